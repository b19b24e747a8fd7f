#include "analyzer/rules.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <iterator>
#include <utility>

#include "analyzer/audit_patterns.h"
#include "analyzer/imports.h"
#include "analyzer/python_tables.h"

namespace airlock::analyzer {

CompiledPolicy::CompiledPolicy(Policy p) : policy(std::move(p)) {
  if (policy.allowed_imports) {
    allowed.emplace(policy.allowed_imports->begin(), policy.allowed_imports->end());
  }
  for (const auto& [module, attr] : policy.blocklist) {
    blocklist.insert(module + "." + attr);
    blocklist_tops.insert(module.substr(0, module.find('.')));
    blocklist_by_module[module].push_back(attr);
  }
}

void FindingSink::Add(std::string_view rule, std::string message, uint32_t line, uint32_t col,
                      Severity severity) {
  if (findings_.size() >= max_) {
    if (!overflowed_ || severity > dropped_severity_) dropped_severity_ = severity;
    overflowed_ = true;
    return;
  }
  Finding f;
  f.rule = std::string(rule);
  f.message = std::move(message);
  f.line = static_cast<int>(line);
  f.col = static_cast<int>(col);
  f.severity = severity;
  findings_.push_back(std::move(f));
}

std::vector<Finding> FindingSink::Take() {
  std::stable_sort(findings_.begin(), findings_.end(), [](const Finding& a, const Finding& b) {
    return a.line != b.line ? a.line < b.line : a.col < b.col;
  });
  if (overflowed_) {
    Finding f;
    f.rule = "too-many-findings";
    f.message = "more than " + std::to_string(max_) +
                " findings; the rest are not reported (fix these first)";
    f.line = findings_.empty() ? 1 : findings_.back().line;
    f.col = 1;
    f.severity = dropped_severity_;  // rejects only if a dropped finding would have
    findings_.push_back(std::move(f));
  }
  return std::move(findings_);
}

namespace {

constexpr size_t kMaxFrames = 256;
constexpr size_t kMaxFoldLength = 64;  // a constructed name longer than this is not a dunder
// Dotted paths longer than this are no module path anyone imports; stop resolving them
// (keeps `os.a.a.a...` with 100k parts linear).
constexpr size_t kMaxQualifiedLength = 256;

std::string_view TopOf(std::string_view dotted) { return dotted.substr(0, dotted.find('.')); }

// Lets the alias map be searched with a string_view (no temporary std::string).
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using AliasMap = std::unordered_map<std::string, std::string, StringHash, std::equal_to<>>;

// A name as shown in a message: hostile input can make dotted paths very long.
std::string Shown(std::string_view name) {
  if (name.size() <= 200) return std::string(name);
  return std::string(name.substr(0, 200)) + "...";
}

enum class Use { kAccess, kCall, kImport };

class RuleEngine {
 public:
  RuleEngine(const TokenizedSource& ts, const CompiledPolicy& cp, FindingSink& sink)
      : ts_(ts), cp_(cp), sink_(sink), guard_(cp.policy.python_guardrails),
        audit_(cp.policy.audit_patterns) {}

  void Run() {
    flagged_.assign(ts_.tokens.size(), 0);
    processed_.assign(ts_.tokens.size(), 0);
    for (const Segment& s : ts_.segments) {
      if (!s.field) CollectAliases(s);
    }
    for (const Segment& s : ts_.segments) {
      if (sink_.full()) return;
      RunSegment(s);
    }
  }

