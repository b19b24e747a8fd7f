"""The lean paths of a warm run (issue 24) against the whole one.

A warm run's program is a fork of the zygote. In the zygote a one-shot request is run by the lean
path in C++ (src/exec/lean_cell.cc) when it takes it, else by warm_main(request), whose own lean
path (airlock_runner._lean_run, after warm_rehearse()) runs what it takes without the Runner. On
either lean path, whatever has more to report than its end event is handed to a Runner. Either way
a user must see exactly what the whole path (Runner.run) gives: the same stdout, stderr, events
and exit status. Each case here runs in forks of one interpreter loaded as the zygote loads the
runner (a module named airlock_runner, complete_site, zygote_preimport, zygote_prepare_lean,
gc.freeze): as a warm run of the runner's lean path does, with the lean path switched off, and
through the C++ path (built as the extension module _airlock_lean; the build names its directory
in AIRLOCK_LEAN_MODULE_DIR, and a sanitizer build has none: those cases then skip), and the
outcomes are compared. Each case also says whether the lean paths must take it
(airlock_runner.lean_runs, and whether the C++ path returned an exit code), so that a change that
quietly sends everything to the whole path fails here too.

Run: /usr/bin/python3 -m unittest discover -s tests/unit/runtime -v
"""

import json
import os
import re
import subprocess
import tempfile
import unittest
from pathlib import Path

PYTHON = "/usr/bin/python3"
SOURCE_DIR = Path(os.environ.get("AIRLOCK_SOURCE_DIR") or Path(__file__).resolve().parents[3])
RUNNER = SOURCE_DIR / "runtime" / "python" / "airlock_runner.py"

# Runs in /usr/bin/python3 -I -B -S: loads the runner as the zygote does (src/exec/zygote_main.cc,
# kBootstrap), then forks one child per (case, mode). A child runs in its own working directory,
# its fds 1 and 2 on files, its result channel on fd 3, and reports the runner's lean_runs on fd 4.
_DRIVER = r'''
import gc, json, os, sys, types
runner_path, cases_path, out_dir, module_dir, preimport = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
_runner = types.ModuleType("airlock_runner")
_runner.__file__ = runner_path
with open(runner_path, "rb") as f:
    exec(compile(f.read(), runner_path, "exec"), _runner.__dict__)
_runner.complete_site()
failed = _runner.zygote_preimport(preimport)
assert not failed, failed
modes = ["lean", "whole"]
if module_dir:
    sys.path.insert(0, module_dir)
    import _airlock_lean
    _airlock_lean.prepare(_runner.__dict__, _runner.zygote_prepare_lean())
    modes.append("cxx")
gc.collect()
gc.freeze()
with open(cases_path) as f:
    cases = json.load(f)
for i, case in enumerate(cases):
    for mode in modes:
        where = os.path.join(out_dir, f"{i}-{mode}")
        os.mkdir(where)
        os.mkdir(os.path.join(where, "cwd"))
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            try:
                os.chdir(os.path.join(where, "cwd"))
                for fd, name in ((1, "stdout"), (2, "stderr"), (3, "events"), (4, "lean_runs")):
                    target = os.open(os.path.join(where, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                    if target != fd:
                        os.dup2(target, fd)
                        os.close(target)
                if mode == "whole":
                    _runner._lean_request = lambda raw: None
                if mode != "cxx":  # the zygote does not rehearse the runner's path for the C++ one
                    _runner.warm_rehearse()
                request = case["request"]
                if case.get("as_bytes"):
                    request = json.dumps(request).encode()
                code = None
                if mode == "cxx":
                    # The zygote hands the C++ path the dict it made of the JSON (bytes it could
                    # not make one of go to warm_main).
                    code = _airlock_lean.run(case["request"], -1)
                    os.write(4, b"cxx " if code is not None else b"py ")
                if code is None:
                    code = _runner.warm_main(request, -1)
                for stream in (sys.stdout, sys.stderr):
                    try:
                        stream.flush()
                    except Exception:
                        pass
                os.write(4, str(_runner.lean_runs).encode())
            except BaseException as e:
                os.write(2, f"DRIVER FAILURE {e!r}".encode())
                code = 99
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        with open(os.path.join(where, "status"), "w") as f:
            f.write(str(os.waitstatus_to_exitcode(status)))
'''


