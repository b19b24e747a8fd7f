"""Approvals (issue 14, docs/api.md "Approvals"): a person in the loop, over real HTTP.

A real `airlock serve` with tokens of three roles (run, approve, run+approve) and profiles whose
approval policy holds requests. Each test asserts what a person and an operator rely on: a held
request answers 202 and does not run; only an approver sees and decides it, never on its own
request unless the profile allows; the approved run is exactly the held code (its sha256) and
its result is at GET /v1/approvals/{id} or on the held connection; a denial or an expiry is
final; the number of held requests is capped (429); every decision is in the audit trail.
"""

import base64
import hashlib
import json
import os
import shutil
import tempfile
import threading
import time
import unittest

from airlock_server import AirlockServer, assert_paced, copy_profiles, scaled, trivial_run_seconds

RUN_TOKEN = "agent-token-0123456789abcdef"
APPROVE_TOKEN = "alice-token-0123456789abcdef"
BOTH_TOKEN = "bob-token-0123456789abcdef01"

PROFILES = {
    # Every request that passes the analyzer waits for a person.
    "gated": "name: gated\nextends: minimal\napproval:\n  policy: always\n  expires: 120\n",
    # Same, but undecided requests expire (are denied) after 1 s.
    "gated-fast": "name: gated-fast\nextends: minimal\napproval:\n  policy: always\n  expires: 1\n",
    # The requester may approve its own request.
    "gated-self": "name: gated-self\nextends: minimal\napproval:\n  policy: always\n  self_approve: true\n",
    # The analyzer enforces; a blocked call waits for a person instead of being rejected,
    # other findings still reject.
    "held": ("name: held\nextends: general\naudit:\n  mode:\n    ast_scan: enforce\n"
             "approval:\n  policy: on_findings\n  rules: [blocked-call]\n"),
    # The analyzer only observes; a finding of a listed rule makes the request wait.
    "held-observe": "name: held-observe\nextends: general\napproval:\n  policy: on_findings\n  rules: [blocked-call]\n",
}

server = None
profiles = None
tokens_dir = None


def auth(token):
    return {"Authorization": f"Bearer {token}"}


def make_profiles():
    return copy_profiles(tempfile.mkdtemp(prefix="airlock-e2e-approval-profiles-"), PROFILES)


def start_server(extra_args=()):
    tokens = os.path.join(tokens_dir, "tokens")
    with open(tokens, "w") as f:
        f.write(f"agent:{RUN_TOKEN}\nalice:{APPROVE_TOKEN}:approve\nbob:{BOTH_TOKEN}:run+approve\n")
    os.chmod(tokens, 0o600)
    srv = AirlockServer(extra_args=["--tokens-file", tokens, *extra_args], profiles_dir=profiles)
    srv.start(wait_ready=False)
    # /readyz needs no token.
    srv.wait_ready()
    return srv


def setUpModule():
    global server, profiles, tokens_dir
    profiles = make_profiles()
    tokens_dir = tempfile.mkdtemp(prefix="airlock-e2e-approval-tokens-")
    server = start_server()


def tearDownModule():
    if server:
        server.cleanup()
    for d in (profiles, tokens_dir):
        if d:
            shutil.rmtree(d, ignore_errors=True)


def post(path, payload, token, timeout=60, srv=None):
    status, headers, data = (srv or server).post_json(path, payload, headers=auth(token), timeout=timeout)
    return status, headers, json.loads(data) if data else None


def get(path, token, srv=None):
    status, _, data = (srv or server).get(path, headers=auth(token))
    return status, json.loads(data) if data else None


def submit(code, profile="gated", token=RUN_TOKEN, **fields):
    status, headers, body = post("/v1/execute", {"code": code, "profile": profile, **fields}, token)
    return status, headers, body


def decide(approval_id, decision, token=APPROVE_TOKEN, srv=None, **fields):
    status, _, body = post(f"/v1/approvals/{approval_id}", {"decision": decision, **fields}, token, srv=srv)
    return status, body


