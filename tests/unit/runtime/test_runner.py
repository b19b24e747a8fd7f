"""Tests of runtime/python/airlock_runner.py, run as the server runs it: a subprocess of
/usr/bin/python3 -I -B -S with a config file and the result channel passed as an inherited fd.

Run: /usr/bin/python3 -m unittest discover -s tests/unit/runtime -v
(AIRLOCK_SOURCE_DIR overrides where the runner is looked up; numpy/matplotlib/pandas parts skip
when those modules are missing.)
"""

import base64
import json
import os
import shutil
import subprocess
import tempfile
import unittest
from pathlib import Path

PYTHON = "/usr/bin/python3"
SOURCE_DIR = Path(os.environ.get("AIRLOCK_SOURCE_DIR") or Path(__file__).resolve().parents[3])
RUNNER = SOURCE_DIR / "runtime" / "python" / "airlock_runner.py"


def _has(module):
    """Whether /usr/bin/python3 (not necessarily the interpreter running the tests) has it."""
    return subprocess.run([PYTHON, "-I", "-c", f"import {module}"],
                          capture_output=True).returncode == 0


HAS_NUMPY = _has("numpy")
HAS_MATPLOTLIB = _has("matplotlib")
HAS_PANDAS = _has("pandas")

_shared = None  # HOME and MPLCONFIGDIR shared by all runs, so matplotlib caches fonts once


def setUpModule():
    global _shared
    _shared = tempfile.mkdtemp(prefix="airlock-runner-test-")
    os.mkdir(os.path.join(_shared, "mpl"))


def tearDownModule():
    shutil.rmtree(_shared, ignore_errors=True)


class Run:
    def __init__(self, proc, raw_events):
        self.rc = proc.returncode
        self.stdout = proc.stdout.decode("utf-8", "replace")
        self.stderr = (proc.stderr or b"").decode("utf-8", "replace")
        self.raw_events = raw_events
        self.events = [json.loads(line) for line in raw_events.splitlines()]
        # The end event's peak memory varies from run to run: checked here, then left out of
        # the comparisons below.
        for e in self.events:
            if e.get("type") == "end":
                peak = e.pop("max_rss_kb")
                assert type(peak) is int and peak > 1000, f"implausible max_rss_kb {peak!r}"

    def of_type(self, kind):
        return [e for e in self.events if e["type"] == kind]

    @property
    def results(self):
        return self.of_type("result")

    @property
    def main(self):
        mains = [e for e in self.results if e["is_main_result"]]
        return mains[0]["data"] if mains else None

    @property
    def error(self):
        errors = self.of_type("error")
        return errors[0] if errors else None

    def __repr__(self):
        return f"Run(rc={self.rc}, stdout={self.stdout!r}, stderr={self.stderr!r}, " \
               f"events={self.raw_events[:2000]!r})"


def run(code, pass_channel=True, merge_stderr=False, **config):
    """Runs code through the runner; returns what it printed, its events and exit status."""
    with tempfile.TemporaryDirectory() as tmp:
        code_path = os.path.join(tmp, "main.py")
        with open(code_path, "wb") as f:
            f.write(code.encode("utf-8") if isinstance(code, str) else code)
        result_file = tempfile.TemporaryFile(dir=tmp)
        cfg = {
            "code_path": code_path,
            "filename": "main.py",
            "allowed_imports": None,
            "runtime_imports_mode": "enforce",
            "blocklist": [],
            "preimport": [],
            "capture_figures": True,
            "result_fd": result_file.fileno(),
            "max_result_bytes": 1 << 20,
            "max_results": 16,
            "seed": 1234,
        }
        cfg.update(config)
        cfg_path = os.path.join(tmp, "config.json")
        with open(cfg_path, "w") as f:
            json.dump(cfg, f)
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": _shared,
               "MPLCONFIGDIR": os.path.join(_shared, "mpl")}
        proc = subprocess.run(
            [PYTHON, "-I", "-B", "-S", str(RUNNER), cfg_path], cwd=tmp, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
            pass_fds=(result_file.fileno(),) if pass_channel else (), timeout=120)
        result_file.seek(0)
        raw = result_file.read()
        result_file.close()
        raw.decode("ascii")  # the channel is ASCII by contract
        return Run(proc, raw.decode("ascii"))


