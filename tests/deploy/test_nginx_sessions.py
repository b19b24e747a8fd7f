"""Sessions across instances (docs/deploy.md, "Scaling and session routing"): three real
`airlock serve` instances behind a real nginx running deploy/nginx/airlock.conf as shipped
(only its example servers and listen port substituted). Through nginx: 30 sessions are
created and spread over the instances, each keeps its state over 10 calls (every call
reaching the instance that holds it, by path; a request naming the session only in
X-Airlock-Session reaches it too); one instance is SIGKILLed and its sessions answer
404 session_not_found from the next instance on the hash ring (nginx skips the dead
one) while the others' sessions keep their state; a burst of 50 one-shot runs at
concurrency 8 all succeed on the instances left. Then a fresh instance comes back at the
dead one's address: it takes back the dead one's keys (their sessions, and those made on its
neighbour meanwhile, answer 404 session_not_found from it) while every other session keeps
its state and instance.

Waits that depend on the host are multiplied by $AIRLOCK_TEST_TIMEOUT_SCALE."""

import concurrent.futures
import http.client
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import time
import unittest

from deploy_common import SOURCE_DIR, Nginx, need_tool

sys.path.insert(0, os.path.join(SOURCE_DIR, "tests", "e2e"))
from airlock_server import AirlockServer, descendants, scaled  # noqa: E402

INSTANCES = 3
SESSIONS = 30
CALLS = 10
BURST = 50
BURST_CONCURRENCY = 8
OUTAGE_SESSIONS = 30
SESSION_ID = re.compile(r"^s1-([0-9a-f]{8})-[0-9a-f]{32}$")

# Test-only response headers (not in the shipped file: they would tell clients the
# instances' addresses): which instance answered, and the key nginx hashed.
OBSERVE = ("        add_header X-Test-Upstream $upstream_addr always;\n"
           "        add_header X-Test-Route $airlock_route always;\n")


def listen_on(port):
    """A wrapper for AirlockServer that makes the server listen on `port` (it execs the server
    with --listen 127.0.0.1:0 replaced, keeping the pid)."""
    return [sys.executable, "-c",
            "import os, sys; a = [sys.argv[1] if x == '127.0.0.1:0' else x for x in sys.argv[2:]]; os.execv(a[0], a)",
            f"127.0.0.1:{port}"]


def cgroups_of(pid):
    """The cgroup directories a server with this pid made for its runs and sessions (named
    <kind>-<pid>-<n>), in every hierarchy, deepest first."""
    pattern = re.compile(rf"-{pid}-\d+$")
    found = []
    for d, subdirs, _ in os.walk("/sys/fs/cgroup"):
        for x in [x for x in subdirs if pattern.search(x)]:
            found += [below for below, _, _ in os.walk(os.path.join(d, x), topdown=False)]
            subdirs.remove(x)
        if d.count("/") >= 8:
            subdirs[:] = []
    return found


def instance(**kwargs):
    # Room for up to 60 sessions on one instance (the default caps, 32 and 8G of limits, could
    # refuse some when the outage's sessions pile onto one neighbour).
    return AirlockServer(extra_args=["--pool-size", "2", "--max-sessions", "64", "--session-memory", "16G"],
                         profiles_dir=NginxSessions.profiles.name, **kwargs)