 private:
  // ---- token helpers ----
  const Token& T(uint32_t i) const { return ts_.tokens[i]; }
  bool Op(uint32_t i, std::string_view op) const {
    return i < last_ && IsOp(T(i), OpCode(op));
  }
  bool Kw(uint32_t i, std::string_view kw) const {
    return i < last_ && T(i).kind == TokenKind::kName && T(i).keyword && ts_.Text(T(i)) == kw;
  }
  bool PlainName(uint32_t i) const {
    return i < last_ && T(i).kind == TokenKind::kName && !T(i).keyword;
  }
  std::string_view N(uint32_t i) const { return ts_.Name(T(i)); }
  bool IsCall(uint32_t i) const { return Op(i + 1, "("); }
  bool StatementStart(uint32_t i) const {
    if (i == first_) return true;
    const Token& p = T(i - 1);
    return p.kind == TokenKind::kNewline || p.kind == TokenKind::kIndent ||
           p.kind == TokenKind::kDedent || IsOp(p, OpCode(";"));
  }
  bool AssignOpAt(uint32_t i) const {
    if (i >= last_ || T(i).kind != TokenKind::kOp) return false;
    static constexpr uint32_t kAssign[] = {
        OpCode("="),   OpCode("+="),  OpCode("-="),  OpCode("*="), OpCode("/="),
        OpCode("//="), OpCode("%="),  OpCode("**="), OpCode(">>="), OpCode("<<="),
        OpCode("&="),  OpCode("^="),  OpCode("|="),  OpCode("@=")};
    return std::find(std::begin(kAssign), std::end(kAssign), T(i).aux) != std::end(kAssign);
  }

  void Add(std::string_view rule, std::string message, uint32_t tok,
           Severity sev = Severity::kError) {
    sink_.Add(rule, std::move(message), T(tok).line, T(tok).col, sev);
    flagged_[tok] = 1;
  }

  std::string Resolve(std::string_view dotted) const {
    std::string_view head = TopOf(dotted);
    auto it = aliases_.find(head);
    if (it == aliases_.end()) return std::string(dotted);
    return it->second + std::string(dotted.substr(head.size()));
  }
  bool Tracked(std::string_view resolved) const {
    std::string_view top = TopOf(resolved);
    return IsTrackedModule(top) ||
           (!cp_.blocklist_tops.empty() && cp_.blocklist_tops.count(std::string(top)) != 0);
  }

  // ---- pass 1: import aliases and `x = module` assignments ----
  void CollectAliases(const Segment& seg) {
    first_ = seg.first;
    last_ = seg.last;
    for (uint32_t i = seg.first; i < seg.last; ++i) {
      const Token& t = T(i);
      if (t.kind != TokenKind::kName) continue;
      if (t.keyword) {
        std::string_view kw = ts_.Text(t);
        if (kw != "import" && kw != "from") continue;
        ImportStatement st;
        if (!ParseImport(ts_, i, seg.first, seg.last, &st)) continue;
        AddImportAliases(st);
        i = std::max(st.next, i + 1) - 1;
        continue;
      }
      // NAME = NAME(.NAME)* at the start of a statement, alone on it.
      if (!StatementStart(i) || !Op(i + 1, "=") || !PlainName(i + 2)) continue;
      uint32_t j = i + 2;
      std::string path(N(j));
      while (Op(j + 1, ".") && PlainName(j + 2)) {
        path += '.';
        path += N(j + 2);
        j += 2;
      }
      uint32_t after = j + 1;
      bool alone = after >= seg.last || T(after).kind == TokenKind::kNewline ||
                   T(after).kind == TokenKind::kEnd || Op(after, ";");
      if (!alone) continue;
      bool known = aliases_.find(TopOf(path)) != aliases_.end();
      std::string resolved = Resolve(path);
      if (known || Tracked(resolved)) aliases_[std::string(N(i))] = std::move(resolved);
      i = j;
    }
  }

  void AddImportAliases(const ImportStatement& st) {
    if (st.level > 0) return;
    if (!st.is_from) {
      for (const ImportEntry& e : st.entries) {
        if (!e.alias.empty()) {
          aliases_[e.alias] = e.path;
        } else {
          std::string top(TopOf(e.path));
          aliases_[top] = top;
        }
      }
      return;
    }
    for (const ImportEntry& e : st.entries) {
      if (e.path == "*") {
        // Names a star import may bind that the rules care about.
        for (std::string_view attr : QualifiedAttrsOf(st.module)) {
          aliases_[std::string(attr)] = st.module + "." + std::string(attr);
        }
        auto it = cp_.blocklist_by_module.find(st.module);
        if (it != cp_.blocklist_by_module.end()) {
          for (const std::string& attr : it->second) aliases_[attr] = st.module + "." + attr;
        }
        continue;
      }
      aliases_[e.alias.empty() ? e.path : e.alias] = st.module + "." + e.path;
    }
  }

