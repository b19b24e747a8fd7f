"""A session's shell commands (issue 22, docs/api.md "Commands"): processes run in the session's
sandbox beside its Python interpreter, over the same /home/user, through a real `airlock serve`.

What a user relies on (files shared both ways, exit codes and stderr, streamed events in order,
background processes listed, fed, signalled and read, timeouts that kill and say so) and what an
attacker tries, each asserted from the host: a fork bomb stops at the sandbox's pids limit and the
interpreter still answers; a background command dies with its session; one session's command sees
neither another's files nor its processes, and another's pid through this session's URL is 404;
a host listener on 127.0.0.1 cannot be reached; a host file outside cannot be read.

Registered warm only: sessions come from the pool (tests/e2e/CMakeLists.txt).
"""

import http.client
import json
import os
import secrets
import socket
import tempfile
import time
import unittest

from airlock_server import AirlockServer, host_processes, scaled

PROFILE = "general"  # no import allowlist: only the kernel layers stand in the way

server = None


def setUpModule():
    global server
    server = AirlockServer().start()
    server.wait_pools_ready()


def tearDownModule():
    if server:
        server.cleanup()


def with_token(token):
    """Host pids whose command line holds `token`."""
    return [p for p, i in host_processes().items() if token.encode() in i["cmdline"]]


class CommandTestCase(unittest.TestCase):
    """Each test's sessions are deleted after it."""

    def setUp(self):
        self.made = []

    def tearDown(self):
        for sid in self.made:
            server.request("DELETE", f"/v1/sessions/{sid}")

    def session(self, profile=PROFILE):
        deadline = time.monotonic() + scaled(60)
        while True:
            status, _, data = server.post_json("/v1/sessions", {"profile": profile})
            if status != 503 or time.monotonic() > deadline:
                break
            time.sleep(0.2)  # no warm run ready yet
        self.assertEqual(status, 201, data)
        sid = json.loads(data)["id"]
        self.made.append(sid)
        return sid

    def run_cmd(self, sid, cmd, expect=200, **fields):
        status, _, data = server.post_json(f"/v1/sessions/{sid}/commands", dict(cmd=cmd, **fields), timeout=120)
        body = json.loads(data) if data else None
        if expect is not None:
            self.assertEqual(status, expect, body)
        return body

    def call(self, method, path, body=None, expect=200, timeout=120):
        status, _, data = server.request(method, path, body=body, timeout=timeout)
        out = json.loads(data) if data else None
        if expect is not None:
            self.assertEqual(status, expect, out)
        return out

    def execute(self, sid, code):
        status, _, data = server.post_json(f"/v1/sessions/{sid}/execute", {"code": code, "timeout": 60}, timeout=120)
        body = json.loads(data)
        self.assertEqual(status, 200, body)
        return body


