"""One request pipeline for every door (issue 21): each finding of the issue, reproduced as an
attacker would try it against a real `airlock serve`, and refused.

  1  sandbox bytes ran as web pages        -> opened in headless Chromium, they run no script
  2  one list stalled the loop             -> lists are pages, without code
  3  bodies read before permission         -> 401/403/404/413/429 before a byte of the body
  4  no quotas per owner                   -> sessions, MCP sessions, held approvals: 429, quota named
  5  threads held for a call               -> E2B and MCP calls hold none: other routes answer
  6  two run limits                        -> MCP one-shot runs take the API's run slots
  8  one address held every connection     -> its own waiting connections are pushed out
  9  duplicate JSON keys                   -> refused on every door
  10 a part without headers, E2B contexts never pruned, a newline forging a log line

Finding 7 (slow readers holding whole files) and the memory bounds of the others are asserted by
tests/e2e/test_service_overload.py, beside honest clients.
"""

import hashlib
import http.client
import json
import os
import re
import resource
import secrets
import shutil
import socket
import tempfile
import threading
import time
import unittest

from airlock_server import AirlockServer, copy_profiles, metric_value, scaled
from browser import browser, skip_unless_browser

GATED = {"gated": "name: gated\nextends: minimal\napproval:\n  policy: always\n  expires: 600\n"}


def token_file(directory, entries):
    path = os.path.join(directory, "tokens")
    with open(path, "w") as f:
        f.write("".join(f"{name}:{token}{':' + roles if roles else ''}\n" for name, token, roles in entries))
    os.chmod(path, 0o600)
    return path


def auth(token):
    return {"Authorization": f"Bearer {token}"} if token else {}


def e2b_port(server, which="code interpreter"):
    """The E2B port the server bound (--e2b-listen 127.0.0.1:0,0), from its log."""
    deadline = time.monotonic() + 10
    pattern = re.compile(r"127\.0\.0\.1:(\d+) \(" + which + r"\)")
    while time.monotonic() < deadline:
        for line in server.stderr_lines:
            m = pattern.search(line)
            if m:
                return int(m.group(1))
        time.sleep(0.05)
    raise AssertionError("the E2B listener's port is not in the log")


def request(port, method, path, body=None, headers=None, timeout=60):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        h = dict(headers or {})
        if body is not None and not isinstance(body, (bytes, str)):
            body = json.dumps(body)
            h.setdefault("Content-Type", "application/json")
        conn.request(method, path, body=body, headers=h)
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def raw(port, data, timeout=10, source=None):
    """Sends raw bytes and returns the socket (the caller reads and closes)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout,
                                 source_address=(source, 0) if source else None)
    s.sendall(data)
    return s


def read_head(s):
    """The response's status line and headers (up to the blank line), or what came before EOF."""
    data = b""
    while b"\r\n\r\n" not in data:
        try:
            chunk = s.recv(4096)
        except socket.timeout:
            break
        if not chunk:
            break
        data += chunk
    return data


def read_all(s):
    """What the server sends until it closes the connection (or the socket times out)."""
    data = b""
    while True:
        try:
            chunk = s.recv(65536)
        except (socket.timeout, ConnectionResetError):
            break
        if not chunk:
            break
        data += chunk
    return data


def mcp_post(port, message, session=None, token=None):
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    headers.update(auth(token))
    if session:
        headers["Mcp-Session-Id"] = session
    return request(port, "POST", "/mcp", body=json.dumps(message) if not isinstance(message, (str, bytes)) else message,
                   headers=headers)


def mcp_initialize(port, token=None, name="pipeline-test"):
    status, headers, body = mcp_post(port, {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                                       "clientInfo": {"name": name, "version": "1"}}}, token=token)
    return status, headers.get("mcp-session-id"), json.loads(body) if body else None


