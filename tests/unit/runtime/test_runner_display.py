"""Tests of what a cell shows (runtime/python/airlock_display.py and airlock_charts.py, through
the runner as the server runs it): display(), rich reprs, PIL images, DataFrames, matplotlib
charts, the byte caps on them, and a run's env.

Run: /usr/bin/python3 -m unittest discover -s tests/unit/runtime -v
"""

import base64
import json
import unittest

import test_runner
from test_runner import HAS_MATPLOTLIB, HAS_NUMPY, HAS_PANDAS, _has, run

HAS_PIL = _has("PIL.Image")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def setUpModule():
    test_runner.setUpModule()


def tearDownModule():
    test_runner.tearDownModule()


def png(data):
    return base64.b64decode(data["image/png"])


class DisplayTest(unittest.TestCase):
    def test_display_is_a_builtin_and_keeps_order(self):
        r = run("display('first')\nprint('out')\ndisplay(2, {'k': 3})\nx = display('last')\nx is None\n")
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(r.stdout, "out\n")
        self.assertEqual([e["data"] for e in r.results],
                         [{"text/plain": "'first'"}, {"text/plain": "2"}, {"text/plain": "{'k': 3}"},
                          {"text/plain": "'last'"}, {"text/plain": "True"}])
        self.assertEqual([e["is_main_result"] for e in r.results], [False] * 4 + [True])

    def test_every_rich_repr_of_a_displayed_object(self):
        code = ("class R:\n"
                "    def __repr__(self): return 'R()'\n"
                "    def _repr_html_(self): return '<i>h</i>'\n"
                "    def _repr_markdown_(self): return '*m*'\n"
                "    def _repr_svg_(self): return '<svg/>'\n"
                "    def _repr_png_(self): return b'png'\n"
                "    def _repr_jpeg_(self): return b'jpg', {'width': 1}\n"
                "    def _repr_latex_(self): return '$x$'\n"
                "    def _repr_json_(self): return {'j': [1]}\n"
                "    def _repr_javascript_(self): return 'alert(1)'\n"
                "    def _repr_pdf_(self): return b'%PDF'\n"
                "display(R())\n")
        r = run(code)
        self.assertEqual(r.rc, 0, r)
        data = r.results[0]["data"]
        self.assertEqual(data["text/plain"], "R()")
        self.assertEqual(data["text/html"], "<i>h</i>")
        self.assertEqual(data["text/markdown"], "*m*")
        self.assertEqual(data["image/svg+xml"], "<svg/>")
        self.assertEqual(base64.b64decode(data["image/png"]), b"png")
        self.assertEqual(base64.b64decode(data["image/jpeg"]), b"jpg")  # (data, metadata): data
        self.assertEqual(data["text/latex"], "$x$")
        self.assertEqual(data["application/json"], {"j": [1]})
        self.assertEqual(data["application/javascript"], "alert(1)")
        self.assertEqual(base64.b64decode(data["application/pdf"]), b"%PDF")

    def test_raw_bundles_and_include_exclude(self):
        r = run("display({'text/html': '<b>x</b>', 'application/json': {'a': 1}}, raw=True)\n"
                "class H:\n    def __repr__(self): return 'H'\n    def _repr_html_(self): return '<p>'\n"
                "display(H(), include=['text/html'])\ndisplay(H(), exclude=['text/html'])\n")
        self.assertEqual(r.rc, 0, r)
        self.assertEqual([e["data"] for e in r.results],
                         [{"text/html": "<b>x</b>", "application/json": {"a": 1}},
                          {"text/html": "<p>"}, {"text/plain": "H"}])

    def test_a_failing_repr_in_display_is_the_users_error_without_runner_frames(self):
        r = run("class Bad:\n    def __repr__(self):\n        raise ValueError('no repr')\n"
                "display(Bad())\n")
        self.assertEqual(r.rc, 1)
        self.assertEqual(r.error["name"], "ValueError")
        self.assertIn('File "main.py", line 4, in <module>', r.error["traceback"])
        self.assertIn('File "main.py", line 3, in __repr__', r.error["traceback"])
        self.assertNotIn("airlock_display", r.error["traceback"])

    def test_displays_after_the_budget_are_counted(self):
        r = run("for i in range(5):\n    display(i)\n", max_results=3)
        self.assertEqual(len(r.results), 3)
        self.assertEqual(r.of_type("truncated"), [{"type": "truncated", "what": "results", "dropped": 2}])

    def test_an_oversized_display_is_shrunk_not_lost(self):
        r = run("class Big:\n    def __repr__(self): return 'Big'\n"
                "    def _repr_html_(self): return 'h' * 5000\n"
                "display(Big())\n'after'\n", max_result_bytes=2000)
        self.assertEqual(r.results[0]["data"], {"text/plain": "Big"})
        self.assertEqual(r.main, {"text/plain": "'after'"})
        self.assertEqual(r.of_type("truncated"), [{"type": "truncated", "what": "results", "dropped": 0}])