def _has(module):
    return subprocess.run([PYTHON, "-I", "-c", f"import {module}"], capture_output=True).returncode == 0


HAS_MATPLOTLIB = _has("matplotlib")


def _request(code, **extra):
    """A one-shot request as RunnerConfigToJson makes it for a warm run of `general`."""
    request = {
        "code": code,
        "filename": "main.py",
        "allowed_imports": None,
        "runtime_imports_mode": "enforce",
        "blocklist": [],
        "preimport": [],
        "capture_figures": True,
        "result_fd": 3,
        "max_result_bytes": 1 << 20,
        "max_results": 16,
        "max_result_values": 1 << 16,
        "max_out_files": 8,
        "max_out_bytes": 1 << 20,
        "stream": False,
    }
    request.update(extra)
    return request


def _outcome(where):
    def read(name):
        with open(os.path.join(where, name), "rb") as f:
            # An object's address ("<function f at 0x...>") differs from fork to fork.
            return re.sub(r"0x[0-9a-f]{6,}", "0x?", f.read().decode("utf-8", "replace"))

    events = [json.loads(line) for line in read("events").splitlines()]
    for e in events:
        if e.get("type") == "end":
            assert type(e.pop("max_rss_kb")) is int
    return {"status": int(read("status")), "stdout": read("stdout"), "stderr": read("stderr"),
            "events": events, "files": sorted(os.listdir(os.path.join(where, "cwd")))}


LEAN_MODULE_DIR = os.environ.get("AIRLOCK_LEAN_MODULE_DIR", "")
if LEAN_MODULE_DIR and not os.path.exists(os.path.join(LEAN_MODULE_DIR, "_airlock_lean.so")):
    raise RuntimeError(f"AIRLOCK_LEAN_MODULE_DIR={LEAN_MODULE_DIR} has no _airlock_lean.so: build the tests first")


def _run_both(cases, preimport=()):
    """[(lean outcome, whole outcome, lean_runs of the lean mode, (C++ outcome, whether the C++
    path took it, lean_runs) or None without the module)] for each case."""
    with tempfile.TemporaryDirectory(prefix="airlock-lean-test-") as tmp:
        cases_path = os.path.join(tmp, "cases.json")
        with open(cases_path, "w") as f:
            json.dump(cases, f)
        out = os.path.join(tmp, "out")
        os.mkdir(out)
        home = os.path.join(tmp, "home")
        os.mkdir(home)
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": home,
               "MPLCONFIGDIR": os.path.join(home, "mpl")}
        proc = subprocess.run([PYTHON, "-I", "-B", "-S", "-c", _DRIVER, str(RUNNER), cases_path, out, LEAN_MODULE_DIR,
                               *preimport],
                              env=env, capture_output=True, timeout=300)
        if proc.returncode != 0:
            raise AssertionError(f"driver failed: {proc.stderr.decode(errors='replace')}")
        results = []
        for i in range(len(cases)):
            lean, whole = _outcome(os.path.join(out, f"{i}-lean")), _outcome(os.path.join(out, f"{i}-whole"))
            with open(os.path.join(out, f"{i}-lean", "lean_runs")) as f:
                lean_runs = int(f.read() or -1)
            cxx = None
            if LEAN_MODULE_DIR:
                with open(os.path.join(out, f"{i}-cxx", "lean_runs")) as f:
                    taken, _, runs = f.read().partition(" ")
                cxx = (_outcome(os.path.join(out, f"{i}-cxx")), taken == "cxx", int(runs or -1))
            results.append((lean, whole, lean_runs, cxx))
        return results