def mcp_call(port, session, code, token=None, session_id=None, timeout_s=None, profile=None):
    args = {"code": code}
    if profile:
        args["profile"] = profile
    if session_id:
        args["session_id"] = session_id
    if timeout_s:
        args["timeout_seconds"] = timeout_s
    status, _, body = mcp_post(port, {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                      "params": {"name": "execute_python", "arguments": args}},
                               session=session, token=token)
    return status, json.loads(body)


def create_session(server, token=None, profile="minimal", expect=201):
    deadline = time.monotonic() + scaled(60)
    while True:
        status, _, data = server.post_json("/v1/sessions", {"profile": profile}, headers=auth(token))
        if status != 503 or time.monotonic() > deadline:
            break
        time.sleep(0.2)  # no warm run ready yet
    assert status == expect, (status, data)
    return json.loads(data)


def wait_for_metric(server, name, value, timeout=30):
    deadline = time.monotonic() + scaled(timeout)
    while metric_value(server.metrics(), name) != value:
        if time.monotonic() > deadline:
            raise AssertionError(f"{name} never reached {value}")
        time.sleep(0.02)


# -------------------------------------------------------------------------------------------------
# Finding 1: a file written by sandboxed code, opened by a person in a browser, ran script from the
# API's own origin (the Host/Origin gate let its requests through; on a server without tokens it
# approved a held request and ran code).

HTML = """<!doctype html><html><body><h1 id=pwned>sandbox page</h1><script>
fetch('/v1/execute', {method: 'POST', headers: {'Content-Type': 'application/json'},
                      body: JSON.stringify({code: "print('MARKER-html')"})});
fetch('/v1/MARKER-html');
</script></body></html>"""
SVG = """<svg xmlns="http://www.w3.org/2000/svg"><script>
fetch('/v1/execute', {method: 'POST', headers: {'Content-Type': 'application/json'},
                      body: JSON.stringify({code: "print('MARKER-svg')"})});
fetch('/v1/MARKER-svg');
</script></svg>"""


