#include "analyzer/tokenizer.h"

#include <algorithm>
#include <iterator>
#include <cstdio>
#include <optional>
#include <utility>

#include "analyzer/imports.h"
#include "analyzer/unicode.h"

namespace airlock::analyzer {
namespace {

// CPython's limits (Parser/tokenizer.h MAXLEVEL, MAXINDENT).
constexpr size_t kMaxParenDepth = 200;
constexpr size_t kMaxIndentDepth = 100;
// An f-string inside an f-string's field: Python 3.11's quoting rules allow at most four
// levels (one per quote kind); the cap only guards the recursion against a bug.
constexpr int kMaxFStringNesting = 6;
constexpr int kEof = -1;
constexpr size_t kMaxIssuesPerLexer = 16;
constexpr size_t kMaxIssues = 4096;

bool IsDigit(int c) { return c >= '0' && c <= '9'; }
bool IsHexDigit(int c) {
  return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
bool IsIdentStart(int c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c >= 0x80;
}
bool IsIdentChar(int c) { return IsIdentStart(c) || IsDigit(c); }
bool IsPySpace(int c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// prefix + "'c'" + suffix
std::string WithChar(std::string_view prefix, int c, std::string_view suffix) {
  std::string s(prefix);
  s += '\'';
  s += static_cast<char>(c);
  s += '\'';
  s += suffix;
  return s;
}

// The flags of a string prefix (r, u, b, f, br, rb, fr, rf in any case), or nullopt.
std::optional<uint8_t> StringPrefixFlags(std::string_view p) {
  if (p.size() > 2) return std::nullopt;
  uint8_t flags = 0;
  bool u = false;
  for (char c : p) {
    char l = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
    uint8_t bit = l == 'r' ? kStrRaw : l == 'b' ? kStrBytes : l == 'f' ? kStrFormat : 0;
    if (l == 'u') {
      if (u || p.size() != 1) return std::nullopt;  // only a lone "u"
      u = true;
      continue;
    }
    if (bit == 0 || (flags & bit)) return std::nullopt;
    flags |= bit;
  }
  if ((flags & kStrBytes) && (flags & kStrFormat)) return std::nullopt;
  return flags;
}

struct Cursor {
  uint32_t pos = 0;
  uint32_t line = 1;
  uint32_t col = 1;
};

// Moves c forward to target, counting lines (\n, \r\n, \r) and code points.
void AdvanceCursor(std::string_view src, Cursor& c, uint32_t target) {
  while (c.pos < target) {
    unsigned char b = static_cast<unsigned char>(src[c.pos]);
    if (b == '\n' || b == '\r') {
      c.pos += (b == '\r' && c.pos + 1 < src.size() && src[c.pos + 1] == '\n') ? 2 : 1;
      ++c.line;
      c.col = 1;
      continue;
    }
    ++c.pos;
    if ((b & 0xC0) != 0x80) ++c.col;
  }
}

// Decodes the escapes of a string literal's text (not raw). Newlines are normalized to
// \n as Python's source decoding does. Returns Python's error message on a bad escape.
std::optional<std::string> DecodeEscapes(std::string_view in, bool bytes, std::string& out) {
  size_t i = 0;
  auto pos_error = [&](size_t from, size_t to, const char* what) {
    char buf[200];
    if (bytes) {
      std::snprintf(buf, sizeof buf, "(value error) %s at position %zu", what, from);
    } else {
      std::snprintf(buf, sizeof buf,
                    "(unicode error) 'unicodeescape' codec can't decode bytes in position "
                    "%zu-%zu: %s",
                    from, to, what);
    }
    return std::string(buf);
  };
  while (i < in.size()) {
    char c = in[i];
    if (c == '\r') {
      out.push_back('\n');
      i += (i + 1 < in.size() && in[i + 1] == '\n') ? 2 : 1;
      continue;
    }
    if (c != '\\' || i + 1 >= in.size()) {
      out.push_back(c);
      ++i;
      continue;
    }
    size_t start = i;
    char e = in[i + 1];
    i += 2;
    switch (e) {
      case '\n': break;
      case '\r':
        if (i < in.size() && in[i] == '\n') ++i;
        break;
      case '\\': out.push_back('\\'); break;
      case '\'': out.push_back('\''); break;
      case '"': out.push_back('"'); break;
      case 'a': out.push_back('\a'); break;
      case 'b': out.push_back('\b'); break;
      case 'f': out.push_back('\f'); break;
      case 'n': out.push_back('\n'); break;
      case 'r': out.push_back('\r'); break;
      case 't': out.push_back('\t'); break;
      case 'v': out.push_back('\v'); break;
      case '0': case '1': case '2': case '3': case '4': case '5': case '6': case '7': {
        unsigned v = static_cast<unsigned>(e - '0');
        for (int k = 0; k < 2 && i < in.size() && in[i] >= '0' && in[i] <= '7'; ++k, ++i) {
          v = v * 8 + static_cast<unsigned>(in[i] - '0');
        }
        if (bytes) {
          out.push_back(static_cast<char>(v & 0xFF));
        } else {
          AppendUtf8(out, v);
        }
        break;
      }
      case 'x': case 'u': case 'U': {
        if (bytes && e != 'x') {  // \u and \U are not escapes in bytes
          out.push_back('\\');
          out.push_back(e);
          break;
        }
        int n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        char32_t v = 0;
        int k = 0;
        for (; k < n && i < in.size() && IsHexDigit(static_cast<unsigned char>(in[i])); ++k, ++i) {
          char h = in[i];
          v = v * 16 + static_cast<char32_t>(IsDigit(h) ? h - '0' : (h | 0x20) - 'a' + 10);
        }
        if (k < n) {
          if (bytes) return pos_error(start, i - 1, "invalid \\x escape");
          const char* what = e == 'x'   ? "truncated \\xXX escape"
                             : e == 'u' ? "truncated \\uXXXX escape"
                                        : "truncated \\UXXXXXXXX escape";
          return pos_error(start, i - 1, what);
        }
        if (v > 0x10FFFF) return pos_error(start, i - 1, "illegal Unicode character");
        if (bytes) {
          out.push_back(static_cast<char>(v));
        } else {
          AppendUtf8(out, v);
        }
        break;
      }
      case 'N': {
        if (bytes) {
          out.push_back('\\');
          out.push_back('N');
          break;
        }
        size_t close = in.find('}', i);
        if (i >= in.size() || in[i] != '{' || close == std::string_view::npos || close == i + 1) {
          return pos_error(start, std::min(in.size(), i + 1) - 1, "malformed \\N character escape");
        }
        std::string_view name = in.substr(i + 1, close - i - 1);
        i = close + 1;
        // Names we cannot resolve (anything but printable ASCII) become U+FFFD: no blocked
        // name contains them, and we do not ship the Unicode name table to reject bad ones.
        if (auto ch = AsciiCharForName(name)) {
          out.push_back(*ch);
        } else {
          AppendUtf8(out, 0xFFFD);
        }
        break;
      }
      default:
        // Invalid escapes stay as written (a DeprecationWarning in Python).
        out.push_back('\\');
        out.push_back(e);
    }
  }
  return std::nullopt;
}

class Lexer {
 public:
  Lexer(TokenizedSource& out, uint32_t begin, uint32_t end, Cursor start, bool field, int fnest)
      : out_(out), src_(out.source), pos_(begin), end_(end), line_(start.line),
        col_(start.col), field_(field), fnest_(fnest) {}

  void Run() {
    if (!field_) toks_.reserve((end_ - pos_) / 3 + 16);
    if (field_) {
      FieldLoop();
    } else {
      ModuleLoop();
    }
    Segment seg;
    seg.first = static_cast<uint32_t>(out_.tokens.size());
    if (out_.tokens.empty()) {
      out_.tokens.swap(toks_);
    } else {
      out_.tokens.insert(out_.tokens.end(), toks_.begin(), toks_.end());
    }
    seg.last = static_cast<uint32_t>(out_.tokens.size());
    seg.field = field_;
    out_.segments.push_back(seg);
  }

 private:
  int Peek(uint32_t k = 0) const {
    return pos_ + k < end_ ? static_cast<unsigned char>(src_[pos_ + k]) : kEof;
  }
  void Bump() {
    unsigned char c = static_cast<unsigned char>(src_[pos_++]);
    if ((c & 0xC0) != 0x80) ++col_;
  }
  bool AtNewline() const {
    int c = Peek();
    return c == '\n' || c == '\r';
  }
  void ConsumeNewline() {
    pos_ += (Peek() == '\r' && Peek(1) == '\n') ? 2 : 1;
    ++line_;
    col_ = 1;
  }
  Cursor Here() const { return Cursor{pos_, line_, col_}; }

  void Issue(const char* rule, std::string message, uint32_t line, uint32_t col, uint32_t order) {
    // Python reports only its first error. A lexer's issues come roughly in source order,
    // so its first few hold the earliest; the caps keep a flood of errors (a megabyte of
    // ']') from costing memory.
    if (issue_count_ >= kMaxIssuesPerLexer || out_.issues.size() >= kMaxIssues) return;
    ++issue_count_;
    SyntaxIssue s;
    s.rule = rule;
    s.message = std::move(message);
    s.line = line;
    s.col = col;
    s.order = order;
    out_.issues.push_back(std::move(s));
  }
  void Issue(std::string message, Cursor at) {
    Issue("syntax", std::move(message), at.line, at.col, at.pos);
  }

  void Emit(TokenKind kind, Cursor start, uint32_t end, uint8_t flags = 0) {
    Token& t = toks_.emplace_back();
    t.kind = kind;
    t.flags = flags;
    t.begin = start.pos;
    t.end = end;
    t.line = start.line;
    t.col = start.col;
  }

  void SkipComment() {
    while (pos_ < end_ && !AtNewline()) Bump();
  }

  void ModuleLoop() {
    bool at_line_start = true;
    while (true) {
      if (at_line_start) {
        at_line_start = false;
        uint32_t col = 0, altcol = 0;
        while (true) {
          int c = Peek();
          if (c == ' ') {
            ++col, ++altcol;
          } else if (c == '\t') {
            col = (col / 8 + 1) * 8;
            ++altcol;
          } else if (c == '\f') {
            col = altcol = 0;
          } else {
            break;
          }
          Bump();
        }
        int c = Peek();
        if (c == kEof) break;
        if (c == '#' || c == '\n' || c == '\r') {  // blank line: no NEWLINE, no INDENT
          SkipComment();
          if (AtNewline()) ConsumeNewline();
          at_line_start = true;
          continue;
        }
        Indentation(col, altcol);
      }
      SkipSpaces();
      int c = Peek();
      if (c == kEof) break;
      if (c == '#') {
        SkipComment();
        continue;
      }
      if (c == '\n' || c == '\r') {
        if (Depth() == 0) {
          Emit(TokenKind::kNewline, Here(), pos_);
          at_line_start = true;
        }
        ConsumeNewline();
        continue;
      }
      if (c == '\\') {
        Continuation();
        continue;
      }
      ScanToken();
    }
    Cursor eof = Here();
    if (!brackets_.empty()) {
      const Open& o = brackets_.back();
      Issue("syntax", std::string("'") + o.c + "' was never closed", o.line, o.col, end_);
    }
    if (!toks_.empty() && toks_.back().kind != TokenKind::kNewline &&
        toks_.back().kind != TokenKind::kDedent) {
      Emit(TokenKind::kNewline, eof, eof.pos);
    }
    for (size_t k = 1; k < indents_.size(); ++k) Emit(TokenKind::kDedent, eof, eof.pos);
    Emit(TokenKind::kEnd, eof, eof.pos);
  }

  // The expression of an f-string field: Python parses it as "(" expr ")", so newlines
  // are whitespace and there is no indentation.
  void FieldLoop() {
    while (true) {
      SkipSpaces();
      int c = Peek();
      if (c == kEof) break;
      if (c == '\n' || c == '\r') {
        ConsumeNewline();
        continue;
      }
      if (c == '#' || c == '\\') {  // already rejected by the field scanner
        Bump();
        continue;
      }
      ScanToken();
    }
    if (!brackets_.empty()) {
      const Open& o = brackets_.back();
      Issue("syntax", std::string("f-string: '") + o.c + "' was never closed", o.line, o.col,
            o.pos);
    }
  }

  void SkipSpaces() {
    while (true) {
      int c = Peek();
      // NUL is reported once by Tokenize(); treating it as a space keeps the rest readable.
      if (c == ' ' || c == '\t' || c == '\f' || c == 0) {
        Bump();
      } else {
        break;
      }
    }
  }

  size_t Depth() const { return brackets_.size() + overflow_; }

  void Indentation(uint32_t col, uint32_t altcol) {
    Cursor at = Here();
    const char* kTab = "inconsistent use of tabs and spaces in indentation";
    if (col == indents_.back()) {
      if (altcol != altindents_.back()) Issue(kTab, at);
    } else if (col > indents_.back()) {
      if (indents_.size() >= kMaxIndentDepth) {
        Issue("nesting", "too many levels of indentation (nesting too deep: the limit is 100)",
              at.line, at.col, at.pos);
        return;
      }
      if (altcol <= altindents_.back()) Issue(kTab, at);
      indents_.push_back(col);
      altindents_.push_back(altcol);
      Emit(TokenKind::kIndent, at, at.pos);
    } else {
      while (indents_.size() > 1 && col < indents_.back()) {
        indents_.pop_back();
        altindents_.pop_back();
        Emit(TokenKind::kDedent, at, at.pos);
      }
      if (col != indents_.back()) {
        Issue("unindent does not match any outer indentation level", at);
      } else if (altcol != altindents_.back()) {
        Issue(kTab, at);
      }
    }
  }

  void Continuation() {
    Cursor at = Here();
    Bump();  // the backslash
    if (Peek() == kEof) {
      Issue("unexpected EOF while parsing", at);
      return;
    }
    if (!AtNewline()) {
      Issue("unexpected character after line continuation character", at);
      return;
    }
    ConsumeNewline();
    if (Peek() == kEof) Issue("unexpected EOF while parsing", Here());
  }

  void ScanToken() {
    int c = Peek();
    if (IsIdentStart(c)) {
      ScanName();
    } else if (IsDigit(c) || (c == '.' && IsDigit(Peek(1)))) {
      ScanNumber();
    } else if (c == '\'' || c == '"') {
      ScanString(Here(), 0);
    } else {
      ScanOp();
    }
  }

  void ScanName() {
    Cursor start = Here();
    bool ascii = true;
    uint32_t p = pos_;
    uint32_t code_points = 0;
    while (p < end_) {
      unsigned char c = static_cast<unsigned char>(src_[p]);
      if (!IsIdentChar(c)) break;
      if (c >= 0x80) ascii = false;
      if ((c & 0xC0) != 0x80) ++code_points;
      ++p;
    }
    pos_ = p;
    col_ += code_points;
    std::string_view text = src_.substr(start.pos, pos_ - start.pos);
    int q = Peek();
    if (q == '\'' || q == '"') {
      if (auto flags = StringPrefixFlags(text)) {
        ScanString(start, *flags);
        return;
      }
    }
    Emit(TokenKind::kName, start, pos_);
    Token& t = toks_.back();
    if (ascii) {
      t.keyword = IsPythonKeyword(text);
    } else if (auto n = NormalizeIdentifierToAscii(text); n && *n != text) {
      t.normalized = true;
      t.aux = static_cast<uint32_t>(out_.names.size());
      out_.names.push_back(std::move(*n));
    }
  }

  // ---- numbers: a transcription of CPython 3.11 tok_get's number branch ----
  int NumAt(uint32_t p) const { return p < end_ ? static_cast<unsigned char>(src_[p]) : kEof; }
  int NextC() { return NumAt(np_++); }
  void Backup() { --np_; }
  bool NumFail(const std::string& msg) {
    num_error_ = msg;
    return false;
  }
  bool VerifyEndOfNumber(int c, const char* kind) {
    // c is the character just read (at np_ - 1). Python 3.11 lets a keyword follow a
    // number directly ("1if x else 2") with a DeprecationWarning.
    auto lookahead = [&](const char* rest) {
      uint32_t p = np_;
      for (; *rest; ++rest, ++p) {
        if (NumAt(p) != static_cast<unsigned char>(*rest)) return false;
      }
      return true;
    };
    bool r = false;
    if (c == 'a') {
      r = lookahead("nd");
    } else if (c == 'e') {
      r = lookahead("lse");
    } else if (c == 'f') {
      r = lookahead("or");
    } else if (c == 'i') {
      int c2 = NumAt(np_);
      r = c2 == 'f' || c2 == 'n' || c2 == 's';
    } else if (c == 'o') {
      r = lookahead("r");
    } else if (c == 'n') {
      r = lookahead("ot");
    }
    if (r) return true;
    if (c != kEof && IsIdentChar(c)) {
      Backup();
      return NumFail(std::string("invalid ") + kind + " literal");
    }
    return true;
  }
  // After a digit: more digits with single underscores between them. Returns the next
  // character, or kEof with num_error_ set.
  bool DecimalTail(int& c) {
    while (true) {
      do {
        c = NextC();
      } while (IsDigit(c));
      if (c != '_') break;
      c = NextC();
      if (!IsDigit(c)) {
        Backup();
        return NumFail("invalid decimal literal");
      }
    }
    return true;
  }
  // The fraction, exponent and imaginary parts; c is the character after the integer
  // part, or (after_dot) the character after the '.'. Leaves np_ after the number.
  bool NumberTail(int c, bool after_dot) {
    if (!after_dot && c == '.') {
      c = NextC();
      after_dot = true;
    }
    if (after_dot && IsDigit(c)) {
      if (!DecimalTail(c)) return false;
    }
    if (c == 'e' || c == 'E') {
      int e = c;
      c = NextC();
      if (c == '+' || c == '-') {
        c = NextC();
        if (!IsDigit(c)) {
          Backup();
          return NumFail("invalid decimal literal");
        }
      } else if (!IsDigit(c)) {
        Backup();
        if (!VerifyEndOfNumber(e, "decimal")) return false;
        Backup();  // the number ends before the 'e' ("1else")
        return true;
      }
      if (!DecimalTail(c)) return false;
    }
    if (c == 'j' || c == 'J') {
      c = NextC();
      if (!VerifyEndOfNumber(c, "imaginary")) return false;
    } else if (!VerifyEndOfNumber(c, "decimal")) {
      return false;
    }
    Backup();
    return true;
  }
  bool RadixNumber(int c, int radix, const char* kind) {
    auto ok_digit = [&](int d) {
      return radix == 16 ? IsHexDigit(d) : (d >= '0' && d < '0' + radix);
    };
    c = NextC();
    do {
      if (c == '_') c = NextC();
      if (!ok_digit(c)) {
        if (radix != 16 && IsDigit(c)) {
          return NumFail(WithChar("invalid digit ", c, radix == 8 ? " in octal literal" : " in binary literal"));
        }
        Backup();
        return NumFail(std::string("invalid ") + kind + " literal");
      }
      do {
        c = NextC();
      } while (ok_digit(c));
    } while (c == '_');
    if (radix != 16 && IsDigit(c)) {
      return NumFail(WithChar("invalid digit ", c, radix == 8 ? " in octal literal" : " in binary literal"));
    }
    if (!VerifyEndOfNumber(c, kind)) return false;
    Backup();
    return true;
  }
  bool NumberBody() {
    int c = NextC();
    if (c == '.') return NumberTail(NextC(), /*after_dot=*/true);
    if (c != '0') {
      if (!DecimalTail(c)) return false;
      return NumberTail(c, false);
    }
    c = NextC();
    if (c == 'x' || c == 'X') return RadixNumber(c, 16, "hexadecimal");
    if (c == 'o' || c == 'O') return RadixNumber(c, 8, "octal");
    if (c == 'b' || c == 'B') return RadixNumber(c, 2, "binary");
    bool nonzero = false;
    while (true) {
      if (c == '_') {
        c = NextC();
        if (!IsDigit(c)) {
          Backup();
          return NumFail("invalid decimal literal");
        }
      }
      if (c != '0') break;
      c = NextC();
    }
    if (IsDigit(c)) {
      nonzero = true;
      if (!DecimalTail(c)) return false;
    }
    if (c == '.') return NumberTail(NextC(), true);
    if (c == 'e' || c == 'E' || c == 'j' || c == 'J') return NumberTail(c, false);
    if (nonzero) {
      Backup();
      return NumFail(
          "leading zeros in decimal integer literals are not permitted; use an 0o prefix for "
          "octal integers");
    }
    if (!VerifyEndOfNumber(c, "decimal")) return false;
    Backup();
    return true;
  }
  void ScanNumber() {
    Cursor start = Here();
    np_ = pos_;
    num_error_.clear();
    if (!NumberBody()) {
      Issue(num_error_, start);
      // Resynchronize after the bad literal: swallow the rest of the word.
      if (np_ <= pos_) np_ = pos_ + 1;
      while (np_ < end_ && IsIdentChar(NumAt(np_))) ++np_;
    }
    np_ = std::max(np_, pos_ + 1);
    while (pos_ < np_ && pos_ < end_) Bump();
    Emit(TokenKind::kNumber, start, pos_);
  }

  // ---- strings ----
  void ScanString(Cursor start, uint8_t flags) {
    const int q = Peek();
    const bool triple = Peek(1) == q && Peek(2) == q;
    if (triple) flags |= kStrTriple;
    for (int k = 0; k < (triple ? 3 : 1); ++k) Bump();
    const Cursor content = Here();
    uint32_t content_end = 0;
    bool terminated = false;
    while (true) {
      // Fast path: ordinary characters, counted without the per-byte checks below.
      {
        uint32_t p = pos_;
        uint32_t code_points = 0;
        while (p < end_) {
          unsigned char b = static_cast<unsigned char>(src_[p]);
          if (b == q || b == '\\' || b == '\n' || b == '\r') break;
          if ((b & 0xC0) != 0x80) ++code_points;
          ++p;
        }
        pos_ = p;
        col_ += code_points;
      }
      int c = Peek();
      if (c == kEof) break;
      if (c == '\\') {
        Bump();
        if (AtNewline()) {
          ConsumeNewline();
        } else if (Peek() != kEof) {
          Bump();
        }
        continue;
      }
      if (c == '\n' || c == '\r') {
        if (!triple) break;
        ConsumeNewline();
        continue;
      }
      if (c == q && (!triple || (Peek(1) == q && Peek(2) == q))) {
        content_end = pos_;
        for (int k = 0; k < (triple ? 3 : 1); ++k) Bump();
        terminated = true;
        break;
      }
      Bump();
    }
    if (!terminated) {
      content_end = pos_;
      uint32_t detected = line_;
      if (triple && pos_ > content.pos && (src_[pos_ - 1] == '\n' || src_[pos_ - 1] == '\r')) {
        detected = std::max(start.line, line_ - 1);
      }
      char buf[120];
      std::snprintf(buf, sizeof buf, "%s (detected at line %u)",
                    triple ? "unterminated triple-quoted string literal"
                           : "unterminated string literal",
                    detected);
      Issue(buf, start);
    }
    Emit(TokenKind::kString, start, pos_, flags);
    const size_t tok_index = toks_.size() - 1;
    const uint32_t value_index = static_cast<uint32_t>(out_.values.size());
    toks_[tok_index].aux = value_index;
    out_.values.emplace_back();  // filled below; nested f-strings append their own
    std::string value;
    std::string_view text = src_.substr(content.pos, content_end - content.pos);
    if (flags & kStrBytes) {
      for (char ch : text) {
        if (static_cast<unsigned char>(ch) >= 0x80) {
          Issue("bytes can only contain ASCII literal characters", start);
          break;
        }
      }
    }
    if (flags & kStrFormat) {
      bool has_fields = false;
      FString(start, content, content_end, (flags & kStrRaw) != 0, value, has_fields);
      if (has_fields) toks_[tok_index].flags |= kStrHasFields;
    } else if (flags & kStrRaw) {
      for (size_t k = 0; k < text.size(); ++k) {  // no escapes, but newlines are normalized
        if (text[k] == '\r') {
          value.push_back('\n');
          if (k + 1 < text.size() && text[k + 1] == '\n') ++k;
        } else {
          value.push_back(text[k]);
        }
      }
    } else if (auto err = DecodeEscapes(text, (flags & kStrBytes) != 0, value)) {
      Issue(*err, start);
    }
    out_.values[value_index] = std::move(value);
  }

  // ---- f-strings: a transcription of CPython 3.11 Parser/string_parser.c ----
  struct FCtx {
    Cursor string_start;
    uint32_t end = 0;     // content end (the closing quote)
    bool raw = false;
    Cursor walker;        // moves forward over the content, for field positions
    bool failed = false;
    bool has_fields = false;
  };

  void FString(Cursor start, Cursor content, uint32_t content_end, bool raw, std::string& value,
               bool& has_fields) {
    FCtx ctx;
    ctx.string_start = start;
    ctx.end = content_end;
    ctx.raw = raw;
    ctx.walker = content;
    uint32_t s = content.pos;
    FParse(ctx, s, 0, &value);
    has_fields = ctx.has_fields;
  }

  bool FFail(FCtx& ctx, std::string message) {
    if (!ctx.failed) Issue(std::move(message), ctx.string_start);
    ctx.failed = true;
    return false;
  }

  // fstring_parse: literals and fields until the end (level 0) or a '}' (format spec).
  bool FParse(FCtx& ctx, uint32_t& s, int lvl, std::string* value) {
    while (true) {
      bool had_expr = false;
      int r = FLiteralAndExpr(ctx, s, lvl, value, had_expr);
      if (r < 0) return false;
      if (r == 1) continue;
      if (!had_expr) break;
    }
    if (lvl != 0 && (s >= ctx.end || src_[s] != '}')) {
      return FFail(ctx, "f-string: expecting '}'");
    }
    return true;
  }

  int FLiteralAndExpr(FCtx& ctx, uint32_t& s, int lvl, std::string* value, bool& had_expr) {
    // fstring_find_literal
    const uint32_t end = ctx.end;
    const uint32_t literal_start = s;
    uint32_t literal_end = 0;
    int result = 0;
    bool done = false;
    while (s < end) {
      unsigned char ch = static_cast<unsigned char>(src_[s++]);
      if (!ctx.raw && ch == '\\' && s < end) {
        ch = static_cast<unsigned char>(src_[s++]);
        if (ch == 'N') {
          if (s < end && src_[s++] == '{') {
            while (s < end && src_[s++] != '}') {
            }
          }
          continue;
        }
      }
      if (ch == '{' || ch == '}') {
        if (lvl == 0) {
          if (s < end && static_cast<unsigned char>(src_[s]) == ch) {
            literal_end = s;
            s = s + 1;
            result = 1;
            done = true;
            break;
          }
          if (ch == '}') {
            s = s - 1;
            FFail(ctx, "f-string: single '}' is not allowed");
            return -1;
          }
        }
        s--;
        break;
      }
    }
    if (!done) literal_end = s;
    if (value != nullptr && literal_end > literal_start) {
      std::string_view lit = src_.substr(literal_start, literal_end - literal_start);
      if (ctx.raw) {
        value->append(lit);
      } else if (auto err = DecodeEscapes(lit, false, *value)) {
        FFail(ctx, *err);
        return -1;
      }
    }
    if (result == 1) return 1;
    if (s >= end || src_[s] == '}') return 0;
    had_expr = true;
    if (!FExpr(ctx, s, lvl)) return -1;
    if (value != nullptr) value->push_back('\0');
    return 0;
  }

  // fstring_find_expr: s is at the '{'.
  bool FExpr(FCtx& ctx, uint32_t& s, int lvl) {
    const uint32_t end = ctx.end;
    if (lvl >= 2) return FFail(ctx, "f-string: expressions nested too deeply");
    ctx.has_fields = true;
    ++s;
    const uint32_t expr_start = s;
    char quote_char = 0;
    int string_type = 0;
    char parenstack[kMaxParenDepth];
    size_t nested_depth = 0;
    if (s >= end) return FFail(ctx, "f-string: expecting '}'");
    for (; s < end; ++s) {
      char ch = src_[s];
      if (ch == '\\') return FFail(ctx, "f-string expression part cannot include a backslash");
      if (quote_char) {
        if (ch == quote_char) {
          if (string_type == 3) {
            if (s + 2 < end && src_[s + 1] == ch && src_[s + 2] == ch) {
              s += 2;
              string_type = 0;
              quote_char = 0;
              continue;
            }
          } else {
            string_type = 0;
            quote_char = 0;
            continue;
          }
        }
        continue;
      }
      if (ch == '\'' || ch == '"') {
        if (s + 2 < end && src_[s + 1] == ch && src_[s + 2] == ch) {
          string_type = 3;
          s += 2;
        } else {
          string_type = 1;
        }
        quote_char = ch;
      } else if (ch == '[' || ch == '(' || ch == '{') {
        if (nested_depth >= kMaxParenDepth) {
          return FFail(ctx, "f-string: too many nested parenthesis");
        }
        parenstack[nested_depth++] = ch;
      } else if (ch == '#') {
        return FFail(ctx, "f-string expression part cannot include '#'");
      } else if (nested_depth == 0 &&
                 (ch == '!' || ch == ':' || ch == '}' || ch == '=' || ch == '>' || ch == '<')) {
        if (s + 1 < end) {
          char next = src_[s + 1];
          if ((ch == '!' && next == '=') || (ch == '=' && next == '=') ||
              (ch == '<' && next == '=') || (ch == '>' && next == '=')) {
            ++s;
            continue;
          }
        }
        if (ch == '>' || ch == '<') continue;
        break;
      } else if (ch == ']' || ch == '}' || ch == ')') {
        if (nested_depth == 0) return FFail(ctx, WithChar("f-string: unmatched ", ch, ""));
        char opening = parenstack[--nested_depth];
        if (!((opening == '(' && ch == ')') || (opening == '[' && ch == ']') ||
              (opening == '{' && ch == '}'))) {
          char buf[120];
          std::snprintf(buf, sizeof buf,
                        "f-string: closing parenthesis '%c' does not match opening "
                        "parenthesis '%c'",
                        ch, opening);
          return FFail(ctx, buf);
        }
      }
    }
    const uint32_t expr_end = s;
    if (quote_char) return FFail(ctx, "f-string: unterminated string");
    if (nested_depth) return FFail(ctx, WithChar("f-string: unmatched ", parenstack[nested_depth - 1], ""));
    if (s >= end) return FFail(ctx, "f-string: expecting '}'");
    bool empty = true;
    for (uint32_t k = expr_start; k < expr_end; ++k) {
      if (!IsPySpace(static_cast<unsigned char>(src_[k]))) empty = false;
    }
    if (empty) {
      return FFail(ctx, src_[s] == '!' ? "f-string: expression required before '!'"
                                       : "f-string: empty expression not allowed");
    }
    // Tokenize the expression as a field segment, at its own position in the source.
    AdvanceCursor(src_, ctx.walker, expr_start);
    if (fnest_ + 1 > kMaxFStringNesting) {
      return FFail(ctx, "f-string: expressions nested too deeply");
    }
    Lexer sub(out_, expr_start, expr_end, ctx.walker, /*field=*/true, fnest_ + 1);
    sub.Run();
    if (src_[s] == '=') {
      ++s;
      while (s < end && IsPySpace(static_cast<unsigned char>(src_[s]))) ++s;
      if (s >= end) return FFail(ctx, "f-string: expecting '}'");
    }
    if (src_[s] == '!') {
      ++s;
      if (s >= end) return FFail(ctx, "f-string: expecting '}'");
      char conversion = src_[s++];
      if (!(conversion == 's' || conversion == 'r' || conversion == 'a')) {
        return FFail(ctx, "f-string: invalid conversion character: expected 's', 'r', or 'a'");
      }
    }
    if (s >= end) return FFail(ctx, "f-string: expecting '}'");
    if (src_[s] == ':') {
      ++s;
      if (s >= end) return FFail(ctx, "f-string: expecting '}'");
      if (!FParse(ctx, s, lvl + 1, nullptr)) return false;
    }
    if (s >= end || src_[s] != '}') return FFail(ctx, "f-string: expecting '}'");
    ++s;
    return true;
  }

  // ---- operators and brackets ----
  void ScanOp() {
    Cursor start = Here();
    const int c = Peek(), c1 = Peek(1), c2 = Peek(2);
    size_t len = 0;  // 0: not an operator
    switch (c) {
      case '(': case ')': case '[': case ']': case '{': case '}': case ',': case ';': case '~':
        len = 1;
        break;
      case ':':
        len = c1 == '=' ? 2 : 1;
        break;
      case '.':
        len = (c1 == '.' && c2 == '.') ? 3 : 1;
        break;
      case '+': case '%': case '&': case '|': case '^': case '@': case '=':
        len = c1 == '=' ? 2 : 1;
        break;
      case '-':
        len = (c1 == '=' || c1 == '>') ? 2 : 1;
        break;
      case '*': case '/': case '>':
        if (c1 == c) {
          len = c2 == '=' ? 3 : 2;
        } else {
          len = c1 == '=' ? 2 : 1;
        }
        break;
      case '<':
        if (c1 == '<') {
          len = c2 == '=' ? 3 : 2;
        } else {
          len = (c1 == '=' || c1 == '>') ? 2 : 1;
        }
        break;
      case '!':
        len = c1 == '=' ? 2 : 0;
        break;
      default:
        break;
    }
    if (len == 0) {
      Bump();
      if (c < 0x20 || c == 0x7F) {
        char buf[80];
        std::snprintf(buf, sizeof buf, "invalid non-printable character U+%04X", c);
        Issue(buf, start);
      } else {
        Issue("invalid syntax", start);  // $ ? ` ! and stray bytes
      }
      return;
    }
    std::string_view rest = src_.substr(pos_, len);
    if (len == 2 && rest.substr(0, 2) == "<>") Issue("invalid syntax", start);
    for (size_t k = 0; k < len; ++k) Bump();
    Emit(TokenKind::kOp, start, pos_);
    toks_.back().aux = OpCode(rest);
    if (len != 1) return;
    if (c == '(' || c == '[' || c == '{') {
      if (brackets_.size() >= kMaxParenDepth) {
        if (overflow_ == 0) {
          Issue("nesting", "too many nested parentheses (nesting too deep: the limit is 200)",
                start.line, start.col, start.pos);
        }
        ++overflow_;
      } else {
        brackets_.push_back(Open{static_cast<char>(c), start.line, start.col, start.pos});
      }
    } else if (c == ')' || c == ']' || c == '}') {
      if (overflow_ > 0) {
        --overflow_;
      } else if (brackets_.empty()) {
        Issue(WithChar("unmatched ", c, ""), start);
      } else {
        Open o = brackets_.back();
        brackets_.pop_back();
        char want = o.c == '(' ? ')' : o.c == '[' ? ']' : '}';
        if (c != want) {
          char buf[160];
          if (o.line != start.line) {
            std::snprintf(buf, sizeof buf,
                          "closing parenthesis '%c' does not match opening parenthesis '%c' "
                          "on line %u",
                          c, o.c, o.line);
          } else {
            std::snprintf(buf, sizeof buf,
                          "closing parenthesis '%c' does not match opening parenthesis '%c'", c,
                          o.c);
          }
          Issue(buf, start);
        }
      }
    }
  }

  struct Open {
    char c;
    uint32_t line, col, pos;
  };

  TokenizedSource& out_;
  std::string_view src_;
  uint32_t pos_, end_;
  uint32_t line_, col_;
  bool field_;
  int fnest_;
  std::vector<Token> toks_;
  std::vector<Open> brackets_;
  size_t overflow_ = 0;
  std::vector<uint32_t> indents_{0};
  std::vector<uint32_t> altindents_{0};
  uint32_t np_ = 0;  // number scanner position
  std::string num_error_;
  size_t issue_count_ = 0;
};

// ---- parser-level checks Python would make first, done on the token stream ----

bool IsOpTok(const TokenizedSource&, const Token& t, std::string_view op) {
  return IsOp(t, OpCode(op));
}
bool IsKw(const TokenizedSource& ts, const Token& t, std::string_view kw) {
  return t.kind == TokenKind::kName && t.keyword && ts.Text(t) == kw;
}
bool IsAtom(const TokenizedSource& ts, const Token& t) {
  if (t.kind == TokenKind::kNumber || t.kind == TokenKind::kString) return true;
  if (t.kind != TokenKind::kName) return false;
  if (!t.keyword) return true;
  std::string_view s = ts.Text(t);
  return s == "True" || s == "False" || s == "None";
}
bool StatementStart(const TokenizedSource& ts, uint32_t i, uint32_t first) {
  if (i == first) return true;
  const Token& p = ts.tokens[i - 1];
  return p.kind == TokenKind::kNewline || p.kind == TokenKind::kIndent ||
         p.kind == TokenKind::kDedent || IsOpTok(ts, p, ";");
}

void AddIssue(TokenizedSource& ts, std::string message, const Token& at) {
  SyntaxIssue s;
  s.rule = "syntax";
  s.message = std::move(message);
  s.line = at.line;
  s.col = at.col;
  s.order = at.begin;
  ts.issues.push_back(std::move(s));
}

// Operand followed by operand ("x y", "print 'x'"), and mixed bytes/str concatenation.
void CheckAdjacent(TokenizedSource& ts, const Segment& seg) {
  for (uint32_t i = seg.first; i < seg.last && !seg.field; ++i) {
    if (IsOpTok(ts, ts.tokens[i], ";") && StatementStart(ts, i, seg.first)) {
      AddIssue(ts, "invalid syntax", ts.tokens[i]);  // ";;" or a line starting with ';'
      break;
    }
  }
  for (uint32_t i = seg.first + 1; i < seg.last; ++i) {
    const Token& a = ts.tokens[i - 1];
    const Token& b = ts.tokens[i];
    if (a.kind == TokenKind::kString && b.kind == TokenKind::kString) {
      if (((a.flags ^ b.flags) & kStrBytes) != 0) {
        AddIssue(ts, "cannot mix bytes and nonbytes literals", b);
        return;
      }
      continue;
    }
    if (!IsAtom(ts, a) || !IsAtom(ts, b)) continue;
    if (!seg.field && a.kind == TokenKind::kName && !a.normalized &&
        StatementStart(ts, i - 1, seg.first)) {
      std::string_view s = ts.Text(a);
      if (s == "match" || s == "case") continue;  // soft keywords
      if (s == "print" || s == "exec") {
        AddIssue(ts,
                 "Missing parentheses in call to '" + std::string(s) + "'. Did you mean " +
                     std::string(s) + "(...)?",
                 a);
        return;
      }
    }
    AddIssue(ts, seg.field ? "f-string: invalid syntax" : "invalid syntax", b);
    return;  // the scan is in source order: the first issue is the one Python reports
  }
}

std::string BlockOwner(const TokenizedSource& ts, const Token& first, const Token* second) {
  const Token* t = &first;
  if (IsKw(ts, first, "async") && second != nullptr) t = second;
  if (t->kind != TokenKind::kName) return "";
  std::string_view s = ts.Text(*t);
  if (t->keyword) {
    if (s == "def") return "function definition";
    if (s == "class") return "class definition";
    static constexpr std::string_view kStatements[] = {"if",  "elif",   "else",  "while",
                                                       "for", "with",   "try",   "except",
                                                       "finally"};
    for (auto k : kStatements) {
      if (s == k) return "'" + std::string(s) + "' statement";
    }
    return "";
  }
  if (s == "match" || s == "case") return "'" + std::string(s) + "' statement";
  return "";
}

bool IsCompoundHeader(const TokenizedSource& ts, const Token& first, const Token* second) {
  const Token* t = &first;
  if (IsKw(ts, first, "async") && second != nullptr) t = second;
  if (t->kind != TokenKind::kName || !t->keyword) return false;
  static constexpr std::string_view kHeaders[] = {"if",  "elif", "else", "while", "for", "with",
                                                  "try", "except", "finally", "def", "class"};
  std::string_view s = ts.Text(*t);
  for (auto k : kHeaders) {
    if (s == k) return true;
  }
  return false;
}

// Logical-line checks on the module: ':' after a compound header, an indented block after
// ':', no indentation elsewhere, something decorable after a decorator, import syntax.
void CheckStatements(TokenizedSource& ts, const Segment& seg) {
  bool prev_colon = false;     // the previous logical line ended with ':'
  bool prev_decorator = false;
  std::string prev_owner;
  uint32_t prev_line = 0;
  uint32_t i = seg.first;
  const size_t issues_before = ts.issues.size();
  while (i < seg.last) {
    // The scan is in source order: after the first issue the rest would be noise.
    if (ts.issues.size() > issues_before) return;
    bool indent = false;
    while (i < seg.last && (ts.tokens[i].kind == TokenKind::kIndent ||
                            ts.tokens[i].kind == TokenKind::kDedent)) {
      if (ts.tokens[i].kind == TokenKind::kIndent) indent = true;
      ++i;
    }
    if (i >= seg.last) break;
    const Token& first = ts.tokens[i];
    if (prev_colon && !indent) {
      AddIssue(ts,
               prev_owner.empty() ? std::string("invalid syntax")
                                  : "expected an indented block after " + prev_owner +
                                        " on line " + std::to_string(prev_line),
               first);
    } else if (!prev_colon && indent) {
      AddIssue(ts, "unexpected indent", first);
    }
    if (first.kind == TokenKind::kEnd) {
      if (prev_decorator) AddIssue(ts, "invalid syntax", first);
      break;
    }
    if (prev_decorator && !(IsOpTok(ts, first, "@") || IsKw(ts, first, "def") ||
                            IsKw(ts, first, "class") || IsKw(ts, first, "async"))) {
      AddIssue(ts, "invalid syntax", first);
    }
    // Scan the logical line.
    uint32_t j = i;
    int depth = 0;
    bool colon0 = false;
    while (j < seg.last && ts.tokens[j].kind != TokenKind::kNewline &&
           ts.tokens[j].kind != TokenKind::kEnd) {
      const Token& t = ts.tokens[j];
      if (t.kind == TokenKind::kOp) {
        std::string_view s = ts.Text(t);
        if (s == "(" || s == "[" || s == "{") {
          ++depth;
        } else if (s == ")" || s == "]" || s == "}") {
          depth = std::max(0, depth - 1);
        } else if (s == ":" && depth == 0) {
          colon0 = true;
        }
      } else if (t.kind == TokenKind::kName && t.keyword &&
                 (ts.Text(t) == "import" || ts.Text(t) == "from")) {
        ImportStatement st;
        if (ParseImport(ts, j, seg.first, seg.last, &st)) {
          if (!st.valid) AddIssue(ts, "invalid syntax", ts.tokens[st.error_token]);
          j = std::max(st.next, j + 1);
          continue;
        }
      }
      ++j;
    }
    const Token* second = i + 1 < j ? &ts.tokens[i + 1] : nullptr;
    if (IsCompoundHeader(ts, first, second) && !colon0 && j < seg.last) {
      AddIssue(ts, "expected ':'", ts.tokens[j]);
    }
    prev_colon = j > i && IsOpTok(ts, ts.tokens[j - 1], ":");
    prev_owner = prev_colon ? BlockOwner(ts, first, second) : "";
    prev_line = first.line;
    prev_decorator = IsOpTok(ts, first, "@");
    if (j < seg.last && ts.tokens[j].kind == TokenKind::kEnd) {
      i = j;  // let the END token close pending checks
      if (prev_colon || prev_decorator) continue;
      break;
    }
    i = j + 1;
  }
}

}  // namespace

bool IsPythonKeyword(std::string_view s) {
  // Bucketed by first letter: most names are rejected after one comparison of lengths.
  static constexpr std::string_view kByLetter[26][6] = {
      /*a*/ {"and", "as", "assert", "async", "await"},
      /*b*/ {"break"},
      /*c*/ {"class", "continue"},
      /*d*/ {"def", "del"},
      /*e*/ {"elif", "else", "except"},
      /*f*/ {"finally", "for", "from"},
      /*g*/ {"global"},
      /*h*/ {},
      /*i*/ {"if", "import", "in", "is"},
      /*j*/ {}, /*k*/ {},
      /*l*/ {"lambda"},
      /*m*/ {},
      /*n*/ {"nonlocal", "not"},
      /*o*/ {"or"},
      /*p*/ {"pass"},
      /*q*/ {},
      /*r*/ {"raise", "return"},
      /*s*/ {},
      /*t*/ {"try"},
      /*u*/ {}, /*v*/ {},
      /*w*/ {"while", "with"},
      /*x*/ {},
      /*y*/ {"yield"},
      /*z*/ {}};
  if (s.size() < 2 || s.size() > 8) return false;
  char c = s[0];
  if (c == 'F') return s == "False";
  if (c == 'N') return s == "None";
  if (c == 'T') return s == "True";
  if (c < 'a' || c > 'z') return false;
  for (std::string_view k : kByLetter[c - 'a']) {
    if (k.empty()) break;
    if (k.size() == s.size() && k == s) return true;
  }
  return false;
}

const SyntaxIssue* TokenizedSource::FirstIssue() const {
  const SyntaxIssue* best = nullptr;
  for (const SyntaxIssue& s : issues) {
    if (best == nullptr || s.order < best->order) best = &s;
  }
  return best;
}

TokenizedSource Tokenize(std::string_view source) {
  TokenizedSource ts;
  ts.source = source;
  // Python decodes the whole source before tokenizing: these errors come first.
  if (auto bad = FindInvalidUtf8(source)) {
    Cursor c;
    AdvanceCursor(source, c, static_cast<uint32_t>(bad->offset));
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "(unicode error) 'utf-8' codec can't decode byte 0x%02x in position %zu: %s",
                  bad->byte, bad->offset, bad->reason);
    ts.issues.push_back(SyntaxIssue{"encoding", buf, c.line, c.col, 0});
  }
  if (size_t nul = source.find('\0'); nul != std::string_view::npos) {
    Cursor c;
    AdvanceCursor(source, c, static_cast<uint32_t>(nul));
    ts.issues.push_back(
        SyntaxIssue{"syntax", "source code cannot contain null bytes", c.line, c.col, 0});
  }
  uint32_t begin = 0;
  if (source.substr(0, 3) == "\xEF\xBB\xBF") begin = 3;  // a UTF-8 BOM, as in a file
  Cursor start{begin, 1, 1};
  Lexer lexer(ts, begin, static_cast<uint32_t>(source.size()), start, /*field=*/false, 0);
  lexer.Run();
  for (size_t k = 0; k < ts.segments.size(); ++k) {
    Segment seg = ts.segments[k];  // copy: AddIssue does not touch segments, but be safe
    CheckAdjacent(ts, seg);
    if (!seg.field) CheckStatements(ts, seg);
  }
  return ts;
}

}  // namespace airlock::analyzer
