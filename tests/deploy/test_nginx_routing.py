"""deploy/nginx/airlock.conf, the session routing scheme of docs/deploy.md, run by a
real nginx in front of three stub instances: a creation request hands its instance
a fresh 8-hex route key in X-Airlock-Route; every later request naming a session id
s1-<key>-<secret> (in the path or X-Airlock-Session) reaches that same instance with
the same key; requests without a session spread over the instances."""

import http.server
import json
import os
import threading
import unittest
import urllib.request

from deploy_common import Nginx


class Stub(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.answer()

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.answer()

    def answer(self):
        body = json.dumps({"instance": self.server.name, "route": self.headers.get("X-Airlock-Route")}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class NginxRouting(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.stubs = []
        for i in range(3):
            server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Stub)
            server.name = f"airlock-{i}"
            threading.Thread(target=server.serve_forever, daemon=True).start()
            cls.stubs.append(server)
        cls.nginx = Nginx([s.server_address[1] for s in cls.stubs])
        cls.port = cls.nginx.port

    @classmethod
    def tearDownClass(cls):
        cls.nginx.stop()
        for s in cls.stubs:
            s.shutdown()

    @classmethod
    def call(cls, method, path, headers=None):
        req = urllib.request.Request(f"http://127.0.0.1:{cls.port}{path}", method=method,
                                     data=b"{}" if method == "POST" else None, headers=headers or {})
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.load(r)

    def test_a_session_stays_on_the_instance_that_created_it(self):
        seen = set()
        for _ in range(30):
            created = self.call("POST", "/v1/sessions")
            key = created["route"]
            self.assertRegex(key, r"^[0-9a-f]{8}$")
            seen.add(created["instance"])
            session = f"s1-{key}-{os.urandom(16).hex()}"
            for _ in range(3):
                by_path = self.call("POST", f"/v1/sessions/{session}/execute")
                self.assertEqual(by_path, created)
                by_header = self.call("POST", "/v1/execute", {"X-Airlock-Session": session})
                self.assertEqual(by_header, created)
        self.assertGreaterEqual(len(seen), 2, "30 sessions all on one instance: keys are not spread")

    def test_requests_without_a_session_get_fresh_keys(self):
        keys = {self.call("POST", "/execute")["route"] for _ in range(20)}
        self.assertEqual(len(keys), 20)
        # A malformed session header does not pin anything.
        odd = {self.call("POST", "/v1/execute", {"X-Airlock-Session": "s1-zzzzzzzz-x"})["route"] for _ in range(5)}
        self.assertEqual(len(odd), 5)


if __name__ == "__main__":
    unittest.main()