class SandboxBytesInABrowser(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        skip_unless_browser("finding 1's test")
        cls.tmp = tempfile.mkdtemp(prefix="airlock-e2e-pipeline-browser-")
        # No tokens: the loopback default, where the page's requests would need nothing more.
        cls.server = AirlockServer().start()
        cls.server.wait_pools_ready(profiles=["general"])

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_sandbox_pages_open_as_downloads_and_run_nothing(self):
        marker = "m" + secrets.token_hex(4)
        sid = create_session(self.server, profile="general")["id"]
        code = (f"open('x.html', 'w').write({HTML.replace('MARKER', marker)!r})\n"
                f"open('x.svg', 'w').write({SVG.replace('MARKER', marker)!r})\n")
        status, _, data = self.server.post_json(f"/v1/sessions/{sid}/execute", {"code": code})
        self.assertEqual(status, 200, data)
        self.assertEqual(json.loads(data)["exit_code"], 0, data)
        for name in ("x.html", "x.svg"):
            status, headers, _ = self.server.get(f"/v1/sessions/{sid}/files/{name}")
            self.assertEqual(status, 200)
            self.assertEqual(headers["content-type"], "application/octet-stream")
            self.assertTrue(headers["content-disposition"].startswith(f'attachment; filename="{name}"'))
            self.assertEqual(headers["content-security-policy"], "sandbox; default-src 'none'")
            self.assertEqual(headers["x-content-type-options"], "nosniff")

        downloads = tempfile.mkdtemp(prefix="downloads-", dir=self.tmp)
        driver = browser(downloads)
        try:
            base = f"http://127.0.0.1:{self.server.port}"
            # The control: a page of the API's origin that does call the API (the console loads
            # the profiles) shows up in the audit trail, so its absence below means something.
            driver.get(base + "/console")
            self.assertTrue(self.server.wait_for_audit(
                lambda r: r.get("route") == "/v1/profiles" and r.get("type") == "request", timeout=scaled(30)),
                "the console's own request is not in the audit trail")
            for name in ("x.html", "x.svg"):
                driver.get(f"{base}/v1/sessions/{sid}/files/{name}")
                # A download, not a page: the file arrives in the downloads directory.
                deadline = time.monotonic() + scaled(30)
                while not os.path.exists(os.path.join(downloads, name)):
                    self.assertLess(time.monotonic(), deadline, f"{name} was not downloaded: {os.listdir(downloads)}")
                    time.sleep(0.1)
                self.assertEqual(driver.find_elements("id", "pwned"), [])
            # The page's own requests would have come within moments of its load; the browser then
            # loads the console once more: its request arrives after anything the pages sent.
            profiles_seen = len([r for r in self.server.audit_records() if r.get("route") == "/v1/profiles"])
            driver.get(base + "/console")
            deadline = time.monotonic() + scaled(30)
            while len([r for r in self.server.audit_records() if r.get("route") == "/v1/profiles"]) <= profiles_seen:
                self.assertLess(time.monotonic(), deadline, "the console's request after the pages never came")
                time.sleep(0.05)
        finally:
            driver.quit()
        records = self.server.audit_records()
        sha = {hashlib.sha256(f"print('{marker}-{k}')".encode()).hexdigest() for k in ("html", "svg")}
        from_pages = [r for r in records if r.get("code_sha256") in sha or
                      (r.get("route") == "/v1/execute" and r.get("client", {}).get("token") is None and
                       r.get("verdict") == "ran")]
        self.assertEqual(from_pages, [], "a page written by the sandbox reached the API")
        # Every request is in the audit trail (its path; 404s too): none of the pages' came.
        self.assertFalse([r for r in records if marker in r.get("route", "")],
                         "a page written by the sandbox reached the API")


# -------------------------------------------------------------------------------------------------
# Findings 3 and 4: bodies before permission, and quotas per owner.

ALICE, BOB, CAROL = (secrets.token_hex(16) for _ in range(3))


class PermissionAndQuotas(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="airlock-e2e-pipeline-quotas-")
        tokens = token_file(cls.tmp, [("alice", ALICE, ""), ("bob", BOB, ""), ("carol", CAROL, "approve")])
        os.mkdir(os.path.join(cls.tmp, "profiles"))
        profiles = copy_profiles(os.path.join(cls.tmp, "profiles"), GATED)
        cls.server = AirlockServer(extra_args=[
            "--tokens-file", tokens, "--max-sessions", "4", "--max-mcp-sessions", "4",
            "--max-pending-approvals", "4", "--max-uploads-per-owner", "2", "--max-file", "8M"],
            profiles_dir=profiles).start()
        cls.server.wait_pools_ready(profiles=["minimal"])

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def put_head(self, sid, token, length, path="up.bin", expect=False):
        head = (f"PUT /v1/sessions/{sid}/files/{path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                f"Authorization: Bearer {token}\r\nContent-Type: application/octet-stream\r\n"
                f"Content-Length: {length}\r\n" + ("Expect: 100-continue\r\n" if expect else "") + "\r\n")
        return raw(self.server.port, head.encode())

    def test_a_body_is_never_read_before_it_is_allowed(self):
        sid = create_session(self.server, ALICE)["id"]
        try:
            big = 7 << 20
            # Another token's session: 404 on the header, nothing of the body sent.
            s = self.put_head(sid, BOB, big)
            self.assertTrue(read_head(s).startswith(b"HTTP/1.1 404"))
            s.close()
            # A token without the run role: 403; no token: 401; over --max-file: 413. All at once.
            for token, want in ((CAROL, b"HTTP/1.1 403"), ("x" * 20, b"HTTP/1.1 401")):
                s = self.put_head(sid, token, big)
                self.assertTrue(read_head(s).startswith(want), want)
                s.close()
            s = self.put_head(sid, ALICE, 9 << 20)
            self.assertTrue(read_head(s).startswith(b"HTTP/1.1 413"))
            s.close()
            # "100 Continue" only once the request is allowed.
            s = self.put_head(sid, BOB, big, expect=True)
            self.assertTrue(read_head(s).startswith(b"HTTP/1.1 404"))
            s.close()
            s = self.put_head(sid, ALICE, 4, expect=True)
            self.assertTrue(read_head(s).startswith(b"HTTP/1.1 100 Continue"))
            s.sendall(b"abcd")
            self.assertTrue(read_head(s).startswith(b"HTTP/1.1 201"))
            s.close()
        finally:
            self.server.request("DELETE", f"/v1/sessions/{sid}", headers=auth(ALICE))

    def test_an_upload_is_streamed_to_its_file_and_counted_per_owner(self):
        sid = create_session(self.server, ALICE)["id"]
        try:
            data = os.urandom(3 << 20)
            held = []
            for name in ("a.bin", "b.bin"):
                s = self.put_head(sid, ALICE, len(data), path=name)
                s.sendall(data[:-1])  # one byte short
                held.append(s)
            # Nothing is under its name until all of it is there.
            status, _, _ = self.server.request("GET", f"/v1/sessions/{sid}/files/a.bin", headers=auth(ALICE))
            self.assertEqual(status, 404)
            # A third upload of the same token is over its quota; another token's is not.
            s = self.put_head(sid, ALICE, 10, path="c.bin")
            answer = read_all(s)
            s.close()
            self.assertTrue(answer.startswith(b"HTTP/1.1 429"), answer[:300])
            self.assertIn(b"Retry-After", answer)
            self.assertIn(b'"quota":"uploads_per_owner"', answer)
            for s in held:
                s.sendall(data[-1:])
                self.assertTrue(read_head(s).startswith(b"HTTP/1.1 201"))
                s.close()
            status, _, got = self.server.request("GET", f"/v1/sessions/{sid}/files/b.bin", headers=auth(ALICE))
            self.assertEqual((status, got == data), (200, True))
        finally:
            self.server.request("DELETE", f"/v1/sessions/{sid}", headers=auth(ALICE))

    def test_one_token_cannot_take_every_session(self):
        mine = [create_session(self.server, ALICE)["id"] for _ in range(2)]  # half of --max-sessions 4
        try:
            status, headers, data = self.server.post_json("/v1/sessions", {"profile": "minimal"}, headers=auth(ALICE))
            body = json.loads(data)
            self.assertEqual(status, 429, body)
            self.assertEqual(body["quota"], "sessions_per_owner")
            self.assertIn("--max-sessions-per-owner", body["error"])
            self.assertIn("retry-after", headers)
            other = create_session(self.server, BOB)["id"]
            self.server.request("DELETE", f"/v1/sessions/{other}", headers=auth(BOB))
        finally:
            for sid in mine:
                self.server.request("DELETE", f"/v1/sessions/{sid}", headers=auth(ALICE))

    def test_one_token_cannot_take_every_mcp_session(self):
        status, first, _ = mcp_initialize(self.server.port, ALICE)  # a quarter of --max-mcp-sessions 4
        self.assertEqual(status, 200)
        status, _, body = mcp_initialize(self.server.port, ALICE)
        self.assertEqual(status, 429, body)
        self.assertIn("mcp_sessions_per_owner", body["error"]["message"])
        status, other, _ = mcp_initialize(self.server.port, BOB)
        self.assertEqual(status, 200)
        # Another token's MCP session is not found, before its body is read.
        status, _ = mcp_call(self.server.port, first, "print(1)", token=BOB)
        self.assertEqual(status, 404)
        for sid, token in ((first, ALICE), (other, BOB)):
            request(self.server.port, "DELETE", "/mcp", headers={**auth(token), "Mcp-Session-Id": sid})

    def test_one_token_cannot_hold_every_approval(self):
        ids = []
        for i in range(2):  # half of --max-pending-approvals 4
            status, _, data = self.server.post_json("/v1/execute", {"code": f"print({i})", "profile": "gated"},
                                                    headers=auth(ALICE))
            self.assertEqual(status, 202, data)
            ids.append(json.loads(data)["approval_id"])
        status, headers, data = self.server.post_json("/v1/execute", {"code": "print(3)", "profile": "gated"},
                                                      headers=auth(ALICE))
        self.assertEqual(status, 429, data)
        self.assertEqual(json.loads(data)["quota"], "pending_approvals_per_owner")
        self.assertIn("retry-after", headers)
        status, _, data = self.server.post_json("/v1/execute", {"code": "print(4)", "profile": "gated"},
                                                headers=auth(BOB))
        self.assertEqual(status, 202, data)
        ids.append(json.loads(data)["approval_id"])
        for aid in ids:
            self.server.post_json(f"/v1/approvals/{aid}", {"decision": "deny"}, headers=auth(CAROL))


# -------------------------------------------------------------------------------------------------
# Findings 2 (lists), 5 (threads held for a call), 6 (two run limits), 9 and 10.

class Doors(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="airlock-e2e-pipeline-doors-")
        os.mkdir(os.path.join(cls.tmp, "profiles"))
        profiles = copy_profiles(os.path.join(cls.tmp, "profiles"), GATED)
        # --max-sessions 4: the session threads are 4, what E2B and MCP calls used to hold.
        cls.server = AirlockServer(extra_args=["--max-sessions", "4", "--max-concurrent", "1", "--max-queue", "0",
                                               "--e2b-listen", "127.0.0.1:0,0", "--e2b-profile", "general",
                                               "--max-pending-approvals", "200"],
                                   profiles_dir=profiles).start()
        cls.server.wait_pools_ready(profiles=["minimal", "general"])
        cls.e2b = e2b_port(cls.server)

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_lists_are_pages_without_code(self):
        big = "x = 1\n# " + "y" * (200 << 10) + "\n"
        held = []
        for i in range(12):
            status, _, data = self.server.post_json("/v1/execute", {"code": big + f"print({i})\n", "profile": "gated"})
            self.assertEqual(status, 202, data[:300])
            held.append(json.loads(data)["approval_id"])
        try:
            status, _, data = self.server.get("/v1/approvals")
            self.assertEqual(status, 200)
            self.assertLess(len(data), 64 << 10, "the list carries the held code")
            listing = json.loads(data)
            self.assertTrue(all("code" not in a for a in listing["approvals"]))
            seen, cursor = [], None
            while True:
                status, _, data = self.server.get("/v1/approvals?limit=5" + (f"&cursor={cursor}" if cursor else ""))
                page = json.loads(data)
                self.assertLessEqual(len(page["approvals"]), 5)
                seen += [a["approval_id"] for a in page["approvals"]]
                cursor = page["next_cursor"]
                if cursor is None:
                    break
            self.assertEqual([a for a in seen if a in held], held)  # each once, oldest first
            status, _, data = self.server.get(f"/v1/approvals/{held[0]}")
            self.assertTrue(json.loads(data)["code"].startswith("x = 1"))
            self.assertEqual(self.server.get("/v1/approvals?limit=0")[0], 400)
        finally:
            for aid in held:
                self.server.post_json(f"/v1/approvals/{aid}", {"decision": "deny"})
        # The runs and the sessions page the same way. (One run slot here: a run keeps it until
        # it is torn down, a moment after its answer; a 429 says to come back.)
        for _ in range(3):
            deadline = time.monotonic() + scaled(30)
            while (status := self.server.post_json("/v1/execute", {"code": "print(1)"})[0]) == 429:
                self.assertLess(time.monotonic(), deadline)
                time.sleep(0.1)
            self.assertEqual(status, 200)
        _, _, data = self.server.get("/v1/runs?limit=1")
        first = json.loads(data)
        self.assertEqual(len(first["runs"]), 1)
        _, _, data = self.server.get(f"/v1/runs?limit=1&cursor={first['next_cursor']}")
        self.assertNotEqual(json.loads(data)["runs"][0]["request_id"], first["runs"][0]["request_id"])
        sids = [create_session(self.server)["id"] for _ in range(3)]
        try:
            # (Other tests' sessions may be live too: an E2B caller's default sandbox.)
            listed, cursor = [], None
            for _ in range(20):
                _, _, data = self.server.get("/v1/sessions?limit=2" + (f"&cursor={cursor}" if cursor else ""))
                page = json.loads(data)
                self.assertLessEqual(len(page["sessions"]), 2)
                listed += [s["id"] for s in page["sessions"]]
                cursor = page["next_cursor"]
                if cursor is None:
                    break
            self.assertIsNone(cursor)
            self.assertEqual(len(listed), len(set(listed)), "a session listed twice")
            self.assertEqual(sorted(s for s in listed if s in sids), sorted(sids))
        finally:
            for sid in sids:
                self.server.request("DELETE", f"/v1/sessions/{sid}")

    def test_calls_hold_no_thread(self):
        # Two E2B calls (two contexts of the caller's one sandbox) and two MCP session calls run
        # at once; while they all still run, routes that need a session thread answer.
        contexts = []
        for _ in range(2):
            status, _, data = request(self.e2b, "POST", "/contexts", body={})
            self.assertEqual(status, 200, data)
            contexts.append(json.loads(data)["id"])
        status, mcp_id, _ = mcp_initialize(self.server.port)
        sessions = [create_session(self.server, profile="general")["id"] for _ in range(2)]
        try:
            self.run_four_calls(contexts, sessions, mcp_id)
        finally:
            for ctx in contexts:
                request(self.e2b, "DELETE", f"/contexts/{ctx}")
            for sid in sessions:
                self.server.request("DELETE", f"/v1/sessions/{sid}")
            request(self.server.port, "DELETE", "/mcp", headers={"Mcp-Session-Id": mcp_id})

    def run_four_calls(self, contexts, sessions, mcp_id):
        code = "import time\nprint('started', flush=True)\ntime.sleep(4)\nprint('ended')\n"
        started, ended = threading.Semaphore(0), []
        errors = []

        def e2b_call(ctx):
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.e2b, timeout=60)
                conn.request("POST", "/execute", body=json.dumps({"code": code, "context_id": ctx}),
                             headers={"Content-Type": "application/json"})
                r = conn.getresponse()
                for line in r:
                    ev = json.loads(line)
                    if ev.get("type") == "stdout" and "started" in ev.get("text", ""):
                        started.release()
                    if ev.get("type") == "end_of_execution":
                        ended.append(time.monotonic())
                conn.close()
            except Exception as e:  # noqa: BLE001 (reported below)
                errors.append(repr(e))

        def mcp_session_call(sid):
            try:
                # An MCP call answers once, at its end: it is running once the session is busy.
                mcp_call(self.server.port, mcp_id, code, session_id=sid)
                ended.append(time.monotonic())
            except Exception as e:  # noqa: BLE001
                errors.append(repr(e))

        threads = [threading.Thread(target=e2b_call, args=(c,)) for c in contexts]
        threads += [threading.Thread(target=mcp_session_call, args=(s,)) for s in sessions]
        for t in threads:
            t.start()
        for _ in contexts:
            self.assertTrue(started.acquire(timeout=scaled(30)), f"an E2B call did not start: {errors}")
        deadline = time.monotonic() + scaled(30)
        # The MCP calls' sessions are busy once they run (the E2B contexts' calls started above).
        while metric_value(self.server.metrics(), "airlock_sessions_busy") < len(sessions):
            self.assertLess(time.monotonic(), deadline, f"the four calls never ran at once: {errors}")
            time.sleep(0.02)
        self.assertEqual(ended, [], "a call ended before the check")
        # Routes that run on the session threads: a list, a session's files.
        status, _, _ = self.server.get("/v1/sessions")
        self.assertEqual(status, 200)
        status, _, _ = self.server.get(f"/v1/sessions/{sessions[0]}/files")
        self.assertEqual(status, 200)
        answered_at = time.monotonic()
        self.assertEqual(ended, [], "the routes answered only after a call ended: a call held their thread")
        for t in threads:
            t.join(scaled(60))
        self.assertEqual(errors, [])
        self.assertEqual(len(ended), 4)
        self.assertTrue(all(e > answered_at for e in ended))

    def test_mcp_one_shot_runs_take_the_apis_run_slots(self):
        # --max-concurrent 1, --max-queue 0: one run at a time, whichever door it came through.
        status, mcp_id, _ = mcp_initialize(self.server.port)
        out = {}
        t = threading.Thread(target=lambda: out.update(mcp=mcp_call(self.server.port, mcp_id,
                                                                    "import time\ntime.sleep(3)\nprint('mcp')",
                                                                    profile="general")))
        t.start()
        wait_for_metric(self.server, "airlock_executions_in_flight", 1)
        status, headers, data = self.server.post_json("/v1/execute", {"code": "print(1)"})
        self.assertEqual(status, 429, data)
        self.assertIn("retry-after", headers)
        t.join(scaled(60))
        self.assertFalse(out["mcp"][1]["result"].get("isError"), out)
        wait_for_metric(self.server, "airlock_executions_in_flight", 0)
        # And the other way round: a /v1/execute run holds the slot, an MCP call is told so.
        t = threading.Thread(target=lambda: out.update(api=self.server.post_json(
            "/v1/execute", {"code": "import time\ntime.sleep(3)", "profile": "general"})))
        t.start()
        wait_for_metric(self.server, "airlock_executions_in_flight", 1)
        status, body = mcp_call(self.server.port, mcp_id, "print(2)")
        self.assertEqual(status, 200)
        self.assertTrue(body["result"]["isError"], body)
        self.assertIn("busy", json.dumps(body))
        t.join(scaled(60))
        self.assertEqual(out["api"][0], 200)
        request(self.server.port, "DELETE", "/mcp", headers={"Mcp-Session-Id": mcp_id})

    def test_duplicate_keys_are_refused_on_every_door(self):
        status, _, data = self.server.post_json("/v1/execute", '{"code": "print(1)", "code": "print(2)"}')
        self.assertEqual(status, 400, data)
        self.assertEqual(json.loads(data)["code"], "duplicate_key")
        status, mcp_id, _ = mcp_initialize(self.server.port)
        # The refused request's audit record is written after its answer: counted before the
        # MCP call's records are looked for, or a busy machine shows it among them.
        deadline = time.monotonic() + 10
        while not any('"code" appears twice' in (r.get("error") or "") for r in self.server.audit_records()):
            self.assertLess(time.monotonic(), deadline, "the refused request left no audit record")
            time.sleep(0.05)
        before = len(self.server.audit_records())
        status, _, data = mcp_post(self.server.port,
                                   '{"jsonrpc":"2.0","id":7,"method":"ping","method":"tools/call",'
                                   '"params":{"name":"execute_python","arguments":{"code":"print(7)"}}}',
                                   session=mcp_id)
        self.assertEqual(status, 400, data)
        self.assertEqual(json.loads(data)["error"]["code"], -32600)
        time.sleep(0.5)
        self.assertFalse([r for r in self.server.audit_records()[before:] if r.get("type") == "execution"],
                         "the tool ran")
        status, _, data = request(self.e2b, "POST", "/execute", body='{"code": "1", "code": "2"}',
                                  headers={"Content-Type": "application/json"})
        self.assertEqual(status, 400, data)
        request(self.server.port, "DELETE", "/mcp", headers={"Mcp-Session-Id": mcp_id})

    def test_the_small_ones(self):
        # A multipart part with no header at all is read as one (not "headers do not end").
        status, _, data = request(self.e2b, "POST", "/files?path=/home/user/bare.txt",
                                  body=b"--x\r\n\r\nbare\r\n--x--\r\n",
                                  headers={"Content-Type": "multipart/form-data; boundary=x"})
        self.assertEqual(status, 400, data)
        self.assertIn("no multipart field named 'file'", json.loads(data)["message"])
        # An E2B context whose sandbox (the caller's default session) ended through
        # /v1/sessions is gone from the contexts.
        status, _, data = request(self.e2b, "POST", "/contexts", body={})
        self.assertEqual(status, 200, data)
        ctx = json.loads(data)["id"]
        self.assertEqual(self.server.request("DELETE", f"/v1/sessions/{ctx.rsplit('-c-', 1)[0]}")[0], 204)
        status, _, data = request(self.e2b, "GET", "/contexts")
        self.assertNotIn(ctx, [c["id"] for c in json.loads(data)])
        status, _, data = request(self.e2b, "POST", "/execute", body={"code": "1", "context_id": ctx})
        self.assertEqual(status, 404, data)
        self.assertIn(f"Context {ctx} not found", json.loads(data)["message"])
        # A newline in an MCP client's name forges no line of the server's log.
        status, mcp_id, _ = mcp_initialize(self.server.port, name="evil\nairlock: error: FORGED-LINE")
        self.assertEqual(status, 200)
        deadline = time.monotonic() + 5
        while not any("FORGED-LINE" in line for line in self.server.stderr_lines) and time.monotonic() < deadline:
            time.sleep(0.05)
        logged = [line for line in self.server.stderr_lines if "FORGED-LINE" in line]
        self.assertEqual(len(logged), 1, logged)
        self.assertTrue(logged[0].startswith("airlock: info: mcp: initialize from 'evil\\nairlock"), logged)
        request(self.server.port, "DELETE", "/mcp", headers={"Mcp-Session-Id": mcp_id})


