// A hand-written tokenizer for Python 3.11 source, the input of the analyzer's rules.
//
// It follows CPython 3.11's tokenizer (Parser/tokenizer.c) closely enough never to
// mis-tokenize valid code: NAME (any byte >= 0x80 is an identifier byte; names with
// non-ASCII characters are NFKC-mapped to ASCII where CPython would do so), NUMBER (all
// of 1_000, 0x1f, 0o7, 0b1, 1e-5, 1.5j, with CPython's error messages), STRING with every
// prefix (r u b br rb f fr rf, any case), single and triple quotes, escapes and line
// continuations, OP, NEWLINE/INDENT/DEDENT; comments and blank lines produce no token.
//
// An f-string is one STRING token (3.11 semantics: its end is found like any string's),
// and the expressions of its replacement fields are tokenized too, each as a separate
// "field" Segment of the same token vector, so the rules see the code inside `{...}`.
//
// Besides tokens it reports the syntax errors a tokenizer (and a few cheap parser checks)
// can find, with Python's messages: unterminated strings, unbalanced brackets, bad
// indentation and tabs, bad numbers, f-string errors, missing ':' or indented block after
// a compound statement header, two adjacent operands ("print 'x'"), bad imports.
//
// Bounded on hostile input: one pass, no recursion except the f-string nesting (capped at
// a small depth), bracket and indentation stacks capped at Python's own limits (200 and
// 100), memory linear in the input.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace airlock::analyzer {

enum class TokenKind : uint8_t { kName, kNumber, kString, kOp, kNewline, kIndent, kDedent, kEnd };

// Token::flags bits of a STRING token.
enum StringFlag : uint8_t {
  kStrRaw = 1,
  kStrBytes = 2,
  kStrFormat = 4,     // f-string
  kStrTriple = 8,
  kStrHasFields = 16, // f-string with at least one replacement field
};

struct Token {
  TokenKind kind = TokenKind::kEnd;
  uint8_t flags = 0;        // StringFlag bits of a STRING
  bool keyword = false;     // a NAME that is a hard keyword (if, import, None, ...)
  bool normalized = false;  // a NAME whose NFKC form differs from its source text
  uint32_t begin = 0;       // byte range in the source
  uint32_t end = 0;
  uint32_t line = 0;        // 1-based
  uint32_t col = 0;         // 1-based, code points
  uint32_t aux = 0;         // STRING: index into values; normalized NAME: into names;
                            // OP: OpCode(text)
};

// An operator's text (1 to 3 characters) packed into an integer: OP tokens carry it in
// Token::aux so that rules compare integers, not strings.
constexpr uint32_t OpCode(std::string_view op) {
  uint32_t v = 0;
  for (size_t k = 0; k < op.size() && k < 3; ++k) {
    v |= static_cast<uint32_t>(static_cast<unsigned char>(op[k])) << (8 * k);
  }
  return v;
}
inline bool IsOp(const Token& t, uint32_t code) {
  return t.kind == TokenKind::kOp && t.aux == code;
}

struct SyntaxIssue {
  std::string rule;     // "syntax", "encoding" or "nesting"
  std::string message;  // Python's message, e.g. "'(' was never closed"
  uint32_t line = 0;
  uint32_t col = 0;
  // Byte offset at which Python would raise it: Python stops at its first error, which
  // is the issue with the smallest order (ties: the first added).
  uint32_t order = 0;
};

// A run of tokens the rules read as one unit: the module, or the expression of one
// f-string replacement field (which has no NEWLINE/INDENT/DEDENT/END tokens).
struct Segment {
  uint32_t first = 0;  // token index range [first, last)
  uint32_t last = 0;
  bool field = false;
};

struct TokenizedSource {
  std::string_view source;  // not owned; must outlive this object
  std::vector<Token> tokens;
  std::vector<Segment> segments;   // field segments first, the module segment last
  std::vector<std::string> values; // decoded STRING values; an f-string's fields are '\0'
  std::vector<std::string> names;  // NFKC-normalized NAMEs
  std::vector<SyntaxIssue> issues;

  std::string_view Text(const Token& t) const { return source.substr(t.begin, t.end - t.begin); }
  // The identifier as Python sees it (NFKC-normalized); the source text for other kinds.
  std::string_view Name(const Token& t) const {
    return t.normalized ? std::string_view(names[t.aux]) : Text(t);
  }
  // The decoded value of a STRING token.
  std::string_view Value(const Token& t) const { return values[t.aux]; }
  // The issue Python would report, or nullptr if the source is valid as far as we can tell.
  const SyntaxIssue* FirstIssue() const;
};

TokenizedSource Tokenize(std::string_view source);

// True for Python 3.11 hard keywords.
bool IsPythonKeyword(std::string_view s);

}  // namespace airlock::analyzer
