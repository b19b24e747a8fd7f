// The static analyzer of the HTTP service: policy and early feedback for agents, NOT
// the security boundary (the kernel layers are). It reads Python 3.11 source with a
// hand-written tokenizer (no parser, no regex on code) and reports, in one pass, every
// finding with its position: syntax errors that Python itself would raise, imports the
// profile does not allow, the fips-agents guardrails (blocked builtins, dunders, frame
// attributes, module aliases, os/subprocess/... calls, unsafe deserialization), the
// profile's (module, attribute) blocklist, and RE2 audit patterns on string literals.
//
//   airlock::analyzer::Policy policy;
//   policy.allowed_imports = std::vector<std::string>{"math", "json"};
//   policy.blocklist = {{"pandas", "read_pickle"}};
//   airlock::analyzer::Analyzer analyzer(std::move(policy));   // once per profile
//   Result r = analyzer.Analyze(code);                          // per request; thread-safe
//   if (r.Rejects()) { ... 400 with r.findings ... }
//
// Severity and rejection. Every finding has a severity; only kError findings reject the
// code (Result::Rejects). What the caller does with the rest is its choice: the service
// reports warnings and infos beside the run, and a profile in "observe" mode may report
// errors without rejecting (RuleStage() tells which profile scan stage a rule belongs to).
//   kError   syntax, size, encoding, nesting, every guardrail rule, import allowlist,
//            profile blocklist, relative imports, and two secret patterns: an AWS access
//            key id and a PEM private key in a string literal (credentials pasted into
//            code are a mistake worth stopping; the peer rejects them too, and these two
//            patterns have next to no false positives).
//   kWarning generic "password = '...'" secret assignments, '../' path traversal, SQL
//            keywords in a formatted string (.format, %, f-string), hashlib md5/sha1,
//            and getter functions (operator.attrgetter, ...) called with a computed name.
//            The fips-agents peer rejects these; we only report them, because the
//            kernel confines the filesystem and there is no network or database to
//            inject into, while the false positives (relative data paths, SQL text in a
//            report, md5 as a checksum) would block honest code.
//            Bidirectional controls (U+202A..U+202E, U+2066..U+2069, ...) anywhere in the
//            code ("invisible-character"): they reorder how a line is shown, so it reads
//            differently from how it runs (Trojan Source); Python allows them in comments
//            and strings, where they can also be honest text.
//   kInfo    other invisible characters (category Cf: zero-width spaces and joiners, tags,
//            ...; the Hangul fillers), 32+ hex digit strings (git SHAs and checksums look the same), suspicious
//            URI schemes, shell meta-characters, long base64 blobs, prompt-injection
//            phrases: audit signals, never a reason to reject.
//
// Positions. line and col are 1-based; col counts Unicode code points from the start of
// the line (a tab is one column; on invalid UTF-8 the count is approximate).
//
// Rule families and their switches (Policy):
//   always      syntax, encoding, nesting, size, too-many-findings, invisible-character,
//               relative-import (a
//               relative import cannot work in a single script), import-not-allowed (when
//               allowed_imports is set), blocklist (when blocklist is non-empty)
//   python_guardrails  blocked-call, blocked-name, blocked-attribute, blocked-module,
//               dunder, frame-attribute, module-alias, getter-string, dynamic-name,
//               deserialization
//   audit_patterns     secret, path-traversal, sql-injection, weak-crypto, c2-pattern,
//               prompt-injection
//
// Deliberate differences from the fips-agents guardrails:
//  * Reading `__name__` and `__class__` is allowed (`if __name__ == "__main__":`,
//    `type(self).__name__`); writing them (`x.__name__ = ...`, `del`, augmented
//    assignment) is blocked. `type(x)` reaches the same objects as `x.__class__`.
//  * `re.compile`, `scipy.io` and `pandas.api.types` are not flagged by the generic
//    "compile"/"io"/"types" attribute rules (they are the data-science staples).
//  * Parameter names and keyword arguments (`def f(input)`, `dict(open=1)`) and names
//    bound by an import (`from re import compile`) are not the builtins of that name.
//  * Identifiers are NFKC-normalized as CPython does, so `ｅｖａｌ(...)` is `eval(...)`;
//    string escapes are decoded, so '\x5f_class__' is '__class__'.
//  * Imports and `x = module` assignments are tracked as aliases, so `import os as o;
//    o.kill(1, 9)` and `from os import kill as k; k(1, 9)` are caught.
//  * Names spelled at run time from literals (`chr(95) * 2 + 'builtins' + ...`,
//    `bytes([95, ...]).decode()`, `'__glo' + 'bals__'`) are caught ("dynamic-name").
//  * subprocess/socket/importlib/signal are rejected at import even without an allowlist;
//    `__future__` imports are always allowed; a few more dunders (__base__, __reduce__,
//    __reduce_ex__, __setattr__, __delattr__) and frame attributes (f_back) are blocked.
//  * Only the first syntax error is reported (as Python does), but the policy rules still
//    run on the tokens, so an agent sees all its violations at once.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace airlock::analyzer {

