// A notebook cell as Python is given it: what IPython's cell transforms do
// before a cell is compiled that the service does too, so that the analyzer
// reads exactly what the runner runs.
//
//   analyzer::CellIndent indent;
//   std::string dedented;
//   const std::string& code = analyzer::RemoveCellIndent(text, &dedented, &indent) ? dedented : text;
//   finding.col = indent.OriginalColumn(finding.line, finding.col);
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace airlock::analyzer {

// What RemoveCellIndent took away: `prefix` (spaces and tabs) from the start
// of the lines that began with it.
struct CellIndent {
  std::string prefix;
  std::vector<bool> stripped;  // per line (index line - 1): whether it lost the prefix
  // The 1-based column in the cell as sent of a position (line, col) in the
  // dedented cell (whose lines are the same lines: none is added or removed).
  int OriginalColumn(int line, int col) const;
};

// IPython's leading-indent transform (a cell indented as a whole, as notebooks
// and E2B's SDK tests send cells): the spaces and tabs that start the first
// line that is not blank are removed from every line that starts with them;
// other lines (blank ones, a string's text less indented) are kept as they are.
// Unlike IPython it keeps the leading blank lines, so line numbers stay the
// user's. Lines end at "\n", "\r\n" or a lone "\r", as Python's do. Linear;
// returns false (and leaves *out alone) when there is nothing to remove.
bool RemoveCellIndent(std::string_view code, std::string* out, CellIndent* indent);

}  // namespace airlock::analyzer
