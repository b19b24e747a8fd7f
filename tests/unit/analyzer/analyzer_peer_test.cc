// The fips-agents/code-sandbox escape and integration cases (research/peers.md §c.1–c.3),
// rewritten as analyzer inputs. V and X cases must be rejected (with the listed substring
// in some violation); R cases and the realistic computations must be accepted.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "analyzer/analyzer.h"

namespace airlock::analyzer {
namespace {

Policy MinimalPolicy() {
  Policy p;
  p.allowed_imports = std::vector<std::string>{
      "collections", "csv",    "datetime", "decimal", "fractions", "functools",
      "itertools",   "json",   "math",     "operator", "random",   "re",
      "statistics",  "string", "textwrap", "typing"};
  return p;
}

std::string Describe(const Result& r) {
  std::string out;
  for (const Finding& f : r.findings) {
    out += "\n  " + std::string(SeverityName(f.severity)) + " [" + f.rule + "] " +
           FormatViolation(f);
  }
  return out.empty() ? " (no findings)" : out;
}

struct RejectCase {
  const char* name;
  const char* code;
  const char* must_contain;  // nullptr: any violation will do
};

class PeerRejectTest : public ::testing::TestWithParam<RejectCase> {};

TEST_P(PeerRejectTest, IsRejected) {
  const RejectCase& c = GetParam();
  Result r = Analyze(c.code, MinimalPolicy());
  EXPECT_TRUE(r.Rejects()) << c.name << Describe(r);
  if (c.must_contain != nullptr) {
    bool found = false;
    for (const Finding& f : r.findings) {
      if (f.severity == Severity::kError &&
          FormatViolation(f).find(c.must_contain) != std::string::npos) {
        found = true;
      }
    }
    EXPECT_TRUE(found) << c.name << ": no violation mentions '" << c.must_contain << "'"
                       << Describe(r);
  }
}

// The payload that gets __import__ out of the builtins of a dict (globals(), locals(), ...).
#define GET_IMPORT                                                        \
  "imp = b['__import__'] if isinstance(b, dict) else b.__import__\n" \
  "m = imp('os')\n"                                                      \
  "print('ESCAPED:', m.getcwd())\n"

const RejectCase kRejectCases[] = {
    // c.1 TestGuardrailBypasses (V)
    {"globals_builtins_access", "g = globals()\nb = g['__builtins__']\n" GET_IMPORT, "globals"},
    {"operator_attrgetter_bypass",
     "import operator\nimport math\nb = operator.attrgetter('__builtins__')(math)\n" GET_IMPORT,
     "attrgetter"},
    {"exception_traceback_frame_walk",
     "try:\n    1/0\nexcept Exception as e:\n    frame = e.__traceback__.tb_frame\n"
     "    b = frame.f_globals['__builtins__']\n    print(b)\n",
     "__traceback__"},
    {"generator_frame_walk",
     "def gen():\n    yield 1\ng = gen()\nframe = g.gi_frame\nb = frame.f_globals['__builtins__']\n",
     "gi_frame"},
    {"vars_builtins_access", "import math\nd = vars(math)\nb = d['__builtins__']\n", "vars"},
    {"dynamic_chr_construction",
     "name = chr(95)*2 + 'builtins' + chr(95)*2\nb = globals()[name]\n" GET_IMPORT, nullptr},
    {"bytes_decode_dunder_construction",
     "name = bytes([95,95,98,117,105,108,116,105,110,115,95,95]).decode()\n"
     "b = globals()[name]\n" GET_IMPORT,
     nullptr},
    {"format_string_attribute_traversal",
     "def f(): pass\nleaked = '{0.__globals__}'.format(f)\nprint('LEAKED_GLOBALS:', leaked[:200])\n",
     "__globals__"},
    {"class_chain_reconnaissance",
     "obj_class = ().__class__.__bases__[0]\nprint('OBJECT:', obj_class)\n"
     "print('DICT:', obj_class.__dict__.keys())\n",
     "__bases__"},
    {"metaclass_globals_escape",
     "class Meta(type):\n    def __new__(mcs, name, bases, ns):\n"
     "        b = globals()['__builtins__']\n        return super().__new__(mcs, name, bases, ns)\n"
     "\nclass Exploit(metaclass=Meta):\n    pass\n",
     "globals"},
    {"operator_methodcaller_bypass",
     "import operator\nimport math\nmc = operator.methodcaller('__init__')\n", "__init__"},
    {"functools_reduce_attrgetter_chain",
     "import functools\nimport operator\nattrs = ['__class__', '__bases__']\n"
     "result = functools.reduce(\n    lambda obj, attr: operator.attrgetter(attr)(obj),\n"
     "    attrs, ()\n)\nprint('CHAIN:', result)\n",
     "__bases__"},
    {"locals_builtins_access", "l = locals()\nb = l['__builtins__']\n" GET_IMPORT, "locals"},
    {"bare_builtins_name_reference", "b = __builtins__\n" GET_IMPORT, "__builtins__"},
    {"bare_builtins_open_method",
     "b = __builtins__\nf = b.open('/etc/passwd', 'r')\nprint(f.read())\n", "open"},
    // c.1 TestModuleAttributeTraversal (V)
    {"random_os_escape", "import random\nrandom._os.system('id')\n", "_os"},
    {"random_os_environ_leak", "import random\nprint(dict(random._os.environ))\n", "_os"},
    // c.1 TestEvalBypasses (V, and the X ones, which we reject outright)
    {"typing_get_type_hints_eval_bypass",
     "import typing\n\nclass X:\n    a: 'type(print(__import__(\"os\").getcwd()))'\n\n"
     "typing.get_type_hints(X)\n",
     "get_type_hints"},
    {"typing_get_type_hints_blocked_by_ast",
     "import typing\n\nclass X:\n    a: '__import__(\"os\").system(\"id\")'\n\n"
     "typing.get_type_hints(X)\n",
     "get_type_hints"},
    {"get_type_hints_direct_import_blocked",
     "from typing import get_type_hints\n\nclass X:\n    a: '__import__(\"os\").system(\"id\")'\n\n"
     "get_type_hints(X)\n",
     "get_type_hints"},
    {"typing_eval_env_leak",
     "import typing\n\nclass X:\n"
     "    a: 'type(print(__import__(\"os\").environ.get(\"HOME\", \"blocked\")))'\n\n"
     "try:\n    typing.get_type_hints(X)\nexcept Exception:\n    pass\n",
     "get_type_hints"},
    // c.1 TestInfoLeaks / TestResourceExhaustion / TestNetworkEscape (X)
    {"proc_self_environ_leak",
     "g = globals()\nb = g['__builtins__']\n" GET_IMPORT
     "with imp('builtins').open('/proc/self/environ', 'rb') as f:\n    print(f.read())\n",
     "open"},
    {"tmp_listing_leak",
     "g = globals()\nb = g['__builtins__']\n" GET_IMPORT "print('TMP_FILES:', m.listdir('/tmp'))\n",
     nullptr},
    {"tmp_fill_exhaustion",
     "g = globals()\nb = g['__builtins__']\n" GET_IMPORT
     "builtins = imp('builtins')\nwith builtins.open('/tmp/fill_test', 'wb') as f:\n"
     "    f.write(b'A' * (15 * 1024 * 1024))\n",
     nullptr},
    {"localhost_probe",
     "g = globals()\nb = g['__builtins__']\n" GET_IMPORT
     "sock = imp('socket')\ns = sock.socket(sock.AF_INET, sock.SOCK_STREAM)\n"
     "s.connect(('127.0.0.1', 8080))\n",
     nullptr},
    {"af_alg_socket_blocked",
     "g = globals()\nb = g['__builtins__']\n" GET_IMPORT
     "sock = imp('socket')\ns = sock.socket(38, sock.SOCK_SEQPACKET, 0)\n",
     nullptr},
    {"splice_syscall_blocked",
     "g = globals()\nb = g['__builtins__']\n" GET_IMPORT
     "rfd, wfd = m.pipe()\nn = m.splice(rfd, wfd, 0)\n",
     nullptr},
    // c.1 TestProcessEscape (V)
    {"os_kill_blocked", "os.kill(1, 9)", "os.kill"},
    {"os_getppid_blocked", "os.getppid()", "os.getppid"},
    {"os_getpid_blocked", "os.getpid()", "os.getpid"},
    {"os_fork_blocked", "os.fork()", "os.fork"},
    {"os_abort_blocked", "os.abort()", "os.abort"},
    {"signal_module_blocked", "signal.raise_signal(9)", "signal"},
    {"getattribute_bypass_blocked", "object.__getattribute__(func, name)", "__getattribute__"},
    {"getattr_dunder_blocked", "x.__getattr__('anything')", "__getattr__"},
    {"transitive_builtins_via_enum_bltns", "import re\nx = re.enum.bltns", "bltns"},
    {"transitive_builtins_via_codecs", "import json\nx = json.codecs.builtins", "builtins"},
    {"blocked_call_aliasing", "myopen = open\nmyopen('/etc/passwd')", "open"},
    {"blocked_call_reference_in_list", "fns = [open]\nfns[0]('/etc/passwd')", "open"},
    {"print_self_builtins_blocked", "b = print.__self__\nb.open('/etc/passwd')", "__self__"},
    {"codecs_module_blocked", "import json\nf = json.codecs.open('/etc/passwd')", "codecs"},
    {"open_as_attribute_blocked", "x.open('/etc/passwd')", "open"},
    {"loader_get_data_blocked", "import json\ndata = json.__loader__.get_data(\"/etc/passwd\")",
     "__loader__"},
    // c.1 TestMemoryLimitBypasses, TestPreimportAttackSurface, TestLandlockNetworkEvasion (V)
    {"resource_import_blocked_by_guardrails", "import resource", "resource"},
    {"preimport_builtins_dunder_blocked", "import json\nb = json.__builtins__", "__builtins__"},
    {"preimport_dict_dunder_blocked", "import json\nd = json.__dict__", "__dict__"},
    {"pandas_eval_blocked", "import pandas\npandas.eval('__import__(\"os\")')", "eval"},
    {"numpy_lib_os_alias_blocked", "import numpy\nnumpy.lib.os.getcwd()", "os"},
    {"preimport_open_removed_from_builtins",
     "try:\n    f = open('/etc/passwd')\n    print('ESCAPED: open still available')\n"
     "except NameError:\n    print('BLOCKED: open removed')\n",
     "open"},
    {"preimport_exec_still_in_builtins",
     "try:\n    exec('import os')\n    print('ESCAPED')\nexcept ImportError:\n"
     "    print('RUNTIME_BLOCKED')\n",
     "exec"},
    {"preimport_module_import_hook_active", "import os\nprint('ESCAPED')\n", "os"},
    {"landlock_udp_not_covered_by_abi4", "import socket", "socket"},
    // c.2 TestGuardrailEdgeCases and TestErrorRecovery (400)
    {"io_import_blocked", "import io", "io"},
    {"shadowing_open_builtin_still_blocked",
     "\ndef open(path):\n    return path\n\nresult = open(\"/etc/passwd\")\nprint(result)\n", "open"},
    {"lambda_with_eval_name_attribute_is_blocked",
     "\nf = lambda: None\nf.__name__ = \"eval\"\nprint(f.__name__)\n", "__name__"},
    {"open_call_blocked", "open(\"/tmp/test.txt\", \"w\").write(\"hello\")", "open"},
    // c.3 (400)
    {"blocked_import", "import os", "import of 'os' is not allowed (not in allowed imports)"},
    {"syntax_error", "def foo(", "SyntaxError"},
};

INSTANTIATE_TEST_SUITE_P(Peer, PeerRejectTest, ::testing::ValuesIn(kRejectCases),
                         [](const ::testing::TestParamInfo<RejectCase>& p) {
                           return std::string(p.param.name);
                         });

TEST(PeerTest, SignalParentProcessHasAtLeastThreeViolations) {
  const char* code =
      "g = globals()\nb = g['__builtins__']\n" GET_IMPORT
      "signal_mod = imp('signal')\nppid = m.getppid()\nprint('PARENT_PID:', ppid)\n"
      "try:\n    m.kill(ppid, signal_mod.SIGTERM)\n    print('SIGNAL_SENT')\n"
      "except Exception as e:\n    print('SIGNAL_BLOCKED:', e)\n";
  Result r = Analyze(code, MinimalPolicy());
  size_t errors = 0;
  for (const Finding& f : r.findings) errors += f.severity == Severity::kError;
  EXPECT_GE(errors, 3u) << Describe(r);
}

TEST(PeerTest, MultipleViolationsAllReported) {
  const char* code =
      "\nimport os\nimport subprocess\nimport socket\neval(\"1+1\")\nexec(\"x=1\")\n"
      "result = open(\"/etc/passwd\")\n";
  Result r = Analyze(code, MinimalPolicy());
  ASSERT_GE(r.findings.size(), 6u) << Describe(r);
  std::string all;
  for (const Finding& f : r.findings) all += FormatViolation(f) + "\n";
  for (const char* s : {"os", "subprocess", "socket", "eval", "exec", "open"}) {
    EXPECT_NE(all.find(s), std::string::npos) << s << " missing in\n" << all;
  }
  // Each at its own line and column.
  EXPECT_EQ(FormatViolation(r.findings[0]),
            "Line 2: import of 'os' is not allowed (not in allowed imports)");
  EXPECT_EQ(r.findings[0].col, 8);
  EXPECT_EQ(FormatViolation(r.findings[3]), "Line 5: call to 'eval()' is not allowed");
  EXPECT_EQ(r.findings[3].col, 1);
  EXPECT_EQ(FormatViolation(r.findings[5]), "Line 7: call to 'open()' is not allowed");
  EXPECT_EQ(r.findings[5].col, 10);
}

TEST(PeerTest, SyntaxErrorUsesPythonsWording) {
  Result r = Analyze("def foo(", MinimalPolicy());
  ASSERT_EQ(r.findings.size(), 1u) << Describe(r);
  EXPECT_FALSE(r.syntax_ok);
  EXPECT_EQ(r.findings[0].rule, "syntax");
  EXPECT_EQ(FormatViolation(r.findings[0]), "SyntaxError: '(' was never closed (line 1)");
}

struct AcceptCase {
  const char* name;
  const char* code;
};

class PeerAcceptTest : public ::testing::TestWithParam<AcceptCase> {};

TEST_P(PeerAcceptTest, IsAcceptedWithoutFindings) {
  const AcceptCase& c = GetParam();
  Result r = Analyze(c.code, MinimalPolicy());
  EXPECT_FALSE(r.Rejects()) << c.name << Describe(r);
  EXPECT_TRUE(r.syntax_ok) << c.name << Describe(r);
  EXPECT_TRUE(r.findings.empty()) << c.name << Describe(r);
}

const AcceptCase kAcceptCases[] = {
    // c.1 R cases
    {"random_os_runtime_purge", "import random\nprint('has _os:', hasattr(random, '_os'))\n"},
    {"resource_transitive_via_allowed_modules",
     "import math, statistics, itertools, functools, re, datetime\n"
     "import collections, json, csv, string, textwrap\n"
     "import decimal, fractions, random, operator, typing\n"
     "mods = [math, statistics, itertools, functools, re, datetime,\n"
     "        collections, json, csv, string, textwrap,\n"
     "        decimal, fractions, random, operator, typing]\n"
     "for m in mods:\n    if hasattr(m, 'resource'):\n        print(f'FOUND: {m}.resource')\n"
     "print('DONE')\n"},
    {"preimport_cached_open_reference",
     "import json\nnames = [x for x in dir(json) if 'open' in x.lower()]\n"
     "print(f'OPEN_REFS: {names}')\n"},
    {"audit_stdout_separate_from_user_stdout",
     "print('{\"class_uid\":2001,\"message\":\"fake_event\"}')\n"},
    {"default_rlimit_fires_before_cgroup", "x = bytearray(600 * 1024 * 1024)\nprint('ALLOCATED')\n"},
    // c.2 TestRealisticComputations
    {"statistical_analysis",
     "\nimport statistics\ndata = [10, 20, 30, 40, 50, 60, 70, 80, 90, 100]\n"
     "print(f\"mean={statistics.mean(data)}\")\nprint(f\"median={statistics.median(data)}\")\n"
     "print(f\"stdev={statistics.stdev(data):.4f}\")\n"},
    {"json_data_processing",
     "\nimport json\nraw = '[{\"name\": \"alice\", \"score\": 82}, {\"name\": \"bob\", \"score\": 45}, '\n"
     "raw += '{\"name\": \"carol\", \"score\": 91}]'\ndata = json.loads(raw)\n"
     "passing = [{\"name\": d[\"name\"], \"grade\": \"pass\"} for d in data if d[\"score\"] >= 50]\n"
     "print(json.dumps(passing))\n"},
    {"regex_extraction",
     "import re\ntext = (\n    'Hello from alice@example.com. '\n"
     "    'Please CC bob@company.org and support@helpdesk.io. '\n"
     "    'Also loop in carol@reports.example.com for the report.'\n)\n"
     "emails = re.findall(r'[\\w.+-]+@[\\w.-]+\\.[a-z]{2,}', text)\nprint(len(emails))\n"
     "for e in sorted(emails):\n    print(e)\n"},
    {"date_arithmetic",
     "\nfrom datetime import date\nd1 = date(2024, 1, 1)\nd2 = date(2024, 12, 31)\n"
     "delta = (d2 - d1).days\nprint(delta)\n"},
    {"combinatorics",
     "\nimport itertools\ncombos = list(itertools.combinations(range(10), 3))\nprint(len(combos))\n"},
    {"fibonacci_lru_cache",
     "\nimport functools\n\n@functools.lru_cache(maxsize=None)\ndef fib(n):\n    if n < 2:\n"
     "        return n\n    return fib(n - 1) + fib(n - 2)\n\nprint(fib(20))\n"},
    {"print_csv_without_io",
     "\nimport json\nrows = [\n    {\"product\": \"apple\", \"qty\": 10, \"price\": 1.20},\n"
     "    {\"product\": \"banana\", \"qty\": 5, \"price\": 0.50},\n"
     "    {\"product\": \"cherry\", \"qty\": 100, \"price\": 3.00},\n]\n"
     "header = list(rows[0].keys())\nprint(\",\".join(header))\nfor row in rows:\n"
     "    print(\",\".join(str(row[k]) for k in header))\n"
     "total = sum(r[\"qty\"] * r[\"price\"] for r in rows)\nprint(f\"total={total:.2f}\")\n"},
    {"decimal_precision",
     "\nfrom decimal import Decimal, ROUND_HALF_UP\nprice = Decimal(\"19.99\")\n"
     "tax_rate = Decimal(\"0.0875\")\n"
     "tax = (price * tax_rate).quantize(Decimal(\"0.01\"), rounding=ROUND_HALF_UP)\n"
     "total = price + tax\nprint(f\"tax={tax}\")\nprint(f\"total={total}\")\n"},
    {"multi_module_computation",
     "\nimport math\nimport statistics\nimport collections\nimport json\n\n"
     "scores = [72, 85, 90, 72, 88, 65, 90, 72, 95, 85]\n"
     "freq = dict(collections.Counter(scores))\nresult = {\n"
     "    \"mean\": round(statistics.mean(scores), 2),\n"
     "    \"variance\": round(statistics.variance(scores), 2),\n"
     "    \"log_mean\": round(math.log(statistics.mean(scores)), 4),\n"
     "    \"most_common\": max(freq, key=freq.get),\n    \"frequency\": freq,\n}\n"
     "print(json.dumps(result, sort_keys=True))\n"},
    // c.2 TestGuardrailEdgeCases (200)
    {"string_containing_eval_is_allowed", "\nx = \"eval('dangerous')\"\nprint(x)\n"},
    {"chained_string_methods_allowed",
     "\nresult = \"  Hello World  \".strip().upper().replace(\"WORLD\", \"SANDBOX\")\nprint(result)\n"},
    {"list_comprehension_with_math",
     "\nimport math\nresult = [round(math.sqrt(i), 4) for i in range(1, 6)]\nprint(result)\n"},
    {"unicode_identifiers_and_strings",
     "\n名前 = \"世界\"\ngreeting = f\"こんにちは、{名前}！\"\nprint(greeting)\nprint(len(名前))\n"},
    {"deeply_nested_safe_builtins", "\nresult = print(sum(range(len(list(map(str, range(10)))))))\n"},
    {"format_spec_with_conversion", "x = 5\nprint(f\"{x!r:>10}\")\n"},
    // c.2 TestConcurrency, TestOutputLimits, TestErrorRecovery (200)
    {"parallel_1", "print(2 ** 10)"},
    {"parallel_2", "print(sum(range(101)))"},
    {"parallel_3", "import math; print(round(math.pi, 5))"},
    {"parallel_4", "print('hello' * 3)"},
    {"parallel_5", "print(sorted([5, 3, 1, 4, 2]))"},
    {"large_stdout", "\nline = \"x\" * 100\nfor _ in range(1000):\n    print(line)\n"},
    {"binary_like_output", "\ndata = bytes(range(32, 128))\nprint(repr(data))\nprint(len(data))\n"},
    {"infinite_loop", "while True: pass"},
    {"memory_intensive_code", "x = [0] * (10 ** 8)"},
    {"system_exit_code", "raise SystemExit(42)"},
    // c.3
    {"valid_code", "print(42)"},
    {"runtime_error", "1/0"},
    {"busy_loop", "while True:\n    x = 1\n"},
};

INSTANTIATE_TEST_SUITE_P(Peer, PeerAcceptTest, ::testing::ValuesIn(kAcceptCases),
                         [](const ::testing::TestParamInfo<AcceptCase>& p) {
                           return std::string(p.param.name);
                         });

}  // namespace
}  // namespace airlock::analyzer