enum class Severity { kInfo, kWarning, kError };
std::string_view SeverityName(Severity s);  // "info", "warning", "error"

struct Finding {
  // Stable rule id: "syntax", "encoding", "nesting", "size", "too-many-findings",
  // "import-not-allowed", "relative-import", "blocked-call", "blocked-name",
  // "blocked-attribute", "blocked-module", "dunder", "frame-attribute", "module-alias",
  // "getter-string", "dynamic-name", "deserialization", "blocklist", "weak-crypto",
  // "secret", "path-traversal", "sql-injection", "c2-pattern", "prompt-injection",
  // "invisible-character".
  std::string rule;
  // What was found and why it is not allowed; the fips-agents wording where it has one,
  // e.g. "import of 'os' is not allowed (not in allowed imports)".
  std::string message;
  int line = 0;  // 1-based
  int col = 0;   // 1-based, in code points
  Severity severity = Severity::kError;
};

struct Policy {
  // Import allowlist of top-level module names ("a" allows "a.b"). nullopt allows every
  // module (the "general" profile). `__future__` is always allowed.
  std::optional<std::vector<std::string>> allowed_imports;
  // Profile blocklist of (module or dotted path, attribute), e.g. {"pandas",
  // "read_pickle"}, {"scipy.io", "loadmat"}. Matched through import aliases.
  std::vector<std::pair<std::string, std::string>> blocklist;
  // The fips-agents ast_scan guardrails (blocked calls/names/dunders/frames/module
  // aliases/os calls/deserialization, ...). Off: only syntax, imports, blocklist, audit.
  bool python_guardrails = true;
  // RE2 patterns on string literals (secrets, path traversal, SQL, ...).
  bool audit_patterns = true;
  // Larger input is not analyzed: one "size" finding.
  size_t max_code_bytes = size_t{1} << 20;
  // At most this many findings are returned; then one "too-many-findings" finding.
  size_t max_findings = 200;
};

struct Result {
  std::vector<Finding> findings;  // in source order
  bool syntax_ok = true;          // false on a syntax, encoding, nesting or size finding
  // True if any finding has severity kError.
  bool Rejects() const;
};

// The profile scan stage a rule belongs to, for observe/enforce modes: "ast_scan"
// (syntax and guardrails), "blocklist_audit" (rule "blocklist") or "audit" (patterns).
std::string_view RuleStage(std::string_view rule);

// The fips-agents one-line form: "Line 4: call to 'eval()' is not allowed"; syntax-level
// findings are already complete ("SyntaxError: '(' was never closed (line 1)").
std::string FormatViolation(const Finding& f);

struct CompiledPolicy;  // sets built from Policy once

// Holds a Policy compiled for fast lookups. Analyze is const and thread-safe.
class Analyzer {
 public:
  explicit Analyzer(Policy policy);
  ~Analyzer();
  Analyzer(Analyzer&&) noexcept;
  Analyzer& operator=(Analyzer&&) noexcept;

  Result Analyze(std::string_view code) const;
  const Policy& policy() const;

 private:
  std::unique_ptr<CompiledPolicy> compiled_;
};

// The "invisible-character" findings alone, for text in any language (the analyzer
// reads Python; a request in another language still has them reported).
std::vector<Finding> InvisibleCharacterFindings(std::string_view text, size_t max_findings = 200);

// One-shot convenience: compiles the policy and analyzes (a few microseconds slower).
Result Analyze(std::string_view code, const Policy& policy);

}  // namespace airlock::analyzer