class TheSharedComputer(CommandTestCase):
    def test_a_file_written_by_python_is_read_by_a_command_and_the_reverse(self):
        sid = self.session()
        token = secrets.token_hex(8)
        body = self.execute(sid, f"open('from_py.txt', 'w').write('py-{token}')")
        self.assertEqual(body["exit_code"], 0, body)
        out = self.run_cmd(sid, "cat /home/user/from_py.txt && echo sh-" + token + " > from_sh.txt")
        self.assertEqual((out["exit_code"], out["stdout"]), (0, f"py-{token}"), out)
        body = self.execute(sid, "print(open('/home/user/from_sh.txt').read().strip())")
        self.assertEqual(body["stdout"].strip(), f"sh-{token}", body)

    def test_exit_codes_stderr_env_and_cwd(self):
        sid = self.session()
        out = self.run_cmd(sid, "echo out; echo \"err $X\" >&2; pwd; exit 7", env={"X": "value"}, cwd="/tmp")
        self.assertEqual(out["exit_code"], 7, out)
        self.assertFalse(out["running"])
        self.assertEqual(out["stdout"], "out\n/tmp\n")
        self.assertEqual(out["stderr"], "err value\n")
        self.assertNotIn("signal", out)
        self.assertNotIn("kill_reason", out)
        self.assertIsInstance(out["pid"], int)
        self.assertIsInstance(out["duration_ms"], (int, float))

    def test_output_over_the_cap_is_truncated_and_says_so(self):
        sid = self.session()
        out = self.run_cmd(sid, "head -c 3000000 /dev/zero | tr '\\0' a")
        self.assertEqual(out["exit_code"], 0)
        self.assertEqual(len(out["stdout"]), out["truncated"]["cap_bytes"])
        self.assertEqual(out["truncated"]["stdout_bytes"], 3000000)
        self.assertTrue(out["truncated"]["stdout"])
        self.assertFalse(out["truncated"]["stderr"])

    def test_streamed_events_come_in_order(self):
        sid = self.session()
        conn = server.connection(120)
        conn.request("POST", f"/v1/sessions/{sid}/commands",
                     body=json.dumps({"cmd": "echo one; sleep 0.2; echo two >&2; sleep 0.2; echo three; exit 4"}),
                     headers={"Content-Type": "application/json", "Accept": "application/x-ndjson"})
        resp = conn.getresponse()
        self.assertEqual(resp.status, 200)
        self.assertIn("ndjson", resp.getheader("Content-Type"))
        events = [json.loads(line) for line in resp.read().decode().splitlines() if line.strip()]
        conn.close()
        events = [e for e in events if e["type"] != "keepalive"]
        self.assertEqual(events[0]["type"], "start", events)
        self.assertEqual(events[-1]["type"], "end", events)
        pid = events[0]["pid"]
        self.assertEqual((events[-1]["pid"], events[-1]["exit_code"]), (pid, 4), events[-1])
        texts = [(e["type"], e["text"]) for e in events[1:-1]]
        self.assertEqual(texts, [("stdout", "one\n"), ("stderr", "two\n"), ("stdout", "three\n")], events)
        # Server-sent events carry the same, framed as SSE.
        conn = server.connection(120)
        conn.request("POST", f"/v1/sessions/{sid}/commands", body=json.dumps({"cmd": "echo sse"}),
                     headers={"Content-Type": "application/json", "Accept": "text/event-stream"})
        resp = conn.getresponse()
        text = resp.read().decode()
        conn.close()
        self.assertIn("event: start", text)
        self.assertLess(text.index("event: start"), text.index("event: stdout"))
        self.assertLess(text.index("event: stdout"), text.index("event: end"))

    def test_background_listed_signalled_and_its_end_read(self):
        sid = self.session()
        base = f"/v1/sessions/{sid}/commands"
        started = self.run_cmd(sid, "echo begun; trap 'echo got-term; exit 9' TERM; sleep 300 & wait", expect=201,
                               background=True, tag="worker")
        pid = started["pid"]
        self.assertTrue(started["running"])
        listed = {c["pid"]: c for c in self.call("GET", base)["commands"]}
        self.assertTrue(listed[pid]["running"], listed)
        self.assertEqual(listed[pid]["tag"], "worker")
        self.assertEqual(listed[pid]["argv"][:3], ["/bin/bash", "-l", "-c"])
        # Read while it runs: not ended, what it wrote so far.
        deadline = time.monotonic() + scaled(30)
        seen = ""
        while "begun" not in seen and time.monotonic() < deadline:
            now = self.call("GET", f"{base}/{pid}?wait=1")
            self.assertTrue(now["running"], now)
            self.assertIsNone(now["exit_code"])
            seen += now["stdout"]
        self.assertEqual(seen, "begun\n")
        self.assertEqual(self.call("POST", f"{base}/{pid}/signal", json.dumps({"signal": "SIGTERM"})),
                         {"pid": pid, "signal": 15})
        end = self.call("GET", f"{base}/{pid}?wait=60")
        self.assertFalse(end["running"], end)
        self.assertEqual((end["exit_code"], end["stdout"]), (9, "got-term\n"), end)
        listed = {c["pid"]: c for c in self.call("GET", base)["commands"]}
        self.assertEqual((listed[pid]["running"], listed[pid]["exit_code"]), (False, 9))
        # An ended process takes no signal, nor input.
        err = self.call("POST", f"{base}/{pid}/signal", json.dumps({"signal": "SIGKILL"}), expect=409)
        self.assertIn("ended", err["error"])
        self.call("POST", f"{base}/{pid}/stdin", b"x", expect=409)

    def test_stdin_fed_in_pieces_then_closed(self):
        sid = self.session()
        base = f"/v1/sessions/{sid}/commands"
        pid = self.run_cmd(sid, "tr a-z A-Z; echo end", expect=201, background=True, stdin=True)["pid"]
        self.assertEqual(self.call("POST", f"{base}/{pid}/stdin", b"hello ")["bytes"], 6)
        self.assertEqual(self.call("POST", f"{base}/{pid}/stdin?close=true", b"world\n")["closed"], True)
        end = self.call("GET", f"{base}/{pid}?wait=60")
        self.assertEqual((end["running"], end["exit_code"], end["stdout"]), (False, 0, "HELLO WORLD\nend\n"), end)
        # A process started without stdin takes none.
        other = self.run_cmd(sid, "sleep 30", expect=201, background=True)["pid"]
        err = self.call("POST", f"{base}/{other}/stdin", b"x", expect=409)
        self.assertIn("without input", err["error"])

    def test_timeout_kills_and_says_so(self):
        sid = self.session()
        out = self.run_cmd(sid, "echo before; sleep 300", timeout=1)
        self.assertEqual(out["kill_reason"], "timeout", out)
        self.assertEqual((out["signal"], out["exit_code"]), (9, 137), out)
        self.assertEqual(out["stdout"], "before\n")
        self.assertIn("timeout of 1 s", out["kill_detail"])

    def test_a_client_that_leaves_kills_its_foreground_command(self):
        sid = self.session()
        conn = server.connection(120)
        conn.request("POST", f"/v1/sessions/{sid}/commands", body=json.dumps({"cmd": "sleep 300", "timeout": 0}),
                     headers={"Content-Type": "application/json", "Accept": "application/x-ndjson"})
        resp = conn.getresponse()
        start = json.loads(resp.readline())
        self.assertEqual(start["type"], "start")
        conn.sock.shutdown(socket.SHUT_RDWR)
        conn.close()
        # Its output is read by the request that ran it until the server saw it go (409 meanwhile).
        deadline = time.monotonic() + scaled(30)
        while True:
            status, _, data = server.request("GET", f"/v1/sessions/{sid}/commands/{start['pid']}?wait=60")
            if status != 409 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        end = json.loads(data)
        self.assertEqual(status, 200, end)
        self.assertEqual((end["running"], end["signal"]), (False, 9), end)

    def test_a_profile_without_bash_runs_no_command(self):
        sid = self.session("minimal")
        err = self.run_cmd(sid, "id", expect=400)
        self.assertEqual(err["code"], "language_not_allowed", err)
        self.assertIn("general", err["error"])
        self.assertEqual(self.call("GET", f"/v1/sessions/{sid}/commands")["commands"], [])

    def test_bad_requests_get_clear_errors(self):
        sid = self.session()
        base = f"/v1/sessions/{sid}/commands"
        self.assertIn("/etc", self.run_cmd(sid, "pwd", expect=400, cwd="/etc")["error"])
        self.run_cmd(sid, "pwd", expect=400, cwd="relative")
        self.run_cmd(sid, "pwd", expect=400, cwd="/home/user/no-such-dir")
        self.assertEqual(self.run_cmd(sid, "pwd", expect=422, cmdd="x")["field"], "cmdd")
        self.assertEqual(self.run_cmd(sid, "", expect=422)["field"], "cmd")
        self.assertEqual(self.run_cmd(sid, "pwd", expect=422, timeout=-1)["field"], "timeout")
        status, _, data = server.post_json(base, '{"cmd":"id","cmd":"reboot"}')
        self.assertEqual(status, 400, data)
        pid = self.run_cmd(sid, "sleep 30", expect=201, background=True)["pid"]
        self.call("POST", f"{base}/{pid}/signal", json.dumps({"signal": "SIGSTOP"}), expect=400)
        self.call("POST", f"{base}/{pid}/signal", b"not json", expect=422)
        self.call("GET", f"{base}/{pid}?wait=soon", expect=400)
        self.assertEqual(self.call("GET", f"{base}/99999", expect=404)["code"], "process_not_found")
        self.call("GET", f"{base}/abc", expect=404)
        self.call("POST", f"{base}/{pid}/other", b"", expect=404)
        self.call("POST", f"{base}/99999/signal", json.dumps({"signal": "SIGKILL"}), expect=404)
        self.run_cmd("s1-00000000-" + "0" * 32, "id", expect=404)
        # A session whose interpreter died has ended (410), its sandbox with it.
        server.post_json(f"/v1/sessions/{sid}/execute", {"code": "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"})
        self.assertEqual(self.run_cmd(sid, "id", expect=410)["code"], "session_ended")
        self.call("GET", base, expect=410)
        server.request("DELETE", f"/v1/sessions/{sid}")
        self.run_cmd(sid, "id", expect=404)


