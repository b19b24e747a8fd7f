"""Files in and out of one-shot runs (issue 10): POST /v1/execute and /execute with "files",
through real HTTP and real sandboxes, in both modes (AIRLOCK_E2E_MODE=cold and =warm).

A CSV given in comes back transformed byte for byte; a matplotlib figure saved to a file comes
back as a PNG; the profile's caps cut files and say so; a run that plants symlinks to host files
and a FIFO in its directory gets no host byte back and the server answers promptly; bad input
paths are clear 4xx.
"""

import base64
import os
import shutil
import tempfile
import time
import unittest

from airlock_server import AirlockServer, assert_mode, copy_profiles

server = None
profiles = None

# A profile with small file caps (the shipped ones allow 64 files and 10 MiB).
TINY = """name: tiny
description: general with small file caps, for the tests
extends: general
files:
  max_in_bytes: 2000
  max_out_bytes: 1000
  max_out_files: 3
"""


def setUpModule():
    global server, profiles
    profiles = copy_profiles(tempfile.mkdtemp(prefix="airlock-e2e-files-profiles-"), {"tiny": TINY})
    server = AirlockServer(profiles_dir=profiles).start()


def tearDownModule():
    if server:
        server.cleanup()
    if profiles:
        shutil.rmtree(profiles, ignore_errors=True)


def b64(data):
    return base64.b64encode(data).decode("ascii")


def by_path(body):
    return {f["path"]: f for f in body["files"]}


class FilesRoundTrip(unittest.TestCase):
    def test_csv_in_pandas_csv_out_byte_exact(self):
        csv = b"city,temp_c\nOslo,4.5\nCairo,31\nLima,19.25\n"
        code = ("import pandas as pd\n"
                "df = pd.read_csv('data/weather.csv')\n"
                "df['temp_f'] = df['temp_c'] * 9 / 5 + 32\n"
                "df.to_csv('weather_f.csv', index=False)\n"
                "len(df)\n")
        status, body = server.execute(code, path="/v1/execute", profile="data-science", timeout=30,
                                      files=[{"path": "data/weather.csv", "content": csv.decode()}])
        self.assertEqual(status, 200, body)
        assert_mode(self, body)
        self.assertEqual(body["exit_code"], 0, body)
        self.assertEqual(body["result"], "3")
        files = by_path(body)
        self.assertEqual(list(files), ["weather_f.csv"], body["files"])  # the unchanged input is not returned
        want = b"city,temp_c,temp_f\nOslo,4.5,40.1\nCairo,31.0,87.8\nLima,19.25,66.65\n"
        got = base64.b64decode(files["weather_f.csv"]["content"])
        self.assertEqual(got, want)
        self.assertEqual(files["weather_f.csv"]["size"], len(want))
        self.assertFalse(files["weather_f.csv"]["truncated"])
        self.assertFalse(body["truncated"]["files"])

    def test_binary_input_by_base64_and_savefig_png_out(self):
        blob = bytes(range(256)) * 4
        code = ("import hashlib\n"
                "import matplotlib.pyplot as plt\n"
                "print(hashlib.sha256(open('blob.bin', 'rb').read()).hexdigest())\n"
                "plt.plot([1, 2, 3], [2, 4, 1])\n"
                "plt.savefig('chart.png')\n")
        # A cold run imports matplotlib from scratch (and builds its font cache): room for a
        # loaded host.
        status, body = server.execute(code, path="/v1/execute", profile="general", timeout=60,
                                      files=[{"path": "blob.bin", "content": b64(blob), "encoding": "base64"}])
        self.assertEqual(status, 200, body)
        self.assertEqual(body["exit_code"], 0, {k: body[k] for k in ("stderr", "kill_reason", "timed_out", "usage")})
        import hashlib
        self.assertEqual(body["stdout"].strip(), hashlib.sha256(blob).hexdigest())
        # Only the chart: matplotlib's own caches (HOME is the working directory) are not returned.
        self.assertEqual(list(by_path(body)), ["chart.png"])
        png = base64.b64decode(by_path(body)["chart.png"]["content"])
        self.assertTrue(png.startswith(b"\x89PNG\r\n\x1a\n"), png[:16])
        self.assertGreater(len(png), 1000)

    def test_compat_execute_takes_files(self):
        status, body = server.execute("print(open('in.txt').read().upper())\nopen('o.txt','w').write('x')",
                                      path="/execute", profile="general",
                                      files=[{"path": "in.txt", "content": "hello"}])
        self.assertEqual(status, 200, body)
        self.assertEqual(body["stdout"], "HELLO\n")
        self.assertEqual([f["path"] for f in body["files"]], ["o.txt"])
        self.assertEqual(body["files_truncated"], False)
        # A run that returns no files keeps the fips body exact.
        status, body = server.execute("print(1)", path="/execute")
        self.assertEqual(status, 200, body)
        self.assertNotIn("files", body)

    def test_no_files_means_an_empty_list(self):
        status, body = server.execute("print(1)", path="/v1/execute")
        self.assertEqual(status, 200, body)
        self.assertEqual(body["files"], [])
        self.assertFalse(body["truncated"]["files"])