@unittest.skipUnless(HAS_PIL and HAS_NUMPY, "PIL or numpy is not installed")
class PilTest(unittest.TestCase):
    IMAGE = ("import numpy\nfrom PIL import Image\n"
             "image = Image.fromarray((numpy.arange(48) % 255).astype('uint8').reshape(4, 4, 3))\n")

    def assertImage(self, data, size=(4, 4)):
        raw = png(data)
        self.assertTrue(raw.startswith(PNG_MAGIC))
        self.assertEqual(int.from_bytes(raw[16:20], "big"), size[0])  # IHDR width
        self.assertTrue(data["text/plain"].startswith("<PIL.Image.Image image mode=RGB size=4x4"))

    def test_show_displays_the_image(self):
        r = run(self.IMAGE + "image.show()\nprint('done')\n")
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(r.stdout, "done\n")
        self.assertEqual(len(r.results), 1)
        self.assertFalse(r.results[0]["is_main_result"])
        self.assertImage(r.results[0]["data"])

    def test_an_image_as_the_last_expression_is_png(self):
        r = run(self.IMAGE + "image\n")
        self.assertEqual(r.rc, 0, r)
        self.assertImage(r.main)
        self.assertEqual(sorted(r.main), ["image/png", "text/plain"])

    def test_save_to_a_path_displays_and_writes(self):
        r = run(self.IMAGE + "image.save('out.png')\nimport os\nprint(os.path.getsize('out.png') > 0)\n"
                "import io\nimage.save(io.BytesIO(), format='PNG')\n", max_out_files=4, max_out_bytes=1 << 16)
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(r.stdout, "True\n")
        self.assertEqual(len(r.results), 1)  # not for the file-like object
        self.assertImage(r.results[0]["data"])
        self.assertEqual([e["path"] for e in r.of_type("file")], ["out.png"])

    def test_an_image_over_the_budget_loses_its_png_and_says_so(self):
        r = run("from PIL import Image\nimport os\n"
                "Image.frombytes('RGB', (400, 400), os.urandom(400 * 400 * 3))\n", max_result_bytes=4000)
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(sorted(r.main), ["text/plain"])
        self.assertEqual(len(r.of_type("truncated")), 1)


