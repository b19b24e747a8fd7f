"""Streamed responses of POST /v1/execute (docs/api.md "Streaming"): `Accept:
application/x-ndjson` or `text/event-stream` gives E2B's events as they happen, through real
HTTP and real sandboxes: order, timing of the first line, SSE framing, keepalives, output caps
in flight, invalid UTF-8, a client that goes away (no process of the run left), a timeout, a
client that does not read (bounded queue), and the plain JSON path unchanged.

The server runs with `--stream-keepalive 1` (so a keepalive shows up within a short sleep) and
`--stream-buffer 64K` (so a client that does not read makes output events drop well before the
output cap), over two profiles: `general` and `bigout` (general with an 8 MiB output cap)."""

import base64
import datetime
import hashlib
import http.client
import json
import os
import secrets
import shutil
import signal
import socket
import tempfile
import time
import unittest

from airlock_server import (AirlockServer, SOURCE_DIR, assert_mode, descendants, host_processes, metric_value, paced,
                            scaled, trivial_run_seconds)

NDJSON = "application/x-ndjson"
SSE = "text/event-stream"
KEEPALIVE_S = 1

server = None
profiles_tmp = None


def setUpModule():
    global server, profiles_tmp
    profiles_tmp = tempfile.TemporaryDirectory(prefix="airlock-stream-profiles-")
    shutil.copy(os.path.join(SOURCE_DIR, "profiles", "general.yaml"), profiles_tmp.name)
    with open(os.path.join(profiles_tmp.name, "bigout.yaml"), "w") as f:
        f.write("name: bigout\nextends: general\ndescription: general with an 8 MiB output cap\n"
                "resources:\n  output: 8Mi\n")
    server = AirlockServer(profiles_dir=profiles_tmp.name,
                           extra_args=["--default-profile", "general", "--stream-keepalive", str(KEEPALIVE_S),
                                       "--stream-buffer", "64K"]).start()


def tearDownModule():
    if server is not None:
        server.cleanup()
    if profiles_tmp is not None:
        profiles_tmp.cleanup()


def open_stream(payload, accept=NDJSON, timeout=60, conn=None):
    """Sends POST /v1/execute with `accept`; returns (connection, response) with the header read."""
    server.wait_pools_ready(profiles=[payload.get("profile", "general")])
    conn = conn or server.connection(timeout)
    conn.request("POST", "/v1/execute", body=json.dumps(payload),
                 headers={"Content-Type": "application/json", "Accept": accept})
    return conn, conn.getresponse()


def ndjson_events(resp):
    """Yields (arrival time, event) per line until the end of the body. Each line must be one
    JSON object in strict UTF-8."""
    while True:
        line = resp.readline()
        if not line:
            return
        at = time.monotonic()
        assert line.endswith(b"\n"), line
        event = json.loads(line.decode("utf-8"))  # strict: invalid UTF-8 fails here
        assert isinstance(event, dict) and "type" in event, line
        yield at, event


def stream(payload, accept=NDJSON):
    """A whole NDJSON stream: (response, [events])."""
    conn, resp = open_stream(payload, accept)
    try:
        return resp, [e for _, e in ndjson_events(resp)]
    finally:
        conn.close()


def text_of(events, kind):
    return "".join(e["text"] for e in events if e["type"] == kind)


