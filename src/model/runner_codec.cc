// JSON of the runner protocol (model/runner_protocol.h).
#include <map>

#include "base/sandbox_path.h"
#include "model/base64.h"
#include "model/json_util.h"
#include "model/runner_protocol.h"

namespace airlock::model {

using internal::Dump;
using nlohmann::json;

namespace {

json FilesJson(const std::vector<InputFile>& files) {
  json out = json::array();
  for (const InputFile& f : files) out.push_back({{"path", f.path}, {"content", Base64Encode(f.content)}});
  return out;
}

// At most this many display results are kept from the channel (the runner
// caps them itself; this guards against a forged flood).
constexpr size_t kMaxDisplays = 64;
// A runner batch is at most max_results (16) results, a truncated, an error
// and an end event; more in one batch is forged and dropped.
constexpr size_t kMaxBatchEvents = 64 + kMaxFileEvents;

}  // namespace

std::string RunnerConfigToJson(const RunnerConfig& c) {
  json blocklist = json::array();
  for (const auto& [m, a] : c.blocklist) blocklist.push_back(json::array({m, a}));
  json j = {
      {"code_path", c.code_path},
      {"filename", c.filename},
      {"allowed_imports", c.any_import ? json(nullptr) : json(c.allowed_imports)},
      {"runtime_imports_mode", c.runtime_imports_mode},
      {"blocklist", std::move(blocklist)},
      {"preimport", c.preimport},
      {"capture_figures", c.capture_figures},
      {"result_fd", c.result_fd},
      {"max_result_bytes", c.max_result_bytes},
      {"max_results", c.max_results},
      {"max_result_values", c.max_result_values},
  };
  if (!c.env.empty()) j["env"] = c.env;
  if (c.stream) j["stream"] = true;
  if (c.syntax_check) j["syntax_check"] = *c.syntax_check;
  if (!c.files.empty()) j["files"] = FilesJson(c.files);
  if (c.max_out_files > 0) {
    j["max_out_files"] = c.max_out_files;
    j["max_out_bytes"] = c.max_out_bytes;
  }
  if (c.code) {
    j["code"] = *c.code;
    j.erase("code_path");
  }
  if (!c.program.empty()) j["program"] = c.program;
  if (c.session) j["session"] = true;
  if (c.call > 0) j["call"] = c.call;
  return Dump(j);
}

std::string RunnerCallFrameToJson(const RunnerConfig& c, int64_t call) {
  json j = {{"frame", "call"}, {"code", c.code.value_or("")}, {"call", call}, {"stream", c.stream}};
  if (c.syntax_check) j["syntax_check"] = *c.syntax_check;
  if (!c.files.empty()) j["files"] = FilesJson(c.files);
  if (!c.env.empty()) j["env"] = c.env;
  return Dump(j);
}

namespace {

// One event line as the SAX pass saw it: only what the protocol uses is kept.
struct Event {
  std::string type;
  bool is_main_result = false;
  bool has_data = false;          // "data" was an object
  std::string data_json;          // that object, re-serialized as it was read
  std::string text_plain;         // data["text/plain"] when a string
  size_t data_values = 0;         // JSON values in "data" (what a DOM of it would hold)
  bool oversized = false;         // a result whose "data" passed kMaxResultValues: parsing stopped
  std::string name, value, traceback;  // an error event's fields
  std::optional<int64_t> exit_code;    // an end event's
  std::string what;                    // a truncated event's
  std::string path, content;           // a file event's
  std::optional<int64_t> size;
  bool file_truncated = false;
};

// A SAX handler for one line: no DOM is built, so memory is the line's own
// strings, and nesting is refused past kMaxEventDepth before the parser goes
// deeper (nlohmann's SAX parser keeps one bit per open level). The line must
// be an object whose fields are scalars, except "data", an object whose
// values may nest (a `_repr_json_` result); "data" is written back to text as
// it is read, duplicate keys kept last-wins at its top level.
class EventSax {
 public:
  using json_t = nlohmann::json;
  explicit EventSax(Event* ev) : ev_(ev) {}

