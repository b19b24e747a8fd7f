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

import json
import os
import shutil
import socket
import tempfile
import threading
import time
import unittest

from airlock_server import SOURCE_DIR, AirlockServer, expected_mode, host_processes, metric_value

# Under AddressSanitizer (scripts/test.sh --sanitize exports ASAN_OPTIONS) the
# server keeps freed memory in ASan's quarantine (256 MB by default), so its RSS
# says nothing about what it holds: the memory bounds are asserted by the
# normal pass of the same suite, the latency bounds by both.
SANITIZED = "ASAN_OPTIONS" in os.environ


def start_server():
    """A server with the two profiles these tests use (fewer zygotes to start on a busy host)."""
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


class OverloadTest(unittest.TestCase):
    """Every attacker at once, beside honest clients."""

    DURATION_S = 12

    @classmethod
    def setUpClass(cls):
        cls.server = start_server()

    @classmethod
    def tearDownClass(cls):
        stop_server(cls.server)

    def post(self, payload, timeout=60):
        try:
            return self.server.post_json("/v1/execute", payload, timeout=timeout)
        except OSError as e:
            return 0, {}, str(e).encode()

    def test_honest_clients_are_served_while_attackers_run(self):
        server = self.server
        stop = threading.Event()
        errors = []
        health, runs = [], []
        marker = "airlk%05d" % ((os.getpid() + 1) % 100000)

        def attacker(code, **fields):
            def loop():
                while not stop.is_set():
                    payload = dict(code=code, profile="general", timeout_s=3)
                    payload.update(fields)
                    self.post(payload)
            return loop

        def slow_bodies():
            # Clients that send a header promising a large body, then trickle it.
            socks = []
            try:
                for _ in range(8):
                    s = socket.create_connection(("127.0.0.1", server.port), timeout=5)
                    s.sendall(b"POST /v1/execute HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
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

        def honest_health():
            while not stop.is_set():
                t = time.monotonic()
                try:
                    status, _, _ = server.get("/healthz")
                    if status != 200:
                        errors.append(f"/healthz answered {status}")
                except OSError as e:
                    errors.append(f"/healthz: {e}")
                health.append(time.monotonic() - t)
                time.sleep(0.02)

        def honest_run():
            while not stop.is_set():
                t = time.monotonic()
                status, _, data = self.post({"code": "print(1)"})
                runs.append(time.monotonic() - t)
                if status != 200 or json.loads(data).get("stdout") != "1\n":
                    errors.append(f"print(1): {status} {data[:300]!r}")
                time.sleep(0.05)

        threads = [threading.Thread(target=f) for f in (
            attacker(CHANNEL_FLOOD),
            attacker(CHANNEL_BOMB),
            attacker(FORGED_END.replace("MARKER", marker), limits={"cpu": 0.01}),
            attacker(SLOW_HANDOFF, limits={"cpu": 0.001}),
            slow_bodies,
            honest_health,
            honest_run,
        )]
        # What the honest clients get with nothing else running here: their bounds under attack
        # scale with it, so that a host busy with other work does not fail the test.
        alone_health = healthz_latencies(server, 50)
        alone_runs = []
        for _ in range(5):
            t = time.monotonic()
            status, _, data = self.post({"code": "print(1)"})
            self.assertEqual(status, 200, data[:300])
            alone_runs.append(time.monotonic() - t)
        before = server.metrics()
        for t in threads:
            t.start()
        time.sleep(self.DURATION_S)
        stop.set()
        for t in threads:
            t.join(60)
        peak_mb = rss_peak_kb(server.proc.pid) / 1024
        after = server.metrics()
        summary = (f"healthz p50 {percentile(health, 0.5) * 1000:.0f} ms p99 {percentile(health, 0.99) * 1000:.0f} ms "
                   f"max {max(health) * 1000:.0f} ms ({len(health)}); print(1) p50 "
                   f"{percentile(runs, 0.5) * 1000:.0f} ms p90 {percentile(runs, 0.9) * 1000:.0f} ms "
                   f"({len(runs)}); server peak RSS {peak_mb:.0f} MB")
        # Cold launches share the one launcher thread with every attacker's: slower (a print(1)
        # may wait behind the attackers' 3 s runs). The bounds are what they were on a quiet host
        # (cold 5 s, warm 2 s at p90; /healthz 0.25 s at p99), or more where the honest client
        # alone takes longer here now: a host busy with other work (at load 8, a cold print(1)
        # once took 5.12 s at p90 beside the attackers) slows both.
        alone_p90 = percentile(alone_runs, 0.9)
        bound_s = (3.0 if expected_mode() == "cold" else 0.0) + max(2.0, 4 * alone_p90)
        health_bound = max(0.25, 5 * percentile(alone_health, 0.99))
        summary += (f"; alone: print(1) p90 {alone_p90 * 1000:.0f} ms, healthz p99 "
                    f"{percentile(alone_health, 0.99) * 1000:.0f} ms; bounds: print(1) p90 {bound_s:.2f} s, "
                    f"healthz p99 {health_bound * 1000:.0f} ms")
        print("\n" + summary)
        self.assertEqual(errors[:5], [], summary)
        # The honest client keeps being served: as many runs as the latency bound allows.
        self.assertGreaterEqual(len(runs), int(self.DURATION_S / bound_s), summary)
        self.assertLess(percentile(health, 0.99), health_bound, summary)
        self.assertLess(percentile(runs, 0.9), bound_s, summary)
        if not SANITIZED:
            self.assertLess(peak_mb, 100, summary)
        killed = (metric_value(after, "airlock_executions_total", outcome="channel") or 0) - \
                 (metric_value(before, "airlock_executions_total", outcome="channel") or 0)
        self.assertGreater(killed, 0, "no flood was killed for its channel")


if __name__ == "__main__":
    unittest.main()
