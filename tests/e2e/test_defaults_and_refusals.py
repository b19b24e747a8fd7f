"""What a new user's first requests get (issue 25), through a real `airlock serve` in the cold
and warm modes: each door's default profile (the fips-compatible /execute keeps minimal; /v1,
sessions and the E2B listener run typical agent code under general), refusals that name the
profiles where the code would run, on every door, one shape for a syntax error whatever the
profile, and the analyzer's rules served at GET /v1/rules and listed in docs/api.md.

MCP's door (its default and its refusals) is tested with the official SDK in
tests/interop/mcp_stdio.test.mjs and mcp_http.test.mjs.
"""

import json
import os
import socket
import unittest

from airlock_server import AirlockServer, SOURCE_DIR, assert_mode

AGENT_CODE = ("import sys, json\n"
              "with open('notes.txt', 'w') as f:\n"
              "    f.write('hello')\n"
              "open('notes.txt').read()\n")

server = None
e2b_server = None
e2b_port = None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def setUpModule():
    global server, e2b_server, e2b_port
    server = AirlockServer().start()
    # The E2B listener on ports of its own (not E2B's fixed 49999/49983), its default profile
    # left to the server (--e2b alone).
    e2b_port = free_port()
    e2b_server = AirlockServer(extra_args=["--e2b-listen", f"127.0.0.1:{e2b_port},{free_port()}"]).start()


def tearDownModule():
    for s in (server, e2b_server):
        if s:
            s.cleanup()