# (name, code or request, whether the lean path takes it)
_CASES = [
    ("print", "print(1)", True),
    ("nothing", "", True),
    ("comments only", "# nothing\n\n", True),
    ("statements", "x = 1\ny = x + 1\nprint(y)", True),
    ("value", "x = 41\nx + 1", True),
    ("value with a comment after it", "x = 2\nx * 3\n# the end\n\n", True),
    ("multi-line value", "x = 2\n(x +\n  3)", True),
    ("value in an indented block is not shown", "if True:\n    5", True),
    ("trailing semicolon", "x = 1\nx;", True),
    ("two statements on a line", "x = 1; x", True),
    ("None is not shown", "None", True),
    ("decorated function last", "import functools\n@functools.lru_cache\ndef f():\n    return 1", True),
    ("class last", "class A:\n    x = 1\n\nA.x", True),
    ("multi-line string then value", "s = '''\nabc\n1 + 1\n'''\nlen(s)", True),
    ("string ending the cell", "s = 1\n'''\ntext\n'''", True),
    ("walrus value", "(y := 3)", True),
    ("display", "display('shown')\nprint('after')", True),
    ("rich repr", "class H:\n    def _repr_html_(self):\n        return '<b>x</b>'\nH()", True),
    ("exception", "print('before')\n1/0", True),
    ("exception in a function", "def f():\n    raise ValueError('bad')\n\nf()", True),
    ("chained exception", "try:\n    {}['k']\nexcept KeyError as e:\n    raise RuntimeError('wrapped') from e", True),
    ("exception in the last expression", "x = 0\n1 / x", True),
    ("sys.exit(3)", "import sys\nprint('out')\nsys.exit(3)", True),
    ("sys.exit(message)", "import sys\nsys.exit('no good')", True),
    ("raise SystemExit", "raise SystemExit", True),
    ("exit()", "exit(4)", True),
    ("KeyboardInterrupt", "raise KeyboardInterrupt", True),
    ("file written", "with open('out.txt', 'w') as f:\n    f.write('hello')", True),
    ("file written and a value", "open('a.txt', 'w').write('abc')", True),
    ("thread", "import threading, time\n"
               "def work():\n    time.sleep(0.05)\n    print('thread done')\n"
               "threading.Thread(target=work).start()\nprint('main done')", True),
    ("atexit", "import atexit\natexit.register(print, 'bye')\nprint('hi')", True),
    ("atexit fails", "import atexit\ndef f():\n    raise OSError('in atexit')\natexit.register(f)", True),
    ("recursion depth", "import sys\ndef d(n):\n    try:\n        return d(n + 1)\n    except RecursionError:\n"
                        "        return n\nprint(d(0))", True),
    ("argv and __main__", "import sys, __main__\nprint(sys.argv, __name__, __main__.__dict__.get('q', 'none'))",
     True),
    ("stderr and stdout order", "import sys\nprint('a')\nsys.stderr.write('b\\n')\nprint('c')", True),
    ("unicode and surrogates", "print('é ☃')\nimport sys\nsys.stdout.write('\\udcff\\n')", True),
    ("syntax error", "x = (", False),
    ("indentation error", "  x = 1\n y = 2", False),
    ("null byte", "x = 1\x00", False),
    ("top-level await", "import asyncio\nawait asyncio.sleep(0)\n7", False),
    ("await inside a value", "import asyncio\nasync def f():\n    return 8\nawait f()", False),
    ("import refused", {"code": "import socket", "allowed_imports": ["math"]}, True),
    ("import allowed", {"code": "import math\nprint(math.pi)", "allowed_imports": ["math"]}, True),
    ("observe mode with any import", {"code": "import socket\nprint(1)", "runtime_imports_mode": "observe"}, True),
    ("observe mode with an allowlist is the whole path's",
     {"code": "import socket\nprint(1)", "runtime_imports_mode": "observe", "allowed_imports": ["math"]}, False),
    ("env", {"code": "import os\nprint(os.environ['FOO'])", "env": {"FOO": "bar"}}, True),
    ("bad env goes to the whole path", {"code": "print(1)", "env": {"A=B": "x"}}, False),
    ("stream", {"code": "print(1)\n1/0", "stream": True}, True),
    ("no files counted", {"code": "open('z.txt', 'w').write('z')", "max_out_files": 0}, True),
    ("a seed is the whole path's", {"code": "import random\nprint(random.random())", "seed": 5}, False),
    ("input files are the whole path's",
     {"code": "print(open('in.txt').read())", "files": [["in.txt", "aGk="]]}, False),
    ("unknown key", {"code": "print(1)", "surprise": 1}, False),
    ("the request as bytes", {"code": "print(2)\n3", "as_bytes": True}, True),
    ("a cell past the split's size limit", "x = 1\n" + "# pad\n" * 12000 + "x", True),
]