  // ---- pass 2 ----
  enum class Ctx : uint8_t { kNone, kDefParams, kGetter };
  struct Frame {
    uint32_t open = 0;
    char bracket = '(';
    Ctx ctx = Ctx::kNone;
    uint32_t getter_tok = 0;  // the attrgetter/methodcaller/itemgetter name
    uint32_t arg_first = 0;
    uint32_t arg_index = 0;
  };

  size_t Depth() const { return frames_.size() + overflow_; }
  const Frame* Top() const {
    return overflow_ == 0 && !frames_.empty() ? &frames_.back() : nullptr;
  }

  void RunSegment(const Segment& seg) {
    first_ = seg.first;
    last_ = seg.last;
    frames_.clear();
    overflow_ = 0;
    lambda_depths_.clear();
    definition_name_ = UINT32_MAX;
    def_paren_ = UINT32_MAX;
    for (uint32_t i = seg.first; i < seg.last; ++i) {
      if (sink_.full()) return;
      const Token& t = T(i);
      switch (t.kind) {
        case TokenKind::kOp:
          HandleOp(i);
          break;
        case TokenKind::kName:
          if (t.keyword) {
            std::string_view kw = ts_.Text(t);
            if (!seg.field && (kw == "import" || kw == "from")) {
              ImportStatement st;
              if (ParseImport(ts_, i, seg.first, seg.last, &st)) {
                HandleImport(st);
                i = std::max(st.next, i + 1) - 1;
              }
            } else if (kw == "def" || kw == "class") {
              if (PlainName(i + 1)) {
                definition_name_ = i + 1;
                if (kw == "def" && Op(i + 2, "(")) def_paren_ = i + 2;
              }
            } else if (kw == "lambda") {
              if (lambda_depths_.size() < kMaxFrames) lambda_depths_.push_back(Depth());
            }
            break;
          }
          NameToken(i);
          break;
        case TokenKind::kString:
          if (i > seg.first && T(i - 1).kind == TokenKind::kString) break;  // same group
          StringGroup(i);
          break;
        case TokenKind::kNewline:  // a lambda or a def header ends with its logical line
          lambda_depths_.clear();
          def_paren_ = UINT32_MAX;
          break;
        case TokenKind::kNumber:  // 2 * '_' + 'mro__'
          if (guard_ && Op(i + 1, "*") &&
              !(i > seg.first && (Op(i - 1, "+") || Op(i - 1, "*")))) {
            Fold(i);
          }
          break;
        default:
          break;
      }
    }
  }

  void HandleOp(uint32_t i) {
    const uint32_t op = T(i).aux;
    if (op == OpCode("(") || op == OpCode("[") || op == OpCode("{")) {
      if (frames_.size() >= kMaxFrames || overflow_ > 0) {
        ++overflow_;
        return;
      }
      Frame f;
      f.open = i;
      f.bracket = static_cast<char>(op);
      f.arg_first = i + 1;
      if (i == def_paren_) {
        f.ctx = Ctx::kDefParams;
      } else if (op == OpCode("(") && i > first_ && T(i - 1).kind == TokenKind::kName &&
                 !T(i - 1).keyword && (ClassifyName(N(i - 1)) & kGetter)) {
        f.ctx = Ctx::kGetter;
        f.getter_tok = i - 1;
      }
      frames_.push_back(f);
      return;
    }
    if (op == OpCode(")") || op == OpCode("]") || op == OpCode("}")) {
      if (overflow_ > 0) {
        --overflow_;
        return;
      }
      if (frames_.empty()) return;
      if (frames_.back().ctx == Ctx::kGetter) GetterArg(frames_.back(), i);
      frames_.pop_back();
      while (!lambda_depths_.empty() && lambda_depths_.back() > Depth()) lambda_depths_.pop_back();
      return;
    }
    if (op == OpCode(",")) {
      if (Frame* f = overflow_ == 0 && !frames_.empty() ? &frames_.back() : nullptr;
          f != nullptr && f->ctx == Ctx::kGetter) {
        GetterArg(*f, i);
        f->arg_first = i + 1;
        ++f->arg_index;
      }
      return;
    }
    if (op == OpCode(":") && !lambda_depths_.empty() && lambda_depths_.back() == Depth()) {
      lambda_depths_.pop_back();
    }
  }

