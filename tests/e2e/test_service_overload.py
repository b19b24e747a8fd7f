"""The service layer under hostile runs and clients (issue 15, part 6).

Each attacker is a run (or a client) that tries to hurt the server or the other clients
rather than the sandbox: it floods or bombs its result channel, forges the runner's end
event and lives on, or makes its hand-off slow. The single-attack tests check what the
server now does about each; the overload test runs them all at once beside honest
clients and bounds the honest clients' latency and the server's memory.

The attack code runs under the `general` profile (the analyzer does not block), so it
reaches the kernel layers. It finds the result channel as user code can: the one pipe
among its fds above 2 (the runner moves fd 3 out of the way, see airlock_runner.py).
"""

import http.client
import json
import os
import re
import resource
import secrets
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import unittest

from airlock_server import SOURCE_DIR, AirlockServer, expected_mode, host_processes, metric_value, scaled

# Under AddressSanitizer (scripts/test.sh --sanitize exports ASAN_OPTIONS) the
# server keeps freed memory in ASan's quarantine (256 MB by default), so its RSS
# says nothing about what it holds: the single-attack memory bounds are
# asserted by the normal pass; the overload test turns the quarantine off for
# its server and allows ASan's redzones and shadow (OverloadTest).
SANITIZED = "ASAN_OPTIONS" in os.environ


def start_profiles():
    """A profiles directory with the two profiles these tests use (fewer zygotes to start on a
    busy host)."""
    profiles = tempfile.mkdtemp(prefix="airlock-overload-profiles-")
    shutil.copy(os.path.join(SOURCE_DIR, "profiles", "minimal.yaml"), profiles)
    # `general` without its heavy preimports: the attacks need none, and its zygote then
    # starts in a second rather than tens on a busy host.
    with open(os.path.join(SOURCE_DIR, "profiles", "general.yaml")) as f:
        text = f.read()
    start = text.index("\npreimport:\n")
    end = text.index("\n\n", start + 1)
    with open(os.path.join(profiles, "general.yaml"), "w") as f:
        f.write(text[:start] + "\npreimport: []\n" + text[end:])
    return profiles


def start_server():
    profiles = start_profiles()
    server = AirlockServer(extra_args=["--max-concurrent", "8"], profiles_dir=profiles)
    server.profiles_tmp = profiles
    return server.start()


def stop_server(server):
    try:
        server.cleanup()
    finally:
        shutil.rmtree(server.profiles_tmp, ignore_errors=True)

# The result channel, as the attacking code finds it.
FIND_CHANNEL = """
import os, stat
def channel():
    for name in os.listdir('/proc/self/fd'):
        fd = int(name)
        if fd > 2:
            try:
                st = os.fstat(fd)
            except OSError:
                continue
            if stat.S_ISFIFO(st.st_mode):
                try:
                    os.write(fd, b'')  # the write end
                    return fd
                except OSError:
                    continue
    raise SystemExit('no channel')
ch = channel()
"""

# Many small lines, forever: the old server read and dropped them for the run's whole
# timeout, one core busy.
CHANNEL_FLOOD = FIND_CHANNEL + """
line = b'{"type":"result","is_main_result":false,"data":{"text/plain":"x"}}\\n' * 4096
while True:
    os.write(ch, line)
"""

# Up to the byte cap of nested JSON in few lines, then a forged end: the old server built a
# DOM of it on its event loop (250-300 MB, the loop stalled ~1 s).
CHANNEL_BOMB = FIND_CHANNEL + """
inner = '[' * 60 + ']' * 60
payload = '[' + ','.join([inner] * 8000) + ']'
line = ('{"type":"result","is_main_result":false,"data":{"application/json":' + payload + '}}\\n').encode()
for _ in range(7):
    os.write(ch, line)
os.write(ch, b'{"type":"end","exit_code":0}\\n')
os.close(ch)
import time
time.sleep(30)
"""

# The runner's last word, forged, then the program lives on (and is throttled to a small CPU
# share): the old server answered and freed the run's slot while it still ran.
FORGED_END = FIND_CHANNEL + """
import ctypes
if ctypes.CDLL(None).prctl(15, b'MARKER', 0, 0, 0) != 0:  # PR_SET_NAME: the host finds it by it
    raise SystemExit('prctl(PR_SET_NAME) failed')
os.write(ch, b'{"type":"end","exit_code":0}\\n')
os.close(ch)
os.close(1)
os.close(2)
while True:
    pass
"""

