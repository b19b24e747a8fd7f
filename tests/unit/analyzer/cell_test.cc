// A notebook cell's leading indentation (analyzer/cell.h): removed as IPython
// removes it, lines and other indentation kept.
#include "analyzer/cell.h"

#include <gtest/gtest.h>

#include <string>

namespace airlock::analyzer {
namespace {

std::string Dedent(const std::string& code, CellIndent* indent = nullptr) {
  std::string out;
  CellIndent local;
  if (!RemoveCellIndent(code, &out, indent ? indent : &local)) return code;
  return out;
}

TEST(RemoveCellIndent, NotebookCellsLoseTheirIndentation) {
  // As E2B's SDK tests send cells: a blank first line, every line indented,
  // blank lines of any width, a last line of spaces.
  EXPECT_EQ(Dedent("\n    import os\n    if True:\n        x = 1\n  \n    x\n    "),
            "\nimport os\nif True:\n    x = 1\n  \nx\n");
  EXPECT_EQ(Dedent("\tx = 1\n\ty = 2\n"), "x = 1\ny = 2\n");
  EXPECT_EQ(Dedent("  a\r\n  b\r  c"), "a\r\nb\rc");  // Python's three line ends
}

TEST(RemoveCellIndent, OtherLinesAreKept) {
  // A string's text less indented than the code, and a line indented
  // differently (tab for spaces), are not touched: only the exact prefix goes.
  EXPECT_EQ(Dedent("    s = '''\nraw\n    '''\n\tx\n"), "s = '''\nraw\n'''\n\tx\n");
  EXPECT_EQ(Dedent("    a\n  b\n"), "a\n  b\n");  // b keeps its own: Python then says why
}

TEST(RemoveCellIndent, UnindentedCellsAreLeftAlone) {
  std::string out = "untouched";
  CellIndent indent;
  for (const char* code : {"x = 1\n    y\n", "", "\n\n", "   \n\t\n", "if x:\n    y\n"}) {
    EXPECT_FALSE(RemoveCellIndent(code, &out, &indent)) << code;
    EXPECT_EQ(out, "untouched");
  }
}

TEST(RemoveCellIndent, ColumnsMapBackToTheCellAsSent) {
  CellIndent indent;
  const std::string sent = "\n    import os\n  # odd\n";
  EXPECT_EQ(Dedent(sent, &indent), "\nimport os\n  # odd\n");
  EXPECT_EQ(indent.prefix, "    ");
  EXPECT_EQ(indent.OriginalColumn(2, 1), 5);   // stripped line
  EXPECT_EQ(indent.OriginalColumn(3, 3), 3);   // kept line
  EXPECT_EQ(indent.OriginalColumn(1, 1), 1);   // blank line
  EXPECT_EQ(indent.OriginalColumn(99, 1), 1);  // past the end
  EXPECT_EQ(indent.OriginalColumn(0, 1), 1);
  EXPECT_EQ(CellIndent().OriginalColumn(2, 1), 1);
}

}  // namespace
}  // namespace airlock::analyzer