if HAS_MATPLOTLIB:
    _CASES += [
        ("open figure", "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nprint('plotted')", True),
        ("shown figure", "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()\nprint('x')", True),
        ("figure as value", "import matplotlib.pyplot as plt\nfig = plt.figure()\nfig", True),
        ("no capture", {"code": "import matplotlib.pyplot as plt\nplt.plot([1])", "capture_figures": False},
         True),
    ]


# Cases the runner's Python lean path takes and the C++ one leaves to it (lean_cell.cc): a request
# with variables in its env, and cells whose last statement _split_cell cannot find without ast
# (none, a ';' in it, a line at column 0 the text before which does not compile alone, a cell
# past the split's size: the runner's path then compiles through ast, which the C++ one has not).
_PYTHON_LEAN_ONLY = frozenset((
    "env", "nothing", "comments only", "trailing semicolon", "two statements on a line", "decorated function last",
    "chained exception", "string ending the cell", "a cell past the split's size limit"))


def _check_cxx(test, cases, results, fresh_stdout=()):
    """The C++ path's outcome of each case is the whole path's, and it took what it should."""
    if not LEAN_MODULE_DIR:
        test.skipTest("no _airlock_lean module (a sanitizer build, or AIRLOCK_LEAN_MODULE_DIR unset)")
    for (name, _, takes), (_, whole, _, (cxx, taken, runs)) in zip(cases, results):
        with test.subTest(name):
            if name in fresh_stdout:
                test.assertNotEqual(cxx["stdout"], whole["stdout"])
                cxx, whole = dict(cxx, stdout=""), dict(whole, stdout="")
            test.assertEqual(cxx, whole)
            test.assertEqual(taken, takes and name not in _PYTHON_LEAN_ONLY)
            test.assertEqual(runs, 1 if takes else 0)


def _as_case(spec):
    if isinstance(spec, str):
        return {"request": _request(spec)}
    spec = dict(spec)
    as_bytes = spec.pop("as_bytes", False)
    return {"request": _request(**spec), "as_bytes": as_bytes}


class LeanPathTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.results = _run_both([_as_case(spec) for _, spec, _ in _CASES])

    def test_every_case_reads_as_on_the_whole_path(self):
        for (name, spec, _), (lean, whole, *_) in zip(_CASES, self.results):
            with self.subTest(name):
                self.assertEqual(lean, whole)

    def test_the_lean_path_takes_what_it_should(self):
        for (name, spec, takes), (lean, whole, lean_runs, _) in zip(_CASES, self.results):
            with self.subTest(name):
                self.assertEqual(lean_runs, 1 if takes else 0)

    def test_the_cxx_path_reads_as_the_whole_path(self):
        _check_cxx(self, _CASES, self.results)

    def test_the_cases_say_something(self):
        # The comparison above holds trivially if both paths fail alike: a few anchors.
        by_name = {name: lean for (name, _, _), (lean, *_) in zip(_CASES, self.results)}
        self.assertEqual(by_name["print"]["stdout"], "1\n")
        self.assertEqual([e["type"] for e in by_name["print"]["events"]], ["end"])
        self.assertEqual(by_name["value"]["events"][0]["data"]["text/plain"], "42")
        self.assertEqual(by_name["exception"]["status"], 1)
        self.assertIn('File "main.py", line 2', by_name["exception"]["stderr"])
        self.assertNotIn("airlock_runner", by_name["exception"]["stderr"])
        self.assertEqual(by_name["sys.exit(3)"]["status"], 3)
        self.assertEqual(by_name["thread"]["stdout"], "main done\nthread done\n")
        self.assertEqual(by_name["atexit"]["stdout"], "hi\nbye\n")
        self.assertIn("ImportError: import of 'socket' is not allowed", by_name["import refused"]["stderr"])
        self.assertEqual(by_name["env"]["stdout"], "bar\n")
        self.assertIn("observe: import of 'socket' would be blocked",
                      by_name["observe mode with an allowlist is the whole path's"]["stderr"])
        self.assertEqual(by_name["file written"]["files"], ["out.txt"])
        self.assertEqual([e["type"] for e in by_name["file written"]["events"]], ["file", "end"])
        # Python's own depth (the whole path's is pinned to it by test_runner's
        # test_recursion_depth_is_pythons).
        code = dict((name, spec) for name, spec, _ in _CASES)["recursion depth"]
        plain = subprocess.run([PYTHON, "-I", "-c", code], capture_output=True, text=True)
        self.assertEqual(by_name["recursion depth"]["stdout"], plain.stdout)
        if HAS_MATPLOTLIB:
            kinds = [e["type"] for e in by_name["open figure"]["events"]]
            self.assertEqual(kinds, ["result", "end"])



