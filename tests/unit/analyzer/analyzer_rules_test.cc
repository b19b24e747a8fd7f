#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "analyzer/analyzer.h"

namespace airlock::analyzer {
namespace {

Policy DataSciencePolicy() {
  Policy p;
  p.allowed_imports = std::vector<std::string>{
      "collections", "csv",    "datetime", "decimal",  "fractions", "functools", "itertools",
      "json",        "math",   "operator", "random",   "re",        "statistics", "string",
      "textwrap",    "typing", "numpy",    "pandas",   "scipy"};
  p.blocklist = {{"numpy", "ctypeslib"},   {"numpy", "frompyfunc"}, {"pandas", "read_pickle"},
                 {"pandas", "read_sql"},   {"pandas", "read_html"}, {"scipy.io", "loadmat"},
                 {"scipy.io", "savemat"}};
  return p;
}

Policy GeneralPolicy() { return Policy{}; }  // every import allowed, guardrails on

std::string Describe(const Result& r) {
  std::string out;
  for (const Finding& f : r.findings) {
    out += "\n  " + std::to_string(f.line) + ":" + std::to_string(f.col) + " " +
           std::string(SeverityName(f.severity)) + " [" + f.rule + "] " + f.message;
  }
  return out.empty() ? " (no findings)" : out;
}

// The findings of one rule, as "line:col message".
std::vector<std::string> Of(const Result& r, std::string_view rule) {
  std::vector<std::string> out;
  for (const Finding& f : r.findings) {
    if (f.rule == rule) {
      out.push_back(std::to_string(f.line) + ":" + std::to_string(f.col) + " " + f.message);
    }
  }
  return out;
}

TEST(AnalyzerRulesTest, ImportAllowlist) {
  Result r = Analyze("import math, os.path as p\nfrom collections import Counter\nfrom sys import argv\n",
                     DataSciencePolicy());
  EXPECT_EQ(Of(r, "import-not-allowed"),
            (std::vector<std::string>{
                "1:14 import of 'os.path' is not allowed (not in allowed imports)",
                "3:6 import of 'sys' is not allowed (not in allowed imports)"}))
      << Describe(r);
  // "a" allows "a.b"; __future__ is a compiler directive, always allowed.
  Result sub = Analyze("from __future__ import annotations\nimport numpy.linalg\n"
                       "from scipy.stats import norm\n",
                       DataSciencePolicy());
  EXPECT_TRUE(sub.findings.empty()) << Describe(sub);
  // No allowlist: every module.
  EXPECT_FALSE(Analyze("import os\nimport sys\nprint(os.getcwd(), sys.argv)\n", GeneralPolicy())
                   .Rejects());
}

TEST(AnalyzerRulesTest, RelativeImportsAreRejected) {
  Result r = Analyze("from . import helpers\nfrom ..pkg import x\n", GeneralPolicy());
  std::vector<std::string> rel = Of(r, "relative-import");
  ASSERT_EQ(rel.size(), 2u) << Describe(r);
  EXPECT_NE(rel[0].find("relative import 'from . import ...' is not allowed"), std::string::npos);
  EXPECT_NE(rel[1].find("'from ..pkg import ...'"), std::string::npos);
}

TEST(AnalyzerRulesTest, BlockedModulesEvenWithoutAllowlist) {
  Result r = Analyze("import subprocess as sp\nsp.run(['ls'])\nfrom socket import socket\n",
                     GeneralPolicy());
  EXPECT_EQ(Of(r, "blocked-module"),
            (std::vector<std::string>{
                "1:8 import of 'subprocess' is not allowed (module 'subprocess' is blocked)",
                "2:4 call to 'subprocess.run()' is not allowed (module 'subprocess' is blocked)",
                "3:6 import of 'socket' is not allowed (module 'socket' is blocked)"}))
      << Describe(r);
}

TEST(AnalyzerRulesTest, OsCallsThroughAliases) {
  Result r = Analyze(
      "import os as o\no.kill(1, 9)\nfrom os import getppid as gp, system\npid = gp()\n"
      "k = o.killpg\nsh = os\nsh.fork()\nprint(os.getcwd())\n",
      GeneralPolicy());
  EXPECT_EQ(Of(r, "blocked-call"),
            (std::vector<std::string>{"2:3 call to 'os.kill()' is not allowed",
                                      "3:16 import of 'os.getppid' is not allowed",
                                      "3:31 import of 'os.system' is not allowed",
                                      "4:7 call to 'os.getppid()' is not allowed",
                                      "5:7 access to 'os.killpg' is not allowed",
                                      "7:4 call to 'os.fork()' is not allowed"}))
      << Describe(r);
}

TEST(AnalyzerRulesTest, ProfileBlocklistThroughAliases) {
  Result r = Analyze(
      "import pandas as pd\nimport numpy as np\nfrom scipy import io\n"
      "df = pd.read_pickle('x.pkl')\nf = np.ctypeslib\nm = io.loadmat('a.mat')\n"
      "from pandas import read_sql\nimport scipy.io\nscipy.io.savemat('b.mat', {})\n"
      "ok = pd.read_csv('data.csv')\n",
      DataSciencePolicy());
  EXPECT_EQ(Of(r, "blocklist"),
            (std::vector<std::string>{
                "4:9 access to 'pandas.read_pickle' is blocked by profile",
                "5:8 access to 'numpy.ctypeslib' is blocked by profile",
                "6:8 access to 'scipy.io.loadmat' is blocked by profile",
                "7:20 access to 'pandas.read_sql' is blocked by profile",
                "9:10 access to 'scipy.io.savemat' is blocked by profile"}))
      << Describe(r);
  EXPECT_EQ(r.findings.size(), 5u) << Describe(r);  // scipy.io itself is fine
}

TEST(AnalyzerRulesTest, StarImportBindsBlockedNames) {
  Result r = Analyze("from pandas import *\ndf = read_html('x.html')\n", DataSciencePolicy());
  EXPECT_EQ(Of(r, "blocklist"),
            std::vector<std::string>{"2:6 access to 'pandas.read_html' is blocked by profile"})
      << Describe(r);
  Result os = Analyze("from os import *\nsystem('id')\n", GeneralPolicy());
  EXPECT_EQ(Of(os, "blocked-call"),
            std::vector<std::string>{"2:1 call to 'os.system()' is not allowed"})
      << Describe(os);
}

TEST(AnalyzerRulesTest, BlockedBuiltinsAsCallsAndNames) {
  Result r = Analyze("eval('1')\nf = getattr\nx = [open]\nbreakpoint()\nglobals()['x']\n",
                     GeneralPolicy());
  EXPECT_EQ(Of(r, "blocked-call"),
            (std::vector<std::string>{"1:1 call to 'eval()' is not allowed",
                                      "4:1 call to 'breakpoint()' is not allowed",
                                      "5:1 call to 'globals()' is not allowed"}))
      << Describe(r);
  EXPECT_EQ(Of(r, "blocked-name"),
            (std::vector<std::string>{"2:5 reference to 'getattr' is not allowed",
                                      "3:6 reference to 'open' is not allowed"}))
      << Describe(r);
}

TEST(AnalyzerRulesTest, NamesThatAreNotReferences) {
  // Keyword arguments, parameter names, definitions and names bound by an import are not
  // the builtins.
  Result r = Analyze(
      "from re import compile\npat = compile(r'\\d+')\n"
      "def f(input, open=None, *vars, **locals):\n    return 1\n"
      "g = lambda eval, exec=1: 0\nd = dict(open=1, input=2)\n"
      "class compile_cache: pass\n",
      GeneralPolicy());
  EXPECT_TRUE(r.findings.empty()) << Describe(r);
  // ...but a default value is a reference.
  Result d = Analyze("def f(x=open):\n    return x\n", GeneralPolicy());
  EXPECT_EQ(Of(d, "blocked-name"),
            std::vector<std::string>{"1:9 reference to 'open' is not allowed"})
      << Describe(d);
}

TEST(AnalyzerRulesTest, AttributeRules) {
  Result r = Analyze(
      "a = x.__globals__\nb = e.__traceback__.tb_frame.f_globals\nc = codecs_mod.open('f')\n"
      "d = random._os\ne = f().__subclasses__()\nre.compile('x')\nimport re\n",
      GeneralPolicy());
  EXPECT_EQ(Of(r, "dunder"),
            (std::vector<std::string>{"1:7 access to '__globals__' attribute is not allowed",
                                      "2:7 access to '__traceback__' attribute is not allowed",
                                      "5:9 access to '__subclasses__' attribute is not allowed"}))
      << Describe(r);
  EXPECT_EQ(Of(r, "frame-attribute"),
            (std::vector<std::string>{
                "2:21 access to 'tb_frame' attribute is not allowed (frame/generator introspection)",
                "2:30 access to 'f_globals' attribute is not allowed (frame/generator "
                "introspection)"}))
      << Describe(r);
  EXPECT_EQ(Of(r, "blocked-attribute"),
            std::vector<std::string>{
                "3:16 access to 'open' attribute is not allowed (dangerous function)"})
      << Describe(r);
  EXPECT_EQ(Of(r, "module-alias"),
            std::vector<std::string>{"4:12 access to '_os' attribute is not allowed (module reference)"})
      << Describe(r);
}

TEST(AnalyzerRulesTest, NameAndClassMayBeReadNotWritten) {
  Result read = Analyze(
      "if __name__ == \"__main__\":\n    print(type(x).__name__, x.__class__.__name__)\n"
      "print(f'{fn.__name__} done', '{0.__class__.__name__}'.format(x))\n",
      GeneralPolicy());
  EXPECT_TRUE(read.findings.empty()) << Describe(read);
  Result write = Analyze(
      "__name__ = 'trusted'\nf.__name__ = 'eval'\nx.__class__ = Evil\ndel g.__name__\n"
      "h.__name__ += 'x'\n",
      GeneralPolicy());
  EXPECT_EQ(Of(write, "dunder"),
            (std::vector<std::string>{"1:1 reference to '__name__' is not allowed",
                                      "2:3 access to '__name__' attribute is not allowed",
                                      "3:3 access to '__class__' attribute is not allowed",
                                      "4:7 access to '__name__' attribute is not allowed",
                                      "5:3 access to '__name__' attribute is not allowed"}))
      << Describe(write);
}

TEST(AnalyzerRulesTest, DunderStrings) {
  Result r = Analyze(
      "a = d['__builtins__']\nb = ['__globals__', '__mro__']\nc = frame['f_locals']\n"
      "e = '{0.__init__.__globals__}'.format(f)\nf2 = '{x[__dict__]}'.format(x=y)\n"
      "g = '__bui' 'ltins__'\nh = '\\x5f_code__'\n",
      GeneralPolicy());
  EXPECT_EQ(Of(r, "dunder"),
            (std::vector<std::string>{
                "1:7 subscript access with key '__builtins__' is not allowed (blocked attribute name)",
                "2:6 string literal '__globals__' matches a blocked attribute name",
                "2:21 string literal '__mro__' matches a blocked attribute name",
                "4:5 string contains format spec accessing a blocked attribute ('__init__')",
                "5:6 string contains format spec accessing a blocked attribute ('__dict__')",
                "6:5 string literal '__builtins__' matches a blocked attribute name",
                "7:5 string literal '__code__' matches a blocked attribute name"}))
      << Describe(r);
  EXPECT_EQ(Of(r, "frame-attribute"),
            std::vector<std::string>{
                "3:11 subscript access with key 'f_locals' is not allowed (frame introspection)"})
      << Describe(r);
}

TEST(AnalyzerRulesTest, FStringFieldsAreChecked) {
  Result r = Analyze("s = f\"{eval('1')} {x.__globals__!r} {y:{open}}\"\n", GeneralPolicy());
  EXPECT_EQ(Of(r, "blocked-call"), std::vector<std::string>{"1:8 call to 'eval()' is not allowed"})
      << Describe(r);
  EXPECT_EQ(Of(r, "dunder"),
            std::vector<std::string>{"1:22 access to '__globals__' attribute is not allowed"})
      << Describe(r);
  EXPECT_EQ(Of(r, "blocked-name"),
            std::vector<std::string>{"1:41 reference to 'open' is not allowed"})
      << Describe(r);
  // Static text of an f-string is a literal like any other.
  Result lit = Analyze("s = f'{{0.__globals__}}'\n", GeneralPolicy());
  EXPECT_EQ(Of(lit, "dunder").size(), 1u) << Describe(lit);
}

TEST(AnalyzerRulesTest, GetterFunctions) {
  Result r = Analyze(
      "from operator import attrgetter, methodcaller, itemgetter\n"
      "a = attrgetter('x.__globals__')\nb = methodcaller('__init__', 1)\n"
      "c = itemgetter('gi_frame')\nd = attrgetter(name)\ne = itemgetter(0, 'k')\n"
      "f = methodcaller('upper')\n",
      GeneralPolicy());
  std::vector<std::string> g = Of(r, "getter-string");
  EXPECT_EQ(g, (std::vector<std::string>{
                   "2:16 dynamic attribute access to '__globals__' via attrgetter() is not allowed",
                   "3:18 dynamic access to dunder '__init__' via methodcaller() is not allowed",
                   "4:16 dynamic attribute access to 'gi_frame' via itemgetter() is not allowed",
                   "5:16 attrgetter() is called with a computed name; the analyzer cannot check "
                   "which attribute it reaches"}))
      << Describe(r);
  for (const Finding& f : r.findings) {
    if (f.rule == "getter-string" && f.line == 5) {
      EXPECT_EQ(f.severity, Severity::kWarning);
    }
  }
}

TEST(AnalyzerRulesTest, DynamicNames) {
  Result r = Analyze(
      "a = chr(95) * 2 + 'globals' + chr(95) * 2\nb = '__' + 'dict' + '__'\n"
      "c = bytearray([95, 95, 99, 111, 100, 101, 95, 95]).decode()\nd = 2 * '_' + 'mro__'\n"
      "e = chr(72) + 'ello'\n",
      GeneralPolicy());
  EXPECT_EQ(Of(r, "dynamic-name").size(), 4u) << Describe(r);
  EXPECT_NE(Of(r, "dynamic-name")[0].find("'__globals__'"), std::string::npos);
}

TEST(AnalyzerRulesTest, Deserialization) {
  Result r = Analyze("import pickle\nobj = pickle.loads(data)\nimport yaml as y\ny.load(s)\n",
                     GeneralPolicy());
  EXPECT_EQ(Of(r, "deserialization"),
            (std::vector<std::string>{"2:14 call to 'pickle.loads()' is unsafe deserialization",
                                      "4:3 call to 'yaml.load()' is unsafe deserialization"}))
      << Describe(r);
}

TEST(AnalyzerRulesTest, NfkcNamesCannotHideBuiltins) {
  // U+FF45 FULLWIDTH LATIN SMALL LETTER E + "val": CPython runs it as eval.
  Result r = Analyze("\xEF\xBD\x85val('1')\nx.\xEF\xBC\xBF_globals__\n", GeneralPolicy());
  EXPECT_EQ(Of(r, "blocked-call"), std::vector<std::string>{"1:1 call to 'eval()' is not allowed"})
      << Describe(r);
  EXPECT_EQ(Of(r, "dunder"),
            std::vector<std::string>{"2:3 access to '__globals__' attribute is not allowed"})
      << Describe(r);
  Result imp = Analyze("import \xEF\xBD\x8F\xEF\xBD\x93\n", DataSciencePolicy());  // ｏｓ
  EXPECT_EQ(Of(imp, "import-not-allowed"),
            std::vector<std::string>{"1:8 import of 'os' is not allowed (not in allowed imports)"})
      << Describe(imp);
}

TEST(AnalyzerRulesTest, AuditPatternSeverities) {
  Result r = Analyze(
      "k = 'AKIAIOSFODNN7EXAMPLE'\npem = '-----BEGIN RSA PRIVATE KEY-----\\nMIIE'\n"
      "h = 'aabbccdd11223344aabbccdd11223344'\np = '../../etc/passwd'\n"
      "q = f\"SELECT * FROM users WHERE id = {uid}\"\nr = 'DELETE FROM t WHERE a = %s' % v\n"
      "u = 'see file:///etc/passwd'\n",
      GeneralPolicy());
  auto severity_of = [&](int line) {
    for (const Finding& f : r.findings) {
      if (f.line == line) return f.severity;
    }
    ADD_FAILURE() << "no finding on line " << line << Describe(r);
    return Severity::kInfo;
  };
  EXPECT_EQ(severity_of(1), Severity::kError);
  EXPECT_EQ(severity_of(2), Severity::kError);
  EXPECT_EQ(severity_of(3), Severity::kInfo);
  EXPECT_EQ(severity_of(4), Severity::kWarning);
  EXPECT_EQ(severity_of(5), Severity::kWarning);
  EXPECT_EQ(severity_of(6), Severity::kWarning);
  EXPECT_EQ(severity_of(7), Severity::kInfo);
  EXPECT_EQ(Of(r, "sql-injection").size(), 2u) << Describe(r);
  EXPECT_EQ(Of(r, "path-traversal"),
            std::vector<std::string>{"4:5 string literal contains path traversal sequence ('../')"});
  // A static query, a short hex string, a plain sentence: nothing.
  Result quiet = Analyze("q = 'SELECT * FROM users'\nx = 'deadbeef' * 10\nm = 'This is a test'\n",
                         GeneralPolicy());
  EXPECT_TRUE(quiet.findings.empty()) << Describe(quiet);
}

TEST(AnalyzerRulesTest, WarningsDoNotReject) {
  Result r = Analyze("import hashlib\nh = hashlib.md5(b'x').hexdigest()\np = '../data.csv'\n",
                     GeneralPolicy());
  EXPECT_FALSE(r.Rejects()) << Describe(r);
  EXPECT_EQ(Of(r, "weak-crypto"),
            std::vector<std::string>{"2:13 call to 'hashlib.md5()' uses weak cryptography"});
}

TEST(AnalyzerRulesTest, SwitchesTurnRuleFamiliesOff) {
  Policy p = DataSciencePolicy();
  p.python_guardrails = false;
  p.audit_patterns = false;
  Result r = Analyze("import os\nx.__globals__\neval('1')\np = '../x'\nimport pandas as pd\n"
                     "pd.read_pickle('f')\n",
                     p);
  // The allowlist and the profile blocklist still apply.
  ASSERT_EQ(r.findings.size(), 2u) << Describe(r);
  EXPECT_EQ(r.findings[0].rule, "import-not-allowed");
  EXPECT_EQ(r.findings[1].rule, "blocklist");
}

TEST(AnalyzerRulesTest, SyntaxErrorDoesNotHideViolations) {
  Result r = Analyze("import os\neval(x)\nprint('unterminated\n", DataSciencePolicy());
  EXPECT_FALSE(r.syntax_ok);
  ASSERT_EQ(r.findings.size(), 3u) << Describe(r);
  EXPECT_EQ(r.findings[0].rule, "import-not-allowed");
  EXPECT_EQ(r.findings[1].rule, "blocked-call");
  EXPECT_EQ(r.findings[2].rule, "syntax");
  EXPECT_EQ(r.findings[2].message,
            "SyntaxError: unterminated string literal (detected at line 3) (line 3)");
  EXPECT_EQ(r.findings[2].col, 7);
}

TEST(AnalyzerRulesTest, SizeLimit) {
  Policy p;
  p.max_code_bytes = 10;
  Result r = Analyze("print('hello world')", p);
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_EQ(r.findings[0].rule, "size");
  EXPECT_FALSE(r.syntax_ok);
  EXPECT_TRUE(r.Rejects());
}

TEST(AnalyzerRulesTest, FindingsAreCapped) {
  Policy p;
  p.max_findings = 5;
  std::string code;
  for (int i = 0; i < 50; ++i) code += "eval(x)\n";
  Result r = Analyze(code, p);
  ASSERT_EQ(r.findings.size(), 6u);
  EXPECT_EQ(r.findings.back().rule, "too-many-findings");
  EXPECT_EQ(r.findings.back().severity, Severity::kError);
  EXPECT_TRUE(r.Rejects());
  // Dropped warnings do not turn into a rejection.
  std::string warnings;
  for (int i = 0; i < 50; ++i) warnings += "p = '../data" + std::to_string(i) + ".csv'\n";
  Result w = Analyze(warnings, p);
  ASSERT_EQ(w.findings.size(), 6u);
  EXPECT_EQ(w.findings.back().severity, Severity::kWarning);
  EXPECT_FALSE(w.Rejects());
}

TEST(AnalyzerRulesTest, AnalyzerObjectIsReusable) {
  Analyzer a(DataSciencePolicy());
  EXPECT_TRUE(a.Analyze("import os").Rejects());
  EXPECT_FALSE(a.Analyze("import numpy as np\nprint(np.arange(3))").Rejects());
  EXPECT_TRUE(a.Analyze("import os").Rejects());
  EXPECT_EQ(a.policy().blocklist.size(), 7u);
}

TEST(AnalyzerRulesTest, RuleStagesAndFormatting) {
  EXPECT_EQ(RuleStage("blocklist"), "blocklist_audit");
  EXPECT_EQ(RuleStage("secret"), "audit");
  EXPECT_EQ(RuleStage("dunder"), "ast_scan");
  EXPECT_EQ(RuleStage("syntax"), "ast_scan");
  Finding f;
  f.rule = "blocked-call";
  f.message = "call to 'eval()' is not allowed";
  f.line = 4;
  EXPECT_EQ(FormatViolation(f), "Line 4: call to 'eval()' is not allowed");
  f.rule = "syntax";
  f.message = "SyntaxError: '(' was never closed (line 1)";
  EXPECT_EQ(FormatViolation(f), "SyntaxError: '(' was never closed (line 1)");
  EXPECT_EQ(SeverityName(Severity::kWarning), "warning");
}

}  // namespace
}  // namespace airlock::analyzer
