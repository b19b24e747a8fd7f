#include "analyzer/tokenizer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace airlock::analyzer {
namespace {

const Segment& ModuleSegment(const TokenizedSource& ts) {
  for (const Segment& s : ts.segments) {
    if (!s.field) return s;
  }
  ADD_FAILURE() << "no module segment";
  return ts.segments.front();
}

std::string KindName(TokenKind k) {
  switch (k) {
    case TokenKind::kName: return "NAME";
    case TokenKind::kNumber: return "NUMBER";
    case TokenKind::kString: return "STRING";
    case TokenKind::kOp: return "OP";
    case TokenKind::kNewline: return "NEWLINE";
    case TokenKind::kIndent: return "INDENT";
    case TokenKind::kDedent: return "DEDENT";
    case TokenKind::kEnd: return "END";
  }
  return "?";
}

// "NAME:x OP:= NUMBER:1 NEWLINE END" for the module segment.
std::string Dump(const TokenizedSource& ts, const Segment& seg) {
  std::string out;
  for (uint32_t i = seg.first; i < seg.last; ++i) {
    const Token& t = ts.tokens[i];
    if (!out.empty()) out += ' ';
    out += KindName(t.kind);
    if (t.kind == TokenKind::kName || t.kind == TokenKind::kNumber ||
        t.kind == TokenKind::kString || t.kind == TokenKind::kOp) {
      out += ':';
      out += ts.Text(t);
    }
  }
  return out;
}
std::string Dump(std::string_view src) {
  TokenizedSource ts = Tokenize(src);
  return Dump(ts, ModuleSegment(ts));
}

std::string FirstError(std::string_view src) {
  TokenizedSource ts = Tokenize(src);
  const SyntaxIssue* s = ts.FirstIssue();
  return s ? s->message : "";
}

// The tokens of every field segment, joined with " | ".
std::string Fields(const TokenizedSource& ts) {
  std::string out;
  for (const Segment& s : ts.segments) {
    if (!s.field) continue;
    if (!out.empty()) out += " | ";
    out += Dump(ts, s);
  }
  return out;
}

TEST(TokenizerTest, SimpleStatement) {
  EXPECT_EQ(Dump("x = 1\n"), "NAME:x OP:= NUMBER:1 NEWLINE END");
  EXPECT_EQ(Dump("x = 1"), "NAME:x OP:= NUMBER:1 NEWLINE END");
  EXPECT_EQ(Dump(""), "END");
  EXPECT_EQ(Dump("\n\n# only a comment\n   \n"), "END");
}

TEST(TokenizerTest, IndentAndDedent) {
  EXPECT_EQ(Dump("if x:\n    y\n    z\nw\n"),
            "NAME:if NAME:x OP:: NEWLINE INDENT NAME:y NEWLINE NAME:z NEWLINE DEDENT NAME:w "
            "NEWLINE END");
  EXPECT_EQ(Dump("def f():\n  if a:\n    return 1\n"),
            "NAME:def NAME:f OP:( OP:) OP:: NEWLINE INDENT NAME:if NAME:a OP:: NEWLINE INDENT "
            "NAME:return NUMBER:1 NEWLINE DEDENT DEDENT END");
  // Blank lines and comment-only lines at any indentation do not count.
  EXPECT_EQ(Dump("if x:\n\n        # comment\n    y\n"),
            "NAME:if NAME:x OP:: NEWLINE INDENT NAME:y NEWLINE DEDENT END");
}

TEST(TokenizerTest, Operators) {
  EXPECT_EQ(Dump("a **= b // c >>= d ... -> := != <= == @= ~x"),
            "NAME:a OP:**= NAME:b OP:// NAME:c OP:>>= NAME:d OP:... OP:-> OP::= OP:!= OP:<= OP:== "
            "OP:@= OP:~ NAME:x NEWLINE END");
  EXPECT_EQ(FirstError("x = $"), "invalid syntax");
  EXPECT_EQ(FirstError("x = 1 ! 2"), "invalid syntax");
  EXPECT_EQ(FirstError("x = 1 <> 2"), "invalid syntax");
  EXPECT_EQ(FirstError("x = \x01"), "invalid non-printable character U+0001");
}

TEST(TokenizerTest, EveryStringPrefix) {
  const char* prefixes[] = {"",   "r",  "u",  "b",  "br", "rb", "f",  "fr", "rf", "R",  "U",
                            "B",  "F",  "Br", "bR", "BR", "rB", "Rb", "RB", "Fr", "fR", "FR",
                            "rF", "Rf", "RF"};
  for (const char* p : prefixes) {
    for (const char* q : {"'", "\"", "'''", "\"\"\""}) {
      std::string src = std::string("x = ") + p + q + "abc" + q + "\n";
      TokenizedSource ts = Tokenize(src);
      const Segment& m = ModuleSegment(ts);
      ASSERT_EQ(m.last - m.first, 5u) << src;
      const Token& t = ts.tokens[m.first + 2];
      EXPECT_EQ(t.kind, TokenKind::kString) << src;
      EXPECT_EQ(ts.Value(t), "abc") << src;
      std::string lower;
      for (const char* c = p; *c; ++c) lower += static_cast<char>(std::tolower(*c));
      EXPECT_EQ((t.flags & kStrRaw) != 0, lower.find('r') != std::string::npos) << src;
      EXPECT_EQ((t.flags & kStrBytes) != 0, lower.find('b') != std::string::npos) << src;
      EXPECT_EQ((t.flags & kStrFormat) != 0, lower.find('f') != std::string::npos) << src;
      EXPECT_EQ((t.flags & kStrTriple) != 0, std::string(q).size() == 3) << src;
      EXPECT_EQ(ts.FirstIssue(), nullptr) << src << ": " << ts.FirstIssue()->message;
    }
  }
}

TEST(TokenizerTest, InvalidPrefixesAreNameThenString) {
  // Python 2's ur'' and the bytes f-string do not exist: a name next to a string.
  for (const char* src : {"ur'x'", "bu'x'", "fb'x'", "bf'x'", "rr'x'", "uu'x'"}) {
    TokenizedSource ts = Tokenize(src);
    const Segment& m = ModuleSegment(ts);
    EXPECT_EQ(ts.tokens[m.first].kind, TokenKind::kName) << src;
    EXPECT_EQ(ts.tokens[m.first + 1].kind, TokenKind::kString) << src;
    ASSERT_NE(ts.FirstIssue(), nullptr) << src;
    EXPECT_EQ(ts.FirstIssue()->message, "invalid syntax") << src;
  }
}

TEST(TokenizerTest, EscapesAreDecoded) {
  auto value = [](std::string_view src) {
    TokenizedSource ts = Tokenize(src);
    EXPECT_EQ(ts.FirstIssue(), nullptr) << src;
    return std::string(ts.Value(ts.tokens[ModuleSegment(ts).first]));
  };
  EXPECT_EQ(value(R"('\x5f\x5fclass\x5f\x5f')"), "__class__");
  EXPECT_EQ(value(R"('\137\137dict\137\137')"), "__dict__");
  EXPECT_EQ(value(R"('\u005f\U0000005fx')"), "__x");
  EXPECT_EQ(value(R"('\N{LOW LINE}\N{low line}a')"), "__a");
  EXPECT_EQ(value(R"('\N{SNOWMAN}')"), "\xEF\xBF\xBD");  // not ASCII: a placeholder
  EXPECT_EQ(value(R"('a\tb\\c\'d\"e\q')"), "a\tb\\c'd\"e\\q");
  EXPECT_EQ(value(R"(r'\x41\n')"), R"(\x41\n)");
  EXPECT_EQ(value(R"(b'\x41\u0041')"), R"(A\u0041)");
  EXPECT_EQ(value("'a\\\nb'"), "ab");  // backslash-newline inside a string
  EXPECT_EQ(value("'''a\r\nb'''"), "a\nb");
}

TEST(TokenizerTest, BadEscapesAreSyntaxErrors) {
  EXPECT_NE(FirstError(R"('\x4')").find("truncated \\xXX escape"), std::string::npos);
  EXPECT_NE(FirstError(R"('\u12')").find("truncated \\uXXXX escape"), std::string::npos);
  EXPECT_NE(FirstError(R"('\U0011ffff')").find("illegal Unicode character"), std::string::npos);
  EXPECT_NE(FirstError(R"('\N')").find("malformed \\N character escape"), std::string::npos);
  EXPECT_NE(FirstError(R"(b'\x4')").find("invalid \\x escape"), std::string::npos);
  EXPECT_EQ(FirstError("b'\xC3\xA9'"), "bytes can only contain ASCII literal characters");
  EXPECT_EQ(FirstError("x = b'a' 'b'"), "cannot mix bytes and nonbytes literals");
}

TEST(TokenizerTest, UnterminatedStrings) {
  EXPECT_EQ(FirstError("x = 'abc\ny = 1"), "unterminated string literal (detected at line 1)");
  EXPECT_EQ(FirstError("x = 1\n'''abc\ndef"),
            "unterminated triple-quoted string literal (detected at line 3)");
  EXPECT_EQ(FirstError("\"\"\"abc\n"),
            "unterminated triple-quoted string literal (detected at line 1)");
  TokenizedSource ts = Tokenize("x = 1\ny = 'abc");
  ASSERT_NE(ts.FirstIssue(), nullptr);
  EXPECT_EQ(ts.FirstIssue()->line, 2u);
  EXPECT_EQ(ts.FirstIssue()->col, 5u);
}

TEST(TokenizerTest, FStringFieldsAreTokenized) {
  TokenizedSource ts = Tokenize("s = f\"{a['k']:{w}.{p}} and {b.c!r:>10} {{literal}}\"\n");
  EXPECT_EQ(ts.FirstIssue(), nullptr);
  EXPECT_EQ(Fields(ts), "NAME:a OP:[ STRING:'k' OP:] | NAME:w | NAME:p | NAME:b OP:. NAME:c");
  const Segment& m = ModuleSegment(ts);
  const Token& s = ts.tokens[m.first + 2];
  EXPECT_TRUE(s.flags & kStrHasFields);
  // Fields become '\0' in the value; doubled braces are literal braces.
  EXPECT_EQ(ts.Value(s), std::string("\0 and \0 {literal}", 17));
}

TEST(TokenizerTest, FStringWithoutFields) {
  TokenizedSource ts = Tokenize("f'{{0.__globals__}}'");
  EXPECT_EQ(Fields(ts), "");
  EXPECT_EQ(ts.Value(ts.tokens[ModuleSegment(ts).first]), "{0.__globals__}");
  EXPECT_FALSE(ts.tokens[ModuleSegment(ts).first].flags & kStrHasFields);
}

TEST(TokenizerTest, NestedFStrings) {
  TokenizedSource ts = Tokenize("x = f\"{f'{y:{w}}'!s:^{n}}\" + f'''{f\"{f'{z}'}\"}'''\n");
  EXPECT_EQ(ts.FirstIssue(), nullptr) << ts.FirstIssue()->message;
  std::string fields = Fields(ts);
  for (const char* name : {"NAME:y", "NAME:w", "NAME:n", "NAME:z"}) {
    EXPECT_NE(fields.find(name), std::string::npos) << name << " in " << fields;
  }
}

TEST(TokenizerTest, FStringFieldPositions) {
  TokenizedSource ts = Tokenize("a = 1\nprint(f'''x\n  {bb.cc}''')\n");
  ASSERT_EQ(ts.FirstIssue(), nullptr);
  for (const Segment& s : ts.segments) {
    if (!s.field) continue;
    const Token& t = ts.tokens[s.first];
    EXPECT_EQ(ts.Text(t), "bb");
    EXPECT_EQ(t.line, 3u);
    EXPECT_EQ(t.col, 4u);
    EXPECT_EQ(ts.tokens[s.first + 2].col, 7u);
  }
}

TEST(TokenizerTest, FStringEquals) {
  TokenizedSource ts = Tokenize("print(f'{x = }', f'{x=!r:10}', f'{a != b}', f'{x:=10}')");
  EXPECT_EQ(ts.FirstIssue(), nullptr) << ts.FirstIssue()->message;
  EXPECT_EQ(Fields(ts), "NAME:x | NAME:x | NAME:a OP:!= NAME:b | NAME:x");
}

TEST(TokenizerTest, FStringErrors) {
  EXPECT_EQ(FirstError("f'{'"), "f-string: expecting '}'");
  EXPECT_EQ(FirstError("f'}'"), "f-string: single '}' is not allowed");
  EXPECT_EQ(FirstError("f'{}'"), "f-string: empty expression not allowed");
  EXPECT_EQ(FirstError("f'{x!z}'"), "f-string: invalid conversion character: expected 's', 'r', or 'a'");
  EXPECT_EQ(FirstError("f'{x#}'"), "f-string expression part cannot include '#'");
  EXPECT_EQ(FirstError("f'{\\n}'"), "f-string expression part cannot include a backslash");
  EXPECT_EQ(FirstError("f'{x:{y:{z}}}'"), "f-string: expressions nested too deeply");
  EXPECT_EQ(FirstError("f'{(}'"),
            "f-string: closing parenthesis '}' does not match opening parenthesis '('");
  EXPECT_EQ(FirstError("f'{x y}'"), "f-string: invalid syntax");
  EXPECT_EQ(FirstError("f'{x:{{}}}'"), "");  // a dict display in the format spec: valid
}

TEST(TokenizerTest, CommentsContainingCodeProduceNoTokens) {
  EXPECT_EQ(Dump("x = 1  # eval('__import__(\"os\")') ( [ {\n"), "NAME:x OP:= NUMBER:1 NEWLINE END");
  EXPECT_EQ(Dump("# import os\n"), "END");
}

TEST(TokenizerTest, LineContinuation) {
  EXPECT_EQ(Dump("x = 1 + \\\n    2\n"), "NAME:x OP:= NUMBER:1 OP:+ NUMBER:2 NEWLINE END");
  EXPECT_EQ(Dump("x = (1 +\n  2)\n"), "NAME:x OP:= OP:( NUMBER:1 OP:+ NUMBER:2 OP:) NEWLINE END");
  EXPECT_EQ(FirstError("x = 1 \\ y"), "unexpected character after line continuation character");
  EXPECT_EQ(FirstError("x = 1 \\"), "unexpected EOF while parsing");
  TokenizedSource ts = Tokenize("x = 1 + \\\n    2\n");
  EXPECT_EQ(ts.tokens[ModuleSegment(ts).first + 4].line, 2u);
}

TEST(TokenizerTest, UnicodeIdentifiers) {
  TokenizedSource ts = Tokenize("名前 = \"世界\"\nπ = 3.14\n");
  EXPECT_EQ(ts.FirstIssue(), nullptr);
  EXPECT_EQ(Dump(ts, ModuleSegment(ts)),
            "NAME:名前 OP:= STRING:\"世界\" NEWLINE NAME:π OP:= NUMBER:3.14 NEWLINE END");
  // Columns count code points: '=' is the 4th character of the line.
  EXPECT_EQ(ts.tokens[ModuleSegment(ts).first + 1].col, 4u);
}

TEST(TokenizerTest, IdentifiersAreNfkcNormalized) {
  // CPython NFKC-normalizes identifiers: these are `eval`, `__builtins__` and `open`.
  TokenizedSource ts = Tokenize("\xEF\xBD\x85val(1)\n\xEF\xBC\xBF_builtins__\n\xC2\xAA = \xF0\x9D\x90\xA8pen\n");
  const Segment& m = ModuleSegment(ts);
  EXPECT_EQ(ts.Name(ts.tokens[m.first]), "eval");
  EXPECT_TRUE(ts.tokens[m.first].normalized);
  EXPECT_EQ(ts.Name(ts.tokens[m.first + 5]), "__builtins__");
  EXPECT_EQ(ts.Name(ts.tokens[m.first + 7]), "a");      // U+00AA FEMININE ORDINAL INDICATOR
  EXPECT_EQ(ts.Name(ts.tokens[m.first + 9]), "open");  // U+1D428 MATHEMATICAL BOLD SMALL O
  // A name with characters that do not normalize to ASCII keeps its source text.
  TokenizedSource cjk = Tokenize("名前");
  EXPECT_EQ(cjk.Name(cjk.tokens[0]), "名前");
  EXPECT_FALSE(cjk.tokens[0].normalized);
}

TEST(TokenizerTest, CrLfLineEndings) {
  TokenizedSource ts = Tokenize("x = 1\r\nif x:\r\n    y = 'a'\r\nz = 2\r\n");
  EXPECT_EQ(ts.FirstIssue(), nullptr);
  EXPECT_EQ(Dump(ts, ModuleSegment(ts)),
            "NAME:x OP:= NUMBER:1 NEWLINE NAME:if NAME:x OP:: NEWLINE INDENT NAME:y OP:= "
            "STRING:'a' NEWLINE DEDENT NAME:z OP:= NUMBER:2 NEWLINE END");
  const Token& z = ts.tokens[ModuleSegment(ts).last - 5];
  EXPECT_EQ(ts.Text(z), "z");
  EXPECT_EQ(z.line, 4u);
  EXPECT_EQ(z.col, 1u);
  // A lone CR is a newline too, as in Python's universal newlines.
  EXPECT_EQ(Dump("x = 1\ry = 2"), "NAME:x OP:= NUMBER:1 NEWLINE NAME:y OP:= NUMBER:2 NEWLINE END");
}

TEST(TokenizerTest, Tabs) {
  EXPECT_EQ(Dump("if x:\n\ty = 1\n\tz = 2\n"),
            "NAME:if NAME:x OP:: NEWLINE INDENT NAME:y OP:= NUMBER:1 NEWLINE NAME:z OP:= "
            "NUMBER:2 NEWLINE DEDENT END");
  EXPECT_EQ(FirstError("if x:\n\ty = 1\n        z = 2\n"),
            "inconsistent use of tabs and spaces in indentation");
  // A tab is one column in positions.
  TokenizedSource ts = Tokenize("if x:\n\ty = 1\n");
  EXPECT_EQ(ts.tokens[ModuleSegment(ts).first + 5].col, 2u);
}

TEST(TokenizerTest, IndentationErrors) {
  EXPECT_EQ(FirstError("x = 1\n  y = 2"), "unexpected indent");
  EXPECT_EQ(FirstError("if x:\n    a\n  b"), "unindent does not match any outer indentation level");
  EXPECT_EQ(FirstError("if x:\npass"), "expected an indented block after 'if' statement on line 1");
  EXPECT_EQ(FirstError("def f():\nreturn"),
            "expected an indented block after function definition on line 1");
  EXPECT_EQ(FirstError("class A:\n    def f(self):\n    pass"),
            "expected an indented block after function definition on line 2");
  EXPECT_EQ(FirstError("for i in x:\n"), "expected an indented block after 'for' statement on line 1");
  EXPECT_EQ(FirstError("while 1:\n# c\n"),
            "expected an indented block after 'while' statement on line 1");
  EXPECT_EQ(FirstError("if x\n  pass"), "expected ':'");
  EXPECT_EQ(FirstError("@dec\nx = 1"), "invalid syntax");
}

TEST(TokenizerTest, Brackets) {
  EXPECT_EQ(FirstError("def foo("), "'(' was never closed");
  EXPECT_EQ(FirstError("x = (1, [2"), "'[' was never closed");
  EXPECT_EQ(FirstError("x = )"), "unmatched ')'");
  EXPECT_EQ(FirstError("x = (]"), "closing parenthesis ']' does not match opening parenthesis '('");
  EXPECT_EQ(FirstError("x = (1,\n]"),
            "closing parenthesis ']' does not match opening parenthesis '(' on line 1");
  TokenizedSource ts = Tokenize("x = 1\nfoo(a,\n  b");
  ASSERT_NE(ts.FirstIssue(), nullptr);
  EXPECT_EQ(ts.FirstIssue()->line, 2u);
  EXPECT_EQ(ts.FirstIssue()->col, 4u);
}

TEST(TokenizerTest, NestingLimitIsPythons) {
  std::string ok = std::string(200, '(') + std::string(200, ')');
  EXPECT_EQ(FirstError(ok), "");
  std::string deep = std::string(201, '(') + std::string(201, ')');
  TokenizedSource ts = Tokenize(deep);
  ASSERT_NE(ts.FirstIssue(), nullptr);
  EXPECT_EQ(ts.FirstIssue()->rule, "nesting");
  EXPECT_NE(ts.FirstIssue()->message.find("too many nested parentheses"), std::string::npos);
  EXPECT_EQ(ts.FirstIssue()->col, 201u);
}

TEST(TokenizerTest, ValidNumbers) {
  for (const char* n : {"0", "00", "0_0", "1_000", "0x1f", "0X_FF", "0o17", "0b1010", "0b_1",
                        "1e-5", "1E+10", "1.5", ".5", "5.", "1.e5", "1j", "1.5J",
                        "1_000.000_1e1_0j", "00.5", "09.5", "0e5", "0j"}) {
    const std::string src = std::string("x = ") + n;  // Tokenize does not copy the source
    TokenizedSource ts = Tokenize(src);
    EXPECT_EQ(ts.FirstIssue(), nullptr) << n << ": " << ts.FirstIssue()->message;
    EXPECT_EQ(ts.Text(ts.tokens[ModuleSegment(ts).first + 2]), std::string_view(n));
  }
  // A keyword right after a number is accepted (with a DeprecationWarning in 3.11).
  EXPECT_EQ(Dump("x = 1if y else 2"),
            "NAME:x OP:= NUMBER:1 NAME:if NAME:y NAME:else NUMBER:2 NEWLINE END");
  EXPECT_EQ(FirstError("x=1if 1else 2"), "");
}

TEST(TokenizerTest, InvalidNumbers) {
  EXPECT_EQ(FirstError("1abc"), "invalid decimal literal");
  EXPECT_EQ(FirstError("0x"), "invalid hexadecimal literal");
  EXPECT_EQ(FirstError("x = 0x_"), "invalid hexadecimal literal");
  EXPECT_EQ(FirstError("01"),
            "leading zeros in decimal integer literals are not permitted; use an 0o prefix for "
            "octal integers");
  EXPECT_EQ(FirstError("1__0"), "invalid decimal literal");
  EXPECT_EQ(FirstError("1_"), "invalid decimal literal");
  EXPECT_EQ(FirstError("0b2"), "invalid digit '2' in binary literal");
  EXPECT_EQ(FirstError("0o8"), "invalid digit '8' in octal literal");
  EXPECT_EQ(FirstError("1e"), "invalid decimal literal");
  EXPECT_EQ(FirstError("x = 1e+"), "invalid decimal literal");
  EXPECT_EQ(FirstError("x = 1.real"), "invalid decimal literal");
}

TEST(TokenizerTest, AdjacentOperands) {
  EXPECT_EQ(FirstError("print 'hello'"),
            "Missing parentheses in call to 'print'. Did you mean print(...)?");
  EXPECT_EQ(FirstError("exec code in ns"),
            "Missing parentheses in call to 'exec'. Did you mean exec(...)?");
  EXPECT_EQ(FirstError("x y"), "invalid syntax");
  EXPECT_EQ(FirstError("x = 1 2"), "invalid syntax");
  EXPECT_EQ(FirstError("x = 'a' b"), "invalid syntax");
  // Soft keywords and keyword operators are fine.
  EXPECT_EQ(FirstError("match x:\n    case [a, b]:\n        pass\n    case _:\n        pass\n"), "");
  EXPECT_EQ(FirstError("match = 1\ncase = 2\nprint(match, case)\n"), "");
  EXPECT_EQ(FirstError("x = a if b else c\ny = not x\nz = 1 is not None and w in v\n"), "");
}

TEST(TokenizerTest, ImportSyntax) {
  EXPECT_EQ(FirstError("import"), "invalid syntax");
  EXPECT_EQ(FirstError("from a import"), "invalid syntax");
  EXPECT_EQ(FirstError("import a as"), "invalid syntax");
  EXPECT_EQ(FirstError("from a import *, b"), "invalid syntax");
  EXPECT_EQ(FirstError("import a.b as c, d\nfrom . import (a, b,)\nfrom ...a import b\n"), "");
  EXPECT_EQ(FirstError("x = yield from y\nraise E from e\n"), "");
}

TEST(TokenizerTest, NulAndInvalidUtf8) {
  const std::string with_nul("x = 1\0y", 7);
  TokenizedSource nul = Tokenize(with_nul);
  ASSERT_NE(nul.FirstIssue(), nullptr);
  EXPECT_EQ(nul.FirstIssue()->message, "source code cannot contain null bytes");
  TokenizedSource bad = Tokenize("x = 1\ny = '\xff'\n");
  ASSERT_NE(bad.FirstIssue(), nullptr);
  EXPECT_EQ(bad.FirstIssue()->rule, "encoding");
  EXPECT_EQ(bad.FirstIssue()->line, 2u);
  EXPECT_EQ(bad.FirstIssue()->col, 6u);
  EXPECT_NE(bad.FirstIssue()->message.find("can't decode byte 0xff"), std::string::npos);
  // Overlong encodings and surrogates are invalid too.
  EXPECT_NE(Tokenize("'\xC0\xAF'").FirstIssue(), nullptr);
  EXPECT_NE(Tokenize("'\xED\xA0\x80'").FirstIssue(), nullptr);
}

TEST(TokenizerTest, Utf8ByteOrderMarkIsSkipped) {
  EXPECT_EQ(Dump("\xEF\xBB\xBFx = 1"), "NAME:x OP:= NUMBER:1 NEWLINE END");
}

}  // namespace
}  // namespace airlock::analyzer
