"""Cells run as Jupyter runs them (issue 22, item 3), through real HTTP and real sandboxes, in
both modes (AIRLOCK_E2E_MODE=cold and =warm): a notebook-indented cell, display() and rich
reprs in order with the last expression's result last, PIL images as PNG, a DataFrame's E2B
data, a matplotlib figure's E2B chart, and env vars per execution and per session, on
POST /v1/execute, POST /execute and the session routes (sessions are warm runs: the warm
mode covers them). What a request may not set is refused with the variable named, and a run's
env never reaches the next run.
"""

import base64
import json
import unittest

from airlock_server import AirlockServer, assert_mode, expected_mode

server = None
PNG = b"\x89PNG\r\n\x1a\n"


def setUpModule():
    global server
    server = AirlockServer().start()


def tearDownModule():
    if server:
        server.cleanup()


def run(code, profile="general", **fields):
    status, body = server.execute(code, path="/v1/execute", profile=profile, **fields)
    return status, body


def ok(test, code, **fields):
    status, body = run(code, **fields)
    test.assertEqual(status, 200, body)
    test.assertEqual(body["exit_code"], 0, body)
    assert_mode(test, body)
    return body


class IndentedCellTest(unittest.TestCase):
    CELL = "\n        total = 0\n        for i in range(4):\n            total += i\n\n        total * 7\n        "

    def test_an_indented_cell_runs_on_both_routes(self):
        body = ok(self, self.CELL)
        self.assertEqual(body["result"], "42")
        self.assertEqual(body["warnings"], [])
        status, compat = server.execute(self.CELL, path="/execute", profile="general")
        self.assertEqual((status, compat["result"]), (200, "42"), compat)

    def test_a_profile_that_analyzes_reads_the_dedented_cell(self):
        # minimal's analyzer enforces: "unexpected indent" would have refused the cell.
        body = ok(self, "\n    import math\n    math.floor(2.5)\n", profile="minimal")
        self.assertEqual(body["result"], "2")
        status, refused = run("\n    import math\n    import os\n", profile="minimal")
        self.assertEqual(status, 400, refused)
        self.assertEqual((refused["violations"][0]["line"], refused["violations"][0]["col"]), (3, 12))

    def test_tracebacks_keep_the_cells_line_numbers(self):
        status, body = run("\n    a = 1\n    b = 0\n    a / b\n")
        self.assertEqual(status, 200, body)
        self.assertEqual(body["error"]["name"], "ZeroDivisionError")
        self.assertIn('line 4, in <module>', body["error"]["traceback"])


class DisplayTest(unittest.TestCase):
    def test_display_reprs_and_the_main_result_last(self):
        body = ok(self, "class Card:\n    def __repr__(self): return 'Card'\n"
                        "    def _repr_html_(self): return '<b>card</b>'\n"
                        "    def _repr_markdown_(self): return '**card**'\n"
                        "display('first')\ndisplay(Card())\n{'n': 3}\n")
        self.assertEqual([r["is_main_result"] for r in body["results"]], [False, False, True])
        self.assertEqual(body["results"][0]["data"], {"text/plain": "'first'"})
        self.assertEqual(body["results"][1]["data"],
                         {"text/plain": "Card", "text/html": "<b>card</b>", "text/markdown": "**card**"})
        self.assertEqual(body["result"], "{'n': 3}")

    def test_pil_images_are_png(self):
        body = ok(self, "from PIL import Image\nimg = Image.new('RGB', (5, 4), 'red')\nimg.show()\n"
                        "img.save('red.png')\nimg\n")
        self.assertEqual([r["is_main_result"] for r in body["results"]], [False, False, True])
        for r in body["results"]:
            raw = base64.b64decode(r["data"]["image/png"])
            self.assertTrue(raw.startswith(PNG))
            self.assertEqual(int.from_bytes(raw[16:20], "big"), 5)
        self.assertEqual([f["path"] for f in body["files"]], ["red.png"])

    def test_a_dataframe_has_its_data(self):
        body = ok(self, "import pandas as pd\npd.DataFrame({'city': ['Oslo', 'Lima'], 'temp': [4.5, None]})\n")
        data = body["results"][-1]["data"]
        self.assertEqual(data["e2b/data"], {"city": ["Oslo", "Lima"], "temp": [4.5, None]})
        self.assertIn("<table", data["text/html"])

    def test_a_figure_has_its_png_and_chart(self):
        body = ok(self, "import matplotlib.pyplot as plt\n"
                        "plt.bar(['a', 'b', 'c'], [3, 1, 2], label='votes')\nplt.title('Poll')\n"
                        "plt.xlabel('option')\nplt.ylabel('count (n)')\nplt.show()\n")
        data = body["results"][0]["data"]
        self.assertTrue(base64.b64decode(data["image/png"]).startswith(PNG))
        chart = data["e2b/chart"]
        self.assertEqual((chart["type"], chart["title"], chart["y_unit"]), ("bar", "Poll", "n"))
        self.assertEqual([(e["label"], e["value"], e["group"]) for e in chart["elements"]],
                         [("a", 3, "votes"), ("b", 1, "votes"), ("c", 2, "votes")])

    def test_results_past_the_caps_are_cut_and_said(self):
        body = ok(self, "for i in range(20):\n    display(i)\n", timeout=60)
        self.assertTrue(body["truncated"]["results"], body["truncated"])
        self.assertEqual(len(body["results"]), 16)
        # A chart's points past what a response keeps (JSON values): cut, and said.
        body = ok(self, "import matplotlib.pyplot as plt\nplt.plot(range(40000))\nplt.show()\n", timeout=60)
        self.assertTrue(body["truncated"]["results"], body["truncated"])
        chart = body["results"][0]["data"]["e2b/chart"]
        self.assertTrue(chart["truncated"])
        self.assertLess(len(chart["elements"][0]["points"]), 40000)
        self.assertEqual(chart["elements"][0]["points"][:2], [[0, 0], [1, 1]])


