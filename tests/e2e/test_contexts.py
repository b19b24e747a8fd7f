"""A session's contexts over REST (issue 22, docs/api.md "Contexts"): interpreters made in one
session's sandbox, each with its own state, all sharing /home/user, the limits and every layer,
through a real `airlock serve`.

What a user relies on: a second Python interpreter beside the session's own (its own variables,
the same files), one in another language, a working directory of the sandbox's own (/tmp), a
restart that drops the state and keeps the files, a delete after which the context answers 404,
bad input answered with the field at fault, another caller's session unreachable, and a
context's code stopped by the kernel's layers as the session's is.
"""

import json
import os
import shutil
import unittest

from airlock_server import AirlockServer, plant_host_secret, scaled

PROFILE = "general"
ALICE = "alice-contexts-0123456789abcdef"
BOB = "bob-contexts-0123456789abcdef00"

server = None


def setUpModule():
    global server
    server = AirlockServer(env={"AIRLOCK_TOKENS": f"alice:{ALICE},bob:{BOB}"}).start()
    server.wait_pools_ready(profiles=[PROFILE])


def tearDownModule():
    if server:
        server.cleanup()


def auth(token):
    return {"Authorization": f"Bearer {token}"}


class Contexts(unittest.TestCase):
    def setUp(self):
        status, _, data = server.post_json("/v1/sessions", {"profile": PROFILE}, headers=auth(ALICE),
                                           timeout=scaled(120))
        self.assertEqual(status, 201, data)
        self.sid = json.loads(data)["id"]

    def tearDown(self):
        server.request("DELETE", f"/v1/sessions/{self.sid}", headers=auth(ALICE))

    def post(self, path, body, token=ALICE):
        status, _, data = server.post_json(f"/v1/sessions/{self.sid}{path}", body, headers=auth(token),
                                           timeout=scaled(120))
        return status, json.loads(data) if data else None

    def get(self, path, token=ALICE, method="GET"):
        status, _, data = server.request(method, f"/v1/sessions/{self.sid}{path}", headers=auth(token))
        return status, json.loads(data) if data else None

    def new(self, **fields):
        status, doc = self.post("/contexts", fields)
        self.assertEqual(status, 201, doc)
        return doc

    def call(self, ctx, code, expect=200):
        status, doc = self.post(f"/contexts/{ctx}/execute", {"code": code, "timeout": 60})
        self.assertEqual(status, expect, doc)
        return doc

    def test_a_second_python_shares_files_not_state(self):
        status, doc = self.post("/execute", {"code": "x = 1\nopen('a.txt', 'w').write('from main')"})
        self.assertEqual(status, 200, doc)
        ctx = self.new(language="python")
        self.assertEqual(ctx["language"], "python")
        self.assertEqual(ctx["cwd"], "/home/user")
        self.assertFalse(ctx["default"])
        r = self.call(ctx["id"], "print(open('a.txt').read())\n'x' in globals()")
        self.assertEqual(r["stdout"], "from main\n")
        self.assertEqual(r["results"][0]["data"]["text/plain"], "False")
        self.assertEqual(r["context"]["id"], ctx["id"])
        self.call(ctx["id"], "y = 2\nopen('b.txt', 'w').write('from ctx')")
        self.assertEqual(self.call(ctx["id"], "y")["results"][0]["data"]["text/plain"], "2")
        status, doc = self.post("/execute", {"code": "open('b.txt').read()"})
        self.assertEqual(doc["results"][0]["data"]["text/plain"], "'from ctx'")
        status, listed = self.get("/contexts")
        self.assertEqual(status, 200)
        ids = [c["id"] for c in listed["contexts"]]
        self.assertTrue(listed["contexts"][0]["default"], listed)
        self.assertIn(ctx["id"], ids)
        # Restart: the state goes, the files stay.
        status, doc = self.post(f"/contexts/{ctx['id']}/restart", {})
        self.assertEqual(status, 200, doc)
        r = self.call(ctx["id"], "print(open('b.txt').read())\ny")
        self.assertEqual(r["stdout"], "from ctx\n")
        self.assertEqual(r["error"]["name"], "NameError", r)
        # Delete: gone, answered 404; the session's own interpreter is untouched.
        status, _ = self.get(f"/contexts/{ctx['id']}", method="DELETE")
        self.assertEqual(status, 204)
        status, doc = self.post(f"/contexts/{ctx['id']}/execute", {"code": "1"})
        self.assertEqual(status, 404, doc)
        self.assertEqual(doc["code"], "context_not_found")
        status, doc = self.post("/execute", {"code": "x"})
        self.assertEqual(doc["results"][0]["data"]["text/plain"], "1")

    def test_other_languages_and_a_cwd_of_the_sandbox(self):
        js = self.new(language="javascript", cwd="/tmp")
        self.assertEqual(js["cwd"], "/tmp")
        r = self.call(js["id"], "require('fs').writeFileSync('t.txt', 'js'); process.cwd()")
        self.assertEqual(r["results"][0]["data"]["text/plain"], "/tmp", r)
        sh = self.new(language="bash")
        r = self.call(sh["id"], "cat /tmp/t.txt; echo; pwd")
        self.assertEqual(r["stdout"], "js\n/home/user\n", r)

    def test_bad_input_gets_the_field_at_fault(self):
        for body, field in (({"language": "cobol"}, "language"), ({"cwd": "relative"}, "cwd"),
                            ({"cwd": "/home/../etc"}, "cwd"), ({"env": {"LD_PRELOAD": "x"}}, "env"),
                            ({"language": 1}, "language")):
            with self.subTest(body=body):
                status, doc = self.post("/contexts", body)
                self.assertIn(status, (400, 422), doc)
                self.assertEqual(doc.get("field"), field, doc)
        # A directory the sandbox does not have (the host's /root) is not made.
        status, doc = self.post("/contexts", {"cwd": "/root"})
        self.assertEqual(status, 400, doc)
        self.assertIn("not a directory of the sandbox", doc["error"])
        # The main context goes only with its session.
        status, listed = self.get("/contexts")
        main = listed["contexts"][0]["id"]
        status, doc = self.get(f"/contexts/{main}", method="DELETE")
        self.assertEqual(status, 400, doc)
        # A call names no language (the context has one).
        ctx = self.new()
        status, doc = self.post(f"/contexts/{ctx['id']}/execute", {"code": "1", "language": "bash"})
        self.assertEqual(status, 422, doc)
        for path in ("/contexts/../x", "/contexts/a%2Fb/execute", f"/contexts/{ctx['id']}/nope"):
            with self.subTest(path=path):
                status, doc = self.post(path, {"code": "1"})
                self.assertEqual(status, 404, doc)

    def test_another_caller_reaches_nothing(self):
        ctx = self.new()
        for method, path in (("GET", "/contexts"), ("GET", f"/contexts/{ctx['id']}"),
                             ("DELETE", f"/contexts/{ctx['id']}")):
            with self.subTest(method=method, path=path):
                status, doc = self.get(path, token=BOB, method=method)
                self.assertEqual(status, 404, doc)
        status, doc = self.post(f"/contexts/{ctx['id']}/execute", {"code": "1"}, token=BOB)
        self.assertEqual(status, 404, doc)
        status, doc = self.post("/contexts", {}, token=BOB)
        self.assertEqual(status, 404, doc)
        # It is still alice's, and answers.
        self.assertEqual(self.call(ctx["id"], "6 * 7")["results"][0]["data"]["text/plain"], "42")

    def test_a_contexts_code_is_held_by_the_kernel_layers(self):
        directory, secret, token = plant_host_secret("airlock-ctx-")
        self.addCleanup(shutil.rmtree, directory, True)
        ctx = self.new(language="python", cwd="/tmp")
        r = self.call(ctx["id"], f"open({secret!r}).read()")
        self.assertIsNotNone(r["error"], r)
        self.assertNotIn(token, json.dumps(r))
        self.assertIn(r["error"]["name"], ("FileNotFoundError", "PermissionError"), r)
        r = self.call(ctx["id"], "import os\nos.kill(1, 9)")
        self.assertIsNotNone(r["error"], r)
        r = self.call(ctx["id"], "import os\nlen(os.listdir('/proc')) < 64")
        self.assertEqual(r["results"][0]["data"]["text/plain"], "True", r)


if __name__ == "__main__":
    unittest.main()
