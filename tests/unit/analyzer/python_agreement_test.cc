// Our syntax verdict must agree with CPython's `ast.parse` on the errors the analyzer
// claims to find (tokenizer errors, brackets, indentation, f-strings, a few parser
// checks), and must never call valid code invalid. Runs /usr/bin/python3 once over all
// snippets; skipped where there is no python3 (it is no kernel feature, so
// AIRLOCK_MUST_WORK does not apply, but CI has python3).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "analyzer/analyzer.h"

namespace airlock::analyzer {
namespace {

namespace fs = std::filesystem;

constexpr const char* kPython = "/usr/bin/python3";

// Snippets in the categories the analyzer claims; both valid and invalid ones.
const std::string kSnippets[] = {
    // valid
    "x = 1\n", "", "\n\n", "# comment only\n", "if x:\n    pass\nelse:\n    pass\n",
    "def f(a, b=1, *args, c, d=2, **kw):\n    return (a, b, args, c, d, kw)\n",
    "class A(B, metaclass=M):\n    x: int = 1\n    def m(self): ...\n",
    "x = [1,\n  2,\n  3]\n", "x = 1 + \\\n  2\n", "s = '''a\nb'''\n", "s = r'\\d+' + b'\\x00'.decode()\n",
    "s = f'{x!r:>{w}}'\n", "s = f\"{'a' if x else 'b'}\"\n", "s = f'''{\nx\n}'''\n", "s = f'{{}}{x=}'\n",
    "s = f'{x:{{}}}'\n", "x = 0x_1f + 0o7 + 0b1 + 1_000 + 1e-5 + 1.5j + .5 + 5.\n",
    "x = 1if y else 2\n", "match p:\n    case [a, *rest]:\n        pass\n    case {'k': v}:\n        pass\n",
    "match = 1\ncase = match\n", "async def f():\n    async with a as b:\n        await c\n",
    "@dec\n@dec2(1)\nclass C:\n    pass\n", "try:\n    pass\nexcept* E:\n    pass\n",
    "x = [i for i in range(3) if i]\n", "lambda: (yield)\n", "print >>sys.stderr, 'x'\n",
    "from . import (a, b,)\nfrom ...a import b\nimport a.b as c, d\n", "x = yield from y\n",
    "if x:\n\tpass\n", "if x:\n  if y:\n      pass\n  z = 1\n", "x = 1\r\ny = 2\r\n", "x = 1\ry = 2\n",
    "x = 1\n\x0cy = 2\n", "\xef\xbb\xbfx = 1\n", "名前 = 1\nprint(名前)\n", "x = '\\N{LOW LINE}'\n",
    "print(f'{x = }', f'{a != b}', f'{x:=10}')\n", "x = 0_0 + 00 + 0e5 + 09.5\n", "x = 1;\n",
    "if x: pass; y = 1\n", "x = (1 <\n 2)\n", "def f():\n    return\n\n\n\n", "x = 1  \\\n\n",
    std::string(200, '(') + std::string(200, ')'),
    // invalid
    "def foo(", "(", "x = )", "x = (]", "x = (1,\n]", "'abc", "\"\"\"abc", "x = 'a\\\n",
    "x = 1 \\", "x = 1 \\ y", "if x:\npass", "def f():\nreturn", "class A:\nx", "for i in x:\n",
    "while 1:\n# c\n", "try:\npass", "x = 1\n  y = 2", "if x:\n    a\n  b", "if x:\n\ta\n        b",
    "1abc", "0x", "01", "1__0", "1_", "0b2", "0o8", "1e", "x = 1.real", "x = $", "x = ?",
    "x = `1`", "x = 1!", "!", "f'{'", "f'}'", "f'{}'", "f'{x!z}'", "f'{x#}'", "f'{\\n}'",
    "f'{x:{y:{z}}}'", "f'{(}'", "f'{x!}'", "f'{x y}'", "f'{!r}'", "f'{ }'", "f'{x'", "f'{x!r=}'",
    "b'\xc3\xa9'", "'\\x4'", "'\\u12'", "'\\U0011ffff'", "'\\N'", "print 'x'", "print x",
    "exec 'x'", "x y", "1 2", "'a' b", "if x\n  pass", "def f() -> int\n  pass", "class A\n  pass",
    "@dec\nx = 1", "@dec\n", "u'x' b'y'", "ur'x'", "bu'x'", "import", "from a import",
    "import a as", "from a import *, b", "x = 1;;", ";", "x = '\xff'", "x = 1\n\\\n",
    "x = 1 <> 2", "if x:\n    # only a comment\n",
    std::string(201, '(') + std::string(201, ')'),
};

bool PythonAvailable() { return access(kPython, X_OK) == 0; }

TEST(PythonAgreementTest, SyntaxVerdictMatchesAstParse) {
  if (!PythonAvailable()) GTEST_SKIP() << kPython << " not found";
  char tmpl[] = "/tmp/airlock-analyzer-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  fs::path dir(tmpl);
  std::map<std::string, std::string> sources;  // file name -> source
  auto add = [&](const std::string& src) {
    char name[32];
    std::snprintf(name, sizeof name, "%05zu.py", sources.size());
    std::ofstream(dir / name, std::ios::binary) << src;
    sources[name] = src;
  };
  for (const std::string& s : kSnippets) add(s);
  size_t corpus = 0;
  fs::path corpus_dir(AIRLOCK_ANALYZER_CORPUS_DIR);
  if (fs::is_directory(corpus_dir)) {
    for (const auto& e : fs::directory_iterator(corpus_dir)) {
      std::ifstream in(e.path(), std::ios::binary);
      std::stringstream ss;
      ss << in.rdbuf();
      add(ss.str());
      ++corpus;
    }
  }
  EXPECT_GE(corpus, 10u) << "seed corpus missing at " << corpus_dir;

  std::ofstream(dir / "check.py") <<
      "import ast, os, sys, warnings\n"
      "warnings.simplefilter('ignore')\n"
      "d = sys.argv[1]\n"
      "for n in sorted(os.listdir(d)):\n"
      "    if not n.endswith('.py') or n == 'check.py':\n"
      "        continue\n"
      "    try:\n"
      "        ast.parse(open(os.path.join(d, n), 'rb').read())\n"
      "        print(n, 'OK')\n"
      "    except (SyntaxError, ValueError):\n"
      "        print(n, 'ERR')\n";
  std::string cmd = std::string(kPython) + " -I " + (dir / "check.py").string() + " " + dir.string();
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::map<std::string, bool> python_ok;
  char line[256];
  while (std::fgets(line, sizeof line, p) != nullptr) {
    std::istringstream ls(line);
    std::string name, verdict;
    ls >> name >> verdict;
    python_ok[name] = verdict == "OK";
  }
  EXPECT_EQ(pclose(p), 0);
  ASSERT_EQ(python_ok.size(), sources.size());

  Policy policy;
  policy.python_guardrails = false;
  policy.audit_patterns = false;
  size_t valid = 0, invalid = 0;
  for (const auto& [name, src] : sources) {
    Result r = Analyze(src, policy);
    std::string ours = r.findings.empty() ? "" : r.findings[0].message;
    EXPECT_EQ(r.syntax_ok, python_ok[name])
        << name << ": python says " << (python_ok[name] ? "valid" : "invalid") << ", we say "
        << (r.syntax_ok ? "valid" : "invalid: " + ours) << "\n--- source ---\n"
        << src.substr(0, 400);
    (python_ok[name] ? valid : invalid) += 1;
  }
  EXPECT_GE(valid, 40u);
  EXPECT_GE(invalid, 60u);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace airlock::analyzer