def wait_status(approval_id, statuses, token=APPROVE_TOKEN, timeout=60):
    deadline = time.monotonic() + scaled(timeout)
    while True:
        status, body = get(f"/v1/approvals/{approval_id}", token)
        if status == 200 and body["status"] in statuses:
            return body
        if time.monotonic() > deadline:
            raise AssertionError(f"approval {approval_id} did not reach {statuses}: {status} {body}")
        time.sleep(0.05)


def sha(code):
    return hashlib.sha256(code.encode()).hexdigest()


class HeldRequests(unittest.TestCase):
    def test_held_request_answers_202_and_does_not_run_until_approved(self):
        code = "import math\nprint('approved-run', math.factorial(10))\n"
        status, headers, body = submit(code)
        self.assertEqual(status, 202, body)
        self.assertEqual(body["status"], "pending")
        self.assertTrue(body["approval_id"].startswith("apr_"))
        self.assertEqual(headers.get("x-approval-id"), body["approval_id"])
        self.assertEqual(body["code_sha256"], sha(code))
        self.assertIn("expires_at", body)
        self.assertEqual(body["findings"], [])
        self.assertNotIn("code", body)  # the 202 does not echo the code
        aid = body["approval_id"]
        # Nothing ran: no "ran" audit record for this request, and it stays pending.
        time.sleep(0.3)
        self.assertEqual(wait_status(aid, ["pending"])["status"], "pending")
        self.assertFalse([r for r in server.audit_records()
                          if r.get("approval_id") == aid and r["verdict"] == "ran"])
        # An approver lists it with its hash and findings (a list never carries code, issue 21),
        # and reads its code by id.
        status, listing = get("/v1/approvals", APPROVE_TOKEN)
        self.assertEqual(status, 200)
        mine = [a for a in listing["approvals"] if a["approval_id"] == aid]
        self.assertEqual(len(mine), 1)
        self.assertNotIn("code", mine[0])
        self.assertEqual(mine[0]["code_sha256"], sha(code))
        self.assertEqual(mine[0]["requested_by"], "agent")
        self.assertEqual(get(f"/v1/approvals/{aid}", APPROVE_TOKEN)[1]["code"], code)
        # Approving with the hash of the code seen starts exactly that code.
        status, d = decide(aid, "approve", code_sha256=sha(code), reason="looks fine")
        self.assertEqual(status, 200, d)
        self.assertEqual(d["status"], "approved")
        self.assertEqual(d["decided_by"], "alice")
        done = wait_status(aid, ["ran", "failed"], token=RUN_TOKEN)  # the requester may follow its own
        self.assertEqual(done["status"], "ran", done)
        self.assertEqual(done["result"]["stdout"], "approved-run 3628800\n")
        self.assertEqual(done["result"]["exit_code"], 0)
        self.assertEqual(done["result"]["profile"]["name"], "gated")
        # The audit trail: held, decided (who, which code, whose request), ran.
        recs = server.wait_for_audit(lambda r: r.get("approval_id") == aid and r["verdict"] == "ran")
        self.assertTrue(recs)
        self.assertEqual(recs[0]["code_sha256"], sha(code))
        self.assertEqual(recs[0]["client"]["token"], "agent")
        decided = [r for r in server.audit_records() if r.get("approval_id") == aid and r["verdict"] == "approved"]
        self.assertEqual(len(decided), 1)
        self.assertEqual(decided[0]["type"], "approval")
        self.assertEqual(decided[0]["client"]["token"], "alice")
        self.assertEqual(decided[0]["requested_by"], "agent")
        self.assertEqual(decided[0]["code_sha256"], sha(code))
        self.assertEqual(decided[0]["reason"], "looks fine")
        held = [r for r in server.audit_records() if r.get("approval_id") == aid and r["verdict"] == "pending_approval"]
        self.assertEqual(len(held), 1)
        self.assertEqual(held[0]["http_status"], 202)
        # Decided once: a second decision is refused.
        status, _ = decide(aid, "deny")
        self.assertEqual(status, 409)

    def test_deny_is_final_and_audited(self):
        code = "print('must never run')\n"
        _, _, body = submit(code)
        aid = body["approval_id"]
        status, d = decide(aid, "deny", reason="not today")
        self.assertEqual(status, 200, d)
        self.assertEqual(d["status"], "denied")
        got = wait_status(aid, ["denied"])
        self.assertNotIn("result", got)
        self.assertEqual(decide(aid, "approve")[0], 409)
        recs = server.wait_for_audit(lambda r: r.get("approval_id") == aid and r["verdict"] == "denied")
        self.assertEqual(recs[0]["reason"], "not today")
        time.sleep(0.3)
        self.assertFalse([r for r in server.audit_records() if r.get("approval_id") == aid and r["verdict"] == "ran"])

    def test_approval_names_the_code_it_approves(self):
        code = "print('the held code')\n"
        _, _, body = submit(code)
        aid = body["approval_id"]
        status, d = decide(aid, "approve", code_sha256=sha("print('other code')\n"))
        self.assertEqual(status, 409, d)
        self.assertIn("code_sha256", d["error"])
        self.assertEqual(wait_status(aid, ["pending"])["status"], "pending")
        decide(aid, "deny")

    def test_expired_request_is_denied(self):
        _, _, body = submit("print('too late')\n", profile="gated-fast")
        aid = body["approval_id"]
        got = wait_status(aid, ["expired"], timeout=10)
        self.assertEqual(got["status"], "expired")
        self.assertEqual(decide(aid, "approve")[0], 409)
        recs = server.wait_for_audit(lambda r: r.get("approval_id") == aid and r["verdict"] == "expired")
        self.assertTrue(recs)
        self.assertEqual(recs[0]["type"], "approval")