@unittest.skipUnless(HAS_PANDAS, "pandas is not installed")
class DataFrameTest(unittest.TestCase):
    def test_data_html_and_text(self):
        r = run("import pandas as pd\npd.DataFrame({'a': [1, 2, 3], 'b': ['x', 'y', None]})\n")
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(r.main["e2b/data"], {"a": [1, 2, 3], "b": ["x", "y", None]})
        self.assertIn("<table", r.main["text/html"])
        self.assertIn("a", r.main["text/plain"])

    def test_values_are_json_safe(self):
        r = run("import pandas as pd, numpy as np\n"
                "df = pd.DataFrame({'f': [1.5, np.nan], 't': pd.to_datetime(['2024-01-02', None]),"
                " 'o': [np.array([1, 2]), {3: 4}]})\n"
                "df.columns = ['f', 't', 7]\ndisplay(df)\n")
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(r.results[0]["data"]["e2b/data"],
                         {"f": [1.5, None], "t": ["2024-01-02T00:00:00", None], "7": [[1, 2], {"3": 4}]})

    def test_a_frame_too_large_for_the_budget_has_no_data(self):
        for caps in ({"max_result_bytes": 30000}, {"max_result_values": 10000}):
            with self.subTest(**caps):
                r = run("import pandas as pd\ndf = pd.DataFrame({'a': range(20000)})\ndf\n", **caps)
                self.assertEqual(r.rc, 0, r)
                self.assertNotIn("e2b/data", r.main)
                self.assertIn("text/html", r.main)
                self.assertEqual(len(r.of_type("truncated")), 1)


