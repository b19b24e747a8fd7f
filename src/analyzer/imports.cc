#include "analyzer/imports.h"

namespace airlock::analyzer {
namespace {

bool IsOp(const TokenizedSource& ts, uint32_t i, uint32_t last, std::string_view op) {
  return i < last && IsOp(ts.tokens[i], OpCode(op));
}

bool IsPlainName(const TokenizedSource& ts, uint32_t i, uint32_t last) {
  return i < last && ts.tokens[i].kind == TokenKind::kName && !ts.tokens[i].keyword;
}

bool IsKeyword(const TokenizedSource& ts, uint32_t i, uint32_t last, std::string_view kw) {
  return i < last && ts.tokens[i].kind == TokenKind::kName && ts.tokens[i].keyword &&
         ts.Text(ts.tokens[i]) == kw;
}

bool AtStatementStart(const TokenizedSource& ts, uint32_t i, uint32_t first) {
  if (i == first) return true;
  const Token& p = ts.tokens[i - 1];
  if (p.kind == TokenKind::kNewline || p.kind == TokenKind::kIndent ||
      p.kind == TokenKind::kDedent) {
    return true;
  }
  return IsOp(p, OpCode(";")) || IsOp(p, OpCode(":"));
}

bool AtStatementEnd(const TokenizedSource& ts, uint32_t i, uint32_t last) {
  if (i >= last) return true;
  const Token& t = ts.tokens[i];
  return t.kind == TokenKind::kNewline || t.kind == TokenKind::kEnd ||
         IsOp(t, OpCode(";"));
}

// dotted_name: NAME ('.' NAME)*. Returns false if tokens[i] is not a NAME.
bool ParseDotted(const TokenizedSource& ts, uint32_t& i, uint32_t last, std::string* path,
                 std::vector<uint32_t>* parts) {
  if (!IsPlainName(ts, i, last)) return false;
  *path = std::string(ts.Name(ts.tokens[i]));
  if (parts) parts->push_back(i);
  ++i;
  while (IsOp(ts, i, last, ".") && IsPlainName(ts, i + 1, last)) {
    *path += '.';
    *path += ts.Name(ts.tokens[i + 1]);
    if (parts) parts->push_back(i + 1);
    i += 2;
  }
  return true;
}

// Skips to the end of the statement after a syntax error.
void Fail(const TokenizedSource& ts, uint32_t i, uint32_t last, ImportStatement* out) {
  out->valid = false;
  out->error_token = i < last ? i : (last > 0 ? last - 1 : 0);
  while (!AtStatementEnd(ts, i, last)) ++i;
  out->next = i;
}

}  // namespace

bool ParseImport(const TokenizedSource& ts, uint32_t i, uint32_t first, uint32_t last,
                 ImportStatement* out) {
  *out = ImportStatement{};
  if (i >= last || ts.tokens[i].kind != TokenKind::kName || !ts.tokens[i].keyword) return false;
  std::string_view kw = ts.Text(ts.tokens[i]);
  out->keyword_token = i;
  out->module_token = i;
  if (kw == "import") {
    ++i;
    while (true) {
      ImportEntry e;
      if (!ParseDotted(ts, i, last, &e.path, &e.part_tokens)) return Fail(ts, i, last, out), true;
      if (IsKeyword(ts, i, last, "as")) {
        if (!IsPlainName(ts, i + 1, last)) return Fail(ts, i + 1, last, out), true;
        e.alias = std::string(ts.Name(ts.tokens[i + 1]));
        i += 2;
      }
      out->entries.push_back(std::move(e));
      if (IsOp(ts, i, last, ",")) {
        ++i;
        continue;
      }
      break;
    }
    if (!AtStatementEnd(ts, i, last)) return Fail(ts, i, last, out), true;
    out->next = i;
    return true;
  }
  if (kw != "from") return false;
  // `yield from x` and `raise E from e` are not imports; only a statement can start with
  // `from`, and then it must be an import.
  if (!AtStatementStart(ts, i, first)) return false;
  out->is_from = true;
  ++i;
  while (IsOp(ts, i, last, ".") || IsOp(ts, i, last, "...")) {
    out->level += ts.Text(ts.tokens[i]) == "..." ? 3 : 1;
    ++i;
  }
  if (IsPlainName(ts, i, last)) {
    out->module_token = i;
    ParseDotted(ts, i, last, &out->module, nullptr);
  } else if (out->level == 0) {
    return Fail(ts, i, last, out), true;
  }
  if (!IsKeyword(ts, i, last, "import")) return Fail(ts, i, last, out), true;
  ++i;
  if (IsOp(ts, i, last, "*")) {
    out->star = true;
    ImportEntry e;
    e.path = "*";
    e.part_tokens.push_back(i);
    out->entries.push_back(std::move(e));
    ++i;
  } else {
    bool paren = IsOp(ts, i, last, "(");
    if (paren) ++i;
    while (true) {
      if (!IsPlainName(ts, i, last)) return Fail(ts, i, last, out), true;
      ImportEntry e;
      e.path = std::string(ts.Name(ts.tokens[i]));
      e.part_tokens.push_back(i);
      ++i;
      if (IsKeyword(ts, i, last, "as")) {
        if (!IsPlainName(ts, i + 1, last)) return Fail(ts, i + 1, last, out), true;
        e.alias = std::string(ts.Name(ts.tokens[i + 1]));
        i += 2;
      }
      out->entries.push_back(std::move(e));
      if (IsOp(ts, i, last, ",")) {
        ++i;
        if (paren && IsOp(ts, i, last, ")")) break;  // trailing comma inside parentheses
        continue;
      }
      break;
    }
    if (paren) {
      if (!IsOp(ts, i, last, ")")) return Fail(ts, i, last, out), true;
      ++i;
    }
  }
  if (!AtStatementEnd(ts, i, last)) return Fail(ts, i, last, out), true;
  out->next = i;
  return true;
}

}  // namespace airlock::analyzer