def e2b_execute(code):
    """The events of POST /execute on the E2B listener (NDJSON), as dicts."""
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", e2b_port, timeout=120)
    try:
        conn.request("POST", "/execute", body=json.dumps({"code": code}), headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        data = resp.read()
        assert resp.status == 200, (resp.status, data)
        return [json.loads(line) for line in data.splitlines() if line.strip()]
    finally:
        conn.close()


class DoorDefaults(unittest.TestCase):
    def test_execute_keeps_the_fips_sidecars_minimal(self):
        status, body = server.execute(AGENT_CODE, path="/execute")
        self.assertEqual(status, 400, body)
        self.assertEqual(body["error"], "Code validation failed")
        status, _, data = server.get("/profile")
        self.assertEqual(json.loads(data)["name"], "minimal")

    def test_v1_execute_runs_agent_code_under_general(self):
        status, body = server.execute(AGENT_CODE, path="/v1/execute")
        self.assertEqual(status, 200, body)
        assert_mode(self, body)
        self.assertEqual(body["profile"]["name"], "general")
        self.assertEqual(body["result"], "'hello'", body)

    def test_sessions_default_to_general(self):
        status, _, data = server.post_json("/v1/sessions", {})
        self.assertEqual(status, 201, data)
        made = json.loads(data)
        try:
            self.assertEqual(made["profile"], "general")
            status, _, data = server.post_json(f"/v1/sessions/{made['id']}/execute", {"code": AGENT_CODE})
            self.assertEqual(status, 200, data)
            self.assertEqual(json.loads(data)["result"], "'hello'")
        finally:
            server.request("DELETE", f"/v1/sessions/{made['id']}")

    def test_profiles_say_each_doors_default(self):
        status, _, data = server.get("/v1/profiles")
        self.assertEqual(status, 200)
        body = json.loads(data)
        self.assertEqual(body["default"], "general")
        self.assertEqual(body["defaults"], {"execute": "minimal", "api": "general", "mcp": "general", "e2b": "general"})
        self.assertEqual([p["name"] for p in body["profiles"] if p["default"]], ["general"])

    def test_e2b_alone_defaults_to_general(self):
        events = e2b_execute(AGENT_CODE)
        errors = [e for e in events if e["type"] == "error"]
        self.assertEqual(errors, [], events)
        results = [e for e in events if e["type"] == "result"]
        # A string result's text without its quotes, as E2B's server gives it.
        self.assertEqual([r.get("text") for r in results], ["hello"], events)


class Refusals(unittest.TestCase):
    CODE = "import numpy\nimport subprocess\n"

    def test_v1_refusal_names_where_each_finding_runs(self):
        status, body = server.execute(self.CODE, path="/v1/execute", profile="minimal")
        self.assertEqual(status, 400, body)
        by_line = {v["line"]: v for v in body["violations"]}
        self.assertEqual(by_line[1]["allowed_in"], ["data-science", "general", "visualization"])
        self.assertTrue(by_line[1]["message"].endswith(
            "in profile 'minimal'; allowed in: data-science, general, visualization"), by_line[1])
        self.assertEqual(by_line[2]["allowed_in"], ["general"])

    def test_execute_refusal_names_them_in_the_fips_strings(self):
        status, body = server.execute(self.CODE, path="/execute")
        self.assertEqual(status, 400, body)
        self.assertIn("Line 1: import of 'numpy' is not allowed (not in allowed imports) in profile 'minimal'; "
                      "allowed in: data-science, general, visualization", body["violations"])

    def test_session_call_refusal_names_them(self):
        status, _, data = server.post_json("/v1/sessions", {"profile": "data-science"})
        self.assertEqual(status, 201, data)
        sid = json.loads(data)["id"]
        try:
            status, _, data = server.post_json(f"/v1/sessions/{sid}/execute", {"code": "import subprocess\n"})
            self.assertEqual(status, 400, data)
            v = json.loads(data)["violations"][0]
            self.assertEqual(v["allowed_in"], ["general"])
            self.assertIn("in profile 'data-science'; allowed in: general", v["message"])
        finally:
            server.request("DELETE", f"/v1/sessions/{sid}")

    def test_e2b_refusal_names_them(self):
        # The E2B door's contexts are general's (nothing refused there): the E2B listener of
        # a server whose E2B default is data-science shows its refusal.
        e2b_events_port = free_port()
        other = AirlockServer(extra_args=["--e2b-listen", f"127.0.0.1:{e2b_events_port},{free_port()}",
                                          "--e2b-profile", "data-science"]).start()
        global e2b_port
        saved, e2b_port = e2b_port, e2b_events_port
        try:
            events = e2b_execute("import subprocess\n")
        finally:
            e2b_port = saved
            other.cleanup()
        errors = [e for e in events if e["type"] == "error"]
        self.assertEqual(len(errors), 1, events)
        self.assertIn("in profile 'data-science'; allowed in: general", errors[0]["traceback"])


class SyntaxErrors(unittest.TestCase):
    """One shape for a syntax error, whatever the profile: Python's own SyntaxError as the run's
    error (200), where an analyzing profile used to answer 400 with the analyzer's wording."""

    CODE = "import os\nprint('never')\nprint((1\n"

    def error_of(self, profile):
        status, body = server.execute(self.CODE, path="/v1/execute", profile=profile)
        self.assertEqual(status, 200, body)
        self.assertEqual(body["stdout"], "", "nothing of the code runs")
        self.assertEqual(body["exit_code"], 1)
        return body

    def test_the_same_error_object_under_every_profile(self):
        bodies = {p: self.error_of(p) for p in ("minimal", "data-science", "general")}
        errors = {p: b["error"] for p, b in bodies.items()}
        self.assertEqual(errors["minimal"]["name"], "SyntaxError")
        self.assertEqual(errors["minimal"]["value"], "'(' was never closed (main.py, line 3)")
        self.assertIn("    print((1\n          ^\n", errors["minimal"]["traceback"])
        self.assertEqual(errors["minimal"], errors["general"])
        self.assertEqual(errors["minimal"], errors["data-science"])
        # The analyzer's other findings are still reported, as warnings.
        self.assertIn("import-not-allowed", [w["rule"] for w in bodies["minimal"]["warnings"]])

    def test_execute_and_sessions_too(self):
        status, body = server.execute(self.CODE, path="/execute")
        self.assertEqual(status, 200, body)
        self.assertEqual(body["error"], "SyntaxError: '(' was never closed (main.py, line 3)")
        status, _, data = server.post_json("/v1/sessions", {"profile": "minimal"})
        self.assertEqual(status, 201, data)
        sid = json.loads(data)["id"]
        try:
            status, _, data = server.post_json(f"/v1/sessions/{sid}/execute", {"code": self.CODE})
            self.assertEqual(status, 200, data)
            body = json.loads(data)
            self.assertEqual(body["error"]["value"], "'(' was never closed (main.py, line 3)")
            self.assertIs(body["session"]["alive"], True)
        finally:
            server.request("DELETE", f"/v1/sessions/{sid}")


class Rules(unittest.TestCase):
    def test_rules_are_served_and_documented(self):
        status, _, data = server.get("/v1/rules")
        self.assertEqual(status, 200, data)
        rules = json.loads(data)["rules"]
        ids = [r["id"] for r in rules]
        for needed in ("import-not-allowed", "blocked-call", "blocklist", "syntax", "secret"):
            self.assertIn(needed, ids)
        for r in rules:
            self.assertEqual(set(r), {"id", "family", "stage", "severity", "catches"}, r)
            self.assertTrue(r["catches"])
        with open(os.path.join(SOURCE_DIR, "docs", "api.md"), encoding="utf-8") as f:
            api = f.read()
        for rule_id in ids:
            self.assertTrue(f"| `{rule_id}` |" in api, f"docs/api.md does not list rule {rule_id}")


if __name__ == "__main__":
    unittest.main()