@unittest.skipUnless(HAS_MATPLOTLIB and HAS_NUMPY, "matplotlib or numpy is not installed")
class ChartTest(unittest.TestCase):
    def chart(self, code, **config):
        r = run("import matplotlib.pyplot as plt\nimport numpy as np\n" + code + "\nplt.show()\n", **config)
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(len(r.results), 1, r)
        data = r.results[0]["data"]
        self.assertTrue(png(data).startswith(PNG_MAGIC))
        self.r = r
        return data.get("e2b/chart")

    def test_line_with_labels_units_and_points(self):
        c = self.chart("plt.plot([0, 1, 2], [1, 4, 9], label='squares')\nplt.plot([5, 6])\n"
                       "plt.axhline(3)\nplt.title('Growth')\nplt.xlabel('Time (s)')\nplt.ylabel('Size [m]')")
        self.assertEqual(c["type"], "line")
        self.assertEqual((c["title"], c["x_label"], c["y_label"]), ("Growth", "Time (s)", "Size [m]"))
        self.assertEqual((c["x_unit"], c["y_unit"]), ("s", "m"))
        self.assertEqual((c["x_scale"], c["y_scale"]), ("linear", "linear"))
        self.assertEqual([e["label"] for e in c["elements"]], ["squares", "Line 1"])  # axhline is no series
        self.assertEqual(c["elements"][0]["points"], [[0, 1], [1, 4], [2, 9]])
        self.assertEqual(c["elements"][1]["points"], [[0, 5], [1, 6]])
        self.assertTrue(all(isinstance(t, float) for t in c["x_ticks"]))
        self.assertEqual(len(c["x_ticks"]), len(c["x_tick_labels"]))
        self.assertTrue(all(isinstance(t, str) for t in c["y_tick_labels"]))

    def test_scales_datetime_categorical_log(self):
        c = self.chart("import datetime\nd = [datetime.date(2024, 3, 1) + datetime.timedelta(days=i) for i in range(3)]\n"
                       "plt.plot(d, [1, 2, 3])")
        self.assertEqual((c["x_scale"], c["y_scale"]), ("datetime", "linear"))
        self.assertEqual(c["elements"][0]["points"][0], ["2024-03-01", 1])
        self.assertTrue(c["x_ticks"][0].startswith("2024-0"))
        c = self.chart("plt.plot([1, 2, 3], ['low', 'mid', 'high'])")
        self.assertEqual((c["x_scale"], c["y_scale"]), ("linear", "categorical"))
        self.assertEqual(c["elements"][0]["points"], [[1, "low"], [2, "mid"], [3, "high"]])
        c = self.chart("plt.plot([1, 2, 3], [10, 1000, 100000])\nplt.yscale('log')\nplt.ylabel('n (log scale)')")
        self.assertEqual((c["y_scale"], c["y_unit"]), ("log", "log scale"))

    def test_scatter(self):
        c = self.chart("plt.scatter([1, 2], [3, 4], label='a')\nplt.scatter([5], [6])\nplt.xlabel('x')")
        self.assertEqual(c["type"], "scatter")
        self.assertIsNone(c["title"])
        self.assertEqual(c["elements"], [{"label": "a", "points": [[1, 3], [2, 4]]},
                                         {"label": "Series 1", "points": [[5, 6]]}])

    def test_bars_vertical_and_horizontal(self):
        c = self.chart("plt.bar(['p', 'q'], [3, 5], label='n')\nplt.bar(['p', 'q'], [1, 1], bottom=[3, 5])\n"
                       "plt.xlabel('who')\nplt.ylabel('count')")
        self.assertEqual(c["type"], "bar")
        self.assertEqual((c["x_label"], c["y_label"]), ("who", "count"))
        self.assertEqual(c["elements"], [{"label": "p", "group": "n", "value": 3}, {"label": "q", "group": "n", "value": 5},
                                         {"label": "p", "group": "Group 1", "value": 1},
                                         {"label": "q", "group": "Group 1", "value": 1}])
        c = self.chart("plt.barh(['p', 'q'], [3, 5])\nplt.xlabel('count')\nplt.ylabel('who')")
        self.assertEqual((c["x_label"], c["y_label"]), ("who", "count"))  # x: the category axis
        self.assertEqual([(e["label"], e["value"]) for e in c["elements"]], [("p", 3), ("q", 5)])

    def test_pie(self):
        c = self.chart("plt.pie([75, 25], labels=['yes', 'no'], autopct='%1.0f%%', startangle=90)\nplt.title('Vote')")
        self.assertEqual(c, {"type": "pie", "title": "Vote",
                             "elements": [{"label": "yes", "angle": 270, "radius": 1},
                                          {"label": "no", "angle": 90, "radius": 1}]})

    def test_box_and_whisker_both_orientations(self):
        for vert in (True, False):
            with self.subTest(vert=vert):
                c = self.chart("fig, ax = plt.subplots()\n"
                               f"ax.boxplot([[1, 2, 3, 4, 5, 40], [10, 12, 14]], labels=['a', 'b'], "
                               f"patch_artist=True, vert={vert})\nax.set_title('Spread')")
                self.assertEqual(c["type"], "box_and_whisker")
                self.assertEqual(c["elements"], [
                    {"label": "a", "min": 1, "first_quartile": 2.25, "median": 3.5, "third_quartile": 4.75,
                     "max": 5, "outliers": [40]},
                    {"label": "b", "min": 10, "first_quartile": 11, "median": 12, "third_quartile": 13,
                     "max": 14, "outliers": []}])

    def test_superchart_unknown_and_blank(self):
        c = self.chart("fig, axs = plt.subplots(1, 3)\nfig.suptitle('All')\naxs[0].plot([1, 2])\n"
                       "axs[1].scatter([1], [2])\naxs[1].set_title('dots')\naxs[2].imshow(np.zeros((2, 2)))")
        self.assertEqual((c["type"], c["title"]), ("superchart", "All"))
        self.assertEqual([e["type"] for e in c["elements"]], ["line", "scatter", "unknown"])
        self.assertEqual(c["elements"][1]["title"], "dots")
        c = self.chart("fig, ax = plt.subplots()\nax.add_patch(plt.Circle((0, 0), 1))\nax.set_title('round')")
        self.assertEqual(c, {"type": "unknown", "title": "round", "elements": []})
        self.assertIsNone(self.chart("plt.figure()"))

    def test_a_figure_as_the_main_result_has_its_chart(self):
        r = run("import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.plot([3, 1])\nfig\n")
        self.assertEqual(r.main["e2b/chart"]["elements"][0]["points"], [[0, 3], [1, 1]])

    def test_points_past_the_budget_are_cut_and_said(self):
        c = self.chart("plt.plot(np.arange(20000))", max_result_bytes=120000)
        points = c["elements"][0]["points"]
        self.assertLess(len(points), 20000)
        self.assertEqual(points[:2], [[0, 0], [1, 1]])
        self.assertTrue(c["truncated"])
        self.assertTrue(c["elements"][0]["truncated"])
        self.assertEqual(len(self.r.of_type("truncated")), 1)
        # The line fits its cap.
        self.assertLessEqual(len(self.r.raw_events.splitlines()[0]) + 1, 120000)


    def test_points_past_the_value_budget_are_cut(self):
        # The server keeps at most max_result_values JSON values of a run's results.
        c = self.chart("plt.plot(np.arange(5000))", max_result_values=2000)
        self.assertLessEqual(len(c["elements"][0]["points"]), 500)
        self.assertTrue(c["truncated"])
        self.assertLessEqual(count_values(self.r.results[0]["data"]), 2000)


