"""Operating `airlock serve`: authentication, the loopback rule, admission (429), client
disconnects, SIGTERM drain, metrics and the audit trail. Each test class starts the server
configuration it needs."""

import concurrent.futures
import hashlib
import http.client
import json
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time
import unittest

from airlock_server import AirlockServer, assert_paced, binary, metric_value, scaled, SOURCE_DIR, trivial_run_seconds

TOKEN_A = "agent-0123456789abcdef0123456789"
TOKEN_B = "ci-fedcba9876543210fedcba98765"
BUSY = "while True:\n    pass"


def send_execute_raw(port, code, timeout_s):
    """Opens a connection and sends an execute request without reading the answer."""
    body = json.dumps({"code": code, "timeout": timeout_s}).encode()
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.sendall(b"POST /execute HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " +
              str(len(body)).encode() + b"\r\n\r\n" + body)
    return s


def wait_for_metric(server, name, value, timeout=30):
    """Polls /metrics until the gauge `name` reads `value`: an ordering barrier (the server has
    admitted, queued or let go of a request) instead of a fixed sleep. Fails after `timeout`
    seconds (scaled by $AIRLOCK_TEST_TIMEOUT_SCALE) with the last value read."""
    deadline = time.monotonic() + scaled(timeout)
    while True:
        got = metric_value(server.metrics(), name)
        if got == value:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{name} is {got}, not {value}, after {scaled(timeout):.0f} s")
        time.sleep(0.02)


def metric(text, name_and_labels):
    for line in text.splitlines():
        if line.startswith(name_and_labels + " "):
            return float(line.rsplit(" ", 1)[1])
    return None