  // A NAME that is not a keyword.
  void NameToken(uint32_t i) {
    if (i == definition_name_) return;
    const Frame* top = Top();
    const bool prev_dot = i > first_ && Op(i - 1, ".");
    if (!prev_dot) {
      // Parameter names of def and lambda, and keyword arguments, are not references.
      if (top != nullptr && top->ctx == Ctx::kDefParams && i > first_ &&
          (Op(i - 1, "(") || Op(i - 1, ",") || Op(i - 1, "*") || Op(i - 1, "**"))) {
        return;
      }
      if (!lambda_depths_.empty() && lambda_depths_.back() == Depth() && i > first_ &&
          (Kw(i - 1, "lambda") || Op(i - 1, ",") || Op(i - 1, "*") || Op(i - 1, "**"))) {
        return;
      }
      if (top != nullptr && top->bracket == '(' && Op(i + 1, "=")) return;
    }
    if (prev_dot) {
      if (!processed_[i]) Chain(i, /*detached=*/true);
      return;
    }
    BareName(i);
    Chain(i, /*detached=*/false);
    std::string_view n = N(i);
    if (guard_ && (n == "chr" || n == "bytes" || n == "bytearray") && !T(i).normalized &&
        !(i > first_ && (Op(i - 1, "+") || Op(i - 1, "*")))) {
      Fold(i);
    }
  }

  void BareName(uint32_t i) {
    std::string_view name = N(i);
    auto it = aliases_.find(name);
    if (it != aliases_.end()) {
      // Bound by an import (or `x = module`): not the builtin of that name. Assigning to
      // the alias is not a use of what it named.
      if (Op(i + 1, "=")) return;
      const std::string& resolved = it->second;
      size_t dot = resolved.rfind('.');
      if (dot != std::string::npos) {
        Qualified(resolved.substr(0, dot), resolved.substr(dot + 1), i,
                  IsCall(i) ? Use::kCall : Use::kAccess);
      }
      return;
    }
    if (!guard_) return;
    uint32_t cls = ClassifyName(name);
    if (cls == 0) return;
    std::string n(name);
    if (cls & kBlockedBuiltin) {
      if (IsCall(i)) {
        Add("blocked-call", "call to '" + n + "()' is not allowed", i);
      } else {
        Add("blocked-name", "reference to '" + n + "' is not allowed", i);
      }
      return;
    }
    if (cls & kBlockedDunder) {
      bool store = AssignOpAt(i + 1) || (i > first_ && (Kw(i - 1, "del") || Kw(i - 1, "as")));
      if ((cls & kReadableDunder) && !store) return;
      Add("dunder", "reference to '" + n + "' is not allowed", i);
    }
  }

  // head and the `.NAME` attributes after it. A detached chain starts at an attribute
  // whose object is not a name (`f().x.y`, `"s".x`).
  void Chain(uint32_t head, bool detached) {
    const bool del = !detached && head > first_ && Kw(head - 1, "del");
    std::vector<uint32_t>& attrs = chain_scratch_;
    attrs.clear();
    if (detached) attrs.push_back(head);
    uint32_t j = head;
    while (Op(j + 1, ".") && PlainName(j + 2)) {
      attrs.push_back(j + 2);
      j += 2;
    }
    if (attrs.empty()) return;
    std::string path;
    bool tracked = false;
    if (!detached) {
      std::string_view h = N(head);
      auto it = aliases_.find(h);
      std::string_view resolved = it == aliases_.end() ? h : std::string_view(it->second);
      tracked = Tracked(resolved);
      if (tracked) path = std::string(resolved);
    }
    for (size_t k = 0; k < attrs.size(); ++k) {
      uint32_t a = attrs[k];
      const bool last = k + 1 == attrs.size();
      processed_[a] = 1;
      if (path.size() > kMaxQualifiedLength) tracked = false;
      if (tracked) Qualified(path, std::string(N(a)), a, last && IsCall(a) ? Use::kCall : Use::kAccess);
      AttributeName(a, tracked ? path : std::string(), last && (del || AssignOpAt(a + 1)));
      if (tracked) {
        path += '.';
        path += N(a);
      }
    }
  }

