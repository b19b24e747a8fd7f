"""Text and output as a new user meets them (issue 25), through a real `airlock serve` in each
mode (cold, warm, session; CMakeLists.txt): every Python run is UTF-8 (open(), subprocess text
mode, file names, the `files` of a request), and everything a run printed before a kill reaches
the response, whatever killed it (timeout, memory, pids, output, a signal).

Session mode runs each case as the second call of a fresh session; its input files go in by
PUT /v1/sessions/{id}/files/{path} (a call takes no `files`). With --pool-size 0 (the cold
mode's server) the session itself is cold: tests/e2e/test_sessions.py runs in both.
"""

import json
import unittest
import urllib.parse

from airlock_server import AirlockServer, assert_mode, expected_mode

PROFILE = "general"
TEXT = "café ✓ 日本"
NAME = "données-日本.txt"

server = None


def setUpModule():
    global server
    server = AirlockServer().start()


def tearDownModule():
    if server:
        server.cleanup()


def run(code, files=(), timeout=10, limits=None):
    """(status, body) of `code` run once in this module's mode, with `files` ({path, content}) in
    its working directory."""
    fields = {"profile": PROFILE, "timeout": timeout}
    if limits:
        fields["limits"] = limits
    if expected_mode() != "session":
        status, body = server.execute(code, path="/v1/execute", files=list(files), **fields)
        return status, body
    create = {"profile": PROFILE}
    if limits:
        create["limits"] = limits
    status, _, data = server.post_json("/v1/sessions", create)
    assert status == 201, (status, data)
    sid = json.loads(data)["id"]
    try:
        for f in files:
            status, _, data = server.request("PUT", f"/v1/sessions/{sid}/files/{urllib.parse.quote(f['path'])}",
                                             body=f["content"].encode("utf-8"))
            assert status == 201 or status == 200, (status, data)
        status, _, data = server.post_json(f"/v1/sessions/{sid}/execute", {"code": "pass"})
        assert status == 200, (status, data)
        status, _, data = server.post_json(f"/v1/sessions/{sid}/execute", {"code": code, "timeout": timeout},
                                           timeout=60 + timeout * 2)
        return status, json.loads(data)
    finally:
        server.request("DELETE", f"/v1/sessions/{sid}")


class Utf8Text(unittest.TestCase):
    def test_python_text_is_utf8(self):
        code = ("import locale, os, subprocess, sys\n"
                f"text = {TEXT!r}\n"
                "print(sys.getfilesystemencoding(), sys.flags.utf8_mode, locale.getpreferredencoding(False).lower(),\n"
                "      sys.stdout.encoding)\n"
                "with open('out.txt', 'w') as f:\n"
                "    f.write(text)\n"
                "with open('out.txt') as f:\n"
                "    assert f.read() == text\n"
                f"with open({NAME!r}, 'w') as f:\n"
                "    f.write(text)\n"
                f"assert {NAME!r} in os.listdir('.'), os.listdir('.')\n"
                f"assert open('in/{NAME}').read() == text\n"
                "p = subprocess.run(['cat', 'out.txt'], capture_output=True, text=True)\n"
                "assert p.stdout == text, p\n"
                "p = subprocess.run([sys.executable, '-c', 'import sys; print(sys.argv[1])', text],\n"
                "                   capture_output=True, text=True)\n"
                "assert p.stdout == text + '\\n', p\n"
                "print(text)\n")
        status, body = run(code, files=[{"path": f"in/{NAME}", "content": TEXT}])
        self.assertEqual(status, 200, body)
        assert_mode(self, body)
        self.assertEqual(body["exit_code"], 0, body["stderr"])
        self.assertEqual(body["stdout"], f"utf-8 1 utf-8 utf-8\n{TEXT}\n")

    def test_the_environment_says_utf8(self):
        status, body = run("import os\nprint(os.environ['LANG'], os.environ['LC_ALL'], os.environ['PYTHONUTF8'])\n")
        self.assertEqual(status, 200, body)
        self.assertEqual(body["stdout"], "C.UTF-8 C.UTF-8 1\n", body)


class OutputBeforeAKill(unittest.TestCase):
    """Each kill reason, with a line printed to stdout (and one to stderr) before it: the lines
    are in the response (Python's stdout is block-buffered when it is not a terminal; a run's is
    line-buffered)."""

    PREFIX = "import sys\nprint('before')\nsys.stderr.write('err-before\\n')\n"

    def check(self, body, reason):
        self.assertEqual(body["kill_reason"], reason, body)
        self.assertTrue(body["stdout"].startswith("before\n"), body["stdout"][:200])
        self.assertTrue(body["stderr"].startswith("err-before\n"), body["stderr"][:200])

    def test_timeout(self):
        status, body = run(self.PREFIX + "while True:\n    pass\n", timeout=2)
        self.assertEqual(status, 200, body)
        self.check(body, "timeout")

    def test_memory(self):
        status, body = run(self.PREFIX + "x = []\nwhile True:\n    x.append(bytearray(1 << 20))\n",
                           timeout=30, limits={"memory": "96Mi"})
        self.assertEqual(status, 200, body)
        self.check(body, "memory")

    def test_pids(self):
        code = self.PREFIX + ("import os\n"
                              "while True:\n"
                              "    try:\n"
                              "        os.fork()\n"
                              "    except OSError:\n"
                              "        pass\n")
        status, body = run(code, timeout=30, limits={"pids": 16})
        self.assertEqual(status, 200, body)
        self.check(body, "pids")

    def test_output(self):
        # The flood goes to stderr: what stdout printed first must still be there.
        code = ("import sys\nprint('before')\nsys.stderr.write('err-before\\n')\n"
                "chunk = 'x' * 65536\nwhile True:\n    sys.stderr.write(chunk)\n")
        status, body = run(code, timeout=30)
        self.assertEqual(status, 200, body)
        self.check(body, "output")

    def test_signal(self):
        status, body = run(self.PREFIX + "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
        self.assertEqual(status, 200, body)
        self.check(body, "signal")


if __name__ == "__main__":
    unittest.main()