class FilesCaps(unittest.TestCase):
    def test_too_many_files_are_left_out_and_flagged(self):
        status, body = server.execute("for i in range(6): open(f'f{i}.txt', 'w').write('x' * 10)",
                                      path="/v1/execute", profile="tiny")
        self.assertEqual(status, 200, body)
        self.assertEqual([f["path"] for f in body["files"]], ["f0.txt", "f1.txt", "f2.txt"])
        self.assertTrue(body["truncated"]["files"])

    def test_too_many_bytes_cut_content_and_flag_it(self):
        status, body = server.execute("open('a.bin','wb').write(b'a' * 600)\nopen('b.bin','wb').write(b'b' * 600)",
                                      path="/v1/execute", profile="tiny")
        self.assertEqual(status, 200, body)
        files = by_path(body)
        self.assertEqual(base64.b64decode(files["a.bin"]["content"]), b"a" * 600)
        self.assertFalse(files["a.bin"]["truncated"])
        self.assertEqual(base64.b64decode(files["b.bin"]["content"]), b"b" * 400)  # what fits of 1000
        self.assertTrue(files["b.bin"]["truncated"])
        self.assertEqual(files["b.bin"]["size"], 600)
        self.assertTrue(body["truncated"]["files"])

    def test_input_over_the_profile_cap_is_413(self):
        status, body = server.execute("print(1)", path="/v1/execute", profile="tiny",
                                      files=[{"path": "big", "content": "x" * 2001}])
        self.assertEqual(status, 413, body)
        self.assertEqual(body["field"], "files")
        self.assertIn("max_in_bytes", body["error"])

    def test_a_forged_file_flood_on_the_channel_is_capped(self):
        # User code writes its own file events to the channel (found in /proc/self/fd): the
        # server keeps at most the profile's count, and nothing but what the run wrote itself.
        code = ("import os, json\n"
                "for fd in os.listdir('/proc/self/fd'):\n"
                "    try:\n"
                "        if 'pipe' in os.readlink(f'/proc/self/fd/{fd}') and int(fd) > 2:\n"
                "            for i in range(20):\n"
                "                os.write(int(fd), (json.dumps({'type': 'file', 'path': f'x{i}', 'size': 1,"
                " 'content': 'eA==', 'truncated': False}) + '\\n').encode())\n"
                "    except OSError: pass\n")
        status, body = server.execute(code, path="/v1/execute", profile="tiny")
        self.assertEqual(status, 200, body)
        self.assertLessEqual(len(body["files"]), 3)


class FilesAttacks(unittest.TestCase):
    def test_planted_symlinks_and_fifo_return_no_host_bytes_promptly(self):
        code = ("import os, socket\n"
                "os.symlink('/etc/passwd', 'passwd')\n"
                "os.symlink('/proc/1/root/etc/hostname', 'hostname')\n"
                "os.symlink('/etc', 'etc')\n"
                "os.mkfifo('fifo')\n"
                "s = socket.socket(socket.AF_UNIX); s.bind('sock')\n"
                "os.mkdir('d'); os.symlink('/etc/shadow', 'd/shadow')\n"
                "open('ok.txt', 'w').write('fine')\n")
        status, body = server.execute(code, path="/v1/execute", profile="general")
        self.assertEqual(status, 200, body)
        self.assertEqual(body["exit_code"], 0, body)
        # Promptly: the runner's walk did not block on the FIFO or the socket (it would have
        # been stopped by the run's timeout).
        self.assertIsNone(body["kill_reason"], body)
        self.assertEqual([f["path"] for f in body["files"]], ["ok.txt"])
        with open("/etc/passwd", "rb") as f:
            host_passwd = f.read()
        for f in body["files"]:
            self.assertNotIn(b"root:", base64.b64decode(f["content"]))
        self.assertNotIn(b64(host_passwd[:30])[:20], str(body))
        # The server still answers.
        status, body = server.execute("print(2)", path="/v1/execute")
        self.assertEqual((status, body["stdout"]), (200, "2\n"))

    def test_bad_input_paths_are_422_naming_the_field(self):
        for path in ("../x", "/etc/x", "a\u0000b", "a//b", "", "./a"):
            status, body = server.execute("print(1)", path="/v1/execute",
                                          files=[{"path": path, "content": "sandbox-wrote"}])
            self.assertEqual(status, 422, (path, body))
            self.assertEqual(body["field"], "files[0].path", body)
            self.assertEqual(body["detail"][0]["loc"], ["body", "files", 0, "path"], body)
        self.assertFalse(os.path.exists("/etc/x"))
        status, body = server.execute("print(1)", path="/execute",
                                      files=[{"path": "ok", "content": "@@", "encoding": "base64"}])
        self.assertEqual(status, 422, body)
        self.assertEqual(body["field"], "files[0].content")
        status, body = server.execute("print(1)", path="/v1/execute",
                                      files=[{"path": "a", "content": ""}, {"path": "a", "content": ""}])
        self.assertEqual(status, 422, body)
        self.assertEqual(body["field"], "files[1].path")

    def test_input_files_cannot_land_outside_the_working_directory(self):
        # The runner writes below its cwd only; a file named like a host path stays a name there.
        status, body = server.execute("import os\nprint(sorted(os.listdir('etc')))\nprint(os.getcwd())",
                                      path="/v1/execute", profile="general",
                                      files=[{"path": "etc/passwd", "content": "sandbox-wrote"}])
        self.assertEqual(status, 200, body)
        self.assertEqual(body["stdout"], "['passwd']\n/home/user\n")
        with open("/etc/passwd") as f:
            self.assertNotIn("sandbox-wrote", f.read())


if __name__ == "__main__":
    unittest.main()