  // module_path.attr where module_path is resolved through aliases.
  void Qualified(const std::string& module_path, const std::string& attr, uint32_t tok, Use use) {
    std::string full = module_path + "." + attr;
    QualifiedClass qc = ClassifyQualified(full);
    auto verb = [&](const char* call_suffix) {
      switch (use) {
        case Use::kCall: return "call to '" + full + call_suffix + "'";
        case Use::kImport: return "import of '" + full + "'";
        case Use::kAccess: break;
      }
      return "access to '" + full + "'";
    };
    if (guard_) {
      if (qc == QualifiedClass::kOsCall) Add("blocked-call", verb("()") + " is not allowed", tok);
      if (qc == QualifiedClass::kDeserialization) {
        Add("deserialization", verb("()") + " is unsafe deserialization", tok);
      }
      std::string_view top = TopOf(module_path);
      if (use != Use::kImport && module_path == top && (ClassifyName(top) & kBlockedModule)) {
        Add("blocked-module",
            verb("()") + " is not allowed (module '" + std::string(top) + "' is blocked)", tok);
      }
    }
    if (audit_ && qc == QualifiedClass::kWeakCrypto) {
      Add("weak-crypto", verb("()") + " uses weak cryptography", tok, Severity::kWarning);
    }
    if (cp_.blocklist.count(full)) {
      Add("blocklist", "access to '" + full + "' is blocked by profile", tok);
    }
  }

  void AttributeName(uint32_t tok, const std::string& parent, bool store) {
    if (!guard_ || flagged_[tok]) return;
    std::string attr(N(tok));
    uint32_t cls = ClassifyName(attr);
    if (cls == 0) return;
    bool safe = !parent.empty() &&
                ClassifyQualified(parent + "." + attr) == QualifiedClass::kSafe;
    if (cls & kBlockedDunder) {
      if ((cls & kReadableDunder) && !store) return;
      Add("dunder", "access to '" + attr + "' attribute is not allowed", tok);
    } else if (cls & kFrameAttr) {
      Add("frame-attribute",
          "access to '" + attr + "' attribute is not allowed (frame/generator introspection)",
          tok);
    } else if ((cls & kBlockedAttr) && !safe) {
      Add("blocked-attribute",
          "access to '" + attr + "' attribute is not allowed (dangerous function)", tok);
    } else if ((cls & kModuleAlias) && !safe) {
      Add("module-alias", "access to '" + attr + "' attribute is not allowed (module reference)",
          tok);
    }
  }

  // ---- imports ----
  void HandleImport(const ImportStatement& st) {
    if (st.is_from) {
      if (st.level > 0) {
        std::string what =
            "from " + std::string(static_cast<size_t>(std::min(st.level, 10)), '.') + Shown(st.module);
        Add("relative-import",
            "relative import '" + what +
                " import ...' is not allowed: the code runs as a single script, not inside a "
                "package (import the module by its absolute name)",
            st.keyword_token);
        return;
      }
      ImportModule(st.module, st.module_token);
      for (const ImportEntry& e : st.entries) {
        if (e.path == "*" || e.part_tokens.empty()) continue;
        uint32_t tok = e.part_tokens[0];
        Qualified(st.module, e.path, tok, Use::kImport);
        ImportedName(st.module, e.path, tok);
      }
      return;
    }
    for (const ImportEntry& e : st.entries) {
      if (e.part_tokens.empty()) continue;
      ImportModule(e.path, e.part_tokens[0]);
      std::string path(N(e.part_tokens[0]));
      if (!Tracked(path)) continue;
      for (size_t k = 1; k < e.part_tokens.size() && path.size() <= kMaxQualifiedLength; ++k) {
        std::string part(N(e.part_tokens[k]));
        Qualified(path, part, e.part_tokens[k], Use::kImport);
        path += "." + part;
      }
    }
  }

  void ImportModule(const std::string& dotted, uint32_t tok) {
    std::string top(TopOf(dotted));
    // `from __future__ import annotations` is a compiler directive, not a module to allow.
    if (cp_.allowed && cp_.allowed->count(top) == 0 && top != "__future__") {
      Add("import-not-allowed",
          "import of '" + Shown(dotted) + "' is not allowed (not in allowed imports)", tok);
    } else if (guard_ && (ClassifyName(top) & kBlockedModule)) {
      Add("blocked-module",
          "import of '" + Shown(dotted) + "' is not allowed (module '" + top + "' is blocked)",
          tok);
    }
  }