  bool null() { return Scalar("null"); }
  bool boolean(bool v) {
    if (depth_ == 1 && key_ == "is_main_result") ev_->is_main_result = v;
    if (depth_ == 1 && key_ == "truncated") ev_->file_truncated = v;
    return Scalar(v ? "true" : "false");
  }
  bool number_integer(json_t::number_integer_t v) {
    if (depth_ == 1 && key_ == "exit_code") ev_->exit_code = v;
    if (depth_ == 1 && key_ == "size") ev_->size = v;
    return Scalar(std::to_string(v));
  }
  bool number_unsigned(json_t::number_unsigned_t v) {
    if (depth_ == 1 && key_ == "exit_code" && v <= static_cast<uint64_t>(INT64_MAX)) {
      ev_->exit_code = static_cast<int64_t>(v);
    }
    if (depth_ == 1 && key_ == "size" && v <= static_cast<uint64_t>(INT64_MAX)) ev_->size = static_cast<int64_t>(v);
    return Scalar(std::to_string(v));
  }
  bool number_float(json_t::number_float_t, const std::string& text) { return Scalar(text); }
  bool string(std::string& v) {
    if (depth_ == 1) {
      if (key_ == "type") ev_->type = v;
      else if (key_ == "name") ev_->name = std::move(v);
      else if (key_ == "value") ev_->value = std::move(v);
      else if (key_ == "traceback") ev_->traceback = std::move(v);
      else if (key_ == "what") ev_->what = std::move(v);
      else if (key_ == "path") ev_->path = std::move(v);
      else if (key_ == "content") ev_->content = std::move(v);
      return true;
    }
    if (depth_ == 2 && key_ == "text/plain") ev_->text_plain = v;
    return Scalar(Dump(json(std::move(v))));
  }
  bool binary(json_t::binary_t&) { return false; }
  bool start_object(std::size_t) {
    if (depth_ == 0) return ++depth_, true;
    if (depth_ == 1 && key_ != "data") return false;  // the protocol's fields are flat
    if (depth_ >= kMaxEventDepth) return false;
    if (depth_ == 1) {
      ev_->has_data = true;
      data_.clear();  // a repeated "data": the last one counts
    } else {
      if (ev_->data_values >= kMaxResultValues) return false;
      Open('{');
    }
    ++depth_;
    return true;
  }
  bool key(std::string& k) {
    if (depth_ <= 2) {
      key_ = k;
      if (depth_ == 2) {
        mime_ = k;
        cur_.clear();
        first_ = true;
      }
      return true;
    }
    Separator();
    cur_ += Dump(json(k));
    cur_ += ':';
    first_ = true;  // the value that follows needs no comma
    return true;
  }
  bool end_object() {
    --depth_;
    if (depth_ >= 2) Close('}');
    if (depth_ == 1) key_.clear();
    return true;
  }
  bool start_array(std::size_t) {
    if (depth_ < 2 || depth_ >= kMaxEventDepth || ev_->data_values >= kMaxResultValues) return false;
    Open('[');
    ++depth_;
    return true;
  }
  bool end_array() {
    --depth_;
    Close(']');
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) { return false; }

  // The data object's text, once the line parsed.
  void FinishData() {
    if (!ev_->has_data) return;
    json_t::string_t out = "{";
    bool first = true;
    for (auto& [k, v] : data_) {
      if (!first) out += ',';
      first = false;
      out += Dump(json(k));
      out += ':';
      out += v;
    }
    out += '}';
    ev_->data_json = std::move(out);
  }

 private:
  // A value inside "data" (depth >= 2); fields at depth 1 are taken above.
  bool Scalar(const std::string& text) {
    if (depth_ < 2) return depth_ == 1;
    // Past the cap a result is dropped anyway: stop before its map grows
    // (each distinct key of "data" is a map node, ~100 bytes for ~9 of input).
    if (ev_->data_values >= kMaxResultValues) return false;
    Separator();
    cur_ += text;
    ++ev_->data_values;
    if (depth_ == 2) data_[mime_] = std::move(cur_), cur_.clear();
    return true;
  }
  void Open(char c) {
    Separator();
    cur_ += c;
    ++ev_->data_values;
    first_ = true;
  }
  void Close(char c) {
    cur_ += c;
    first_ = false;
    if (depth_ == 2) data_[mime_] = std::move(cur_), cur_.clear();
  }
  void Separator() {
    if (!first_ && !cur_.empty()) cur_ += ',';
    first_ = false;
  }

