"""Web pages cannot drive a local airlock (issue 9, docs/security.md "Browsers").

A page the user opens can send a "simple" cross-origin POST (form or text/plain body, no
preflight) to http://localhost:8000, and after a DNS rebinding its requests carry the
attacker's host name while reaching the server. Each test sends exactly what a browser would
and asserts the request is refused before any code runs (the run counter does not move);
the requests real clients send (the seed tutorial's httpx client, same-origin pages, allowed
origins, a named host behind a proxy) keep working.
"""

import http.client
import json
import os
import socket
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from airlock_server import AirlockServer, binary, metric_value  # noqa: E402

ALLOWED_ORIGIN = "http://console.example:3000"


def request(port, method, path, headers, body=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for k, v in headers.items():
            conn.putheader(k, v)
        data = body.encode() if isinstance(body, str) else body
        if data is not None:
            conn.putheader("Content-Length", str(len(data)))
        conn.endheaders(data)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def runs_counter(server):
    text = server.get("/metrics")[2].decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith("airlock_executions_total"):
            total += float(line.rsplit(" ", 1)[1])
    return total


CODE = json.dumps({"code": "print(42)"})


class TestBrowserRules(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = AirlockServer(extra_args=["--allowed-origin", ALLOWED_ORIGIN,
                                               "--allowed-host", "airlock.internal"]).start()
        cls.port = cls.server.port
        cls.own = f"127.0.0.1:{cls.port}"

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()

    def assert_refused_without_running(self, status, expected, body):
        self.assertEqual(status, expected, body)
        self.assertIn("error", json.loads(body))

    def test_the_issue_request_is_refused(self):
        before = runs_counter(self.server)
        # The curl from the issue: foreign Host, foreign Origin, text/plain body.
        status, headers, body = request(self.port, "POST", "/execute", {
            "Host": "attacker.example:8000", "Origin": "http://attacker.example",
            "Content-Type": "text/plain"}, CODE)
        self.assert_refused_without_running(status, 421, body)
        self.assertIn(b"--allowed-host", body)
        self.assertNotIn("access-control-allow-origin", headers)
        self.assertEqual(runs_counter(self.server), before)

    def test_rebinding_request_without_origin_is_refused(self):
        before = runs_counter(self.server)
        # After a DNS rebinding the page is same-origin with the server: no Origin on a
        # GET, and the Host is still the attacker's name.
        for method, path, body in (("POST", "/execute", CODE), ("POST", "/v1/execute", CODE),
                                   ("GET", "/v1/profiles", None), ("GET", "/metrics", None)):
            headers = {"Host": f"rebind.attacker.example:{self.port}"}
            if body is not None:
                headers["Content-Type"] = "application/json"
            status, _, data = request(self.port, method, path, headers, body)
            self.assert_refused_without_running(status, 421, data)
        self.assertEqual(runs_counter(self.server), before)

    def test_simple_request_bodies_are_refused(self):
        before = runs_counter(self.server)
        for ctype, body in (("application/x-www-form-urlencoded", CODE), ("text/plain", CODE),
                            ("multipart/form-data; boundary=x", CODE), (None, CODE),
                            ("application/jsonx", CODE), ("text/json", CODE)):
            headers = {"Host": self.own}
            if ctype:
                headers["Content-Type"] = ctype
            status, _, data = request(self.port, "POST", "/v1/execute", headers, body)
            self.assert_refused_without_running(status, 415, data)
            self.assertIn(b"application/json", data)
        self.assertEqual(runs_counter(self.server), before)

    def test_foreign_origin_is_refused_even_with_a_json_body(self):
        before = runs_counter(self.server)
        for origin in ("http://attacker.example", "null", f"http://localhost.attacker.example:{self.port}",
                       f"https://127.0.0.1:{self.port + 1}", "file://"):
            status, headers, data = request(self.port, "POST", "/execute", {
                "Host": self.own, "Origin": origin, "Content-Type": "application/json"}, CODE)
            self.assert_refused_without_running(status, 403, data)
            self.assertIn(b"--allowed-origin", data)
            self.assertNotIn("access-control-allow-origin", headers)
        self.assertEqual(runs_counter(self.server), before)

    def test_preflight_from_a_foreign_origin_gets_no_cors_headers(self):
        status, headers, _ = request(self.port, "OPTIONS", "/v1/execute", {
            "Host": self.own, "Origin": "http://attacker.example",
            "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"})
        self.assertEqual(status, 403)
        self.assertFalse([h for h in headers if h.startswith("access-control-allow")], headers)

    def test_allowed_origin_works_end_to_end(self):
        status, headers, _ = request(self.port, "OPTIONS", "/v1/execute", {
            "Host": self.own, "Origin": ALLOWED_ORIGIN,
            "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"})
        self.assertEqual(status, 204)
        self.assertEqual(headers["access-control-allow-origin"], ALLOWED_ORIGIN)
        self.assertIn("POST", headers["access-control-allow-methods"])
        self.assertIn("Content-Type", headers["access-control-allow-headers"])
        self.assertEqual(headers["vary"], "Origin")
        status, headers, data = request(self.port, "POST", "/v1/execute", {
            "Host": self.own, "Origin": ALLOWED_ORIGIN, "Content-Type": "application/json"}, CODE)
        self.assertEqual(status, 200, data)
        self.assertEqual(json.loads(data)["stdout"], "42\n")
        self.assertEqual(headers["access-control-allow-origin"], ALLOWED_ORIGIN)
        self.assertIn("X-Request-Id", headers["access-control-expose-headers"])

    def test_same_origin_pages_and_plain_clients_work(self):
        # A page served by airlock itself sends Origin on POST: its own scheme, host and port.
        for host in (self.own, f"localhost:{self.port}", f"[::1]:{self.port}"):
            origin = "http://" + host
            status, headers, data = request(self.port, "POST", "/execute", {
                "Host": host, "Origin": origin,
                "Content-Type": "application/json; charset=utf-8"}, CODE)
            self.assertEqual(status, 200, (host, data))
            self.assertEqual(json.loads(data)["stdout"], "42\n")
            self.assertNotIn("access-control-allow-origin", headers)  # same origin: no CORS needed
        # No Origin at all (curl, httpx, the fips clients): only Host matters.
        status, _, data = request(self.port, "POST", "/execute", {
            "Host": f"localhost:{self.port}", "Content-Type": "application/json"}, CODE)
        self.assertEqual(status, 200, data)

    def test_allowed_host_names_work(self):
        status, _, data = request(self.port, "POST", "/execute", {
            "Host": "airlock.internal", "Content-Type": "application/json"}, CODE)
        self.assertEqual(status, 200, data)
        status, _, data = request(self.port, "POST", "/execute", {
            "Host": "AIRLOCK.INTERNAL.:8000", "Content-Type": "application/json"}, CODE)
        self.assertEqual(status, 200, data)

    def test_probes_stay_open(self):
        for path in ("/healthz", "/readyz"):
            status, _, _ = request(self.port, "GET", path, {"Host": "10.1.2.3:8000"})
            self.assertEqual(status, 200, path)

    def test_refusals_are_counted(self):
        request(self.port, "POST", "/execute", {"Host": "evil.example", "Content-Type": "application/json"}, CODE)
        request(self.port, "POST", "/execute", {"Host": self.own, "Content-Type": "text/plain"}, CODE)
        request(self.port, "POST", "/execute", {"Host": self.own, "Origin": "http://evil.example",
                                                "Content-Type": "application/json"}, CODE)
        text = self.server.get("/metrics")[2].decode()
        for reason in ("host", "media_type", "origin"):
            self.assertGreaterEqual(
                metric_value(text, "airlock_requests_rejected_total", reason=reason) or 0, 1, reason)


class TestAnyHost(unittest.TestCase):
    """--allowed-host '*': a deployment behind a proxy that checks the Host itself."""

    def test_any_host_but_origins_still_checked(self):
        server = AirlockServer(extra_args=["--allowed-host", "*"]).start()
        try:
            status, _, data = request(server.port, "POST", "/execute", {
                "Host": "whatever.example", "Content-Type": "application/json"}, CODE)
            self.assertEqual(status, 200, data)
            status, _, data = request(server.port, "POST", "/execute", {
                "Host": "whatever.example", "Origin": "http://attacker.example",
                "Content-Type": "application/json"}, CODE)
            self.assertEqual(status, 403, data)
        finally:
            server.cleanup()

    def test_wildcard_origin_is_refused_at_start(self):
        for flag, value in (("--allowed-origin", "*"), ("--allowed-origin", "null"),
                            ("--allowed-origin", "console.example"), ("--allowed-host", "a b")):
            p = subprocess.run([binary(), "serve", "--listen", "127.0.0.1:0", flag, value],
                               capture_output=True, timeout=60)
            self.assertEqual(p.returncode, 2, (flag, value, p.stderr))
            self.assertIn(flag.encode(), p.stderr)
            self.assertNotIn(b"listening", p.stdout)


class TestRefusedBeforeTheBody(unittest.TestCase):
    """With tokens, a request without one is refused on its headers: its body is never read,
    no "100 Continue" invites it, and the answer does not wait for it."""

    TOKEN = "e2e-" + "b" * 40

    @classmethod
    def setUpClass(cls):
        cls.server = AirlockServer(env={"AIRLOCK_TOKENS": f"agent:{cls.TOKEN}"}).start()

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()

    def send_headers_only(self, extra, method=b"POST"):
        s = socket.create_connection(("127.0.0.1", self.server.port), timeout=45)
        s.sendall(method + b" /v1/execute HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n" +
                  extra + b"Content-Length: 2000000\r\n\r\n")
        t0 = time.monotonic()
        data = b""
        try:
            while b"\r\n\r\n" not in data:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
        finally:
            s.close()
        return data, time.monotonic() - t0

    def test_no_token_is_answered_401_without_reading_the_body(self):
        data, elapsed = self.send_headers_only(b"")
        self.assertTrue(data.startswith(b"HTTP/1.1 401"), data[:200])
        self.assertIn(b"Connection: close", data)
        # The server would otherwise wait up to its 60 s body timeout for 2 MB that never come:
        # half of it tells the two apart on any host.
        self.assertLess(elapsed, 30, "the server waited for a body it should have refused unread")

    def test_no_100_continue_for_an_unauthenticated_body(self):
        data, _ = self.send_headers_only(b"Expect: 100-continue\r\n")
        self.assertFalse(data.startswith(b"HTTP/1.1 100"), data[:200])
        self.assertTrue(data.startswith(b"HTTP/1.1 401"), data[:200])

    def test_options_is_answered_without_reading_a_body(self):
        # A preflight needs no token; a body it carries is never read (nor invited).
        data, elapsed = self.send_headers_only(b"Expect: 100-continue\r\n", method=b"OPTIONS")
        self.assertTrue(data.startswith(b"HTTP/1.1 204"), data[:200])
        self.assertIn(b"Connection: close", data)
        self.assertLess(elapsed, 30, "the server waited for a body it should not read (its body timeout is 60 s)")

    def test_with_the_token_the_body_is_read(self):
        status, _, data = self.server.post_json("/v1/execute", {"code": "print(1)"},
                                                headers={"Authorization": f"Bearer {self.TOKEN}"})
        self.assertEqual(status, 200, data)


if __name__ == "__main__":
    unittest.main()