  // `from module import name`: the name rules applied to the imported attribute.
  void ImportedName(const std::string& module, const std::string& name, uint32_t tok) {
    if (!guard_ || flagged_[tok]) return;
    uint32_t cls = ClassifyName(name);
    if (cls == 0) return;
    std::string full = module + "." + name;
    bool safe = ClassifyQualified(full) == QualifiedClass::kSafe;
    if (cls & kBlockedDunder) {
      Add("dunder", "import of '" + full + "' is not allowed (blocked attribute name)", tok);
    } else if (cls & kFrameAttr) {
      Add("frame-attribute", "import of '" + full + "' is not allowed (frame introspection)",
          tok);
    } else if ((cls & (kBlockedAttr | kBlockedBuiltin)) && !safe) {
      Add("blocked-attribute", "import of '" + full + "' is not allowed (dangerous function)",
          tok);
    } else if ((cls & kModuleAlias) && !safe) {
      Add("module-alias", "import of '" + full + "' is not allowed (module reference)", tok);
    }
  }

  // ---- string literals ----
  // The end of the run of adjacent STRING tokens starting at i, and its joined value.
  uint32_t GroupEnd(uint32_t i) const {
    uint32_t j = i;
    while (j < last_ && T(j).kind == TokenKind::kString) ++j;
    return j;
  }
  std::string GroupValue(uint32_t i, uint32_t j, bool* bytes, bool* fields) const {
    std::string v;
    for (uint32_t k = i; k < j; ++k) {
      v += ts_.Value(T(k));
      if (T(k).flags & kStrBytes) *bytes = true;
      if (T(k).flags & kStrHasFields) *fields = true;
    }
    return v;
  }

  // Blocked dunder (writable) or frame attribute name: "dunder" / "frame-attribute".
  static std::string_view BlockedNameRule(std::string_view name) {
    if (name.size() > 64) return {};
    uint32_t cls = ClassifyName(name);
    if ((cls & kBlockedDunder) && !(cls & kReadableDunder)) return "dunder";
    if (cls & kFrameAttr) return "frame-attribute";
    return {};
  }

  void StringGroup(uint32_t i) {
    const uint32_t j = GroupEnd(i);
    bool bytes = false, fields = false;
    std::string value = GroupValue(i, j, &bytes, &fields);
    if (bytes) return;  // the peer checks str constants only; bytes cannot name attributes
    const bool subscript = i > first_ + 1 && Op(i - 1, "[") && Op(j, "]") &&
                           (PlainName(i - 2) || T(i - 2).kind == TokenKind::kString ||
                            Op(i - 2, ")") || Op(i - 2, "]"));
    if (guard_) {
      std::string_view rule = BlockedNameRule(value);
      if (!rule.empty()) {
        if (subscript) {
          Add(rule,
              "subscript access with key '" + value + "' is not allowed (" +
                  (rule == "dunder" ? "blocked attribute name" : "frame introspection") + ")",
              i);
        } else {
          Add(rule, "string literal '" + value + "' matches a blocked attribute name", i);
        }
      }
      std::string field_name;
      if (FormatFieldTraversal(value, &field_name)) {
        Add(ClassifyName(field_name) & kFrameAttr ? "frame-attribute" : "dunder",
            "string contains format spec accessing a blocked attribute ('" + field_name + "')", i);
      }
      if (!(i > first_ && (Op(i - 1, "+") || Op(i - 1, "*") || Op(i - 1, "%")))) Fold(i);
    }
    if (!audit_) return;
    pattern_hits_.clear();
    ScanLiteral(value, &pattern_hits_);
    for (const PatternHit& h : pattern_hits_) Add(h.rule, std::string(h.message), i, h.severity);
    const char* sql = nullptr;
    if (fields) {
      sql = "potential SQL injection via f-string containing SQL keywords";
    } else if (Op(j, ".") && PlainName(j + 1) && N(j + 1) == "format" && Op(j + 2, "(")) {
      sql = "potential SQL injection via .format() on a string containing SQL keywords";
    } else if (Op(j, "%")) {
      sql = "potential SQL injection via %-formatting on a string containing SQL keywords";
    }
    if (sql != nullptr && HasSqlKeyword(value)) Add("sql-injection", sql, i, Severity::kWarning);
  }