class NginxSessions(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        need_tool("nginx", "nginx-light")
        # Only the minimal profile (a root profile: it extends nothing): one zygote per
        # instance, a pool of 2 ready runs, so three instances start fast.
        cls.profiles = tempfile.TemporaryDirectory(prefix="airlock-nginx-profiles-")
        shutil.copy(os.path.join(SOURCE_DIR, "profiles", "minimal.yaml"), cls.profiles.name)
        cls.servers = []
        cls.victim = None
        cls.nginx = None
        try:
            for _ in range(INSTANCES):
                server = instance()
                cls.servers.append(server)
                server.start()
            cls.by_addr = {f"127.0.0.1:{s.port}": s for s in cls.servers}
            cls.nginx = Nginx([s.port for s in cls.servers], location_extra=OBSERVE)
        except BaseException:
            try:
                cls.tearDownClass()
            except AssertionError as e:  # the reason not to start comes first
                print(f"while stopping after a failed start: {e}", file=sys.stderr)
            raise

    @classmethod
    def tearDownClass(cls):
        if cls.nginx is not None:
            cls.nginx.stop()
        errors = []
        for s in cls.servers:
            if s is cls.victim:
                s.stop()
                s.tmp.cleanup()
                # SIGKILLed, it could not remove its (empty) cgroups: do it for it.
                for d in cgroups_of(s.proc.pid):
                    try:
                        os.rmdir(d)
                    except OSError as e:
                        errors.append(f"cannot remove the killed instance's cgroup {d}: {e}")
                continue
            try:
                s.cleanup()  # drains cleanly: exit code 0, no sanitizer report
            except AssertionError as e:
                errors.append(str(e))
        cls.profiles.cleanup()
        if errors:
            raise AssertionError("\n".join(errors))

    # -- HTTP through nginx ------------------------------------------------------------------

    def request(self, method, path, payload=None, headers=None, timeout=60):
        """(status, headers lower-cased, parsed JSON body or None) of a request through nginx."""
        conn = http.client.HTTPConnection("127.0.0.1", self.nginx.port, timeout=scaled(timeout))
        try:
            h = dict(headers or {})
            body = None
            if payload is not None:
                body = json.dumps(payload)
                h["Content-Type"] = "application/json"
            conn.request(method, path, body=body, headers=h)
            resp = conn.getresponse()
            data = resp.read()
            hdrs = {k.lower(): v for k, v in resp.getheaders()}
            try:
                parsed = json.loads(data) if data else None
            except ValueError:
                parsed = {"raw": data.decode(errors="replace")}
            return resp.status, hdrs, parsed
        finally:
            conn.close()

    def create_session(self):
        """Creates a minimal session through nginx, retrying while the pool it lands on has
        no ready run (503); returns (id, the instance that answered, the key nginx hashed)."""
        deadline = time.monotonic() + scaled(60)
        while True:
            status, hdrs, body = self.request("POST", "/v1/sessions", {"profile": "minimal"})
            if status != 503 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        self.assertEqual(status, 201, body)
        m = SESSION_ID.match(body["id"])
        self.assertIsNotNone(m, body["id"])
        # The instance put nginx's key (X-Airlock-Route) in the id: later requests hash the same key.
        self.assertEqual(m.group(1), hdrs["x-test-route"], "the instance ignored X-Airlock-Route")
        holder = self.served_by(hdrs)
        self.assertIsNotNone(holder, hdrs)
        return body["id"], holder, m.group(1)

    def served_by(self, hdrs):
        """The instance that answered (the last address nginx tried)."""
        return self.by_addr.get(hdrs.get("x-test-upstream", "").split(", ")[-1])

    def call(self, sid, code):
        return self.request("POST", f"/v1/sessions/{sid}/execute", {"code": code})

    def live_ids(self, server):
        status, _, data = server.get("/v1/sessions")
        self.assertEqual(status, 200, data)
        return {s["id"] for s in json.loads(data)["sessions"] if s["state"] != "dead"}

    # -- the scenario ------------------------------------------------------------------------

    def test_sessions_routed_kept_and_failed_over(self):
        sessions = {}  # id -> instance that holds it
        for _ in range(SESSIONS):
            sid, holder, _ = self.create_session()
            sessions[sid] = holder

        # Spread: every instance holds some, and each holds exactly the sessions nginx sent it.
        held = {s.port: self.live_ids(s) for s in self.servers}
        for server in self.servers:
            mine = {sid for sid, h in sessions.items() if h is server}
            self.assertTrue(mine, f"no session on the instance at port {server.port}: keys are not spread "
                                  f"({[len(v) for v in held.values()]})")
            self.assertEqual(held[server.port], mine)
        print(f"\n[ nginx   ] sessions per instance: {[len(v) for v in held.values()]}", file=sys.stderr)

        # State over 10 calls, every call on the holder; the header variant reaches it too.
        for sid, holder in sessions.items():
            status, hdrs, body = self.call(sid, "x = 0")
            self.assertEqual(status, 200, body)
            for i in range(1, CALLS):
                status, hdrs, body = self.call(sid, "x = x + 1\nx")
                self.assertEqual(status, 200, body)
                self.assertEqual(body["result"], str(i), body)
                self.assertEqual(body["execution_count"], i + 1)
                self.assertIs(self.by_addr[hdrs["x-test-upstream"]], holder)
            status, hdrs, body = self.request("GET", "/v1/sessions", headers={"X-Airlock-Session": sid})
            self.assertEqual(status, 200, body)
            self.assertIs(self.by_addr[hdrs["x-test-upstream"]], holder)
            self.assertIn(sid, {s["id"] for s in body["sessions"]})

        # One instance dies: its sessions answer 404 session_not_found through nginx (from the next
        # instance on the ring), the others' sessions keep their state.
        victim = max(self.servers, key=lambda s: len(held[s.port]))
        type(self).victim = victim
        orphans = descendants(victim.proc.pid)  # its zygote and its sessions' processes
        self.assertTrue(orphans)
        victim.proc.send_signal(signal.SIGKILL)
        victim.proc.wait(timeout=30)
        time.sleep(scaled(0.5))  # nginx closes its idle keepalive connections to the dead instance
        for sid, holder in sessions.items():
            status, hdrs, body = self.call(sid, "x = x + 1\nx")
            if holder is victim:
                self.assertEqual(status, 404, body)
                self.assertEqual(body.get("code"), "session_not_found", body)
                self.assertIsNot(self.served_by(hdrs), victim)
            else:
                self.assertEqual(status, 200, body)
                self.assertEqual(body["result"], str(CALLS), body)
                self.assertIs(self.by_addr[hdrs["x-test-upstream"]], holder)

        # Nothing of the dead instance lives on (its sessions' processes die with it).
        deadline = time.monotonic() + scaled(10)
        while any(os.path.exists(f"/proc/{p}") for p in orphans) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = [p for p in orphans if os.path.exists(f"/proc/{p}")]
        self.assertEqual(left, [], f"processes of the killed instance still run: {left}")
        for d in cgroups_of(victim.proc.pid):
            with open(os.path.join(d, "cgroup.procs")) as f:
                self.assertEqual(f.read().split(), [], f"{d} still has processes")

        # A burst of one-shot runs on the instances left: all succeed.
        def run(i):
            return self.request("POST", "/v1/execute", {"code": f"print({i} * 2)", "profile": "minimal"},
                                timeout=120)

        with concurrent.futures.ThreadPoolExecutor(BURST_CONCURRENCY) as pool:
            results = list(pool.map(run, range(BURST)))
        served = set()
        for i, (status, hdrs, body) in enumerate(results):
            self.assertEqual(status, 200, body)
            self.assertEqual(body["exit_code"], 0, body)
            self.assertEqual(body["stdout"], f"{i * 2}\n", body)
            served.add(hdrs["x-test-upstream"].split(", ")[-1])
        self.assertNotIn(f"127.0.0.1:{victim.port}", served)
        self.assertEqual(len(served), INSTANCES - 1, f"the burst did not spread: {served}")

        # Sessions created while it is down land on the instances left, under keys some of which
        # are the dead instance's.
        outage = {}
        for _ in range(OUTAGE_SESSIONS):
            sid, holder, _ = self.create_session()
            self.assertIsNot(holder, victim)
            status, _, body = self.call(sid, "y = 41")
            self.assertEqual(status, 200, body)
            outage[sid] = holder

        # The instance comes back at its address (empty). nginx takes it back once the dead one's
        # fail_timeout (10 s) is over, and with it its keys.
        back = instance(wrapper=listen_on(victim.port))
        self.servers.append(back)
        back.start()
        self.assertEqual(back.port, victim.port)
        self.by_addr[f"127.0.0.1:{back.port}"] = back
        deadline = time.monotonic() + scaled(60)
        while True:
            status, hdrs, body = self.request("POST", "/v1/execute", {"code": "print(1)", "profile": "minimal"})
            self.assertEqual(status, 200, body)
            if self.served_by(hdrs) is back:
                break
            self.assertLess(time.monotonic(), deadline, "nginx never sent a request to the instance that came back")
            time.sleep(0.5)

        # Its keys' sessions, old and made meanwhile, answer 404 session_not_found from it; every
        # other session keeps its state and its instance.
        moved = 0
        for sid, holder in outage.items():
            status, hdrs, body = self.call(sid, "y = y + 1\ny")
            if self.served_by(hdrs) is back:
                self.assertEqual((status, body.get("code")), (404, "session_not_found"), body)
                moved += 1
            else:
                self.assertEqual(status, 200, body)
                self.assertEqual(body["result"], "42", body)
                self.assertIs(self.served_by(hdrs), holder)
        self.assertGreater(moved, 0, f"none of {OUTAGE_SESSIONS} sessions made during the outage had a key of the "
                                     "instance that came back")
        for sid, holder in sessions.items():
            status, hdrs, body = self.call(sid, "x = x + 1\nx")
            if holder is victim:
                self.assertIs(self.served_by(hdrs), back)
                self.assertEqual((status, body.get("code")), (404, "session_not_found"), body)
            else:
                self.assertEqual(status, 200, body)
                self.assertEqual(body["result"], str(CALLS + 1), body)
                self.assertIs(self.served_by(hdrs), holder)
        print(f"[ nginx   ] {moved} of {OUTAGE_SESSIONS} sessions made during the outage moved back", file=sys.stderr)


if __name__ == "__main__":
    unittest.main()
