#include "analyzer/rule_catalog.h"

namespace airlock::analyzer {
namespace {

constexpr RuleInfo kRules[] = {
    {"syntax", "always", "ast_scan", "error",
     "a syntax error Python would raise (the first one); the code is then compiled in the sandbox, never run, "
     "and Python's own SyntaxError is the run's error"},
    {"encoding", "always", "ast_scan", "error", "source that is not valid UTF-8 (reported as a syntax error)"},
    {"nesting", "always", "ast_scan", "error",
     "brackets nested deeper than 200 or indentation deeper than 100 levels, Python's limits (reported as a "
     "syntax error)"},
    {"size", "always", "ast_scan", "error", "code larger than the analyzer reads; it is not analyzed"},
    {"too-many-findings", "always", "ast_scan", "error",
     "more findings than the analyzer returns (200); the rest are dropped"},
    {"invisible-character", "always", "ast_scan", "warning or info",
     "invisible characters (Unicode Cf: bidirectional controls, which reorder what an editor or the approval console "
     "shows, as a warning; zero-width and other format characters as info), in code of any language"},
    {"relative-import", "always", "ast_scan", "error",
     "a relative import (from . import x): a single script has no package to import from"},
    {"import-not-allowed", "always", "ast_scan", "error",
     "an import of a module outside the profile's import allowlist (profiles with one); the runtime import "
     "hook refuses the same imports while the code runs"},
    {"blocklist", "always", "blocklist_audit", "error",
     "a (module, attribute) pair of the profile's blocklist, e.g. pandas.read_pickle, through any alias"},
    {"blocked-call", "python_guardrails", "ast_scan", "error",
     "a call of a blocked builtin (eval, exec, compile, open, __import__, getattr, setattr, delattr, input, "
     "globals, locals, vars, breakpoint) or of an os call that reaches outside the program (os.system, "
     "os.popen, os.kill, os.fork, os.exec*, os.spawn*, os.getpid, ...)"},
    {"blocked-name", "python_guardrails", "ast_scan", "error",
     "a blocked builtin named without being called (f = eval)"},
    {"blocked-attribute", "python_guardrails", "ast_scan", "error",
     "an attribute that is a dangerous function (x.system, x.popen, x.open, x.get_data, ...; from os import popen)"},
    {"blocked-module", "python_guardrails", "ast_scan", "error",
     "an import or use of a module blocked even without an allowlist (subprocess, socket, importlib, signal, ...)"},
    {"dunder", "python_guardrails", "ast_scan", "error",
     "a blocked dunder (__globals__, __subclasses__, __builtins__, __reduce__, ...); reading __name__ and "
     "__class__ is allowed, writing them is not"},
    {"frame-attribute", "python_guardrails", "ast_scan", "error",
     "frame and generator introspection (f_globals, f_back, gi_frame, tb_frame, ...)"},
    {"module-alias", "python_guardrails", "ast_scan", "error",
     "an attribute that is a module reference reached through another object (x.os, x.sys, x.subprocess, "
     "x.builtins, ...)"},
    {"getter-string", "python_guardrails", "ast_scan", "error",
     "operator.attrgetter/methodcaller/itemgetter given a blocked name, or a computed one the analyzer cannot check"},
    {"dynamic-name", "python_guardrails", "ast_scan", "error",
     "a blocked name spelled at run time from literals (chr(95) * 2 + 'globals__', bytes([...]).decode(), "
     "'__glo' + 'bals__')"},
    {"deserialization", "python_guardrails", "ast_scan", "error",
     "unsafe deserialization (pickle.load(s), pickle.Unpickler, marshal.load(s), yaml.load, shelve.open, dill)"},
    {"secret", "audit_patterns", "audit", "error or warning",
     "a credential in a string literal: an AWS access key id or a PEM private key (error), a "
     "password = '...' assignment (warning)"},
    {"path-traversal", "audit_patterns", "audit", "warning", "a '../' sequence in a string literal"},
    {"sql-injection", "audit_patterns", "audit", "warning",
     "SQL keywords in a string built with .format, % or an f-string"},
    {"weak-crypto", "audit_patterns", "audit", "warning", "hashlib md5 or sha1"},
    {"c2-pattern", "audit_patterns", "audit", "info",
     "audit signals in string literals: long hex or base64 blobs, suspicious URI schemes, shell meta-characters"},
    {"prompt-injection", "audit_patterns", "audit", "info", "a prompt-injection phrase in a string literal"},
};

}  // namespace

std::span<const RuleInfo> RuleCatalog() { return kRules; }

const RuleInfo* FindRule(std::string_view id) {
  for (const RuleInfo& r : kRules) {
    if (r.id == id) return &r;
  }
  return nullptr;
}

}  // namespace airlock::analyzer