class TestAuth(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        tokens = os.path.join(cls.tmp.name, "tokens")
        with open(tokens, "w") as f:
            f.write(f"# tokens\nci-runner:{TOKEN_B}\n")
        os.chmod(tokens, 0o600)
        cls.server = AirlockServer(extra_args=["--tokens-file", tokens],
                                   env={"AIRLOCK_TOKENS": f"agent:{TOKEN_A}"}).start()

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()
        cls.tmp.cleanup()

    def test_probes_need_no_token(self):
        self.assertEqual(self.server.get("/healthz")[0], 200)
        self.assertEqual(self.server.get("/readyz")[0], 200)

    def test_missing_or_wrong_token_is_401(self):
        for headers in [{}, {"Authorization": "Bearer nope-nope-nope-nope-nope"}, {"X-API-Key": TOKEN_A[:-1]},
                        {"Authorization": "Basic " + TOKEN_A}, {"Authorization": "Bearer " + TOKEN_A + "x"}]:
            with self.subTest(headers=headers):
                status, hdrs, data = self.server.post_json("/execute", {"code": "print(1)"}, headers=headers)
                self.assertEqual(status, 401)
                self.assertIn("Bearer", hdrs["www-authenticate"])
                self.assertIn("token", json.loads(data)["error"])
        self.assertEqual(self.server.get("/profile")[0], 401)
        self.assertEqual(self.server.get("/metrics")[0], 401)

    def test_bearer_and_api_key(self):
        for headers in [{"Authorization": "Bearer " + TOKEN_A}, {"Authorization": "bearer " + TOKEN_B},
                        {"X-API-Key": TOKEN_A}]:
            with self.subTest(headers=headers):
                status, _, data = self.server.post_json("/execute", {"code": "print(5)"}, headers=headers)
                self.assertEqual(status, 200, data)
                self.assertEqual(json.loads(data)["stdout"], "5\n")
        self.assertEqual(self.server.get("/profile", headers={"X-API-Key": TOKEN_B})[0], 200)

    def test_audit_names_the_token(self):
        status, hdrs, _ = self.server.post_json("/execute", {"code": "print(6)"},
                                                headers={"Authorization": "Bearer " + TOKEN_B})
        rid = hdrs["x-request-id"]
        rec = self.server.wait_for_audit(lambda r: r["request_id"] == rid)
        self.assertEqual(rec[0]["client"]["token"], "ci-runner")
        self.assertTrue(rec[0]["client"]["address"].startswith("127.0.0.1:"))
        status, hdrs, _ = self.server.post_json("/execute", {"code": "print(6)"}, headers={"X-API-Key": "x" * 20})
        rid = hdrs["x-request-id"]
        rec = self.server.wait_for_audit(lambda r: r["request_id"] == rid)
        self.assertEqual(rec[0]["verdict"], "unauthorized")
        self.assertIsNone(rec[0]["client"]["token"])


class TestStartupRules(unittest.TestCase):
    def run_serve(self, args, env=None, timeout=20):
        e = dict(os.environ)
        e.pop("AIRLOCK_TOKENS", None)
        e.update(env or {})
        p = subprocess.Popen([binary(), "serve", "--profiles", os.path.join(SOURCE_DIR, "profiles"),
                              "--audit-log", ""] + args,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e)
        return p

    def test_non_loopback_without_tokens_is_refused(self):
        p = self.run_serve(["--listen", "0.0.0.0:0"])
        out, err = p.communicate(timeout=20)
        self.assertEqual(p.returncode, 2)
        self.assertIn(b"--insecure", err)
        self.assertEqual(out, b"")  # refused before listening
        self.assertIn(b"token", err)

    def test_non_loopback_with_insecure_or_tokens_starts(self):
        for args, env in [(["--insecure"], None), ([], {"AIRLOCK_TOKENS": "t:" + TOKEN_A})]:
            with self.subTest(args=args):
                p = self.run_serve(["--listen", "0.0.0.0:0"] + args, env=env)
                try:
                    first = p.stdout.readline().decode()
                    self.assertTrue(first.startswith("airlock: listening on http://0.0.0.0:"), first)
                finally:
                    p.send_signal(signal.SIGTERM)
                    p.communicate(timeout=30)
                self.assertEqual(p.returncode, 0)

    def test_short_token_is_refused(self):
        p = self.run_serve(["--listen", "127.0.0.1:0"], env={"AIRLOCK_TOKENS": "short"})
        out, err = p.communicate(timeout=20)
        self.assertEqual(p.returncode, 2)
        self.assertIn(b"at least 16", err)

    def test_bad_listen_and_unknown_default_profile(self):
        for args, text in [(["--listen", "127.0.0.1:99999"], b"port"),
                           (["--listen", "127.0.0.1:0", "--default-profile", "nope"], b"nope")]:
            with self.subTest(args=args):
                p = self.run_serve(args)
                out, err = p.communicate(timeout=20)
                self.assertEqual(p.returncode, 2, err)
                self.assertIn(text, err)


class TestAdmission(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = AirlockServer(extra_args=["--max-concurrent", "1", "--max-queue", "1"]).start()

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()

    def test_429_under_a_burst(self):
        def one(_):
            status, headers, data = self.server.post_json("/execute", {"code": BUSY, "timeout": 1.5})
            return status, headers
        with concurrent.futures.ThreadPoolExecutor(6) as pool:
            results = list(pool.map(one, range(6)))
        statuses = sorted(s for s, _ in results)
        self.assertEqual(statuses.count(200), 2, statuses)  # one running, one queued
        self.assertEqual(statuses.count(429), 4, statuses)
        for status, headers in results:
            if status == 429:
                self.assertEqual(headers["retry-after"], "1")
        text = self.server.get("/metrics")[2].decode()
        self.assertGreaterEqual(metric(text, 'airlock_requests_rejected_total{reason="overloaded"}'), 4)
        # A run holds its slot until it is torn down, a moment after its answer.
        deadline = time.monotonic() + 10
        while metric(text, "airlock_executions_in_flight") != 0 and time.monotonic() < deadline:
            time.sleep(0.05)
            text = self.server.get("/metrics")[2].decode()
        self.assertEqual(metric(text, "airlock_executions_in_flight"), 0)
        self.assertEqual(metric(text, "airlock_execution_queue_depth"), 0)

    def test_disconnect_while_queued_leaves_the_queue(self):
        # The running request holds the only slot until it is closed below (its timeout is only
        # a backstop), so the second one stays queued.
        running = send_execute_raw(self.server.port, BUSY, 20)
        wait_for_metric(self.server, "airlock_executions_in_flight", 1)
        queued = send_execute_raw(self.server.port, "print('never')", 5)
        wait_for_metric(self.server, "airlock_execution_queue_depth", 1)
        queued.close()
        recs = self.server.wait_for_audit(lambda r: r["verdict"] == "client_gone" and r["exit_code"] is None)
        self.assertTrue(recs, self.server.audit_records())
        text = self.server.get("/metrics")[2].decode()
        self.assertEqual(metric(text, "airlock_execution_queue_depth"), 0)
        running.close()


class TestDisconnect(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = AirlockServer().start()

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()

    def test_client_disconnect_kills_the_run(self):
        code = "# disconnect-test\n" + BUSY
        s = send_execute_raw(self.server.port, code, 25)
        wait_for_metric(self.server, "airlock_executions_in_flight", 1)
        s.close()
        sha = hashlib.sha256(code.encode()).hexdigest()
        # Waited past the run's own 25 s timeout: what ended it is in the record.
        recs = self.server.wait_for_audit(lambda r: r["code_sha256"] == sha, timeout=40)
        self.assertTrue(recs)
        rec = recs[0]
        # Killed because the client went, not by its timeout (which would say "timeout").
        self.assertEqual(rec["verdict"], "client_gone")
        self.assertEqual(rec["kill_reason"], "cancelled")
        self.assertTrue(rec["client_gone"])
        self.assertLess(rec["run_ms"], 25000)
        # The audit record is written at the answer; the run's slot is let go once its teardown
        # is done (docs/security.md, issue 15.6), which a sanitizer build can take a while over.
        wait_for_metric(self.server, "airlock_executions_in_flight", 0, timeout=10)
        text = self.server.get("/metrics")[2].decode()
        self.assertGreaterEqual(metric(text, 'airlock_executions_total{outcome="cancelled"}'), 1)


class TestDrain(unittest.TestCase):
    def test_sigterm_lets_runs_finish(self):
        server = AirlockServer(extra_args=["--drain-grace", "20", "--max-concurrent", "1"]).start()
        try:
            # Long enough to be still running when SIGTERM comes on a loaded host; far inside the grace.
            code = "import time\ntime.sleep(4)\nprint('finished')"
            with concurrent.futures.ThreadPoolExecutor(2) as pool:
                # Its own timeout well past launch + 4 s on a loaded host (the profile's default is 10 s).
                running = pool.submit(server.execute, code, profile="general", timeout=30)
                wait_for_metric(server, "airlock_executions_in_flight", 1)
                queued = pool.submit(server.execute, "print('queued')")
                wait_for_metric(server, "airlock_execution_queue_depth", 1)
                server.proc.send_signal(signal.SIGTERM)
                status, body = running.result(30)
                self.assertEqual(status, 200)
                self.assertEqual(body["stdout"], "finished\n", body)
                self.assertEqual(body["exit_code"], 0)
                qstatus, qbody = queued.result(30)
                self.assertEqual(qstatus, 503, qbody)
                self.assertIn("shutting down", qbody["error"])
            self.assertEqual(server.proc.wait(30), 0)
            self.assertIn("draining", "".join(server.stderr_lines))
        finally:
            server.cleanup()

    def test_sigterm_kills_runs_after_the_grace_period(self):
        server = AirlockServer(extra_args=["--drain-grace", "1"]).start()
        try:
            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                running = pool.submit(server.execute, BUSY, path="/v1/execute", timeout=25)
                wait_for_metric(server, "airlock_executions_in_flight", 1)
                server.proc.send_signal(signal.SIGTERM)
                status, body = running.result(60)
                self.assertEqual(status, 200)
                # Killed at the end of the 1 s grace ("cancelled"), not by its own 25 s timeout.
                self.assertEqual(body["kill_reason"], "cancelled")
                self.assertLess(body["duration_ms"], 25000, body)
            self.assertEqual(server.proc.wait(30), 0)
            # No new request is served any more.
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=2)
            try:
                conn.request("GET", "/healthz")
                served = conn.getresponse().status == 200
            except OSError:
                served = False
            finally:
                conn.close()
            self.assertFalse(served)
        finally:
            server.cleanup()

    def test_idle_server_exits_at_once(self):
        # A drain grace far longer than any shutdown here: a server that waited for its idle
        # keep-alive connection would take all of it.
        server = AirlockServer(extra_args=["--drain-grace", "120"]).start()
        try:
            pace = trivial_run_seconds(server)
            conn = server.connection()
            conn.request("GET", "/healthz")  # an idle keep-alive connection stays open
            conn.getresponse().read()
            start = time.monotonic()
            self.assertEqual(server.stop(timeout=150), 0)
            assert_paced(self, time.monotonic() - start, 5, pace, "stopping an idle server (its grace is 120 s)")
            conn.close()
        finally:
            server.cleanup()


class TestMetricsAndAudit(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = AirlockServer().start()

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()

    def test_metrics(self):
        self.server.execute("print(1)")
        self.server.execute("import os")
        self.server.execute("print(1)", timeout=99)
        status, headers, data = self.server.get("/metrics")
        self.assertEqual(status, 200)
        self.assertTrue(headers["content-type"].startswith("text/plain; version=0.0.4"))
        text = data.decode()
        self.assertGreaterEqual(metric(text, 'airlock_executions_total{outcome="ok"}'), 1)
        self.assertGreaterEqual(metric(text, 'airlock_requests_rejected_total{reason="policy"}'), 1)
        self.assertGreaterEqual(metric(text, 'airlock_requests_rejected_total{reason="invalid"}'), 1)
        self.assertGreaterEqual(metric(text, 'airlock_policy_rejections_total{rule="import-not-allowed"}'), 1)
        self.assertEqual(metric(text, 'airlock_execution_duration_seconds_bucket{le="+Inf"}'),
                         metric(text, "airlock_execution_duration_seconds_count"))
        self.assertEqual(metric(text, "airlock_ready"), 1)
        self.assertIn("# TYPE airlock_execution_duration_seconds histogram", text)
        self.assertGreaterEqual(metric(text, 'airlock_http_requests_total{route="/execute",code="200"}'), 1)

    def test_one_audit_record_per_request(self):
        ids = {}
        for code, extra in [("print('audit-ok')", {}), ("import socket", {}), ("print(1)", {"timeout": 0})]:
            status, hdrs, _ = self.server.post_json("/execute", dict(code=code, **extra))
            ids[hdrs["x-request-id"]] = (status, code)
        # The audit log is written asynchronously: wait for each request's record.
        for rid in ids:
            self.assertTrue(self.server.wait_for_audit(lambda r, rid=rid: r["request_id"] == rid, timeout=scaled(30)),
                            f"no audit record for {rid} in {scaled(30):.0f} s")
        recs = {r["request_id"]: r for r in self.server.audit_records() if r["request_id"] in ids}
        self.assertEqual(set(recs), set(ids))
        for rid, (status, code) in ids.items():
            r = recs[rid]
            self.assertEqual(r["http_status"], status)
            self.assertEqual(r["code_sha256"], hashlib.sha256(code.encode()).hexdigest())
            self.assertEqual(r["profile"], "minimal")
            self.assertTrue(r["time"].endswith("Z"))
            self.assertIn("duration_ms", r)
            self.assertIn("usage", r)
        verdicts = sorted(r["verdict"] for r in recs.values())
        self.assertEqual(verdicts, ["invalid", "ran", "rejected"])
        ran = [r for r in recs.values() if r["verdict"] == "ran"][0]
        self.assertEqual(ran["exit_code"], 0)
        self.assertIsNone(ran["kill_reason"])
        rejected = [r for r in recs.values() if r["verdict"] == "rejected"][0]
        self.assertEqual(rejected["violations"][0]["rule"], "import-not-allowed")

    def test_user_output_cannot_forge_audit_records(self):
        fake = json.dumps({"request_id": "forged", "verdict": "ran", "fake_event": True})
        code = f"print({fake!r})\nprint('\\n' + {fake!r})\n"
        status, body = self.server.execute(code)
        self.assertEqual(status, 200)
        self.assertEqual(body["exit_code"], 0)
        self.assertIn("fake_event", body["stdout"])
        time.sleep(0.3)
        with open(self.server.audit_path, encoding="utf-8") as f:
            lines = [line for line in f if line.strip()]
        for line in lines:
            rec = json.loads(line)  # every line is one whole record
            self.assertNotEqual(rec["request_id"], "forged")
            self.assertNotIn("fake_event", line)

    def test_audit_to_stdout(self):
        server = AirlockServer()
        server.start(audit_to_stdout=True)
        try:
            status, hdrs, _ = server.post_json("/execute", {"code": "print('{\"request_id\": \"forged\"}')"})
            self.assertEqual(status, 200)
            rid = hdrs["x-request-id"]
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and not any(rid in l for l in server.stdout_lines):
                time.sleep(0.05)
        finally:
            server.stop()
            server.cleanup()
        records = [json.loads(l) for l in server.stdout_lines if l.strip()]
        self.assertEqual([r["request_id"] for r in records if r["route"] == "/execute"], [rid])
        self.assertFalse(any(r["request_id"] == "forged" for r in records))


if __name__ == "__main__":
    unittest.main()
