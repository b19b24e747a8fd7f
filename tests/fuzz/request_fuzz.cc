// libFuzzer target for the HTTP service's untrusted-input parsers (src/model): execute
// request bodies and the run's result channel. Any byte string must be handled without a
// crash, a sanitizer report or deep recursion, and what comes out must hold the invariants
// the server relies on (valid UTF-8 code under the cap; UTF-8 JSON responses).
//   cmake -S . -B build-fuzz -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
//         -DAIRLOCK_FUZZ=ON && ninja -C build-fuzz request_fuzz
//   build-fuzz/tests/fuzz/request_fuzz -max_len=65536 tests/fuzz/corpus/request
#include <cstddef>
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/sandbox_path.h"
#include "model/base64.h"
#include "model/e2b.h"
#include "model/execute.h"
#include "model/gzip_inflate.h"
#include "model/mcp.h"
#include "model/runner_protocol.h"
#include "model/session.h"
#include "model/stream_events.h"

namespace {

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace airlock::model;
  std::string_view input(reinterpret_cast<const char*>(data), size);

  // 1. A request body.
  RequestCaps caps;
  caps.max_code_bytes = 4096;
  caps.max_depth = 16;
  ExecuteRequest request;
  ApiError error;
  if (ParseExecuteRequest(input, caps, &request, &error)) {
    Check(request.code.size() <= caps.max_code_bytes);
    Check(IsValidUtf8(request.code));
    Check(!request.timeout_s || *request.timeout_s == *request.timeout_s);  // not NaN
    // Files: each path passes the shared rule, none twice, none the directory of another.
    Check(request.files.size() <= caps.max_files);
    for (size_t i = 0; i < request.files.size(); ++i) {
      const std::string& p = request.files[i].path;
      Check(airlock::CheckSandboxPath(p).ok());
      for (size_t j = 0; j < request.files.size(); ++j) {
        const std::string& q = request.files[j].path;
        Check(i == j || (p != q && !(q.size() > p.size() && q.compare(0, p.size(), p) == 0 && q[p.size()] == '/')));
      }
    }
  } else {
    Check(!error.message.empty());
    // A body that is not a request is 422 (413 past a cap); one that names a key twice is
    // 400 duplicate_key on every door (issue 21, finding 9).
    Check(error.kind == ErrorKind::kUnprocessable || error.kind == ErrorKind::kPayloadTooLarge ||
          (error.kind == ErrorKind::kBadRequest && error.code == "duplicate_key"));
    Check(IsValidUtf8(ErrorToJson(error, "req_fuzz")));
  }

  // 1b. The same bytes as a session's create and call bodies.
  SessionCreateRequest create;
  if (ParseSessionCreateRequest(input, caps, &create, &error)) {
    Check(!create.idle_timeout_s || (*create.idle_timeout_s > 0 && *create.idle_timeout_s <= 366.0 * 86400));
    Check(!create.ttl_s || (*create.ttl_s > 0 && *create.ttl_s <= 366.0 * 86400));
    Check(!create.base.limits.cpu_time);
  } else {
    Check(!error.message.empty());
    Check(IsValidUtf8(ErrorToJson(error, "req_fuzz")));
  }
  ExecuteRequest call;
  if (ParseSessionExecuteRequest(input, caps, &call, &error)) {
    Check(IsValidUtf8(call.code) && call.code.size() <= caps.max_code_bytes);
    Check(!call.profile);
  }
  // 1b. The same bytes as base64 text: a decode that succeeds re-encodes to the same
  // text (once CR/LF are dropped), and its size is predicted without decoding.
  std::string decoded;
  if (Base64Decode(input, &decoded)) {
    std::string stripped;
    for (char c : input) {
      if (c != '\r' && c != '\n') stripped += c;
    }
    Check(Base64Encode(decoded) == stripped);
    Check(Base64DecodedSize(input) == decoded.size());
  }
  (void)airlock::CheckSandboxPath(input);
  Check(airlock::EscapeSandboxPath(input).size() <= 310);

  // 2. The same bytes as a result channel (whole, and cut off) and as run output.
  for (bool cut : {false, true}) {
    RunnerEvents ev = ParseRunnerEvents(input, cut);
    (void)ParseProgramEnd(input, cut);
    ExecuteResponse response;
    response.run.stdout_text = std::string(input);
    response.run.stderr_text = std::string(input.substr(0, size / 2));
    response.run.stdout_truncated = cut;
    response.results = ev.displays;
    if (ev.main_result) {
      response.result = ev.main_result->text_plain;
      response.results.push_back(*ev.main_result);
    }
    response.error = ev.error;
    response.limits.output_bytes = 51200;
    // File events: bounded, each path valid UTF-8 under the path rule, base64 no larger than the size.
    Check(ev.files.size() <= kMaxFileEvents);
    for (const OutputFile& f : ev.files) {
      Check(IsValidUtf8(f.path) && airlock::CheckSandboxPath(f.path).ok());
      Check(f.size >= 0 && static_cast<int64_t>(Base64DecodedSize(f.content_base64)) <= f.size);
    }
    response.files = ev.files;
    response.files_truncated = ev.files_truncated;
    std::string compat = CompatExecuteToJson(response);
    std::string v1 = V1ExecuteToJson(response);
    Check(IsValidUtf8(compat));
    Check(IsValidUtf8(v1));
    Check(compat.find('\n') == std::string::npos);  // control characters are escaped
    AuditRecord audit;
    audit.route = std::string(input.substr(0, 64));
    audit.error = std::string(input);
    std::string line = AuditRecordToJson(audit);
    Check(line.find('\n') == std::string::npos);  // one record, one line
    Check(IsValidUtf8(line));
    // The same output as an MCP tool result: one line, valid UTF-8.
    std::string mcp = McpResultLine("1", McpToolCallResult(response));
    Check(mcp.find('\n') == std::string::npos);
    Check(IsValidUtf8(mcp));
    // The same output streamed (Accept: application/x-ndjson): cut anywhere, each event is
    // one line of valid UTF-8, the pieces add up to the whole, and so do the final events.
    Utf8Carry carry;
    std::string joined;
    for (size_t at = 0; at < size;) {
      size_t n = std::min<size_t>(size - at, 1 + (data[at] % 7));
      std::string text = carry.Take(input.substr(at, n));
      Check(carry.pending() <= 3);
      joined += text;
      at += n;
      std::string event = OutputEvent("stdout", text, "2026-01-01T00:00:00.000000Z");
      Check(event.find('\n') == std::string::npos && IsValidUtf8(event));
    }
    joined += carry.Flush();
    Check(joined == input);
    for (const StreamEvent& e : FinalEvents(response)) {
      Check(e.json.find('\n') == std::string::npos && IsValidUtf8(e.json));
    }
    std::string end = EndOfExecutionEvent(v1, StreamStatsJson(1, size));
    Check(end.find('\n') == std::string::npos && IsValidUtf8(end));
    std::string sse = FrameEvent(StreamFormat::kSse, "end_of_execution", end, 1);
    Check(sse.find("\n\n") == sse.size() - 2);  // one SSE event: no blank line inside
  }