HAS_PANDAS = _has("pandas")

_DS_PREIMPORT = ("numpy", "pandas")
_DS_CASES = [
    ("numpy print", "import numpy as np\nprint(np.arange(3).sum())", True),
    ("numpy value", "import numpy as np\nnp.arange(4)", True),
    # Two forks of one zygote draw different numbers only if each run reseeds (_reseed_after_fork).
    ("random draws are fresh per run", "import numpy as np, random\nprint(np.random.random(), random.random())", True),
    ("DataFrame value", "import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': [3, 4]})", True),
    ("DataFrame display", "import pandas as pd\ndisplay(pd.DataFrame({'a': [1]}))", True),
    ("a module not preimported is the whole path's", {"code": "print(1)", "preimport": ["numpy", "not_there"]}, False),
]


def _run_preimported(cases, preimport):
    """_run_both for a zygote that preimported `preimport`, each request naming those modules
    as its profile's do (unless the case's request says otherwise)."""
    return _run_both([_as_case({"preimport": list(preimport), **({"code": spec} if isinstance(spec, str) else spec)})
                      for _, spec, _ in cases], preimport=preimport)


@unittest.skipUnless(HAS_PANDAS, "/usr/bin/python3 has no pandas (python3-pandas)")
class LeanPathDataScienceTest(unittest.TestCase):
    """The same comparison in a zygote that preimported numpy and pandas, as data-science's."""

    @classmethod
    def setUpClass(cls):
        cls.results = _run_preimported(_DS_CASES, _DS_PREIMPORT)

    def test_every_case_reads_as_on_the_whole_path(self):
        for (name, _, takes), (lean, whole, lean_runs, _) in zip(_DS_CASES, self.results):
            with self.subTest(name):
                if name == "random draws are fresh per run":
                    self.assertNotEqual(lean["stdout"], whole["stdout"])
                    lean["stdout"] = whole["stdout"] = ""
                self.assertEqual(lean, whole)
                self.assertEqual(lean_runs, 1 if takes else 0)

    def test_the_cxx_path_reads_as_the_whole_path(self):
        _check_cxx(self, _DS_CASES, self.results, fresh_stdout=("random draws are fresh per run",))

    def test_the_cases_say_something(self):
        by_name = {name: lean for (name, _, _), (lean, *_) in zip(_DS_CASES, self.results)}
        self.assertEqual(by_name["numpy print"]["stdout"], "3\n")
        self.assertIn("text/html", by_name["DataFrame value"]["events"][0]["data"])


_PLOT_PREIMPORT = ("matplotlib.pyplot",)
_PLOT_CASES = [
    ("shown figure", "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()\nprint('x')", True),
    ("open figure", "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nprint('plotted')", True),
    ("figure as value", "import matplotlib.pyplot as plt\nfig = plt.figure()\nfig", True),
    # matplotlib's own show(), as the whole path leaves it: nothing shown, the figure stays open.
    ("no capture, shown", {"code": "import matplotlib.pyplot as plt\nplt.plot([1])\nplt.show()\n"
                                   "print(len(plt.get_fignums()))", "capture_figures": False}, True),
    ("print", "print(1)", True),
]