def count_values(data):
    """JSON values below the top level of data, as the server counts them."""
    if isinstance(data, dict):
        return sum(1 + count_values(v) for v in data.values())
    if isinstance(data, list):
        return sum(1 + count_values(v) for v in data)
    return 0


class ShrinkTest(unittest.TestCase):
    @staticmethod
    def shown(formats, last="", **caps):
        """Runs display() of an object whose _repr_mimebundle_ gives {mime: 'c' * n}."""
        bundle = ", ".join(f"{mime!r}: {{'v': 'c' * {n}}}" if mime.startswith("e2b/") else f"{mime!r}: 'c' * {n}"
                           for mime, n in formats.items())
        return run("class V:\n    def __repr__(self): return 'V'\n"
                   "    def _repr_mimebundle_(self, include=None, exclude=None):\n"
                   f"        return {{{bundle}}}\n"
                   "display(V())\n" + last, **caps)

    def test_chart_and_data_go_first_then_the_largest(self):
        formats = {"e2b/chart": 900, "e2b/data": 300, "text/html": 400, "text/markdown": 200}
        r = self.shown(formats, last="'x' * 3000\n", max_result_bytes=2000)
        self.assertEqual(r.rc, 0, r)
        # The main result comes first in the budget: it is cut to fit, and the display, which
        # fits no more, is dropped.
        self.assertTrue(r.main["text/plain"].endswith("... [truncated by airlock]"))
        self.assertEqual([e["is_main_result"] for e in r.results], [True])
        self.assertEqual(r.of_type("truncated"), [{"type": "truncated", "what": "results", "dropped": 1}])
        r = self.shown(formats, max_result_bytes=1000)
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(sorted(r.results[0]["data"]), ["text/html", "text/markdown", "text/plain"])
        del formats["e2b/data"]
        r = self.shown(formats, max_result_bytes=500)
        self.assertEqual(sorted(r.results[0]["data"]), ["text/markdown", "text/plain"])
        self.assertEqual(len(r.of_type("truncated")), 1)


class EnvTest(unittest.TestCase):
    def test_env_is_seen_by_the_code_and_its_children(self):
        r = run("import os, subprocess\nprint(os.environ['GREETING'])\n"
                "subprocess.run(['/bin/sh', '-c', 'echo $GREETING-$OTHER'])\nos.getenv('OTHER')\n",
                env={"GREETING": "hi there", "OTHER": "ü"}, stream=True)
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(r.stdout, "hi there\nhi there-ü\n")
        self.assertEqual(r.main, {"text/plain": "'ü'"})

    def test_bad_env_is_a_config_error(self):
        for env in ({"A=B": "x"}, {"": "x"}, {"A": 1}, ["A"], {"A": "x\x00y"}):
            with self.subTest(env=env):
                r = run("1\n", env=env)
                self.assertEqual(r.rc, 2, r)
                self.assertEqual(r.error["name"], "AirlockConfigError")


if __name__ == "__main__":
    unittest.main()
