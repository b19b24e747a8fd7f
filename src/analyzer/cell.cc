#include "analyzer/cell.h"

#include <utility>

namespace airlock::analyzer {
namespace {

bool IsIndent(char c) { return c == ' ' || c == '\t'; }

// The end of the line starting at `pos` (the index of its terminator, or the
// code's size) and the start of the next one.
std::pair<size_t, size_t> LineEnd(std::string_view code, size_t pos) {
  size_t end = pos;
  while (end < code.size() && code[end] != '\n' && code[end] != '\r') ++end;
  if (end == code.size()) return {end, end};
  if (code[end] == '\r' && end + 1 < code.size() && code[end + 1] == '\n') return {end, end + 2};
  return {end, end + 1};
}

bool IsBlank(std::string_view line) {
  for (char c : line) {
    if (c != ' ' && c != '\t' && c != '\f' && c != '\v') return false;
  }
  return true;
}

}  // namespace

bool RemoveCellIndent(std::string_view code, std::string* out, CellIndent* indent) {
  std::string_view prefix;
  for (size_t pos = 0; pos < code.size();) {
    auto [end, next] = LineEnd(code, pos);
    std::string_view line = code.substr(pos, end - pos);
    if (!IsBlank(line)) {
      size_t n = 0;
      while (n < line.size() && IsIndent(line[n])) ++n;
      prefix = line.substr(0, n);
      break;
    }
    pos = next;
  }
  if (prefix.empty()) return false;
  std::string result;
  result.reserve(code.size());
  indent->stripped.clear();
  for (size_t pos = 0; pos < code.size();) {
    auto [end, next] = LineEnd(code, pos);
    std::string_view line = code.substr(pos, next - pos);  // with its terminator
    const bool strip = line.substr(0, prefix.size()) == prefix;
    if (strip) line.remove_prefix(prefix.size());
    indent->stripped.push_back(strip);
    result.append(line);
    pos = next;
  }
  *out = std::move(result);
  indent->prefix = std::string(prefix);
  return true;
}

int CellIndent::OriginalColumn(int line, int col) const {
  if (line <= 0 || static_cast<size_t>(line) > stripped.size() || !stripped[static_cast<size_t>(line) - 1]) return col;
  return col + static_cast<int>(prefix.size());
}

}  // namespace airlock::analyzer