class Attacks(CommandTestCase):
    def test_a_fork_bomb_stops_at_the_pids_limit_and_the_interpreter_still_answers(self):
        sid = self.session()
        out = self.run_cmd(sid, "bomb() { bomb | bomb & }; bomb; sleep 5; echo survived", timeout=15)
        # It ran into the limit (bash says fork failed) and never took the sandbox down with it.
        self.assertIn("fork", out["stderr"].lower(), out)
        self.assertNotEqual(out.get("kill_reason"), "lost", out)
        # The interpreter is alive: answers, once the bomb's processes are gone (their group
        # killed at the end of the command; the ones that escaped it die at the limit's turn).
        deadline = time.monotonic() + scaled(60)
        while True:
            self.run_cmd(sid, "pkill -KILL -u sandbox -x bash || true", expect=None)
            status, _, data = server.post_json(f"/v1/sessions/{sid}/execute", {"code": "print(6 * 7)", "timeout": 30},
                                               timeout=120)
            body = json.loads(data)
            if status == 200 and body.get("stdout") == "42\n" or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        self.assertEqual((status, body.get("stdout")), (200, "42\n"), body)

    def test_the_sandboxs_process_cap_answers_429(self):
        sid = self.session()
        statuses = {}
        for _ in range(80):
            status, headers, data = server.post_json(f"/v1/sessions/{sid}/commands",
                                                     {"cmd": "sleep 300", "background": True})
            statuses.setdefault(status, json.loads(data))
            if status == 429:
                self.assertIn("retry-after", headers)
                break
        self.assertIn(429, statuses, statuses)
        self.assertEqual(statuses[429]["code"], "quota_exceeded", statuses[429])
        self.assertEqual(set(statuses), {201, 429}, statuses)
        # The interpreter still answers beside them.
        self.assertEqual(self.execute(sid, "print(6 * 7)")["stdout"], "42\n")

    def test_a_background_command_dies_with_its_session(self):
        sid = self.session()
        token = str(100000 + secrets.randbelow(800000))
        self.run_cmd(sid, f"sleep {token}", expect=201, background=True)
        # Two more that leave their shell: a double fork, and one in a session of its own.
        pid = self.run_cmd(sid, f"(sleep {token} &) ; setsid sleep {token} & wait", expect=201, background=True)["pid"]
        deadline = time.monotonic() + scaled(30)
        while len([p for p in with_token(token) if host_processes().get(p, {}).get("comm") == "sleep"]) < 3 \
                and time.monotonic() < deadline:
            time.sleep(0.05)
        sleepers = [p for p in with_token(token) if host_processes().get(p, {}).get("comm") == "sleep"]
        self.assertGreaterEqual(len(sleepers), 3, self.call("GET", f"/v1/sessions/{sid}/commands/{pid}"))
        self.assertEqual(server.request("DELETE", f"/v1/sessions/{sid}")[0], 204)
        deadline = time.monotonic() + scaled(30)
        while with_token(token) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(with_token(token), [], "a process of a deleted session is still alive")

    def test_one_session_cannot_see_anothers_files_or_processes(self):
        a, b = self.session(), self.session()
        token = secrets.token_hex(8)
        self.execute(b, f"open('secret-{token}', 'w').write('{token}')")
        for _ in range(3):  # B's pid is of a process B has that A never started
            self.run_cmd(b, "true")
        b_pid = self.run_cmd(b, "sleep 300", expect=201, background=True)["pid"]
        a_pids = {c["pid"] for c in self.call("GET", f"/v1/sessions/{a}/commands")["commands"]}
        self.assertNotIn(b_pid, a_pids)
        # The token reaches the command through its environment, so that its own command line does not hold it.
        out = self.run_cmd(a, "ls -a /home/user /tmp; cat /proc/*/cmdline 2>/dev/null | tr '\\0' ' '; "
                              "find / -name \"secret-$T\" 2>/dev/null", env={"T": token})
        self.assertNotIn(token, out["stdout"] + out["stderr"], out)
        # B's pid named through A's URL: not A's.
        base = f"/v1/sessions/{a}/commands/{b_pid}"
        self.call("GET", base, expect=404)
        self.call("POST", f"{base}/signal", json.dumps({"signal": "SIGKILL"}), expect=404)
        self.call("POST", f"{base}/stdin", b"x", expect=404)
        # And B's process still runs.
        self.assertTrue(self.call("GET", f"/v1/sessions/{b}/commands/{b_pid}")["running"])

    def test_a_host_listener_on_loopback_cannot_be_reached(self):
        sid = self.session()
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        listener.setblocking(False)
        port = listener.getsockname()[1]
        try:
            out = self.run_cmd(sid, f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo CONNECTED; "
                                    f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 3); "
                                    f"print('CONNECTED')\"", timeout=30)
            self.assertNotIn("CONNECTED", out["stdout"], out)
            self.assertNotEqual(out["exit_code"], 0, out)
            with self.assertRaises(BlockingIOError):
                listener.accept()
        finally:
            listener.close()

    def test_a_host_file_outside_cannot_be_read(self):
        sid = self.session()
        token = secrets.token_hex(12)
        with tempfile.NamedTemporaryFile("w", dir="/tmp", prefix="airlock-host-secret-", delete=False) as f:
            f.write(token)
            path = f.name
        os.chmod(path, 0o644)
        try:
            out = self.run_cmd(sid, f"cat {path}; cat /etc/shadow; ls /tmp; cat /proc/1/root{path}")
            self.assertNotIn(token, out["stdout"], out)
            self.assertNotIn("root:", out["stdout"], out)
            self.assertNotIn(os.path.basename(path), out["stdout"], out)
            self.assertNotEqual(out["exit_code"], 0, out)
        finally:
            os.unlink(path)


if __name__ == "__main__":
    unittest.main()