def python_oracle(code):
    """(exit status, stderr) of plain `python3 -I main.py`, with its path shown as main.py."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "main.py")
        with open(path, "wb") as f:
            f.write(code.encode("utf-8") if isinstance(code, str) else code)
        proc = subprocess.run([PYTHON, "-I", "-B", path], cwd=tmp, capture_output=True,
                              env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}, timeout=60)
        return proc.returncode, proc.stderr.decode("utf-8", "replace").replace(path, "main.py")


class MainResultTest(unittest.TestCase):
    def test_last_expression_is_the_main_result_not_stdout(self):
        r = run("1+1\n")
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(r.stdout, "")
        self.assertEqual(r.events, [
            {"type": "result", "is_main_result": True, "data": {"text/plain": "2"}},
            {"type": "end", "exit_code": 0},
        ])

    def test_assignment_then_name(self):
        r = run("x=5\nx")
        self.assertEqual(r.main, {"text/plain": "5"})

    def test_prints_and_result(self):
        r = run("print('hi')\nfor i in range(2):\n    print(i)\n'done'\n")
        self.assertEqual(r.stdout, "hi\n0\n1\n")
        self.assertEqual(r.main, {"text/plain": "'done'"})

    def test_trailing_semicolon_suppresses_display(self):
        r = run("x = 3\nx ;  # quiet\n")
        self.assertEqual(r.results, [])
        self.assertEqual(r.rc, 0)

    def test_none_and_statements_give_no_result(self):
        for code in ("None\n", "print(1)\n", "x = 1\n", "if True:\n    5\n", ""):
            with self.subTest(code=code):
                r = run(code)
                self.assertEqual(r.results, [], r)
                self.assertEqual(r.events[-1], {"type": "end", "exit_code": 0})

    def test_multiline_last_expression_keeps_user_line_numbers(self):
        r = run("a = [1,\n     2]\n(sum(a) +\n 1/0)\n")
        self.assertEqual(r.rc, 1)
        self.assertIn('File "main.py", line 4, in <module>', r.stderr)
        self.assertEqual(r.stderr, python_oracle("a = [1,\n     2]\n(sum(a) +\n 1/0)\n")[1])

    def test_rich_reprs(self):
        code = (
            "class Rich:\n"
            "    def __repr__(self): return 'Rich()'\n"
            "    def _repr_html_(self): return '<b>rich</b>'\n"
            "    def _repr_png_(self): return b'\\x89PNG fake'\n"
            "    def _repr_markdown_(self): return None\n"
            "    def _repr_json_(self): return {'a': 1}\n"
            "    def _repr_svg_(self): raise ValueError('broken formatter is skipped')\n"
            "Rich()\n")
        r = run(code)
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(r.main["text/plain"], "Rich()")
        self.assertEqual(r.main["text/html"], "<b>rich</b>")
        self.assertEqual(base64.b64decode(r.main["image/png"]), b"\x89PNG fake")
        self.assertEqual(r.main["application/json"], {"a": 1})
        self.assertNotIn("text/markdown", r.main)
        self.assertNotIn("image/svg+xml", r.main)

    def test_repr_mimebundle_wins(self):
        code = ("class Chart:\n"
                "    def _repr_mimebundle_(self, include=None, exclude=None):\n"
                "        return {'application/vnd.chart+json': {'x': [1, 2]},\n"
                "                'text/html': '<div>bundle</div>', 'image/png': b'PNG'}\n"
                "    def _repr_html_(self): return '<div>method</div>'\n"
                "    def _repr_markdown_(self): return '*md*'\n"
                "Chart()\n")
        r = run(code)
        self.assertEqual(r.main["text/html"], "<div>bundle</div>")
        self.assertEqual(r.main["text/markdown"], "*md*")
        self.assertEqual(r.main["application/vnd.chart+json"], {"x": [1, 2]})
        self.assertEqual(base64.b64decode(r.main["image/png"]), b"PNG")
        self.assertTrue(r.main["text/plain"].startswith("<__main__.Chart object at "))

    def test_class_as_result_is_plain_text(self):
        r = run("class K:\n    def _repr_html_(self): return 'x'\nK\n")
        self.assertEqual(r.main, {"text/plain": "<class '__main__.K'>"})

    def test_failing_repr_is_an_error(self):
        r = run("class Bad:\n    def __repr__(self):\n"
                "        raise RuntimeError('no repr')\nBad()\n")
        self.assertEqual(r.rc, 1)
        self.assertEqual(r.results, [])
        self.assertEqual(r.error["name"], "RuntimeError")
        self.assertIn('File "main.py", line 3, in __repr__', r.error["traceback"])
        self.assertNotIn("airlock_runner", r.error["traceback"])

    def test_top_level_await(self):
        r = run("import asyncio\nawait asyncio.sleep(0)\nasync def f():\n    return 41\n"
                "(await f()) + 1\n")
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(r.main, {"text/plain": "42"})

    def test_top_level_await_error_shows_only_user_frames(self):
        r = run("import asyncio\nasync def f():\n    raise KeyError('k')\nawait f()\n")
        self.assertEqual(r.rc, 1)
        self.assertEqual(r.stderr, "Traceback (most recent call last):\n"
                                   '  File "main.py", line 4, in <module>\n'
                                   "    await f()\n"
                                   '  File "main.py", line 3, in f\n'
                                   "    raise KeyError('k')\n"
                                   "KeyError: 'k'\n")

    def test_user_namespace_is_main(self):
        code = ("import pickle, sys\n"
                "class Point:\n    def __init__(self, x): self.x = x\n"
                "p = pickle.loads(pickle.dumps(Point(7)))\n"
                "(__name__, sys.argv, p.x, sys.modules['__main__'].Point is Point)\n")
        r = run(code)
        self.assertEqual(r.main, {"text/plain": "('__main__', ['main.py'], 7, True)"}, r)

    def test_atexit_and_threads_finish_before_the_end_event(self):
        code = ("import atexit, threading, time\n"
                "atexit.register(print, 'atexit ran')\n"
                "def work():\n    time.sleep(0.2)\n    print('thread done')\n"
                "threading.Thread(target=work).start()\n"
                "'main'\n")
        r = run(code)
        self.assertEqual(r.stdout, "thread done\natexit ran\n")
        self.assertEqual(r.main, {"text/plain": "'main'"})
        self.assertEqual(r.events[-1], {"type": "end", "exit_code": 0})


class ErrorTest(unittest.TestCase):
    PROGRAMS = {
        "nested": "def f():\n    return 1/0\n\nf()\n",
        "last_expression": "x = 0\n1/x\n",
        "library_frames": "import json\njson.loads('{')\n",
        "chained": ("try:\n    {}['k']\nexcept KeyError as e:\n"
                    "    raise ValueError('bad') from e\n"),
        "during_handling": "try:\n    1/0\nexcept ZeroDivisionError:\n    undefined_name\n",
        "after_output": "print('before')\nraise RuntimeError('boom')\n",
        "exception_group": "raise ExceptionGroup('many', [ValueError(1), TypeError(2)])\n",
        "recursion": "def r(n):\n    return r(n + 1)\nr(0)\n",
    }

    def test_traceback_is_what_python_prints(self):
        for label, code in self.PROGRAMS.items():
            with self.subTest(program=label):
                r = run(code)
                rc, expected = python_oracle(code)
                self.assertEqual(r.rc, rc)
                self.assertEqual(r.stderr, expected)
                self.assertEqual(r.error["traceback"], expected)
                self.assertNotIn(str(RUNNER), r.stderr)
                self.assertNotIn("airlock_runner", r.raw_events)

    def test_error_event_fields(self):
        r = run("print('out')\n\nraise ValueError('bad value')\n")
        self.assertEqual(r.rc, 1)
        self.assertEqual(r.stdout, "out\n")
        self.assertEqual(r.events[-2:], [
            {"type": "error", "name": "ValueError", "value": "bad value",
             "traceback": "Traceback (most recent call last):\n"
                          '  File "main.py", line 3, in <module>\n'
                          "    raise ValueError('bad value')\n"
                          "ValueError: bad value\n"},
            {"type": "end", "exit_code": 1},
        ])

    def test_syntax_check_reports_pythons_syntax_error_and_runs_nothing(self):
        r = run("print('ran')\nprint((1\n", syntax_check="SyntaxError: '(' was never closed (line 2)")
        self.assertEqual(r.rc, 1, r)
        self.assertEqual(r.stdout, "")
        self.assertEqual(r.error["name"], "SyntaxError")
        self.assertEqual(r.error["value"], "'(' was never closed (main.py, line 2)")
        plain = run("print('ran')\nprint((1\n")
        self.assertEqual((r.rc, r.stdout, r.stderr, r.events), (plain.rc, plain.stdout, plain.stderr, plain.events),
                         "the same report as a plain run's")

    def test_syntax_check_of_code_python_compiles_runs_nothing(self):
        # The analyzer saw a syntax error Python does not: the code is not run either.
        r = run("print('ran')\n", syntax_check="SyntaxError: made up (line 1)")
        self.assertEqual(r.rc, 1, r)
        self.assertEqual(r.stdout, "")
        self.assertEqual(r.error["name"], "AirlockAnalyzerError")
        self.assertIn("SyntaxError: made up (line 1)", r.error["value"])
        self.assertIn("was not run", r.stderr)

    def test_syntax_errors_are_what_python_prints(self):
        programs = {
            "unclosed": "x = (\n",
            "second_line": "x = 1\ny = = 2\n",
            "compile_stage": "x = 1\nreturn x\n",
            "indentation": "if True:\nprint(1)\n",
            "unterminated_string": "s = 'abc\n",
            "keyword_argument": "f(**x, *y)\n",
        }
        for label, code in programs.items():
            with self.subTest(program=label):
                r = run(code)
                rc, expected = python_oracle(code)
                self.assertEqual(r.rc, rc)
                self.assertEqual(r.stderr, expected)
                self.assertIn(r.error["name"], ("SyntaxError", "IndentationError"))
                self.assertEqual(r.error["traceback"], expected)
                self.assertEqual(r.results, [])

    def test_null_byte(self):
        # Debian's 3.11.2 garbles such a line; 3.12 (and this runner) refuse the file.
        r = run("x = 1\ny = 2\0\n")
        self.assertEqual(r.rc, 1)
        self.assertEqual(r.stderr, '  File "main.py", line 2\n    y = 2\n'
                                   "SyntaxError: source code cannot contain null bytes\n")
        self.assertEqual(r.error["name"], "SyntaxError")

    def test_recursion_depth_is_pythons(self):
        code = "import sys\ndef d(n):\n    try:\n        return d(n + 1)\n" \
               "    except RecursionError:\n        return n\nd(1)\n"
        r = run(code)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "main.py")
            with open(path, "w") as f:
                f.write(code.replace("d(1)\n", "print(d(1))\n"))
            plain = subprocess.run([PYTHON, "-I", path], capture_output=True, text=True)
        self.assertEqual(r.main["text/plain"], plain.stdout.strip())

    def test_invalid_utf8(self):
        code = b"x = 1\ny = '\xff'\n"
        r = run(code)
        rc, expected = python_oracle(code)
        self.assertEqual(r.rc, 1)
        self.assertEqual(r.stderr, expected)
        self.assertEqual(r.error["name"], "SyntaxError")
        self.assertIn("Non-UTF-8 code starting with '\\xff' in file main.py on line 2",
                      r.error["value"])
        self.assertEqual(r.events[-1], {"type": "end", "exit_code": 1})

    def test_invalid_utf8_after_a_bom_names_that_byte(self):
        # The BOM is not part of the text: the byte and line named are the invalid ones.
        # (python3 itself, given a BOM, reports a "(unicode error)" of the token instead.)
        r = run(b"\xef\xbb\xbfx = 1\ny = '\xfe'\n")
        self.assertEqual(r.rc, 1)
        self.assertEqual(r.error["name"], "SyntaxError")
        self.assertIn("Non-UTF-8 code starting with '\\xfe' in file main.py on line 2", r.error["value"])

    def test_utf8_bom_and_crlf_are_accepted(self):
        r = run(b"\xef\xbb\xbfx = 'caf\xc3\xa9'\r\nx\r\n")
        self.assertEqual(r.main, {"text/plain": "'caf\u00e9'"}, r)

    def test_lone_surrogates_do_not_break_the_channel(self):
        r = run("raise ValueError('\\udcff')\n")
        self.assertEqual(r.rc, 1)
        self.assertNotIn("\\udcff", r.raw_events.lower().replace("\\\\udcff", ""))
        self.assertEqual(r.error["value"], "\\udcff")


class ExitTest(unittest.TestCase):
    def test_system_exit_codes(self):
        cases = [
            ("raise SystemExit(42)\n", 42, ""),
            ("exit(3)\n", 3, ""),
            ("quit()\n", 0, ""),
            ("import sys\nprint('bye')\nsys.exit()\n", 0, ""),
            ("raise SystemExit('msg')\n", 1, "msg\n"),
            ("import sys\nsys.exit(263)\n", 7, ""),
            ("def f():\n    raise SystemExit(5)\nf()\n", 5, ""),
        ]
        for code, code_expected, stderr in cases:
            with self.subTest(code=code):
                r = run(code)
                self.assertEqual(r.rc, code_expected, r)
                self.assertEqual(python_oracle(code)[0], code_expected)
                self.assertEqual(r.stderr, stderr)
                self.assertIsNone(r.error)
                self.assertEqual(r.events[-1], {"type": "end", "exit_code": code_expected})
        self.assertEqual(run("print('bye')\nraise SystemExit(0)\n").stdout, "bye\n")


class SiteTest(unittest.TestCase):
    """The runner starts with -S (no .pth files, no sitecustomize: most of a python3 start-up)
    and completes what a program needs of site itself."""

    def test_site_packages_help_and_builtins_without_site(self):
        code = ("import builtins, site, sys\n"
                "print(sys.flags.no_site)\n"
                "print(sorted(d for d in site.getsitepackages() if d in sys.path) == "
                "sorted(d for d in site.getsitepackages() if __import__('os').path.isdir(d)))\n"
                "print(callable(help), 'Python Software Foundation' in str(copyright), "
                "callable(credits), callable(license), callable(exit), callable(quit))\n"
                "print('sitecustomize' in sys.modules)\n")
        r = run(code)
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(r.stdout, "1\nTrue\nTrue True True True True True\nFalse\n", r)

    def test_dist_packages_import(self):
        probe = subprocess.run([PYTHON, "-I", "-c", "import numpy"], capture_output=True)
        if probe.returncode != 0:
            self.skipTest("python3-numpy is not installed")
        r = run("import numpy\nprint(numpy.__file__.startswith('/usr/lib/python3/dist-packages/'))\n")
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(r.stdout, "True\n", r)


class ImportAllowlistTest(unittest.TestCase):
    def assertBlocked(self, code, module="os", **config):
        config.setdefault("allowed_imports", ["math", "json"])
        r = run(code, **config)
        self.assertEqual(r.rc, 1, r)
        self.assertEqual(r.error["name"], "ImportError")
        self.assertEqual(r.error["value"],
                         f"import of '{module}' is not allowed (not in allowed imports)")
        self.assertNotIn("airlock_runner", r.stderr)
        return r

    def test_blocked_forms(self):
        r = self.assertBlocked("import math\nimport os\n")
        self.assertEqual(r.stderr, "Traceback (most recent call last):\n"
                                   '  File "main.py", line 2, in <module>\n'
                                   "    import os\n"
                                   "ImportError: import of 'os' is not allowed "
                                   "(not in allowed imports)\n")
        self.assertBlocked("from os import path\n")
        self.assertBlocked("__import__('os')\n")
        self.assertBlocked("import os.path\n", module="os.path")
        self.assertBlocked("def f():\n    import os\nf()\n")
        self.assertBlocked("list(map(lambda _: __import__('os'), [1]))\n")
        self.assertBlocked("exec('import os')\n")
        self.assertBlocked("eval(compile('__import__(\"os\")', '<x>', 'eval'))\n")
        self.assertBlocked("import importlib\nimportlib.import_module('os')\n",
                           allowed_imports=["importlib"])
        self.assertBlocked("import importlib\nimportlib.__import__('os')\n",
                           allowed_imports=["importlib"])

    def test_preimported_module_is_still_blocked_by_name(self):
        self.assertBlocked("import json\n", module="json", allowed_imports=["math"],
                           preimport=["json"])

    def test_allowed_modules_work_with_their_internal_imports(self):
        r = run("import json, math\njson.dumps({'pi': round(math.pi, 2)})\n",
                allowed_imports=["math", "json"])
        self.assertEqual(r.main, {"text/plain": "'{\"pi\": 3.14}'"}, r)
        # C code importing on the user's behalf (_strptime) and a lazy import inside a library
        # function called by the user (warnings -> linecache).
        r = run("import datetime, warnings\nwarnings.warn('careful')\n"
                "datetime.datetime.strptime('2024', '%Y').year\n",
                allowed_imports=["datetime", "warnings"])
        self.assertEqual(r.main, {"text/plain": "2024"}, r)
        self.assertIn("UserWarning: careful", r.stderr)

    def test_future_imports_always_work(self):
        r = run("from __future__ import annotations\ndef f(x: Undefined) -> int:\n"
                "    return 1\nf(2)\n", allowed_imports=[])
        self.assertEqual(r.main, {"text/plain": "1"}, r)

    def test_bad_import_arguments_fail_as_in_python(self):
        r = run("__import__(42)\n", allowed_imports=["math"])
        self.assertEqual(r.error["name"], "TypeError", r)

    def test_relative_import_fails_normally(self):
        r = run("from . import x\n", allowed_imports=["math"])
        self.assertEqual(r.error["name"], "ImportError")
        self.assertEqual(r.error["value"], "attempted relative import with no known parent package")

    def test_observe_mode_warns_and_allows(self):
        r = run("import os\nimport os\nfrom os import path\nos.sep\n", allowed_imports=["math"],
                runtime_imports_mode="observe")
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(r.main, {"text/plain": "'/'"})
        self.assertEqual(r.stderr, "airlock: observe: import of 'os' would be blocked\n")

    def test_null_allowlist_allows_everything(self):
        r = run("import os, subprocess\nos.sep\n", allowed_imports=None)
        self.assertEqual(r.main, {"text/plain": "'/'"}, r)

    @unittest.skipUnless(HAS_NUMPY, "numpy is not installed")
    def test_numpy_imports_its_internals(self):
        code = "import numpy as np\nint(np.arange(4).sum())\n"
        for preimport in ([], ["numpy"]):
            with self.subTest(preimport=preimport):
                r = run(code, allowed_imports=["numpy"], preimport=preimport)
                self.assertEqual(r.main, {"text/plain": "6"}, r)
        self.assertBlocked("import numpy\nimport os\n", allowed_imports=["numpy"],
                           preimport=["numpy"])

    @unittest.skipUnless(HAS_PANDAS, "pandas is not installed")
    def test_pandas_works_and_shows_html(self):
        r = run("import pandas as pd\ndf = pd.DataFrame({'a': [1, 2]})\n"
                "df['t'] = pd.to_datetime(['2024-01-01', '2024-01-02'])\ndf\n",
                allowed_imports=["pandas"])
        self.assertEqual(r.rc, 0, r)
        self.assertIn("text/html", r.main)
        self.assertIn("2024-01-02", r.main["text/plain"])


@unittest.skipUnless(HAS_MATPLOTLIB, "matplotlib is not installed")
class FigureTest(unittest.TestCase):
    def assertPng(self, data):
        self.assertEqual(data["text/plain"], "<Figure size 640x480 with 1 Axes>")
        self.assertTrue(base64.b64decode(data["image/png"]).startswith(b"\x89PNG\r\n\x1a\n"))

    def test_show_and_open_figures_become_display_results(self):
        r = run("import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()\n"
                "print('between')\nplt.figure()\nplt.plot([2, 1])\n'last'\n",
                allowed_imports=["matplotlib"])
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(r.stdout, "between\n")
        self.assertEqual([e["is_main_result"] for e in r.results], [False, False, True])
        self.assertPng(r.results[0]["data"])
        self.assertPng(r.results[1]["data"])
        self.assertNotEqual(r.results[0]["data"]["image/png"], r.results[1]["data"]["image/png"])
        self.assertEqual(r.main, {"text/plain": "'last'"})

    def test_figure_as_last_expression_is_shown_once(self):
        r = run("import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.plot([1, 3])\nfig\n",
                preimport=["matplotlib.pyplot"])
        self.assertEqual(len(r.results), 1, r)
        self.assertTrue(r.results[0]["is_main_result"])
        self.assertPng(r.main)

    def test_figures_are_kept_when_the_cell_fails(self):
        r = run("import matplotlib.pyplot as plt\nplt.plot([1])\n1/0\n")
        self.assertEqual(r.rc, 1)
        self.assertEqual(len(r.results), 1)
        self.assertEqual(r.error["name"], "ZeroDivisionError")

    @unittest.skipUnless(HAS_PANDAS, "pandas is not installed")
    def test_pandas_plot_imports_matplotlib_itself(self):
        # matplotlib is not in the allowlist: pandas imports it on the user's behalf.
        r = run("import pandas as pd\npd.Series([1, 3, 2]).plot();\n",
                allowed_imports=["pandas"])
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(len(r.results), 1)
        self.assertPng(r.results[0]["data"])

    def test_capture_off(self):
        r = run("import matplotlib.pyplot as plt\nplt.plot([1])\nplt.show()\n",
                capture_figures=False)
        self.assertEqual(r.results, [], r)
        self.assertEqual(r.rc, 0)

    def test_max_results_truncates_displays_first(self):
        r = run("import matplotlib.pyplot as plt\nfor i in range(5):\n"
                "    plt.plot([i])\n    plt.show()\n'done'\n", max_results=3)
        self.assertEqual([e["is_main_result"] for e in r.results], [False, False, True], r)
        self.assertEqual(r.main, {"text/plain": "'done'"})
        self.assertEqual(r.of_type("truncated"), [{"type": "truncated", "what": "results",
                                                   "dropped": 3}])
        self.assertEqual(r.events[-1], {"type": "end", "exit_code": 0})


class OutputTest(unittest.TestCase):
    CODE = "import sys\nprint('a')\nprint('b', file=sys.stderr)\nprint('c')\n1/0\n"

    def test_line_buffered_keeps_order(self):
        # stdout is line-buffered in every run: each line is written when printed, so the
        # interleaving with stderr is the program's (a block-buffered stdout printed b first).
        r = run(self.CODE, merge_stderr=True)
        self.assertTrue(r.stdout.startswith("a\nb\nc\nTraceback"), r)

    def test_a_line_is_written_before_the_process_is_killed(self):
        # What was printed survives a SIGKILL (a timeout, an out-of-memory kill): a
        # block-buffered stdout lost it.
        r = run("import os, signal\nprint('before')\nos.kill(os.getpid(), signal.SIGKILL)\n")
        self.assertEqual(r.rc, -9, r)
        self.assertEqual(r.stdout, "before\n")

    def test_streamed_traceback_is_the_error_event_only(self):
        # E2B's shape: a streamed run's traceback arrives once, as the error event.
        r = run(self.CODE, stream=True)
        self.assertEqual(r.stdout, "a\nc\n")
        self.assertEqual(r.stderr, "b\n")
        self.assertEqual(r.error["name"], "ZeroDivisionError")
        self.assertIn("1/0", r.error["traceback"])
        plain = run(self.CODE)
        self.assertIn("ZeroDivisionError: division by zero", plain.stderr)

    def test_output_is_utf8(self):
        r = run("print('caf\u00e9 \u2713')\n")
        self.assertEqual(r.stdout, "caf\u00e9 \u2713\n")


class CapsTest(unittest.TestCase):
    def test_oversized_main_result_is_cut(self):
        r = run("'x' * 10000\n", max_result_bytes=1000)
        text = r.main["text/plain"]
        self.assertTrue(text.startswith("'xxx"))
        self.assertTrue(text.endswith("... [truncated by airlock]"))
        self.assertLessEqual(len(r.raw_events.splitlines()[0]) + 1, 1000)
        self.assertEqual(r.of_type("truncated"), [{"type": "truncated", "what": "results",
                                                   "dropped": 0}])

    def test_oversized_rich_repr_is_dropped_first(self):
        r = run("class R:\n    def __repr__(self): return 'R'\n"
                "    def _repr_html_(self): return 'h' * 5000\nR()\n", max_result_bytes=1000)
        self.assertEqual(r.main, {"text/plain": "R"})
        self.assertEqual(len(r.of_type("truncated")), 1)

    def test_max_results_zero(self):
        r = run("1\n", max_results=0)
        self.assertEqual(r.results, [])
        self.assertEqual(r.of_type("truncated"), [{"type": "truncated", "what": "results",
                                                   "dropped": 1}])


class ChannelTest(unittest.TestCase):
    def test_result_fd_is_closed_before_user_code(self):
        # The config names the fd the test passed; user code must find it closed.
        code = ("import json, os\n"
                "fd = json.load(open('config.json'))['result_fd']\n"
                "try:\n    os.write(fd, b'{\"type\":\"end\",\"exit_code\":0}\\n')\n"
                "    print('wrote')\nexcept OSError as e:\n    print('closed', e.errno)\n")
        r = run(code)
        self.assertEqual(r.stdout, "closed 9\n", r)
        self.assertEqual(r.events[-1], {"type": "end", "exit_code": 0})

    def test_pipe_channel_larger_than_the_pipe_buffer(self):
        # The server reads the channel as a pipe while the run goes on; a result bigger than the
        # pipe buffer must arrive whole through partial writes.
        import threading

        read_fd, write_fd = os.pipe()
        chunks = []
        reader = threading.Thread(target=lambda: chunks.extend(iter(
            lambda: os.read(read_fd, 65536), b"")))
        reader.start()
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, "main.py"), "w") as f:
                f.write("'y' * 300000\n")
            with open(os.path.join(tmp, "config.json"), "w") as f:
                json.dump({"code_path": os.path.join(tmp, "main.py"), "result_fd": write_fd}, f)
            proc = subprocess.run([PYTHON, "-I", "-B", "-S", str(RUNNER), "config.json"], cwd=tmp,
                                  pass_fds=(write_fd,), capture_output=True, timeout=60)
        os.close(write_fd)
        reader.join(timeout=60)
        os.close(read_fd)
        events = [json.loads(line) for line in b"".join(chunks).splitlines()]
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(len(events[0]["data"]["text/plain"]), 300002)
        self.assertEqual(events[-1]["type"], "end")
        self.assertEqual(events[-1]["exit_code"], 0)

    def test_no_channel_when_the_fd_is_not_open(self):
        r = run("print('alone')\n1\n", pass_channel=False)
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(r.stdout, "alone\n")
        self.assertEqual(r.events, [])
        self.assertEqual(run("2\n", result_fd=None).rc, 0)

    def test_bad_config_exits_2(self):
        r = run("1\n", runtime_imports_mode="sometimes")
        self.assertEqual(r.rc, 2)
        self.assertIn("airlock: runner config error: runtime_imports_mode", r.stderr)
        self.assertEqual(r.error["name"], "AirlockConfigError")
        self.assertEqual(r.events[-1], {"type": "end", "exit_code": 2})
        r = run("1\n", code_path="/nonexistent/main.py")
        self.assertEqual(r.rc, 2)
        self.assertIn("cannot read code_path", r.stderr)


class SeedTest(unittest.TestCase):
    def draw(self, seed, code):
        r = run(code, seed=seed)
        self.assertEqual(r.rc, 0, r)
        return r.main["text/plain"]

    def test_random_is_reseeded(self):
        code = "import random\n[random.random() for _ in range(3)]\n"
        self.assertEqual(self.draw(1, code), self.draw(1, code))
        self.assertNotEqual(self.draw(1, code), self.draw(2, code))

    @unittest.skipUnless(HAS_NUMPY, "numpy is not installed")
    def test_numpy_is_reseeded_preimported_or_not(self):
        code = "import numpy as np\nnp.random.random(3).tolist()\n"
        seed = 2 ** 40 + 5
        expected = run("import numpy as np\n"
                       f"np.random.RandomState({seed % 2 ** 32}).random_sample(3).tolist()\n")
        for preimport in ([], ["numpy"]):
            with self.subTest(preimport=preimport):
                r = run(code, seed=seed, preimport=preimport)
                self.assertEqual(r.main, expected.main, r)
        self.assertNotEqual(self.draw(1, code), self.draw(2, code))


class ProgramTest(unittest.TestCase):
    """`program`: the runner as the launcher of another language's program (JavaScript, bash)."""

    def test_files_streams_and_exit_status(self):
        import base64

        script = ("cat data/in.txt; echo err >&2; tr a-z A-Z < data/in.txt > out.txt\n"
                  "ls /proc/self/fd | tr '\\n' ' '; echo\n"
                  "exit 3\n")
        r = run(script, program=["/bin/bash", "main.py"], max_out_files=8, max_out_bytes=1000,
                files=[{"path": "data/in.txt", "content": base64.b64encode(b"abc\n").decode()}])
        self.assertEqual(r.rc, 3, r)
        lines = r.stdout.splitlines()
        self.assertEqual(lines[0], "abc")
        self.assertEqual(r.stderr, "err\n")
        # The program holds the standard streams and nothing else of the runner's: not the
        # result channel (the fd ls itself opened for /proc/self/fd is the 4th).
        self.assertEqual(len(lines[1].split()), 4, lines[1])
        self.assertEqual([e["type"] for e in r.events], ["file", "end"], r)
        self.assertEqual(r.events[0]["path"], "out.txt")  # data/in.txt was not changed
        self.assertEqual(base64.b64decode(r.events[0]["content"]), b"ABC\n")
        self.assertEqual(r.events[1], {"type": "end", "exit_code": 3})
        self.assertIsNone(r.error)  # no error event for other languages

    def test_a_program_killed_by_a_signal_kills_the_runner_with_it(self):
        r = run("kill -TERM $$\n", program=["/bin/bash", "main.py"])
        self.assertEqual(r.rc, -15, r)  # the run's status is the program's
        self.assertEqual(r.events, [{"type": "end", "exit_code": 143}])

    def test_bad_program_is_a_config_error(self):
        for program in (["bash"], [], "/bin/bash", ["/bin/bash", 3]):
            with self.subTest(program=program):
                r = run("exit 0\n", program=program)
                self.assertEqual(r.rc, 2, r)
                self.assertEqual(r.error["name"], "AirlockConfigError")
        r = run("exit 0\n", program=["/nonexistent/interpreter"])
        self.assertEqual(r.rc, 2, r)
        self.assertIn("cannot start", r.error["value"])


if __name__ == "__main__":
    unittest.main()