class EnvTest(unittest.TestCase):
    def test_env_per_execution_reaches_the_code_and_its_children(self):
        body = ok(self, "import os, subprocess\n"
                        "print(subprocess.run(['/bin/sh', '-c', 'echo $GREETING'], capture_output=True, "
                        "text=True).stdout, end='')\nos.environ['GREETING']\n",
                  env={"GREETING": "hello world"})
        self.assertEqual((body["stdout"], body["result"]), ("hello world\n", "'hello world'"))
        # The next run does not see it.
        body = ok(self, "import os\nos.getenv('GREETING', 'unset')\n")
        self.assertEqual(body["result"], "'unset'")
        status, compat = server.execute("import os\nos.environ['A']", path="/execute", profile="general",
                                        env={"A": "1"})
        self.assertEqual((status, compat["result"]), (200, "'1'"), compat)

    def test_the_sandbox_keeps_its_own_variables(self):
        for name in ("PATH", "HOME", "LD_PRELOAD", "PYTHONPATH", "OMP_NUM_THREADS"):
            status, body = run("1", env={name: "/tmp/evil"})
            self.assertEqual(status, 422, body)
            self.assertEqual(body["field"], "env")
            self.assertIn(name, body["error"])
        for bad in ({"A-B": "1"}, {"A": 5}, ["A"], {"A": "x" * (33 << 10)}):
            status, body = run("1", env=bad)
            self.assertEqual(status, 422, body)


@unittest.skipIf(expected_mode() == "cold", "sessions are warm runs: e2e_test_cells_warm covers them")
class SessionTest(unittest.TestCase):
    def setUp(self):
        status, _, data = server.post_json("/v1/sessions", {"profile": "general", "env": {"STAGE": "session"}})
        self.assertEqual(status, 201, data)
        self.sid = json.loads(data)["id"]
        self.addCleanup(server.request, "DELETE", f"/v1/sessions/{self.sid}")

    def call(self, code, **fields):
        status, _, data = server.post_json(f"/v1/sessions/{self.sid}/execute", dict(code=code, **fields))
        body = json.loads(data)
        self.assertEqual(status, 200, body)
        return body

    def test_session_env_lasts_a_call_env_only_its_call(self):
        self.assertEqual(self.call("import os\nos.environ['STAGE']")["result"], "'session'")
        body = self.call("os.environ['STAGE'] + os.environ['EXTRA']", env={"STAGE": "call", "EXTRA": "+"})
        self.assertEqual(body["result"], "'call+'")
        self.assertEqual(self.call("os.environ['STAGE'], os.getenv('EXTRA')")["result"], "('session', None)")
        # What the code itself sets in a call stays, as in a notebook.
        self.call("os.environ['OWN'] = 'kept'")
        self.assertEqual(self.call("os.environ['OWN']")["result"], "'kept'")

    def test_indented_cells_display_and_charts_in_a_session(self):
        self.call("\n    import matplotlib.pyplot as plt\n    xs = [1, 2, 3]\n")
        body = self.call("\n    display('before')\n    plt.plot(xs, [2, 4, 8], label='up')\n    plt.show()\n    len(xs)\n")
        self.assertEqual([r["is_main_result"] for r in body["results"]], [False, False, True])
        chart = body["results"][1]["data"]["e2b/chart"]
        self.assertEqual(chart["elements"], [{"label": "up", "points": [[1, 2], [2, 4], [3, 8]]}])
        self.assertEqual(body["result"], "3")

    def test_a_reserved_name_is_refused_at_creation_and_per_call(self):
        status, _, data = server.post_json("/v1/sessions", {"profile": "general", "env": {"LD_PRELOAD": "x"}})
        self.assertEqual(status, 422, data)
        status, _, data = server.post_json(f"/v1/sessions/{self.sid}/execute", {"code": "1", "env": {"HOME": "/"}})
        self.assertEqual(status, 422, data)
        self.assertIn("HOME", json.loads(data)["error"])


if __name__ == "__main__":
    unittest.main()
