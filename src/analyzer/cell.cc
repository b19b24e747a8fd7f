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
  for (size_t pos = 0; pos < code.size();) {
    auto [end, next] = LineEnd(code, pos);
    std::string_view line = code.substr(pos, next - pos);  // with its terminator
    if (line.substr(0, prefix.size()) == prefix) line.remove_prefix(prefix.size());
    result.append(line);
    pos = next;
  }
  *out = std::move(result);
  indent->prefix = std::string(prefix);
  return true;
}

int CellIndent::OriginalColumn(std::string_view original, int line, int col) const {
  if (prefix.empty() || line <= 0) return col;
  size_t pos = 0;
  for (int l = 1; l < line && pos < original.size(); ++l) pos = LineEnd(original, pos).second;
  if (pos >= original.size()) return col;
  return original.substr(pos, prefix.size()) == prefix ? col + static_cast<int>(prefix.size()) : col;
}

}  // namespace airlock::analyzer
