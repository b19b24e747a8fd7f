"""The runner's files in and out (config "files", "max_out_files", "max_out_bytes"; "file"
events), run as the server runs it (see test_runner.py)."""

import base64
import os
import shutil
import tempfile
import time
import unittest

import test_runner
from test_runner import HAS_MATPLOTLIB, HAS_PANDAS, run


def setUpModule():
    test_runner._shared = tempfile.mkdtemp(prefix="airlock-runner-files-test-")
    os.mkdir(os.path.join(test_runner._shared, "mpl"))


def tearDownModule():
    shutil.rmtree(test_runner._shared, ignore_errors=True)


def b64(data):
    return base64.b64encode(data).decode("ascii")


def files_of(r):
    return {e["path"]: e for e in r.of_type("file")}


def run_files(code, files=(), max_out_files=8, max_out_bytes=1 << 20, **config):
    return run(code, files=[{"path": p, "content": b64(d)} for p, d in files],
               max_out_files=max_out_files, max_out_bytes=max_out_bytes, **config)


class FilesInTest(unittest.TestCase):
    def test_files_are_placed_before_the_code_runs(self):
        r = run_files("print(open('data/in.csv').read(), end='')\nprint(open('raw.bin','rb').read())",
                      files=[("data/in.csv", b"a,b\n1,2\n"), ("raw.bin", b"\x00\xff")])
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(r.stdout, "a,b\n1,2\nb'\\x00\\xff'\n")
        self.assertEqual(r.of_type("file"), [], r)  # unchanged inputs are not returned

    def test_a_changed_input_is_returned(self):
        r = run_files("open('x.txt','a').write('more')", files=[("x.txt", b"some")])
        self.assertEqual(r.rc, 0, r)
        f = files_of(r)["x.txt"]
        self.assertEqual(base64.b64decode(f["content"]), b"somemore")
        self.assertEqual(f["size"], 8)
        self.assertFalse(f["truncated"])

    def test_a_bad_config_path_is_a_config_error(self):
        r = run("print(1)", files=[{"path": "../x", "content": ""}], max_out_files=1, max_out_bytes=1)
        self.assertEqual(r.rc, 2, r)
        self.assertIn("bad path", r.stderr)


class FilesOutTest(unittest.TestCase):
    def test_new_files_come_back_sorted_with_exact_bytes(self):
        r = run_files("import os\nos.makedirs('out/sub')\n"
                      "open('out/sub/b.bin','wb').write(bytes(range(256)))\n"
                      "open('a.txt','w').write('hello')\n")
        self.assertEqual(r.rc, 0, r)
        paths = [e["path"] for e in r.of_type("file")]
        self.assertEqual(paths, ["a.txt", "out/sub/b.bin"])
        self.assertEqual(base64.b64decode(files_of(r)["out/sub/b.bin"]["content"]), bytes(range(256)))
        self.assertEqual(r.of_type("truncated"), [])
        # Before the end event.
        self.assertEqual(r.events[-1]["type"], "end")

    def test_nothing_when_not_asked(self):
        r = run("open('a.txt','w').write('x')")
        self.assertEqual(r.of_type("file"), [])

    def test_count_and_byte_caps(self):
        r = run_files("for i in range(5): open(f'f{i}', 'wb').write(b'x' * 100)",
                      max_out_files=3, max_out_bytes=250)
        files = r.of_type("file")
        self.assertEqual([f["path"] for f in files], ["f0", "f1", "f2"])
        self.assertEqual([len(base64.b64decode(f["content"])) for f in files], [100, 100, 50])
        self.assertEqual([f["truncated"] for f in files], [False, False, True])
        self.assertTrue(all(f["size"] == 100 for f in files))
        self.assertEqual(r.of_type("truncated"), [{"type": "truncated", "what": "files", "dropped": 2}])

    def test_symlinks_fifos_and_sockets_are_not_followed_nor_opened(self):
        code = ("import os, socket\n"
                "os.symlink('/etc/passwd', 'passwd')\n"
                "os.mkfifo('fifo')\n"
                "s = socket.socket(socket.AF_UNIX); s.bind('sock')\n"
                "os.mkdir('d'); os.symlink('/etc', 'd/etc')\n"
                "open('real.txt', 'w').write('ok')\n")
        start = time.monotonic()
        r = run_files(code)
        self.assertLess(time.monotonic() - start, 30)
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(list(files_of(r)), ["real.txt"])
        self.assertNotIn("root:", r.raw_events)

    def test_a_fifo_replacing_a_reported_file_is_skipped(self):
        # A file written, then replaced by a FIFO from a thread: skipped, never opened for a read that blocks.
        code = ("import os, threading, time\n"
                "open('f', 'w').write('x')\n"
                "def swap():\n"
                "    time.sleep(0.2); os.unlink('f'); os.mkfifo('f')\n"
                "threading.Thread(target=swap).start()\n")
        start = time.monotonic()
        r = run_files(code)
        self.assertLess(time.monotonic() - start, 30)
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(r.of_type("file"), [])

    def test_names_that_are_not_utf8_are_counted_not_sent(self):
        r = run_files("open(b'bad\\xff', 'w').write('x')\nopen('line\\nbreak', 'w').write('y')")
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(list(files_of(r)), ["line\nbreak"])
        self.assertEqual(r.of_type("truncated"), [{"type": "truncated", "what": "files", "dropped": 1}])

    def test_the_walk_is_bounded(self):
        r = run_files("for i in range(5000): open(f'f{i}', 'w').close()", max_out_files=2)
        self.assertEqual(len(r.of_type("file")), 2)
        self.assertEqual(len(r.of_type("truncated")), 1)

    @unittest.skipUnless(HAS_PANDAS, "pandas is not installed")
    def test_pandas_round_trip(self):
        code = ("import pandas as pd\n"
                "df = pd.read_csv('in.csv')\n"
                "df['c'] = df['a'] + df['b']\n"
                "df.to_csv('out.csv', index=False)\n")
        r = run_files(code, files=[("in.csv", b"a,b\n1,2\n3,4\n")])
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(base64.b64decode(files_of(r)["out.csv"]["content"]), b"a,b,c\n1,2,3\n3,4,7\n")

    @unittest.skipUnless(HAS_MATPLOTLIB, "matplotlib is not installed")
    def test_savefig_comes_back_as_png(self):
        code = ("import matplotlib.pyplot as plt\n"
                "plt.plot([1, 2], [3, 4])\nplt.savefig('chart.png')\n")
        r = run_files(code)
        self.assertEqual(r.rc, 0, r)
        png = base64.b64decode(files_of(r)["chart.png"]["content"])
        self.assertTrue(png.startswith(b"\x89PNG\r\n\x1a\n"))


if __name__ == "__main__":
    unittest.main()
