// The streaming events (model/stream_events.h).
#include "model/stream_events.h"

#include <algorithm>
#include <cstdio>
#include <ctime>

#include "model/connect.h"
#include "model/json_util.h"

namespace airlock::model {

using internal::Dump;
using nlohmann::json;

namespace {

char Lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool IEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (Lower(a[i]) != Lower(b[i])) return false;
  }
  return true;
}

// The q value of a media range's parameters ("; q=0.5; charset=x"): 1 when
// absent, 0 when unreadable (a malformed preference is no preference).
double Quality(std::string_view params) {
  while (!params.empty()) {
    size_t semi = params.find(';');
    std::string_view p = Trim(params.substr(0, semi));
    params = semi == std::string_view::npos ? std::string_view() : params.substr(semi + 1);
    if (p.size() < 2 || Lower(p[0]) != 'q' || p[1] != '=') continue;
    std::string_view v = p.substr(2);
    // RFC 9110: qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] )
    if (v.empty() || v.size() > 5 || (v[0] != '0' && v[0] != '1')) return 0;
    double q = v[0] - '0', scale = 0.1;
    if (v.size() > 1) {
      if (v[1] != '.') return 0;
      for (size_t i = 2; i < v.size(); ++i) {
        if (v[i] < '0' || v[i] > '9') return 0;
        q += (v[i] - '0') * scale;
        scale /= 10;
      }
    }
    return q > 1 ? 0 : q;
  }
  return 1;
}

// An event object with "type" first (as E2B writes it; the codec sorts the
// other members).
std::string WithType(std::string_view type, const json& members) {
  std::string rest = Dump(members);  // "{...}"
  std::string out = "{\"type\":" + Dump(json(std::string(type)));
  if (rest.size() > 2) {
    out += ',';
    out.append(rest, 1, std::string::npos);
  } else {
    out += '}';
  }
  return out;
}

}  // namespace

StreamFormat NegotiateStreamFormat(std::string_view accept) {
  double ndjson = 0, sse = 0;
  while (!accept.empty()) {
    size_t comma = accept.find(',');
    std::string_view range = accept.substr(0, comma);
    accept = comma == std::string_view::npos ? std::string_view() : accept.substr(comma + 1);
    size_t semi = range.find(';');
    std::string_view type = Trim(range.substr(0, semi));
    double q = semi == std::string_view::npos ? 1 : Quality(range.substr(semi + 1));
    if (IEquals(type, "application/x-ndjson") || IEquals(type, "application/ndjson")) {
      ndjson = std::max(ndjson, q);
    } else if (IEquals(type, "text/event-stream")) {
      sse = std::max(sse, q);
    }
  }
  if (ndjson <= 0 && sse <= 0) return StreamFormat::kNone;
  return ndjson >= sse ? StreamFormat::kNdjson : StreamFormat::kSse;
}

const char* StreamContentType(StreamFormat format) {
  switch (format) {
    case StreamFormat::kNdjson: return "application/x-ndjson";
    case StreamFormat::kSse: return "text/event-stream; charset=utf-8";
    case StreamFormat::kConnect: return kConnectStreamJson;
    case StreamFormat::kNone: break;
  }
  return "";
}

std::string Utf8Carry::Take(std::string_view data) {
  std::string out;
  out.reserve(pending_.size() + data.size());
  out.append(pending_);
  out.append(data);
  pending_.clear();
  // Look back at most 3 bytes for the lead byte of a sequence the chunk ends in.
  size_t n = out.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    unsigned char c = static_cast<unsigned char>(out[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    size_t need = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xC2 && c <= 0xDF ? 2 : 1;
    if (need > back) {  // the sequence is not complete yet: hold it back
      pending_.assign(out, n - back, back);
      out.resize(n - back);
    }
    break;
  }
  return out;
}

std::string Utf8Carry::Flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

std::string StreamTimestamp(std::chrono::system_clock::time_point t) {
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
  time_t secs = static_cast<time_t>(us / 1000000);
  long micros = static_cast<long>(us % 1000000);
  if (micros < 0) {
    micros += 1000000;
    --secs;
  }
  struct tm tm;
  ::gmtime_r(&secs, &tm);
  char buf[64];
  snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
           tm.tm_hour, tm.tm_min, tm.tm_sec, micros);
  return buf;
}

std::string OutputEvent(std::string_view stream, std::string_view text, std::string_view timestamp) {
  return WithType(stream, {{"text", std::string(text)}, {"timestamp", std::string(timestamp)}});
}

std::string KeepaliveEvent() { return R"({"type":"keepalive"})"; }

std::vector<StreamEvent> FinalEvents(const ExecuteResponse& r) {
  std::vector<StreamEvent> out;
  for (const DisplayResult& d : r.results) {
    json data = json::parse(d.data_json, nullptr, /*allow_exceptions=*/false);
    if (data.is_discarded() || !data.is_object()) data = json::object();
    json j = {{"is_main_result", d.is_main_result}, {"data", std::move(data)}};
    auto text = j["data"].find("text/plain");
    if (text != j["data"].end() && text->is_string()) j["text"] = *text;
    out.push_back({"result", WithType("result", j)});
  }
  if (r.error) {
    json j = {{"name", r.error->name}, {"value", r.error->value}, {"traceback", r.error->traceback}};
    out.push_back({"error", WithType("error", j)});
  }
  return out;
}

std::string EndOfExecutionEvent(std::string_view response_json, std::string_view stream_json) {
  return EndEvent("end_of_execution", response_json, stream_json);
}

std::string EndEvent(std::string_view type, std::string_view response_json, std::string_view stream_json) {
  std::string out = R"({"type":")";
  out.append(type);
  out += '"';
  std::string_view body = Trim(response_json);
  // The response is a JSON object: its members follow ours.
  if (body.size() >= 2 && body.front() == '{' && body.back() == '}') {
    std::string_view members = Trim(body.substr(1, body.size() - 2));
    if (!members.empty()) {
      out += ',';
      out.append(members);
    }
  }
  if (!stream_json.empty()) {
    out += R"(,"stream":)";
    out.append(stream_json);
  }
  out += '}';
  return out;
}

std::string StreamStatsJson(uint64_t dropped_events, uint64_t dropped_bytes) {
  return Dump({{"dropped_events", dropped_events}, {"dropped_bytes", dropped_bytes}});
}

std::string FrameEvent(StreamFormat format, std::string_view type, std::string_view json_text, uint64_t seq) {
  if (format == StreamFormat::kConnect) return ConnectFrame(json_text, type == "end_stream");
  std::string out;
  if (format == StreamFormat::kSse) {
    out.reserve(json_text.size() + type.size() + 40);
    out += "event: ";
    out.append(type);
    out += "\nid: ";
    out += std::to_string(seq);
    out += "\ndata: ";
    out.append(json_text);
    out += "\n\n";
  } else {
    out.reserve(json_text.size() + 1);
    out.append(json_text);
    out += '\n';
  }
  return out;
}

}  // namespace airlock::model