@unittest.skipUnless(HAS_MATPLOTLIB, "/usr/bin/python3 has no matplotlib (python3-matplotlib)")
class LeanPathPyplotPreimportedTest(unittest.TestCase):
    """In a zygote that preimported pyplot, as general's does, the lean path's pyplot.show is
    installed once in the zygote (_zygote_patch_pyplot): a run that captures figures must show
    them as the whole path does, and one that does not must get matplotlib's own show()."""

    @classmethod
    def setUpClass(cls):
        cls.results = _run_preimported(_PLOT_CASES, _PLOT_PREIMPORT)

    def test_every_case_reads_as_on_the_whole_path(self):
        for (name, _, takes), (lean, whole, lean_runs, _) in zip(_PLOT_CASES, self.results):
            with self.subTest(name):
                self.assertEqual(lean, whole)
                self.assertEqual(lean_runs, 1 if takes else 0)

    def test_the_cxx_path_reads_as_the_whole_path(self):
        _check_cxx(self, _PLOT_CASES, self.results)

    def test_the_cases_say_something(self):
        by_name = {name: lean for (name, _, _), (lean, *_) in zip(_PLOT_CASES, self.results)}
        self.assertEqual([e["type"] for e in by_name["shown figure"]["events"]], ["result", "end"])
        self.assertIn("image/png", by_name["shown figure"]["events"][0]["data"])
        self.assertEqual([e["type"] for e in by_name["no capture, shown"]["events"]], ["end"])
        self.assertEqual(by_name["no capture, shown"]["stdout"], "1\n")


# Loads the runner as the zygote does with numpy preimported, then checks how a fork reseeds
# numpy's legacy generator: prints one JSON line.
_RESEED = r'''
import json, os, sys, types
_runner = types.ModuleType("airlock_runner")
_runner.__file__ = sys.argv[1]
with open(sys.argv[1], "rb") as f:
    exec(compile(f.read(), sys.argv[1], "exec"), _runner.__dict__)
_runner.complete_site()
assert not _runner.zygote_preimport(["numpy"])
import numpy
out = {"mapped": _runner._mt_state is not None, "zygote": numpy.random.random()}

def child(seed):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        _runner._reseed_after_fork(seed)
        state = numpy.random.get_state()
        os.write(w, json.dumps([numpy.random.random(), int(state[2]), int(state[3]),
                                state[1][:4].tolist()]).encode())
        os._exit(0)
    os.close(w)
    data = os.read(r, 4096)
    os.waitpid(pid, 0)
    return json.loads(data)

out["forks"] = [child(None), child(None)]
out["seeded"] = child(5)
numpy.random.seed(5)
out["numpy seed 5"] = numpy.random.random()
print(json.dumps(out))
'''


@unittest.skipUnless(_has("numpy"), "/usr/bin/python3 has no numpy (python3-numpy)")
class NumpyReseedTest(unittest.TestCase):
    """A run reseeds numpy's legacy generator by writing fresh words from the kernel straight
    into its C state, where the zygote found it (_zygote_map_numpy_state): each fork must draw
    its own numbers, none the zygote's, and a seeded run numpy's own for that seed."""

    def test_each_fork_draws_its_own_numbers(self):
        proc = subprocess.run([PYTHON, "-I", "-B", "-S", "-c", _RESEED, str(RUNNER)], capture_output=True,
                              text=True, timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        out = json.loads(proc.stdout)
        self.assertTrue(out["mapped"], "the zygote did not map numpy's generator state (Debian 12's numpy)")
        (a, a_pos, a_gauss, a_key), (b, b_pos, b_gauss, b_key) = out["forks"]
        self.assertNotEqual(a, b)
        self.assertNotEqual(a_key, b_key)
        self.assertNotIn(out["zygote"], (a, b))
        # Read before the draw, as set_state(key, 624) leaves it: the key regenerated at the first
        # draw, no cached gaussian.
        self.assertEqual((a_pos, a_gauss, b_pos, b_gauss), (624, 0, 624, 0))
        self.assertEqual(out["seeded"][0], out["numpy seed 5"])


if __name__ == "__main__":
    unittest.main()