# -------------------------------------------------------------------------------------------------
# Finding 8: 1,030 connections from one address, each sending half a header, exhausted the 1,024
# connection cap: the next client's /healthz was reset, and so were the E2B ports.

class ConnectionsPerAddress(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = AirlockServer(extra_args=["--e2b-listen", "127.0.0.1:0,0"]).start()
        cls.e2b = e2b_port(cls.server)
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft < 4096:
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8192), hard))
        if resource.getrlimit(resource.RLIMIT_NOFILE)[0] < 2000:
            raise unittest.SkipTest("this process may not open 2,000 files")

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()

    def test_one_address_cannot_hold_every_connection(self):
        flood = []
        try:
            for _ in range(1100):
                # From 127.0.0.2: another client address than the honest clients' 127.0.0.1.
                flood.append(raw(self.server.port, b"GET /healthz HTTP/1.1\r\nHost: 127.0", source="127.0.0.2"))
            for port in (self.server.port, self.e2b):
                for path in ("/healthz", "/health"):
                    if (port == self.e2b) != (path == "/health"):
                        continue
                    status, _, _ = request(port, "GET", path, timeout=30)
                    self.assertEqual(status, 200, path)
            status, body = self.server.execute("print(6 * 7)", path="/v1/execute")
            self.assertEqual((status, body.get("stdout")), (200, "42\n"), body)
            # The flooding address kept at most its budget of waiting connections: the server
            # closed its oldest ones to make room.
            closed = 0
            for s in flood:
                s.settimeout(0.5)
                try:
                    if s.recv(1) == b"":
                        closed += 1
                except socket.timeout:
                    pass
                except OSError:
                    closed += 1
            self.assertGreaterEqual(closed, 1100 - 128, f"only {closed} of the flood's connections were closed")
        finally:
            for s in flood:
                s.close()


if __name__ == "__main__":
    unittest.main()
