// JSON of the runner protocol (model/runner_protocol.h).
#include "model/json_util.h"
#include "model/runner_protocol.h"

namespace airlock::model {

using internal::Dump;
using nlohmann::json;

namespace {

// At most this many display results are kept from the channel (the runner
// caps them itself; this guards against a forged flood).
constexpr size_t kMaxDisplays = 64;

std::string StringField(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

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
  };
  if (c.code) {
    j["code"] = *c.code;
    j.erase("code_path");
  }
  return Dump(j);
}

RunnerEvents ParseRunnerEvents(std::string_view channel, bool channel_truncated) {
  RunnerEvents out;
  out.truncated = channel_truncated;
  std::vector<json> batch, final_batch;
  bool have_end = false;
  while (!channel.empty()) {
    size_t nl = channel.find('\n');
    std::string_view line = channel.substr(0, nl);
    channel = nl == std::string_view::npos ? std::string_view() : channel.substr(nl + 1);
    if (line.empty()) continue;
    if (nl == std::string_view::npos && channel_truncated) break;  // a cut-off last line
    if (internal::JsonDepth(line) > kMaxEventDepth) {
      ++out.malformed_lines;
      continue;
    }
    json ev = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (ev.is_discarded() || !ev.is_object() || !ev.contains("type") || !ev["type"].is_string()) {
      ++out.malformed_lines;
      continue;
    }
    if (ev["type"] == "end") {
      batch.push_back(std::move(ev));
      final_batch = std::move(batch);
      batch.clear();
      have_end = true;
    } else {
      batch.push_back(std::move(ev));
    }
  }
  if (!have_end) return out;  // no runner batch: only what user code may have written

  for (const json& ev : final_batch) {
    const std::string type = ev["type"].get<std::string>();
    if (type == "result") {
      auto data = ev.find("data");
      if (data == ev.end() || !data->is_object()) {
        ++out.malformed_lines;
        continue;
      }
      DisplayResult r;
      auto main = ev.find("is_main_result");
      r.is_main_result = main != ev.end() && main->is_boolean() && main->get<bool>();
      r.data_json = Dump(*data);
      r.text_plain = StringField(*data, "text/plain");
      if (r.is_main_result) {
        out.main_result = std::move(r);
      } else if (out.displays.size() < kMaxDisplays) {
        out.displays.push_back(std::move(r));
      } else {
        out.truncated = true;
      }
    } else if (type == "truncated") {
      out.truncated = true;
    } else if (type == "error") {
      out.error = ErrorInfo{StringField(ev, "name"), StringField(ev, "value"), StringField(ev, "traceback")};
    } else if (type == "end") {
      auto code = ev.find("exit_code");
      if (code != ev.end() && code->is_number_integer()) out.end_exit_code = code->get<int>();
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
  return end;
}

}  // namespace airlock::model