def request_sha256(approval, code):
    """request_sha256 as docs/api.md defines it, from what the approval shows."""
    digest = {"code": code, "language": approval["language"], "profile": approval["profile"],
              "limits": approval["limits"],
              "files": [{"path": f["path"], "size": f["size"], "sha256": f["sha256"]} for f in approval["files"]]}
    text = json.dumps(digest, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


# Trojan Source (CVE-2021-42574): shown, line 2 reads `if access_level != "user": # Check if admin`;
# what runs compares access_level with a longer string, so the "admin" branch runs.
TROJAN = ("access_level = 'user'\n"
          "if access_level != \"user\u202e \u2066# Check if admin\u2069 \u2066\":\n"
          "    print('You are an admin.')\n")


class WhatTheApproverSees(unittest.TestCase):
    """Issue 23.2: the approval shows everything that will run, and the decision binds it."""

    def test_bidi_controls_are_a_finding_and_escaped(self):
        status, _, body = submit(TROJAN)
        self.assertEqual(status, 202, body)
        aid = body["approval_id"]
        marks = [f for f in body["findings"] if f["rule"] == "invisible-character"]
        self.assertEqual([(f["line"], f["col"], f["severity"]) for f in marks], [(2, 25, "warning")], body["findings"])
        self.assertIn("U+202E RIGHT-TO-LEFT OVERRIDE", marks[0]["message"])
        # The JSON text itself carries escapes, never the raw controls, wherever the code is.
        for path in (f"/v1/approvals/{aid}", "/v1/approvals"):
            status, _, raw = server.get(path, headers=auth(APPROVE_TOKEN))
            self.assertEqual(status, 200)
            text = raw.decode()
            for ch in "\u202e\u2066\u2069":
                self.assertNotIn(ch, text, f"{path} carries a raw bidirectional control")
            self.assertIn("\\u202e", text)
        # Parsed, the code is exactly what was sent (and what runs).
        _, shown = get(f"/v1/approvals/{aid}", APPROVE_TOKEN)
        self.assertEqual(shown["code"], TROJAN)
        self.assertEqual(decide(aid, "deny")[0], 200)

    def test_the_approval_holds_language_limits_and_every_file(self):
        setup = "echo setup-ran-$((6 * 7))\n"
        big = "x" * (70 << 10)
        files = [{"path": "setup.sh", "content": setup},
                 {"path": "data/blob.bin", "content": base64.b64encode(b"\x00\x01\xfe\xff").decode(),
                  "encoding": "base64"},
                 {"path": "big.txt", "content": big}]
        code = ". ./setup.sh\n"
        status, _, body = submit(code, profile="held-observe", language="bash", files=files, timeout=7,
                                 limits={"memory": "64Mi"})
        self.assertEqual(status, 202, body)
        aid = body["approval_id"]
        self.assertNotIn("code", body)
        self.assertEqual([f["path"] for f in body["files"]], ["setup.sh", "data/blob.bin", "big.txt"])
        self.assertNotIn("content", body["files"][0])  # a 202 echoes no content
        _, a = get(f"/v1/approvals/{aid}", APPROVE_TOKEN)
        self.assertEqual(a["language"], "bash")
        self.assertEqual(a["limits"]["timeout_s"], 7)
        self.assertEqual(a["limits"]["memory_bytes"], 64 << 20)
        self.assertEqual(set(a["limits"]), {"timeout_s", "memory_bytes", "cpu_cores", "cpu_time_s", "pids",
                                            "disk_bytes", "output_bytes"})
        by_path = {f["path"]: f for f in a["files"]}
        self.assertEqual(by_path["setup.sh"], {"path": "setup.sh", "size": len(setup), "content": setup,
                                               "sha256": hashlib.sha256(setup.encode()).hexdigest()})
        for path, content in (("data/blob.bin", b"\x00\x01\xfe\xff"), ("big.txt", big.encode())):
            f = by_path[path]
            self.assertNotIn("content", f)
            self.assertEqual((f["size"], f["sha256"]), (len(content), hashlib.sha256(content).hexdigest()))
            status, got = get(f["download"], APPROVE_TOKEN)
            self.assertEqual(status, 200, got)
            self.assertEqual(base64.b64decode(got["content_base64"]), content)
            self.assertEqual(get(f["download"], RUN_TOKEN)[0], 200)  # its requester may follow it too
            self.assertEqual(get(f["download"], BOTH_TOKEN)[0], 200)
        self.assertEqual(get(f"/v1/approvals/{aid}/files/3", APPROVE_TOKEN)[0], 404)
        self.assertEqual(get(f"/v1/approvals/{aid}/other", APPROVE_TOKEN)[0], 404)
        # request_sha256 binds code, language, profile, limits and files, as documented.
        self.assertEqual(a["request_sha256"], request_sha256(a, code))
        self.assertEqual(body["request_sha256"], a["request_sha256"])
        self.assertEqual(a["code_sha256"], sha(code))
        # Approved on that hash, the files it showed are the files that run.
        self.assertEqual(decide(aid, "approve", request_sha256=a["request_sha256"])[0], 200)
        done = wait_status(aid, ["ran", "failed"], token=RUN_TOKEN)
        self.assertEqual(done["result"]["stdout"], "setup-ran-42\n", done)
        # The decision and the run are audited with the hash they bound.
        bound = [r for r in server.audit_records() if r.get("approval_id") == aid and r["verdict"] in ("approved", "ran")]
        self.assertEqual(sorted(r["verdict"] for r in bound), ["approved", "ran"])
        self.assertTrue(all(r["request_sha256"] == a["request_sha256"] for r in bound), bound)
        # Done: the bytes are no longer kept, their hashes are.
        self.assertTrue(all(f.get("content_dropped") for f in done["files"]), done["files"])
        self.assertEqual(get(f"/v1/approvals/{aid}/files/0", APPROVE_TOKEN)[0], 404)

    def test_deciding_on_a_stale_request_hash_is_409(self):
        code = "echo held\n"
        _, _, first = submit(code, profile="held-observe", language="bash",
                             files=[{"path": "setup.sh", "content": "echo one\n"}])
        _, _, second = submit(code, profile="held-observe", language="bash",
                              files=[{"path": "setup.sh", "content": "echo two\n"}])
        # Same code, other files: code_sha256 alike, request_sha256 not.
        self.assertEqual(first["code_sha256"], second["code_sha256"])
        self.assertNotEqual(first["request_sha256"], second["request_sha256"])
        status, d = decide(second["approval_id"], "approve", request_sha256=first["request_sha256"])
        self.assertEqual(status, 409, d)
        self.assertIn("request_sha256", d["error"])
        self.assertEqual(wait_status(second["approval_id"], ["pending"])["status"], "pending")
        status, d = decide(second["approval_id"], "approve", request_sha256="0" * 63)
        self.assertEqual(status, 422, d)
        # Not hex (never echoed back raw in an error, bidirectional controls included).
        status, d = decide(second["approval_id"], "approve", request_sha256="\u202e" * 64)
        self.assertEqual(status, 422, d)
        self.assertNotIn("\u202e", d["error"])
        for a in (first, second):
            self.assertEqual(decide(a["approval_id"], "deny", request_sha256=a["request_sha256"])[0], 200)


class Roles(unittest.TestCase):
    def test_run_only_token_cannot_list_or_decide(self):
        _, _, body = submit("print(1)\n")
        aid = body["approval_id"]
        self.assertEqual(get("/v1/approvals", RUN_TOKEN)[0], 403)
        self.assertEqual(decide(aid, "approve", token=RUN_TOKEN)[0], 403)
        self.assertEqual(wait_status(aid, ["pending"])["status"], "pending")
        decide(aid, "deny")

    def test_approve_only_token_cannot_run_code(self):
        status, _, body = post("/v1/execute", {"code": "print(1)", "profile": "minimal"}, APPROVE_TOKEN)
        self.assertEqual(status, 403, body)
        status, _, body = post("/v1/sessions", {"profile": "minimal"}, APPROVE_TOKEN)
        self.assertEqual(status, 403, body)

    def test_no_self_approval_unless_the_profile_allows_it(self):
        _, _, body = submit("print('mine')\n", token=BOTH_TOKEN)
        aid = body["approval_id"]
        status, d = decide(aid, "approve", token=BOTH_TOKEN)
        self.assertEqual(status, 403, d)
        self.assertIn("may not decide", d["error"])
        self.assertEqual(decide(aid, "approve", token=APPROVE_TOKEN)[0], 200)
        self.assertEqual(wait_status(aid, ["ran"])["result"]["stdout"], "mine\n")
        _, _, body = submit("print('self ok')\n", profile="gated-self", token=BOTH_TOKEN)
        aid = body["approval_id"]
        self.assertEqual(decide(aid, "approve", token=BOTH_TOKEN)[0], 200)
        self.assertEqual(wait_status(aid, ["ran"])["result"]["stdout"], "self ok\n")

    def test_other_requesters_cannot_see_an_approval(self):
        _, _, body = submit("print(2)\n", token=BOTH_TOKEN)
        aid = body["approval_id"]
        self.assertEqual(get(f"/v1/approvals/{aid}", RUN_TOKEN)[0], 404)
        self.assertEqual(get(f"/v1/approvals/{aid}", BOTH_TOKEN)[0], 200)
        decide(aid, "deny")

    def test_unauthenticated_is_refused(self):
        status, _, _ = server.get("/v1/approvals")
        self.assertEqual(status, 401)


class Waiting(unittest.TestCase):
    def _wait_in_thread(self, code, wait, profile="gated"):
        out = {}

        def go():
            out["reply"] = post("/v1/execute", {"code": code, "profile": profile, "wait": wait}, RUN_TOKEN,
                                timeout=wait + 60)
        t = threading.Thread(target=go)
        t.start()
        deadline = time.monotonic() + scaled(30)
        while True:
            _, listing = get("/v1/approvals", APPROVE_TOKEN)
            found = [a for a in listing["approvals"] if a["code_sha256"] == sha(code)]
            if found:
                return t, out, found[0]["approval_id"]
            self.assertLess(time.monotonic(), deadline, "the held request never appeared")
            time.sleep(0.05)

    def test_waiting_client_gets_the_result_once_approved(self):
        code = "print('waited', 6 * 7)\n"
        t, out, aid = self._wait_in_thread(code, 60)
        time.sleep(0.2)
        self.assertTrue(t.is_alive(), "the connection is held while pending")
        self.assertEqual(decide(aid, "approve")[0], 200)
        t.join(scaled(60))
        status, headers, body = out["reply"]
        self.assertEqual(status, 200, body)
        self.assertEqual(body["stdout"], "waited 42\n")
        self.assertEqual(headers.get("x-approval-id"), aid)

    def test_waiting_client_is_refused_on_deny(self):
        t, out, aid = self._wait_in_thread("print('no')\n", 60)
        self.assertEqual(decide(aid, "deny", reason="nope")[0], 200)
        t.join(scaled(30))
        status, _, body = out["reply"]
        self.assertEqual(status, 403, body)
        self.assertEqual(body["status"], "denied")
        self.assertIn("nope", body["error"])

    def test_wait_ends_with_202_while_pending(self):
        t0 = time.monotonic()
        status, _, body = post("/v1/execute", {"code": "print('later')\n", "profile": "gated", "wait": 1},
                               RUN_TOKEN)
        self.assertEqual(status, 202, body)
        self.assertEqual(body["status"], "pending")
        self.assertGreaterEqual(time.monotonic() - t0, 0.9)
        decide(body["approval_id"], "deny")

    def test_event_loop_is_not_blocked_by_waiters(self):
        pace = trivial_run_seconds(server, headers=auth(RUN_TOKEN))
        threads = [self._wait_in_thread(f"print({i})\n", 30) for i in range(3)]
        t0 = time.monotonic()
        status, _, body = post("/v1/execute", {"code": "print('free')", "profile": "minimal"}, RUN_TOKEN)
        self.assertEqual(status, 200, body)
        # Answered while the three wait (30 s each): the loop is not theirs.
        assert_paced(self, time.monotonic() - t0, 10, pace, "a run beside three waiting clients")
        for t, out, aid in threads:
            decide(aid, "deny")
            t.join(scaled(30))
            self.assertEqual(out["reply"][0], 403)


class OnFindings(unittest.TestCase):
    def test_listed_finding_holds_unlisted_rejects_clean_runs(self):
        status, _, body = submit("print('clean')\n", profile="held")
        self.assertEqual(status, 200, body)
        self.assertEqual(body["stdout"], "clean\n")
        code = "import os\nprint('pid', os.getpid())\n"
        status, _, body = submit(code, profile="held")
        self.assertEqual(status, 202, body)
        self.assertEqual([f["rule"] for f in body["findings"]], ["blocked-call"])
        aid = body["approval_id"]
        # A finding the profile does not list still rejects, as without approvals.
        status, _, rej = submit("().__class__.__bases__[0].__subclasses__()\n", profile="held")
        self.assertEqual(status, 400, rej)
        # Approved: the run goes ahead, in the same sandbox (its own pid namespace).
        self.assertEqual(decide(aid, "approve", code_sha256=sha(code))[0], 200)
        done = wait_status(aid, ["ran"])
        self.assertEqual(done["result"]["exit_code"], 0, done["result"])
        self.assertRegex(done["result"]["stdout"], r"^pid \d+\n$")
        self.assertLess(int(done["result"]["stdout"].split()[1]), 100)
        self.assertEqual([w["rule"] for w in done["result"]["warnings"]], ["blocked-call"])

    def test_observed_finding_of_a_listed_rule_holds(self):
        status, _, body = submit("print('clean')\n", profile="held-observe")
        self.assertEqual(status, 200, body)
        status, _, body = submit("import os\nprint(os.getpid())\n", profile="held-observe")
        self.assertEqual(status, 202, body)
        self.assertIn("blocked-call", [f["rule"] for f in body["findings"]])
        decide(body["approval_id"], "deny")

    def test_code_the_analyzer_cannot_read_is_held_under_on_findings(self):
        # JavaScript and bash get no static check, so they cannot be shown free of the listed
        # findings: an on_findings profile holds them for a person (fail closed).
        if not os.access("/usr/bin/node", os.X_OK):
            self.skipTest("/usr/bin/node is not installed")
        code = "console.log('js-approved', 6 * 7)\n"
        status, _, body = submit(code, profile="held-observe", language="javascript")
        self.assertEqual(status, 202, body)
        self.assertEqual([f["rule"] for f in body["findings"]], ["no_static_check"])
        aid = body["approval_id"]
        self.assertEqual(decide(aid, "approve", code_sha256=sha(code))[0], 200)
        done = wait_status(aid, ["ran", "failed"], token=RUN_TOKEN)
        self.assertEqual(done["status"], "ran", done)
        self.assertEqual(done["result"]["stdout"], "js-approved 42\n")
        # Denied: refused, never run.
        status, _, body = submit("echo never-ran\n", profile="held-observe", language="bash")
        self.assertEqual(status, 202, body)
        self.assertEqual(decide(body["approval_id"], "deny")[0], 200)
        self.assertEqual(wait_status(body["approval_id"], ["denied"])["status"], "denied")
        self.assertFalse([r for r in server.audit_records()
                          if r.get("approval_id") == body["approval_id"] and r["verdict"] == "ran"])

    def test_sessions_do_not_run_code_that_needs_approval(self):
        status, _, body = post("/v1/sessions", {"profile": "gated"}, RUN_TOKEN)
        self.assertEqual(status, 403, body)

    def test_profile_shows_its_policy(self):
        status, body = get("/v1/profiles/held", RUN_TOKEN)
        self.assertEqual(status, 200)
        self.assertEqual(body["approval"]["policy"], "on_findings")
        self.assertEqual(body["approval"]["rules"], ["blocked-call"])


class Bounds(unittest.TestCase):
    def test_pending_approvals_are_capped(self):
        # The server-wide cap alone (the per-owner quota, half of it by default, is
        # test_pipeline.py's).
        srv = start_server(["--max-pending-approvals", "2", "--max-pending-approvals-per-owner", "2"])
        try:
            ids = []
            for i in range(2):
                status, _, body = post("/v1/execute", {"code": f"print({i})", "profile": "gated"}, RUN_TOKEN, srv=srv)
                self.assertEqual(status, 202, body)
                ids.append(body["approval_id"])
            status, headers, body = post("/v1/execute", {"code": "print(3)", "profile": "gated"}, RUN_TOKEN, srv=srv)
            self.assertEqual(status, 429, body)
            self.assertIn("max-pending-approvals", body["error"])
            # Deciding one frees its place.
            self.assertEqual(decide(ids[0], "deny", srv=srv)[0], 200)
            status, _, body = post("/v1/execute", {"code": "print(4)", "profile": "gated"}, RUN_TOKEN, srv=srv)
            self.assertEqual(status, 202, body)
        finally:
            srv.cleanup()

    def test_sigterm_answers_waiting_clients_and_stops(self):
        srv = start_server(["--drain-grace", "2"])
        try:
            out = {}

            def go():
                out["reply"] = post("/v1/execute", {"code": "print('held')", "profile": "gated", "wait": 600},
                                    RUN_TOKEN, timeout=120, srv=srv)
            t = threading.Thread(target=go)
            t.start()
            deadline = time.monotonic() + scaled(30)
            while not get("/v1/approvals", APPROVE_TOKEN, srv=srv)[1]["approvals"]:
                self.assertLess(time.monotonic(), deadline)
                time.sleep(0.05)
            code = srv.stop(timeout=60)
            t.join(60)
            self.assertEqual(code, 0)
            # The waiting client was answered (still pending), not left hanging until the
            # hard stop (a kill, exit code -9, after 60 s), and the server ended within its drain.
            self.assertEqual(out["reply"][0], 202, out["reply"])
            self.assertEqual(out["reply"][2]["status"], "pending")
        finally:
            srv.cleanup()

    def test_bad_decisions_are_422(self):
        _, _, body = submit("print(5)\n")
        aid = body["approval_id"]
        self.assertEqual(decide(aid, "maybe")[0], 422)
        self.assertEqual(post(f"/v1/approvals/{aid}", {"decision": "approve", "reason": "x" * 2000},
                              APPROVE_TOKEN)[0], 422)
        self.assertEqual(decide("apr_nope", "approve")[0], 404)
        self.assertEqual(post("/v1/execute", {"code": "print(1)", "profile": "gated", "wait": -1},
                              RUN_TOKEN)[0], 422)
        decide(aid, "deny")


if __name__ == "__main__":
    unittest.main()