# A request whose hand-off is slow: 1 MiB of code for a run throttled to 0.1% of a CPU.
SLOW_HANDOFF = "# " + "x" * ((1 << 20) - 4096) + "\nprint(1)\n"


def rss_peak_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def healthz_latencies(server, n):
    """`n` GET /healthz round trips, in seconds (10 ms apart)."""
    out = []
    for _ in range(n):
        t = time.monotonic()
        server.get("/healthz")
        out.append(time.monotonic() - t)
        time.sleep(0.01)
    return out


def percentile(values, q):
    values = sorted(values)
    if not values:
        return 0.0
    return values[min(len(values) - 1, int(q * len(values)))]


class ServiceOverloadTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = start_server()

    @classmethod
    def tearDownClass(cls):
        stop_server(cls.server)

    def run_code(self, code, timeout=60, **fields):
        fields.setdefault("profile", "general")
        status, _, data = self.server.post_json("/v1/execute", dict(code=code, **fields), timeout=timeout)
        self.assertEqual(status, 200, data[:500])
        return json.loads(data)

    def test_channel_flood_is_killed(self):
        body = self.run_code(CHANNEL_FLOOD, timeout_s=20)
        # Killed at the cap ("channel"), not at the end of its timeout (which would say "timeout").
        self.assertEqual(body.get("kill_reason"), "channel", body)
        self.assertIn("result channel", body.get("kill_detail", ""))
        self.assertIs(body.get("timed_out"), False, body)
        self.assertEqual(metric_value(self.server.metrics(), "airlock_executions_total", outcome="channel") > 0,
                         True)

    def test_channel_bomb_costs_little(self):
        before = rss_peak_kb(self.server.proc.pid)
        # What /healthz takes on this host now, with nothing else running here: the bound on it
        # during the bombs scales with it (a host busy with other work slows both).
        alone = healthz_latencies(self.server, 50)
        stall_bound = 0.5 + 5 * max(alone)
        stalls = []
        stop = threading.Event()

        def probe():
            while not stop.is_set():
                t = time.monotonic()
                self.server.get("/healthz")
                stalls.append(time.monotonic() - t)
                time.sleep(0.01)

        prober = threading.Thread(target=probe)
        prober.start()
        try:
            bodies = []
            threads = [threading.Thread(target=lambda: bodies.append(self.run_code(CHANNEL_BOMB, timeout_s=20)))
                       for _ in range(3)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        finally:
            stop.set()
            prober.join()
        after = rss_peak_kb(self.server.proc.pid)
        for body in bodies:
            # Answered from its (forged) end with its results dropped, or killed: never a DOM of it.
            self.assertLessEqual(len(json.dumps(body.get("results", []))), 8 << 20)
        if SANITIZED:
            print(f"\npeak RSS grew from {before} kB to {after} kB (not bounded under AddressSanitizer)")
        else:
            self.assertLess(after - before, 80 * 1024, f"peak RSS grew from {before} kB to {after} kB")
        self.assertLess(max(stalls), stall_bound, f"/healthz took up to {max(stalls):.3f} s during the bombs, "
                                                  f"over {stall_bound:.3f} s (0.5 s + 5 x {max(alone):.3f} s, the "
                                                  f"most it took alone here now)")

    def test_forged_end_keeps_the_slot_until_the_run_is_gone(self):
        marker = "airlk%05d" % (os.getpid() % 100000)
        code = FORGED_END.replace("MARKER", marker)
        body = self.run_code(code, timeout_s=20, limits={"cpu": 0.01})
        deadline = time.monotonic() + 10
        while True:
            in_flight = metric_value(self.server.metrics(), "airlock_executions_in_flight")
            if in_flight == 0:
                break
            self.assertLess(time.monotonic(), deadline, "the run's slot was never released")
            time.sleep(0.005)
        # The slot is free: nothing of the run may be left.
        alive = [p for p, info in host_processes().items() if info["comm"] == marker]
        self.assertEqual(alive, [], f"the run's program outlived its slot ({body.get('kill_reason')})")

    def test_slow_handoff_does_not_hold_other_launches(self):
        if expected_mode() == "cold":
            self.skipTest("a hand-off is the warm path's")
        # An honest request above 64 KiB is handed off by the launcher thread, as the
        # attackers' are: it waits behind theirs.
        honest = "# " + "y" * (70 << 10) + "\nprint(1)\n"

        def honest_latency():
            t = time.monotonic()
            body = self.run_code(honest, profile="minimal")
            self.assertEqual(body["stdout"], "1\n", body)
            return time.monotonic() - t

        alone = [honest_latency() for _ in range(5)]
        stop = threading.Event()

        def attack():
            while not stop.is_set():
                self.run_code(SLOW_HANDOFF, timeout_s=2, limits={"cpu": 0.001})

        attackers = [threading.Thread(target=attack) for _ in range(6)]
        for t in attackers:
            t.start()
        time.sleep(0.3)
        try:
            loaded = [honest_latency() for _ in range(8)]
        finally:
            stop.set()
            for t in attackers:
                t.join()
        # Before: each attacker's hand-off held the launcher ~0.35 s (seconds on a busy host), six
        # of them ahead of each honest request. The margin scales with what the honest request
        # takes alone here now.
        margin = max(0.75, 3 * percentile(alone, 0.5))
        self.assertLess(percentile(loaded, 0.5), percentile(alone, 0.5) + margin,
                        f"honest latencies alone {alone}, beside slow hand-offs {loaded} (margin {margin:.2f} s)")


# -------------------------------------------------------------------------------------------------
# Every attacker at once, beside honest clients (issue 15, part 6; issue 21).

MALLORY = "mallory-" + secrets.token_hex(12)
HONEST = "honest-" + secrets.token_hex(12)
APPROVER = "approver-" + secrets.token_hex(12)
MIB = 1 << 20

# The budgets the overload server is given, and what the memory bound assumes of each:
BODY_BUFFER = 16 * MIB             # --max-body-buffer: request bodies held at once, server-wide
PER_CONNECTION = 128 * 1024        # a connection: its piece buffer (64 KiB: a file sent, an upload read,
                                   # a body discarded), its header (16 KiB at most) and its objects
STREAM_BUFFER = 1 * MIB            # --stream-buffer: what a streamed answer may queue for a slow client
HELD = 16                          # --max-pending-approvals: requests held for a person, in memory by
HELD_BYTES = 6 * MIB               # design: a held 1 MiB request costs ~5 MiB of RSS (measured): its code kept
                                   # three times (what a person reads; the plan's warm request and cold file),
                                   # and the allocator's pieces of its parse
# What the budgets do not cover, stated: the runs' results in flight (a bomb's parsed channel,
# up to 8 MiB, a few at once), the warm pools' and sessions' bookkeeping, the allocator's slack.
MARGIN = 64 * MIB


def reset_peak_rss(pid):
    """Resets VmHWM (the kernel's peak RSS) to the current RSS: the peak is measured from here."""
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class ControlServer:
    """A trivial HTTP server in a process of its own that answers every GET at once: its latency
    seen by the test's client threads is what the host and the test itself add to a request (CPU
    steal, scheduling of this shared 2-core machine, the test's own threads). /healthz is bounded
    by 100 ms plus that, so that the verdict rests on what airlock did."""

    CODE = ("import http.server, sys\n"
            "class H(http.server.BaseHTTPRequestHandler):\n"
            "    protocol_version = 'HTTP/1.0'\n"
            "    def do_GET(self):\n"
            "        self.send_response(200); self.send_header('Content-Length', '2'); self.end_headers()\n"
            "        self.wfile.write(b'ok')\n"
            "    def log_message(self, *a): pass\n"
            "s = http.server.ThreadingHTTPServer(('127.0.0.1', 0), H)\n"
            "print(s.server_address[1], flush=True)\n"
            "s.serve_forever()\n")

    def __enter__(self):
        self.proc = subprocess.Popen(["/usr/bin/python3", "-c", self.CODE], stdout=subprocess.PIPE)
        self.port = int(self.proc.stdout.readline())
        return self

    def __exit__(self, *exc):
        self.proc.kill()
        self.proc.wait()
        self.proc.stdout.close()


def e2b_port_of(server):
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        for line in server.stderr_lines:
            m = re.search(r"127\.0\.0\.1:(\d+) \(code interpreter\)", line)
            if m:
                return int(m.group(1))
        time.sleep(0.05)
    raise AssertionError("the E2B listener's port is not in the log")


class OverloadTest(unittest.TestCase):
    """Every attacker at once, beside honest clients: hostile runs (issue 15), and hostile clients
    of every door (issue 21): uploads held one byte short, 1 MB requests held for approval and
    listed, one token flooding sessions, MCP sessions and approvals, E2B calls beside the session
    routes, 24 clients downloading a 30 MiB file without reading, one address opening more
    connections than the cap with half a header each. The session-based ones need the warm pool
    (a session is a warm run): in cold mode they are left out."""

    DURATION_S = 12

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="airlock-overload-all-")
        tokens = os.path.join(cls.tmp, "tokens")
        with open(tokens, "w") as f:
            f.write(f"mallory:{MALLORY}\nhonest:{HONEST}\napprover:{APPROVER}:approve\n")
        os.chmod(tokens, 0o600)
        profiles = start_profiles()
        with open(os.path.join(profiles, "gated.yaml"), "w") as f:
            f.write("name: gated\nextends: minimal\napproval:\n  policy: always\n  expires: 600\n")
        env = {}
        if SANITIZED:
            # Freed memory straight back to the allocator: ASan's quarantine (256 MB by default)
            # would otherwise stand in the RSS for memory the server no longer holds.
            env["ASAN_OPTIONS"] = os.environ["ASAN_OPTIONS"] + ":quarantine_size_mb=0:thread_local_quarantine_size_kb=0"
        cls.server = AirlockServer(extra_args=[
            "--max-concurrent", "8", "--tokens-file", tokens, "--max-sessions", "16", "--max-pending-approvals",
            f"{HELD}",
            "--max-body-buffer", f"{BODY_BUFFER}", "--max-body-buffer-per-owner", f"{BODY_BUFFER // 2}",
            "--stream-buffer", f"{STREAM_BUFFER}", "--e2b-listen", "127.0.0.1:0,0"],
            profiles_dir=profiles, env=env)
        cls.server.profiles_tmp = profiles
        cls.server.start()
        cls.e2b = e2b_port_of(cls.server)
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft < 4096:
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8192), hard))

    @classmethod
    def tearDownClass(cls):
        stop_server(cls.server)
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def call(self, method, path, token, body=None, headers=None, port=None, timeout=60):
        h = {"Authorization": f"Bearer {token}"} if token else {}
        h.update(headers or {})
        if body is not None and not isinstance(body, (bytes, str)):
            body = json.dumps(body)
            h.setdefault("Content-Type", "application/json")
        conn = http.client.HTTPConnection("127.0.0.1", port or self.server.port, timeout=timeout)
        try:
            conn.request(method, path, body=body, headers=h)
            r = conn.getresponse()
            return r.status, r.read()
        except OSError as e:
            return 0, str(e).encode()
        finally:
            conn.close()

    def metrics(self):
        status, data = self.call("GET", "/metrics", HONEST)
        self.assertEqual(status, 200, data[:200])
        return data.decode()

    def session(self, token, profile="minimal"):
        deadline = time.monotonic() + scaled(60)
        while True:
            status, data = self.call("POST", "/v1/sessions", token, {"profile": profile})
            if status != 503 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        self.assertEqual(status, 201, data)
        return json.loads(data)["id"]

    def mcp_init(self, token):  # the MCP session's id is in a header: not needed by the flood
        status, data = self.call("POST", "/mcp", token,
                                 {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                  "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                             "clientInfo": {"name": "overload", "version": "1"}}},
                                 headers={"Accept": "application/json"})
        return status, data

    def test_honest_clients_are_served_while_attackers_run(self):
        server = self.server
        warm = expected_mode() != "cold"
        stop = threading.Event()
        errors = []
        health, control_health, runs = [], [], []
        served = {}
        marker = "airlk%05d" % ((os.getpid() + 1) % 100000)
        held_sockets = []

        def note(what):
            served[what] = served.get(what, 0) + 1

        def attacker(code, **fields):
            def loop():
                while not stop.is_set():
                    payload = dict(code=code, profile="general", timeout_s=3)
                    payload.update(fields)
                    self.call("POST", "/v1/execute", MALLORY, payload)
            return loop

        def slow_bodies():
            # Clients that send a header promising a large body, then trickle it: held within
            # the body budget (the rest are told 429).
            socks = []
            try:
                for _ in range(8):
                    s = socket.create_connection(("127.0.0.1", server.port), timeout=5)
                    s.sendall(b"POST /v1/execute HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                              b"Authorization: Bearer " + MALLORY.encode() + b"\r\n"
                              b"Content-Length: 1000000\r\n\r\n{\"code\": \"")
                    socks.append(s)
                while not stop.is_set():
                    for s in list(socks):
                        try:
                            s.sendall(b"x")
                        except OSError:
                            socks.remove(s)
                    time.sleep(0.5)
            finally:
                for s in socks:
                    s.close()

        def probe(port, path, sink):
            def loop():
                while not stop.is_set():
                    t = time.monotonic()
                    try:
                        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                        conn.request("GET", path)
                        r = conn.getresponse()
                        r.read()
                        conn.close()
                        if r.status != 200:
                            errors.append(f"{path} answered {r.status}")
                    except OSError as e:
                        errors.append(f"{path}: {e}")
                    sink.append(time.monotonic() - t)
                    time.sleep(0.02)
            return loop

        def honest_run():
            while not stop.is_set():
                t = time.monotonic()
                status, data = self.call("POST", "/v1/execute", HONEST, {"code": "print(1)"})
                runs.append(time.monotonic() - t)
                if status != 200 or json.loads(data).get("stdout") != "1\n":
                    errors.append(f"print(1): {status} {data[:300]!r}")
                else:
                    note("run")
                time.sleep(0.05)

        def honest_approver():
            # The console's polling of the held requests (1 MB each, a person's code to read).
            while not stop.is_set():
                status, data = self.call("GET", "/v1/approvals?limit=20", APPROVER)
                if status != 200 or len(data) > 1 * MIB:
                    errors.append(f"GET /v1/approvals: {status}, {len(data)} bytes")
                else:
                    note("approvals listed")
                    page = json.loads(data)["approvals"]
                    if page:
                        status, one = self.call("GET", f"/v1/approvals/{page[0]['approval_id']}", APPROVER)
                        if status != 200:
                            errors.append(f"GET one approval: {status}")
                time.sleep(0.2)

        def mallory_holds_approvals():
            big = "# " + "z" * (MIB - 4096) + "\nprint(1)\n"
            while not stop.is_set():
                status, _ = self.call("POST", "/v1/execute", MALLORY, {"code": big, "profile": "gated"})
                if status not in (202, 429):
                    errors.append(f"mallory's held request: {status}")
                time.sleep(0.1)

        def mallory_floods_sessions_and_mcp():
            mine = []
            while not stop.is_set():
                status, data = self.call("POST", "/v1/sessions", MALLORY, {"profile": "minimal"})
                if status == 201:
                    mine.append(json.loads(data)["id"])
                elif status not in (429, 503):
                    errors.append(f"mallory's session: {status} {data[:200]!r}")
                self.mcp_init(MALLORY)
                time.sleep(0.05)

        def honest_session():
            sid = None
            while sid is None and not stop.is_set():
                status, data = self.call("POST", "/v1/sessions", HONEST, {"profile": "minimal"})
                if status == 201:
                    sid = json.loads(data)["id"]
                elif status != 503:
                    errors.append(f"the honest session: {status} {data[:300]!r}")
                    return
                else:
                    time.sleep(0.2)
            while not stop.is_set():
                status, data = self.call("POST", f"/v1/sessions/{sid}/execute", HONEST, {"code": "x = 1\nx + 1"})
                if status != 200 or json.loads(data).get("result") != "2":
                    errors.append(f"the honest session's call: {status} {data[:300]!r}")
                status, _ = self.call("PUT", f"/v1/sessions/{sid}/files/in.txt", HONEST, b"honest",
                                      headers={"Content-Type": "application/octet-stream"})
                status2, got = self.call("GET", f"/v1/sessions/{sid}/files/in.txt", HONEST)
                if (status, status2, got) != (201, 200, b"honest"):
                    errors.append(f"the honest session's files: {status} {status2} {got[:100]!r}")
                else:
                    note("session")
                time.sleep(0.05)

        def honest_e2b():
            while not stop.is_set():
                status, data = self.call("POST", "/execute", HONEST, {"code": "print(6 * 7)"}, port=self.e2b,
                                         headers={"X-Access-Token": HONEST})
                lines = [json.loads(x) for x in data.splitlines() if x.strip()] if status == 200 else []
                if not any(e.get("type") == "stdout" and e.get("text") == "42\n" for e in lines):
                    if status != 503:  # a context waits for a warm run at most 15 s
                        errors.append(f"the honest E2B call: {status} {data[:300]!r}")
                else:
                    note("e2b")
                time.sleep(0.05)

        def honest_mcp():
            conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=60)
            conn.request("POST", "/mcp", body=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "h", "version": "1"}}}),
                headers={"Authorization": f"Bearer {HONEST}", "Content-Type": "application/json",
                         "Accept": "application/json"})
            r = conn.getresponse()
            r.read()
            mcp_id = r.getheader("Mcp-Session-Id")
            conn.close()
            if r.status != 200 or not mcp_id:
                errors.append(f"the honest MCP session: {r.status}")
                return
            while not stop.is_set():
                status, data = self.call("POST", "/mcp", HONEST,
                                         {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                          "params": {"name": "execute_python", "arguments": {"code": "print(5)"}}},
                                         headers={"Accept": "application/json", "Mcp-Session-Id": mcp_id})
                result = json.loads(data).get("result", {}) if status == 200 else {}
                if result.get("isError") or "5" not in json.dumps(result.get("content", "")):
                    # One-shot MCP runs take the API's run slots: with the attackers' runs queued
                    # ahead a call may be told the server is busy, as /v1/execute's 429 says.
                    if "busy" not in json.dumps(result):
                        errors.append(f"the honest MCP call: {status} {data[:300]!r}")
                else:
                    note("mcp")
                time.sleep(0.1)

        def held_uploads(sid):
            # Uploads held one byte short, as many as the token may (then 429).
            for _ in range(12):
                s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
                s.sendall((f"PUT /v1/sessions/{sid}/files/held.bin HTTP/1.1\r\nHost: x\r\n"
                           f"Authorization: Bearer {MALLORY}\r\nContent-Type: application/octet-stream\r\n"
                           f"Content-Length: {30 * MIB}\r\n\r\n").encode())
                try:
                    s.sendall(b"\0" * (30 * MIB - 1))
                except OSError:
                    pass  # refused (429) and closed
                held_sockets.append(s)

        def slow_downloads(sid):
            # 24 clients ask for a 30 MiB file and never read (a 4 KiB receive buffer).
            for _ in range(24):
                s = socket.socket()
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                s.settimeout(10)
                s.connect(("127.0.0.1", server.port))
                s.sendall((f"GET /v1/sessions/{sid}/files/big.bin HTTP/1.1\r\nHost: x\r\n"
                           f"Authorization: Bearer {MALLORY}\r\n\r\n").encode())
                held_sockets.append(s)

        def connection_flood():
            # One address (127.0.0.2) opens more connections than the cap, half a header each.
            for _ in range(1100):
                if stop.is_set():
                    return
                try:
                    s = socket.create_connection(("127.0.0.1", server.port), timeout=10,
                                                 source_address=("127.0.0.2", 0))
                    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0")
                    held_sockets.append(s)
                except OSError as e:
                    errors.append(f"the flood could not connect: {e}")
                    return

        # Mallory's session, with a 30 MiB file for the downloads (streamed in as it is sent).
        mallory_sid = None
        if warm:
            server.wait_pools_ready(profiles=["minimal"])
            mallory_sid = self.session(MALLORY, profile="general")
            status, data = self.call("PUT", f"/v1/sessions/{mallory_sid}/files/big.bin", MALLORY,
                                     os.urandom(30 * MIB), headers={"Content-Type": "application/octet-stream"})
            self.assertEqual(status, 201, data)
        loops = [attacker(CHANNEL_FLOOD), attacker(CHANNEL_BOMB),
                 attacker(FORGED_END.replace("MARKER", marker), limits={"cpu": 0.01}),
                 attacker(SLOW_HANDOFF, limits={"cpu": 0.001}), slow_bodies, mallory_holds_approvals,
                 connection_flood, honest_run, honest_approver, honest_mcp]
        if warm:
            loops += [mallory_floods_sessions_and_mcp, honest_session, honest_e2b,
                      lambda: held_uploads(mallory_sid), lambda: slow_downloads(mallory_sid)]
        # What an honest print(1) takes with nothing else running here: its bound under attack
        # scales with it, so that a host busy with other work does not fail the test.
        alone_runs = []
        for _ in range(5):
            t = time.monotonic()
            status, data = self.call("POST", "/v1/execute", HONEST, {"code": "print(1)"})
            self.assertEqual(status, 200, data[:300])
            alone_runs.append(time.monotonic() - t)
        with ControlServer() as control:
            loops += [probe(server.port, "/healthz", health), probe(control.port, "/", control_health)]
            threads = [threading.Thread(target=f) for f in loops]
            before = self.metrics()
            start_rss_kb = rss_kb(server.proc.pid)
            reset_peak_rss(server.proc.pid)
            for t in threads:
                t.start()
            time.sleep(self.DURATION_S)
            peak_kb = rss_peak_kb(server.proc.pid)
            stop.set()
            for t in threads:
                t.join(60)
        for s in held_sockets:
            s.close()
        after = self.metrics()
        # The memory the server may hold: what it held before, its budgets, the connections
        # open at the peak (the flood's waiting ones are its per-address budget), and the margin.
        connections = 128 + 24 + 12 + 8 + 40
        bound_kb = (start_rss_kb * 1024 + BODY_BUFFER + connections * PER_CONNECTION + 4 * STREAM_BUFFER +
                    HELD * HELD_BYTES + MARGIN) // 1024
        if SANITIZED:
            # Every allocation carries redzones and a shadow of an eighth of its size: twice what
            # the normal build's bound allows above where the server started.
            bound_kb = start_rss_kb + 2 * (bound_kb - start_rss_kb)
        hp99, cp99 = percentile(health, 0.99), percentile(control_health, 0.99)
        summary = (f"healthz p50 {percentile(health, 0.5) * 1000:.0f} ms p99 {hp99 * 1000:.0f} ms "
                   f"max {max(health) * 1000:.0f} ms ({len(health)}); control p99 {cp99 * 1000:.0f} ms "
                   f"({len(control_health)}); print(1) p50 {percentile(runs, 0.5) * 1000:.0f} ms p90 "
                   f"{percentile(runs, 0.9) * 1000:.0f} ms ({len(runs)}); served {served}; server RSS "
                   f"{start_rss_kb // 1024} MB at the start, peak {peak_kb // 1024} MB, bound {bound_kb // 1024} MB")
        print("\n" + summary)
        self.assertEqual(errors[:5], [], summary)
        # Cold launches share the one launcher thread with every attacker's: slower (a print(1)
        # may wait behind the attackers' 3 s runs). The bounds are what they were on a quiet host
        # (cold 5 s, warm 2 s at p90), or more where the honest client alone takes longer here
        # now: a host busy with other work slows both. The honest client must keep being
        # served: as many runs as the latency bound allows in the test's time.
        alone_p90 = percentile(alone_runs, 0.9)
        bound_s = (3.0 if expected_mode() == "cold" else 0.0) + max(2.0, 4 * alone_p90)
        print(f"alone: print(1) p90 {alone_p90 * 1000:.0f} ms; bound at p90 {bound_s:.2f} s")
        self.assertGreaterEqual(len(runs), int(self.DURATION_S / bound_s), summary)
        # Every honest client of every door was served.
        for what in ["run", "approvals listed", "mcp"] + (["session", "e2b"] if warm else []):
            self.assertGreater(served.get(what, 0), 0, f"no honest {what} was served: {summary}")
        # /healthz answers within 100 ms at the 99th percentile, beyond what the host and the test
        # itself add to any request at the same moment (the control server's p99).
        self.assertLess(hp99, 0.1 + cp99, summary)
        self.assertLess(percentile(runs, 0.9), bound_s, summary)
        self.assertLess(peak_kb, bound_kb, summary)
        killed = (metric_value(after, "airlock_executions_total", outcome="channel") or 0) - \
                 (metric_value(before, "airlock_executions_total", outcome="channel") or 0)
        self.assertGreater(killed, 0, "no flood was killed for its channel")


if __name__ == "__main__":
    unittest.main()