  Event* ev_;
  size_t depth_ = 0;
  std::string key_;   // the current key at depth 1 or 2
  std::string mime_;  // the current key of "data"
  std::string cur_;   // the value of data[mime_] being written
  bool first_ = true;  // no comma before the next value
  std::map<std::string, std::string> data_;  // data's top level, last key wins
};

bool ParseEvent(std::string_view line, Event* ev) {
  EventSax sax(ev);
  if (!json::sax_parse(line, &sax, json::input_format_t::json, /*strict=*/true)) {
    // A result too large to keep: dropped, and the response says results were cut.
    ev->oversized = ev->type == "result" && ev->data_values >= kMaxResultValues;
    return ev->oversized;
  }
  sax.FinishData();
  return !ev->type.empty();
}

// A "file" event, checked: a path a client could name (and valid UTF-8), a
// size, base64 content no larger than the size (equal unless truncated).
// False when malformed.
bool TakeFile(Event* ev, RunnerEvents* out) {
  if (!ev->size || *ev->size < 0 || !CheckSandboxPath(ev->path).ok() || !IsValidUtf8(ev->path)) return false;
  std::string decoded;
  if (!Base64Decode(ev->content, &decoded)) return false;
  const auto n = static_cast<int64_t>(decoded.size());
  if (n > *ev->size || (!ev->file_truncated && n != *ev->size)) return false;
  if (out->files.size() >= kMaxFileEvents) {
    out->files_truncated = true;
    return true;
  }
  OutputFile f;
  f.path = std::move(ev->path);
  f.size = *ev->size;
  f.content_base64 = std::move(ev->content);
  f.truncated = ev->file_truncated;
  out->files.push_back(std::move(f));
  return true;
}

}  // namespace

RunnerEvents ParseRunnerEvents(std::string_view channel, bool channel_truncated) {
  RunnerEvents out;
  out.truncated = channel_truncated;
  // Only the events of one batch are kept at a time, and only their strings.
  std::vector<Event> batch, final_batch;
  bool have_end = false;
  while (!channel.empty()) {
    size_t nl = channel.find('\n');
    std::string_view line = channel.substr(0, nl);
    channel = nl == std::string_view::npos ? std::string_view() : channel.substr(nl + 1);
    if (line.empty()) continue;
    if (nl == std::string_view::npos && channel_truncated) break;  // a cut-off last line
    Event ev;
    if (line.size() > kMaxEventLineBytes || !ParseEvent(line, &ev)) {
      ++out.malformed_lines;
      continue;
    }
    if (ev.type == "end") {
      batch.push_back(std::move(ev));
      final_batch = std::move(batch);
      batch.clear();
      have_end = true;
    } else if (batch.size() < kMaxBatchEvents) {
      batch.push_back(std::move(ev));
    } else {
      ++out.malformed_lines;  // more events than any runner batch has
    }
  }
  if (!have_end) return out;  // no runner batch: only what user code may have written

  size_t values = 0;  // what the response's DOM will hold of the results
  for (Event& ev : final_batch) {
    if (ev.type == "result") {
      if (ev.oversized) {
        out.truncated = true;
        continue;
      }
      if (!ev.has_data) {
        ++out.malformed_lines;
        continue;
      }
      if (values + ev.data_values > kMaxResultValues) {
        out.truncated = true;
        continue;
      }
      values += ev.data_values;
      DisplayResult r;
      r.is_main_result = ev.is_main_result;
      r.data_json = std::move(ev.data_json);
      r.text_plain = std::move(ev.text_plain);
      if (r.is_main_result) {
        out.main_result = std::move(r);
      } else if (out.displays.size() < kMaxDisplays) {
        out.displays.push_back(std::move(r));
      } else {
        out.truncated = true;
      }
    } else if (ev.type == "file") {
      if (!TakeFile(&ev, &out)) ++out.malformed_lines;
    } else if (ev.type == "truncated") {
      (ev.what == "files" ? out.files_truncated : out.truncated) = true;
    } else if (ev.type == "error") {
      out.error = ErrorInfo{std::move(ev.name), std::move(ev.value), std::move(ev.traceback)};
    } else if (ev.type == "end") {
      if (ev.exit_code && *ev.exit_code >= INT32_MIN && *ev.exit_code <= INT32_MAX) {
        out.end_exit_code = static_cast<int>(*ev.exit_code);
      }
    }
  }
  return out;
}

std::optional<ProgramEnd> ParseProgramEnd(std::string_view channel, bool channel_truncated) {
  if (channel_truncated || channel.size() < 2 || channel.back() != '\n') return std::nullopt;
  channel.remove_suffix(1);
  size_t start = channel.rfind('\n');
  std::string_view line = start == std::string_view::npos ? channel : channel.substr(start + 1);
  if (line.size() > 256) return std::nullopt;  // an end event is a few dozen bytes
  json ev = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (ev.is_discarded() || !ev.is_object()) return std::nullopt;
  auto type = ev.find("type");
  auto code = ev.find("exit_code");
  if (type == ev.end() || *type != "end" || code == ev.end() || !code->is_number_integer()) return std::nullopt;
  // As the process's status would say it: the runner exits with exit_code & 0xFF.
  if (code->is_number_unsigned() ? code->get<uint64_t>() > INT32_MAX : code->get<int64_t>() < INT32_MIN) {
    return std::nullopt;
  }
  ProgramEnd end;
  end.exit_code = static_cast<int>(code->get<int64_t>() & 0xFF);
  auto peak = ev.find("max_rss_kb");
  if (peak != ev.end() && peak->is_number_unsigned() && peak->get<uint64_t>() <= (uint64_t{1} << 40)) {
    end.max_rss_kb = static_cast<int64_t>(peak->get<uint64_t>());  // up to 1 PiB: anything more is not a peak
  }
  auto call = ev.find("call");
  if (call != ev.end() && call->is_number_integer()) end.call = call->get<int64_t>();
  return end;
}

}  // namespace airlock::model