  // 2b. The same bytes as an Accept header: never a crash, a known answer.
  StreamFormat format = NegotiateStreamFormat(input);
  Check(format == StreamFormat::kNone || format == StreamFormat::kNdjson || format == StreamFormat::kSse);

  // 2c. The same bytes as E2B bodies (POST /execute, /contexts), a
  // multipart upload and an E2B path: never a crash; what is accepted is
  // within the caps, and a path that maps is one CheckSandboxPath accepts.
  {
    E2bExecuteRequest e2b;
    if (ParseE2bExecuteRequest(input, caps, &e2b, &error)) {
      Check(e2b.code.size() <= caps.max_code_bytes && !(e2b.context_id && e2b.language));
    }
    E2bContextRequest ctx;
    (void)ParseE2bContextRequest(input, caps, &ctx, &error);
    size_t cut = input.find('\n');
    std::string_view ct = cut == std::string_view::npos ? std::string_view() : input.substr(0, cut);
    std::string_view mp = cut == std::string_view::npos ? input : input.substr(cut + 1);
    std::vector<MultipartPart> parts;
    std::string why;
    if (ParseMultipartFormData(ct, mp, 8, &parts, &why)) {
      Check(parts.size() <= 8);
      size_t bytes = 0;
      for (const auto& part : parts) bytes += part.body.size();
      Check(bytes <= mp.size());
      // The same body fed a byte at a time: the same parts (a delimiter split
      // across two pieces is still found).
      std::vector<MultipartPart> again;
      std::unique_ptr<MultipartReader> reader;
      Check(MultipartReader::Create(ct, 8, &reader, &why));
      struct Collect : MultipartReader::Handler {
        std::vector<MultipartPart>* parts;
        bool OnPartBegin(const MultipartPartInfo& p) override {
          parts->push_back({p.name, p.filename, ""});
          return true;
        }
        bool OnPartData(std::string_view b) override {
          parts->back().body.append(b);
          return true;
        }
        bool OnPartEnd() override { return true; }
      } collect;
      collect.parts = &again;
      for (char c : mp) Check(reader->Feed(std::string_view(&c, 1), collect));
      Check(reader->Finish(collect) && again.size() == parts.size());
      for (size_t i = 0; i < parts.size(); ++i) Check(again[i].body == parts[i].body);
    } else {
      Check(!why.empty());
    }
    std::string rel;
    if (E2bPathToSandbox(input, &rel, &why)) Check(airlock::CheckSandboxPath(rel).ok());
    // A gzip upload body (Content-Encoding: gzip): never more out than the
    // cap, the same bytes whole or a byte at a time.
    GzipInflater whole(4096);
    std::string out, again;
    airlock::Status st = whole.Feed(input, [&](std::string_view b) {
      out.append(b);
      return airlock::Status::Ok();
    });
    if (st.ok()) st = whole.Finish();
    Check(out.size() <= 4096 && whole.output_bytes() == static_cast<int64_t>(out.size()));
    GzipInflater bytewise(4096);
    airlock::Status st2;
    for (char c : input) {
      st2 = bytewise.Feed(std::string_view(&c, 1), [&](std::string_view b) {
        again.append(b);
        return airlock::Status::Ok();
      });
      if (!st2.ok()) break;
    }
    if (st2.ok()) st2 = bytewise.Finish();
    Check(st.ok() == st2.ok() && (!st.ok() || out == again));
  }

  // 3. The same bytes as an MCP message (a stdio line or an HTTP body): never a
  // crash; whatever it is, the answer is one line of valid UTF-8 JSON.
  McpCaps mcp_caps;
  mcp_caps.max_code_bytes = 4096;
  mcp_caps.max_depth = 16;
  McpMessage m;
  ParseMcpMessage(input, mcp_caps, &m);
  if (m.kind == McpMessage::kInvalid) {
    Check(m.error_code < 0 && !m.error_message.empty());
    std::string e = McpErrorLine(m.id_json, m.error_code, m.error_message);
    Check(e.find('\n') == std::string::npos && IsValidUtf8(e));
  } else if (m.kind == McpMessage::kRequest && m.call.argument_error.empty() && m.method == "tools/call") {
    Check(m.call.execute.code.size() <= mcp_caps.max_code_bytes);
    Check(IsValidUtf8(m.call.execute.code));
  }
  return 0;
}