class StreamCase(unittest.TestCase):
    def assertWellFormed(self, resp, events):
        self.assertEqual(resp.status, 200)
        self.assertEqual(resp.getheader("Content-Type"), NDJSON)
        self.assertEqual(resp.getheader("Transfer-Encoding"), "chunked")
        self.assertEqual(resp.getheader("Cache-Control"), "no-cache")
        self.assertTrue(resp.getheader("X-Request-Id", "").startswith("req_"))
        self.assertTrue(events, "no event at all")
        end = events[-1]
        self.assertEqual(end["type"], "end_of_execution", events[-3:])
        self.assertEqual([e["type"] for e in events].count("end_of_execution"), 1)
        self.assertEqual(end["request_id"], resp.getheader("X-Request-Id"))
        assert_mode(self, end)
        # The streamed text is the response's (nothing dropped here).
        self.assertNotIn("stream", end)
        self.assertEqual(text_of(events, "stdout"), end["stdout"])
        self.assertEqual(text_of(events, "stderr"), end["stderr"])
        stamps = [e["timestamp"] for e in events if e["type"] in ("stdout", "stderr")]
        for s in stamps:
            self.assertRegex(s, r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
        self.assertEqual(stamps, sorted(stamps))
        return end


class TestEvents(StreamCase):
    def test_order_of_output_results_and_end(self):
        code = ("import sys, time\n"
                "print('one')\n"
                "time.sleep(0.2)\n"
                "sys.stderr.write('two\\n')\n"
                "time.sleep(0.2)\n"
                "print('three')\n"
                "6 * 7\n")
        resp, events = stream({"code": code, "timeout": 30})
        end = self.assertWellFormed(resp, events)
        # A keepalive may come first on a loaded host (a cold start past --stream-keepalive).
        events = [e for e in events if e["type"] != "keepalive"]
        self.assertEqual(events[0], {**events[0], "type": "stdout", "text": "one\n"})
        self.assertEqual(list(events[0])[0], "type", "type comes first, as E2B writes it")
        output = [(e["type"], e["text"]) for e in events if e["type"] in ("stdout", "stderr")]
        self.assertEqual(output, [("stdout", "one\n"), ("stderr", "two\n"), ("stdout", "three\n")])
        results = [e for e in events if e["type"] == "result"]
        self.assertEqual(len(results), 1, events)
        self.assertEqual(results[0]["data"], {"text/plain": "42"})
        self.assertEqual(results[0]["text"], "42")
        self.assertIs(results[0]["is_main_result"], True)
        self.assertLess(events.index(results[0]), len(events) - 1)
        self.assertEqual(end["exit_code"], 0)
        self.assertEqual(end["result"], "42")
        self.assertIsNone(end["error"])
        self.assertIsNone(end["kill_reason"])
        for key in ("usage", "isolation", "truncated", "profile", "warnings", "duration_ms", "results"):
            self.assertIn(key, end)

    def test_an_exception_is_an_error_event(self):
        resp, events = stream({"code": "print('before')\n1 / 0\n"})
        end = self.assertWellFormed(resp, events)
        errors = [e for e in events if e["type"] == "error"]
        self.assertEqual(len(errors), 1, events)
        self.assertEqual(errors[0]["name"], "ZeroDivisionError")
        self.assertEqual(errors[0]["value"], "division by zero")
        self.assertIn("line 2", errors[0]["traceback"])
        self.assertEqual(events[-2], errors[0])
        self.assertEqual(end["error"], {k: errors[0][k] for k in ("name", "value", "traceback")})
        self.assertEqual(end["exit_code"], 1)
        # The traceback arrives once, as the error event (E2B's shape), not also as stderr.
        self.assertEqual(text_of(events, "stderr"), "", events)
        self.assertEqual(end["stderr"], "")
        self.assertEqual(text_of(events, "stdout"), "before\n")

    def test_an_exception_is_sent_once_over_sse_too(self):
        conn, resp = open_stream({"code": "print('before')\n1 / 0\n"}, accept=SSE)
        try:
            self.assertEqual(resp.status, 200)
            body = resp.read().decode("utf-8")
        finally:
            conn.close()
        kinds = [line[len("event: "):] for line in body.split("\n") if line.startswith("event: ")]
        self.assertEqual(kinds.count("error"), 1, body)
        self.assertNotIn("stderr", kinds, body)
        self.assertEqual(body.count("ZeroDivisionError: division by zero"), 2, "the error event's traceback "
                         "and the final event's copy of the same error, nothing more")

    def test_figures_are_result_events(self):
        code = ("import matplotlib.pyplot as plt\n"
                "plt.plot([1, 2, 3], [1, 4, 9])\n"
                "plt.show()\n"
                "'done'\n")
        resp, events = stream({"code": code, "timeout": 30})
        end = self.assertWellFormed(resp, events)
        results = [e for e in events if e["type"] == "result"]
        self.assertEqual([r["is_main_result"] for r in results], [False, True], events)
        png = base64.b64decode(results[0]["data"]["image/png"])
        self.assertTrue(png.startswith(b"\x89PNG\r\n\x1a\n"))
        self.assertEqual(results[1]["data"]["text/plain"], "'done'")
        self.assertEqual([r["data"] for r in end["results"]], [r["data"] for r in results])

    def test_sse_framing(self):
        conn, resp = open_stream({"code": "print('a')\nprint('b')\n'r'\n"}, accept=SSE)
        try:
            self.assertEqual(resp.status, 200)
            self.assertEqual(resp.getheader("Content-Type"), "text/event-stream; charset=utf-8")
            self.assertEqual(resp.getheader("X-Accel-Buffering"), "no")
            body = resp.read().decode("utf-8")
        finally:
            conn.close()
        self.assertTrue(body.endswith("\n\n"), body[-100:])
        frames = body[:-2].split("\n\n")
        parsed = []
        for i, frame in enumerate(frames, start=1):
            lines = frame.split("\n")
            self.assertEqual(len(lines), 3, frame)
            self.assertTrue(lines[0].startswith("event: "), frame)
            self.assertEqual(lines[1], f"id: {i}")
            self.assertTrue(lines[2].startswith("data: "), frame)
            data = json.loads(lines[2][len("data: "):])
            self.assertEqual(data["type"], lines[0][len("event: "):])
            parsed.append(data)
        self.assertEqual(parsed[-1]["type"], "end_of_execution")
        self.assertEqual(text_of(parsed, "stdout"), "a\nb\n")
        self.assertEqual(parsed[-1]["stdout"], "a\nb\n")
        self.assertIn("result", [p["type"] for p in parsed])

    def test_invalid_utf8_and_split_characters(self):
        # Invalid bytes; then a two-byte character whose halves are written 0.3 s apart (two reads).
        code = ("import sys, time\n"
                "out = sys.stdout.buffer\n"
                "out.write(b'a\\xff\\xfeb\\n'); out.flush()\n"
                "e = 'é'.encode()\n"
                "out.write(b'x' + e[:1]); out.flush()\n"
                "time.sleep(0.3)\n"
                "out.write(e[1:] + b'y\\n'); out.flush()\n"
                "out.write(b'end\\xe2\\x82'); out.flush()\n")  # ends inside a character
        resp, events = stream({"code": code})
        end = self.assertWellFormed(resp, events)
        self.assertEqual(end["stdout"], "a\ufffd\ufffdb\nxéy\nend\ufffd")
        # The 0.3 s pause puts é's halves in two reads: the event before the split ends with
        # the whole characters before it, the next one starts with é whole (the joined text
        # equals the response's, checked above, so no half became U+FFFD).
        texts = [e["text"] for e in events if e["type"] == "stdout"]
        split = [i for i, t in enumerate(texts) if t.endswith("x")]
        if split:
            self.assertTrue(texts[split[0] + 1].startswith("é"), texts)
        else:
            self.assertTrue(any("xéy" in t for t in texts), texts)

    def test_keepalive_while_the_program_is_silent(self):
        conn, resp = open_stream({"code": "import time\nprint('a')\ntime.sleep(2.5)\nprint('b')\n"})
        try:
            events = [e for _, e in ndjson_events(resp)]
        finally:
            conn.close()
        kinds = [e["type"] for e in events]
        a, b = kinds.index("stdout"), len(kinds) - 1 - kinds[::-1].index("stdout")
        keepalives = [k for k in kinds[a:b] if k == "keepalive"]
        self.assertGreaterEqual(len(keepalives), 1, kinds)
        self.assertLessEqual(len(keepalives), 3, kinds)
        self.assertEqual(events[a + 1], {"type": "keepalive"})


class TestTiming(StreamCase):
    def test_first_line_arrives_while_the_program_sleeps(self):
        conn, resp = open_stream({"code": "import time\nprint('first')\ntime.sleep(1)\nprint('second')\n"})
        try:
            arrivals = []
            for at, e in ndjson_events(resp):
                if e["type"] == "stdout":
                    arrivals.append((at, e))
        finally:
            conn.close()
        self.assertEqual([e["text"] for _, e in arrivals], ["first\n", "second\n"])
        (t1, e1), (t2, e2) = arrivals
        # Block-buffered stdout would deliver both lines together, after the sleep.
        self.assertGreater(t2 - t1, 0.8, "the first line waited for the second")
        # From the server reading the line to the client having it (same host clock): the first
        # line reached the client before the server had read the second (event order, not speed).
        def stamp(e):
            return datetime.datetime.strptime(e["timestamp"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(
                tzinfo=datetime.timezone.utc).timestamp()
        arrived = time.time() - (time.monotonic() - t1)
        lag = arrived - stamp(e1)
        print(f"\n[ measure ] first line: server read -> client {lag * 1000:.1f} ms; lines {t2 - t1:.3f} s apart",
              flush=True)
        self.assertLess(arrived, stamp(e2), f"the first line reached the client {lag:.3f} s after the server read "
                                            f"it, after the server read the second")


class TestLimits(StreamCase):
    def test_output_cap_applies_in_flight(self):
        code = "for i in range(100):\n    print('x' * 99)\nprint('tail')\n"  # 10 lines fit
        resp, events = stream({"code": code, "limits": {"output": "1000"}})
        end = self.assertWellFormed(resp, events)
        self.assertEqual(end["profile"]["output_bytes"], 1000)
        self.assertEqual(len(text_of(events, "stdout")), 1000)
        self.assertIs(end["truncated"]["stdout"], True)
        self.assertEqual(end["stdout"], ("x" * 99 + "\n") * 10)

    def test_timeout_while_streaming(self):
        # Long enough for a cold start on this host now to print first (the clock starts at launch).
        timeout = min(paced(2, trivial_run_seconds(server, profile="general")), 40)
        resp, events = stream({"code": "import time\nprint('started')\ntime.sleep(50)\n", "timeout": timeout})
        end = self.assertWellFormed(resp, events)
        self.assertEqual(text_of(events, "stdout"), "started\n")
        self.assertEqual(end["kill_reason"], "timeout")
        self.assertIs(end["timed_out"], True)

    def test_a_client_that_does_not_read_costs_a_bounded_queue(self):
        # 8 MiB of output while the client reads nothing for 3 s with a tiny receive window:
        # past the server's --stream-buffer (64K) output events are dropped and counted; the
        # end event still has every byte.
        code = ("import sys\n"
                "line = 'y' * 1023 + '\\n'\n"
                "for i in range(8192):\n"
                "    sys.stdout.write(line)\n")
        server.wait_pools_ready(profiles=["bigout"])
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(("127.0.0.1", server.port))
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        conn.sock = s
        try:
            conn.request("POST", "/v1/execute", body=json.dumps({"code": code, "profile": "bigout", "timeout": 30}),
                         headers={"Content-Type": "application/json", "Accept": NDJSON})
            time.sleep(3)
            resp = conn.getresponse()
            events = [e for _, e in ndjson_events(resp)]
        finally:
            conn.close()
        end = events[-1]
        self.assertEqual(end["type"], "end_of_execution")
        self.assertEqual(end["exit_code"], 0, end["stderr"])
        self.assertEqual(len(end["stdout"]), 8 << 20)
        self.assertIs(end["truncated"]["stdout"], False)
        self.assertIn("stream", end, "nothing was dropped: the kernel buffers held 8 MiB?")
        dropped = end["stream"]
        self.assertGreater(dropped["dropped_events"], 0)
        streamed = text_of(events, "stdout")
        self.assertEqual(len(streamed) + dropped["dropped_bytes"], 8 << 20)
        print(f"\n[ measure ] slow client: {len(streamed)} bytes streamed, {dropped['dropped_bytes']} dropped "
              f"in {dropped['dropped_events']} events", flush=True)


class TestCancellation(unittest.TestCase):
    def test_a_client_that_goes_away_cancels_the_run_and_leaves_nothing(self):
        token = f"6161.{os.getpid()}{secrets.randbelow(10 ** 6)}"
        code = ("# stream-disconnect\nimport subprocess, time\n"
                f"subprocess.Popen(['/bin/sleep', '{token}'])\n"
                "print('ready', flush=True)\n"
                "while True:\n    time.sleep(0.1)\n")
        sha = hashlib.sha256(code.encode()).hexdigest()
        before = metric_value(server.metrics(), "airlock_executions_total", outcome="cancelled") or 0
        conn, resp = open_stream({"code": code, "timeout": 30})
        cgroup = None
        try:
            seen = []
            for _, e in ndjson_events(resp):
                seen.append(e)
                if e["type"] == "stdout" and "ready" in e["text"]:
                    break
            else:
                self.fail(f"the stream ended before the program said 'ready': {seen[-5:]}")
            # Polled: on a loaded host the child's exec can trail the parent's first line.
            deadline = time.monotonic() + scaled(30)
            while True:
                procs = host_processes()
                sleepers = [p for p, i in procs.items() if token.encode() in i["cmdline"]]
                if sleepers or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            self.assertEqual(len(sleepers), 1, "the run's child is not on the host")
            self.assertIn(sleepers[0], descendants(server.proc.pid, procs))
            try:
                with open(f"/proc/{sleepers[0]}/cgroup") as f:
                    v2 = [line.split("::", 1)[1].strip() for line in f if line.startswith("0::")]
                if v2 and v2[0] != "/":
                    cgroup = "/sys/fs/cgroup" + v2[0]
                    self.assertTrue(os.path.isdir(cgroup), cgroup)
            except OSError:
                pass
        finally:
            conn.sock.shutdown(socket.SHUT_RDWR)
            conn.close()
        # Waited past the run's own 30 s timeout: what ended it is in the record.
        recs = server.wait_for_audit(lambda r: r["code_sha256"] == sha, timeout=45)
        self.assertTrue(recs, server.audit_records()[-3:])
        rec = recs[0]
        # Cancelled because the client went (its timeout would say "timeout").
        self.assertEqual(rec["verdict"], "client_gone")
        self.assertEqual(rec["kill_reason"], "cancelled")
        self.assertTrue(rec["client_gone"])
        self.assertEqual(rec["http_status"], 499)
        self.assertLess(rec["run_ms"], 30000, rec)
        deadline = time.monotonic() + scaled(30)
        while time.monotonic() < deadline:
            left = [p for p, i in host_processes().items() if token.encode() in i["cmdline"]]
            if not left and not (cgroup and os.path.exists(cgroup)):
                break
            time.sleep(0.05)
        self.assertEqual([p for p, i in host_processes().items() if token.encode() in i["cmdline"]], [],
                         "a process of the cancelled run is still alive")
        if cgroup:
            self.assertFalse(os.path.exists(cgroup), f"the run's cgroup {cgroup} is still there")
        after = metric_value(server.metrics(), "airlock_executions_total", outcome="cancelled") or 0
        self.assertGreaterEqual(after, before + 1)
        self.assertIsNone(server.proc.poll())


class TestDrainWhileStreaming(unittest.TestCase):
    def test_sigterm_lets_a_streamed_run_finish_and_end_its_stream(self):
        own = AirlockServer(profiles_dir=profiles_tmp.name,
                            extra_args=["--default-profile", "general", "--drain-grace", "20"]).start()
        try:
            own.wait_pools_ready(profiles=["general"])
            conn = own.connection(60)
            conn.request("POST", "/v1/execute",
                         body=json.dumps({"code": "import time\nprint('a')\ntime.sleep(1.5)\nprint('b')\n",
                                          "timeout": 30}),
                         headers={"Content-Type": "application/json", "Accept": NDJSON})
            resp = conn.getresponse()
            events = []
            for _, e in ndjson_events(resp):
                events.append(e)
                if e["type"] == "stdout" and e["text"] == "a\n":
                    own.proc.send_signal(signal.SIGTERM)
            conn.close()
            self.assertEqual(events[-1]["type"], "end_of_execution", events)
            self.assertEqual(events[-1]["stdout"], "a\nb\n")
            self.assertEqual(events[-1]["exit_code"], 0)
            self.assertIsNone(events[-1]["kill_reason"])
            self.assertEqual(own.proc.wait(scaled(30)), 0)
        finally:
            own.cleanup()


class TestNegotiation(StreamCase):
    def test_refusals_before_the_run_keep_their_status_and_json(self):
        server.wait_pools_ready(profiles=["general"])
        for payload, status in (({"code": ""}, 400),
                                ({"code": "print(1)", "timeout": -1}, 422),
                                ({"code": "print(1)", "profile": "nope"}, 422),
                                ('{"code": ', 422)):
            for accept in (NDJSON, SSE):
                got, headers, data = server.post_json("/v1/execute", payload, headers={"Accept": accept})
                self.assertEqual(got, status, (payload, data))
                self.assertEqual(headers["content-type"], "application/json")
                self.assertIn("error", json.loads(data))

    def test_without_a_streaming_accept_nothing_changes(self):
        for accept in (None, "application/json", "*/*", f"{NDJSON};q=0"):
            headers = {"Accept": accept} if accept else {}
            got, hdrs, data = server.post_json("/v1/execute", {"code": "print('plain')\n1 + 1\n"}, headers=headers)
            self.assertEqual(got, 200, data)
            self.assertEqual(hdrs["content-type"], "application/json")
            self.assertEqual(int(hdrs["content-length"]), len(data))
            body = json.loads(data)
            self.assertEqual((body["stdout"], body["result"]), ("plain\n", "2"))
        # The fips-compatible route never streams.
        got, hdrs, data = server.post_json("/execute", {"code": "print('compat')"}, headers={"Accept": NDJSON})
        self.assertEqual(got, 200, data)
        self.assertEqual(hdrs["content-type"], "application/json")
        self.assertEqual(json.loads(data)["stdout"], "compat\n")

    def test_the_connection_serves_more_requests_after_a_stream(self):
        conn = server.connection(60)
        try:
            for i in range(2):
                _, resp = open_stream({"code": f"print({i})"}, conn=conn)
                events = [e for _, e in ndjson_events(resp)]
                self.assertWellFormed(resp, events)
                self.assertEqual(events[-1]["stdout"], f"{i}\n")
            conn.request("POST", "/v1/execute", body=json.dumps({"code": "print('after')"}),
                         headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            self.assertEqual(json.loads(resp.read())["stdout"], "after\n")
        finally:
            conn.close()


if __name__ == "__main__":
    unittest.main()