  // '{0.__globals__}', '{x[f_globals]}': a str.format field reaching a blocked attribute.
  // Checked regardless of '{{' escaping: formatting twice undoes it.
  static bool FormatFieldTraversal(std::string_view v, std::string* name) {
    bool in_field = false;
    for (size_t k = 0; k < v.size(); ++k) {
      char c = v[k];
      if (c == '{') {
        in_field = true;
      } else if (c == '}') {
        in_field = false;
      } else if (in_field && (c == '.' || c == '[')) {
        size_t e = k + 1;
        while (e < v.size() && (std::isalnum(static_cast<unsigned char>(v[e])) || v[e] == '_')) ++e;
        std::string_view id = v.substr(k + 1, e - k - 1);
        uint32_t cls = ClassifyName(id);
        bool readable = (cls & kReadableDunder) != 0;
        if (!BlockedNameRule(id).empty() || (IsDunderShape(id) && !readable)) {
          *name = std::string(id);
          return true;
        }
        k = e - 1;
      }
    }
    return false;
  }

  // ---- operator.attrgetter('__x__') and friends ----
  void GetterArg(const Frame& f, uint32_t end) {
    if (!guard_ || f.arg_first >= end) return;
    std::string getter(N(f.getter_tok));
    const uint32_t a = f.arg_first;
    if (GroupEnd(a) == end) {  // the whole argument is a string literal
      bool bytes = false, fields = false;
      std::string value = GroupValue(a, end, &bytes, &fields);
      if (bytes) return;
      size_t start = 0;
      while (start <= value.size()) {  // attrgetter('a.b.__globals__') walks dotted paths
        size_t dot = value.find('.', start);
        std::string part = value.substr(start, dot == std::string::npos ? dot : dot - start);
        uint32_t cls = ClassifyName(part);
        if ((cls & kBlockedDunder) || (cls & kFrameAttr)) {
          Add("getter-string",
              "dynamic attribute access to '" + part + "' via " + getter + "() is not allowed", a);
        } else if (IsDunderShape(part)) {
          Add("getter-string",
              "dynamic access to dunder '" + part + "' via " + getter + "() is not allowed", a);
        }
        if (dot == std::string::npos) break;
        start = dot + 1;
      }
      return;
    }
    const bool names_attr =
        getter == "attrgetter" || (getter == "methodcaller" && f.arg_index == 0);
    if (names_attr && PlainName(a)) {
      Add("getter-string",
          getter + "() is called with a computed name; the analyzer cannot check which "
                   "attribute it reaches",
          a, Severity::kWarning);
    }
  }

  // ---- names spelled at run time: chr(95)*2 + 'builtins' + chr(95)*2, bytes([..]).decode() ----
  struct FoldValue {
    bool is_str = false;
    std::string s;
    long n = 0;
  };

  bool IntAt(uint32_t p, long* n) const {
    if (p >= last_ || T(p).kind != TokenKind::kNumber) return false;
    std::string_view t = ts_.Text(T(p));
    if (t.empty() || t.size() > 7) return false;
    long v = 0;
    for (char c : t) {
      if (c < '0' || c > '9') return false;
      v = v * 10 + (c - '0');
    }
    *n = v;
    return true;
  }

