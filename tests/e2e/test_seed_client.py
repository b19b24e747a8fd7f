"""The seed tutorial's client (seed_client.py, httpx) against a started server: it must work
unchanged and print the same output parts as against the fips-agents sidecar."""

import os
import subprocess
import sys
import unittest

from airlock_server import AirlockServer

HERE = os.path.dirname(os.path.abspath(__file__))
server = None


def setUpModule():
    global server
    try:
        import httpx  # noqa: F401
    except ImportError:
        if os.environ.get("AIRLOCK_MUST_WORK") == "1":
            raise
        raise unittest.SkipTest("httpx is not installed (apt-get install python3-httpx)")
    server = AirlockServer().start()


def tearDownModule():
    if server:
        server.cleanup()


def client(code):
    env = dict(os.environ, SANDBOX_URL=f"http://127.0.0.1:{server.port}")
    p = subprocess.run([sys.executable, os.path.join(HERE, "seed_client.py"), "-"], input=code.encode(),
                       capture_output=True, env=env, timeout=60)
    assert p.returncode == 0, p.stderr.decode()
    return p.stdout.decode()


class TestSeedClient(unittest.TestCase):
    def test_stdout_and_result(self):
        self.assertEqual(client("print('hello')\n6 * 7"), "hello\n\nResult: 42\n")

    def test_result_only(self):
        self.assertEqual(client("sum(range(10))"), "Result: 45\n")

    def test_no_output(self):
        self.assertEqual(client("x = 1"), "(no output)\n")

    def test_runtime_error_parts(self):
        out = client("print('a')\n1/0")
        self.assertTrue(out.startswith("a\n\nStderr: Traceback (most recent call last):\n"), out)
        self.assertIn('File "main.py", line 2', out)
        self.assertTrue(out.endswith("Error: ZeroDivisionError: division by zero\n"), out)

    def test_rejected_code(self):
        out = client("import os")
        self.assertTrue(out.startswith("Sandbox error (HTTP 400): "), out)
        self.assertIn("import of 'os' is not allowed", out)

    def test_empty_code(self):
        self.assertEqual(client("  "), 'Sandbox error (HTTP 400): {"error":"No code provided"}\n')


if __name__ == "__main__":
    unittest.main()