  bool FoldTerm(uint32_t& p, FoldValue& v, bool& dynamic) const {
    if (p >= last_) return false;
    const Token& t = T(p);
    if (t.kind == TokenKind::kString) {
      uint32_t e = GroupEnd(p);
      bool bytes = false, fields = false;
      v.s = GroupValue(p, e, &bytes, &fields);
      if (bytes || fields || v.s.size() > kMaxFoldLength) return false;
      v.is_str = true;
      p = e;
      return true;
    }
    if (t.kind == TokenKind::kNumber) {
      if (!IntAt(p, &v.n)) return false;
      v.is_str = false;
      ++p;
      return true;
    }
    if (t.kind != TokenKind::kName || t.keyword || t.normalized) return false;
    std::string_view n = ts_.Text(t);
    if (n == "chr" && Op(p + 1, "(") && Op(p + 3, ")")) {
      long c = 0;
      if (!IntAt(p + 2, &c) || c <= 0 || c > 0x10FFFF) return false;
      v.is_str = true;
      v.s.clear();
      if (c < 0x80) {
        v.s.push_back(static_cast<char>(c));
      } else {
        v.s = "\xEF\xBF\xBD";  // not ASCII: cannot be part of a blocked name
      }
      dynamic = true;
      p += 4;
      return true;
    }
    if ((n == "bytes" || n == "bytearray") && Op(p + 1, "(") && Op(p + 2, "[")) {
      uint32_t q = p + 3;
      std::string s;
      while (true) {
        long c = 0;
        if (!IntAt(q, &c) || c > 255 || s.size() >= kMaxFoldLength) return false;
        s.push_back(static_cast<char>(c));
        ++q;
        if (Op(q, ",")) {
          ++q;
          if (Op(q, "]")) break;
          continue;
        }
        if (Op(q, "]")) break;
        return false;
      }
      // ] ) . decode ( )
      if (!(Op(q + 1, ")") && Op(q + 2, ".") && PlainName(q + 3) && N(q + 3) == "decode" &&
            Op(q + 4, "(") && Op(q + 5, ")"))) {
        return false;
      }
      v.is_str = true;
      v.s = std::move(s);
      dynamic = true;
      p = q + 6;
      return true;
    }
    return false;
  }

  bool FoldProduct(uint32_t& p, FoldValue& v, bool& dynamic) const {
    if (!FoldTerm(p, v, dynamic)) return false;
    while (Op(p, "*")) {
      uint32_t q = p + 1;
      FoldValue r;
      if (!FoldTerm(q, r, dynamic)) break;
      dynamic = true;
      if (v.is_str == r.is_str) {
        if (v.is_str) return false;
        if (v.n > 4096 || r.n > 4096) return false;
        v.n *= r.n;
      } else {
        const std::string& s = v.is_str ? v.s : r.s;
        long times = v.is_str ? r.n : v.n;
        if (times < 0 || s.size() * static_cast<size_t>(times) > kMaxFoldLength) return false;
        std::string out;
        for (long k = 0; k < times; ++k) out += s;
        v.is_str = true;
        v.s = std::move(out);
      }
      p = q;
    }
    return true;
  }

  void Fold(uint32_t start) {
    uint32_t p = start;
    FoldValue v;
    bool dynamic = false;
    if (!FoldProduct(p, v, dynamic)) return;
    while (Op(p, "+")) {
      uint32_t q = p + 1;
      FoldValue r;
      if (!FoldProduct(q, r, dynamic)) break;
      if (!v.is_str || !r.is_str) return;
      v.s += r.s;
      if (v.s.size() > kMaxFoldLength) return;
      dynamic = true;
      p = q;
    }
    if (!dynamic || !v.is_str) return;
    std::string_view rule = BlockedNameRule(v.s);
    if (rule.empty()) return;
    Add("dynamic-name",
        "string built at run time spells the blocked name '" + v.s + "' (chr()/bytes()/"
        "concatenation does not hide it)",
        start);
  }

  const TokenizedSource& ts_;
  const CompiledPolicy& cp_;
  FindingSink& sink_;
  const bool guard_;
  const bool audit_;
  uint32_t first_ = 0, last_ = 0;  // the current segment
  AliasMap aliases_;
  std::vector<uint8_t> flagged_;    // a name rule already reported this token
  std::vector<uint8_t> processed_;  // an attribute name handled as part of a chain
  std::vector<Frame> frames_;
  size_t overflow_ = 0;
  std::vector<size_t> lambda_depths_;
  uint32_t definition_name_ = UINT32_MAX;
  uint32_t def_paren_ = UINT32_MAX;
  std::vector<uint32_t> chain_scratch_;
  std::vector<PatternHit> pattern_hits_;
};

}  // namespace

void RunRules(const TokenizedSource& ts, const CompiledPolicy& policy, FindingSink& sink) {
  RuleEngine(ts, policy, sink).Run();
}

}  // namespace airlock::analyzer
