"""The HTTP contract of `airlock serve`: the fips-agents sidecar's (its test_app.py cases,
research/peers.md §c.3), every status code of docs/api.md, the /v1 shapes and the
profile endpoints."""

import json
import os
import unittest

from airlock_server import AirlockServer, SOURCE_DIR, assert_mode, assert_paced, raw_request, trivial_run_seconds

server = None


def setUpModule():
    global server
    server = AirlockServer(extra_args=["--max-body", "256K", "--max-code", "100K"]).start()


def tearDownModule():
    if server:
        server.cleanup()


class TestPeerContract(unittest.TestCase):
    """The sidecar's test_app.py, over HTTP."""

    def test_healthz(self):
        status, _, body = server.get("/healthz")
        self.assertEqual(status, 200)
        self.assertEqual(json.loads(body), {"status": "ok"})

    def test_valid_code(self):
        status, body = server.execute("print(42)")
        self.assertEqual(status, 200)
        self.assertEqual(body["stdout"], "42\n")
        self.assertEqual(body["exit_code"], 0)
        self.assertIs(body["timed_out"], False)

    def test_custom_timeout(self):
        status, body = server.execute("print('ok')", timeout=5)
        self.assertEqual(status, 200)
        self.assertEqual(body["stdout"], "ok\n")

    def test_runtime_error(self):
        status, body = server.execute("1/0")
        self.assertEqual(status, 200)
        self.assertNotEqual(body["exit_code"], 0)
        self.assertIn("ZeroDivisionError", body["stderr"])

    def test_timeout_execution(self):
        status, body = server.execute("while True:\n    pass", timeout=1)
        self.assertEqual(status, 200)
        self.assertIs(body["timed_out"], True)

    def test_empty_code(self):
        for code in ["", "   \n\t  "]:
            status, body = server.execute(code)
            self.assertEqual(status, 400)
            self.assertEqual(body, {"error": "No code provided"})

    def test_blocked_import(self):
        status, body = server.execute("import os\nprint(os.getcwd())")
        self.assertEqual(status, 400)
        self.assertEqual(body["error"], "Code validation failed")
        self.assertIsInstance(body["violations"], list)
        self.assertTrue(body["violations"])
        # The sidecar's wording, then where the code would run (issue 25).
        self.assertIn("Line 1: import of 'os' is not allowed (not in allowed imports) in profile 'minimal'; "
                      "allowed in: general", body["violations"])

    def test_syntax_error(self):
        # Python's own SyntaxError as the run's error, as under every profile (issue 25; the
        # sidecar answers 400 with its analyzer's wording).
        status, body = server.execute("def foo(")
        self.assertEqual(status, 200, body)
        self.assertEqual(body["exit_code"], 1)
        self.assertTrue(body["error"].startswith("SyntaxError: "), body)
        self.assertIn("(main.py, line 1)", body["error"])

    def test_timeout_too_large(self):
        status, body = server.execute("print(1)", timeout=60)
        self.assertEqual(status, 422)
        self.assertEqual(body["field"], "timeout")
        self.assertIn("timeout", body["error"])

    def test_negative_timeout(self):
        status, body = server.execute("print(1)", timeout=-1)
        self.assertEqual(status, 422)
        self.assertEqual(body["detail"][0]["loc"], ["body", "timeout"])


class TestCompatExtras(unittest.TestCase):
    """/execute's result and error strings (the seed tutorial's client reads them)."""

    def test_result_is_repr_of_last_expression(self):
        status, body = server.execute("x = 6\nx * 7")
        self.assertEqual(status, 200)
        self.assertEqual(body["result"], "42")
        self.assertIsNone(body["error"])
        status, body = server.execute("'a' + 'b'")
        self.assertEqual(body["result"], "'ab'")

    def test_no_result_for_statement(self):
        status, body = server.execute("x = 1")
        self.assertEqual(status, 200)
        self.assertIsNone(body["result"])

    def test_error_string(self):
        status, body = server.execute("print('before')\n1/0")
        self.assertEqual(body["error"], "ZeroDivisionError: division by zero")
        self.assertEqual(body["stdout"], "before\n")

    def test_system_exit_code(self):
        status, body = server.execute("raise SystemExit(42)")
        self.assertEqual(status, 200)
        self.assertEqual(body["exit_code"], 42)
        self.assertIs(body["timed_out"], False)

    def test_timeout_shape(self):
        status, body = server.execute("while True:\n    pass", timeout=0.5)
        self.assertEqual(body["exit_code"], -9)
        self.assertIn("Execution timed out after 0.5s", body["stderr"])
        self.assertIn("timeout", body["error"])

    def test_keys_are_the_peers_plus_two(self):
        status, body = server.execute("print(1)")
        self.assertEqual(set(body), {"stdout", "stderr", "exit_code", "timed_out", "result", "error"})


class TestStatusCodes(unittest.TestCase):
    def test_413_body_over_cap(self):
        status, headers, data = server.post_json("/execute", {"code": "x = '" + "a" * (300 * 1024) + "'"})
        self.assertEqual(status, 413)
        self.assertIn("larger than", json.loads(data)["error"])

    def test_413_code_over_cap(self):
        status, headers, data = server.post_json("/execute", {"code": "# " + "a" * (150 * 1024)})
        self.assertEqual(status, 413)
        body = json.loads(data)
        self.assertEqual(body["field"], "code")

    def test_422_bad_json(self):
        status, _, data = server.post_json("/execute", b"{not json")
        self.assertEqual(status, 422)
        self.assertIn("not valid JSON", json.loads(data)["error"])

    def test_422_not_an_object(self):
        status, _, data = server.post_json("/execute", b"[1, 2]")
        self.assertEqual(status, 422)

    def test_422_wrong_types(self):
        for payload, field in [({"code": 1}, "code"), ({"code": "print(1)", "timeout": "10"}, "timeout"),
                               ({"code": "print(1)", "timeout": True}, "timeout"), ({}, "code"),
                               ({"code": "print(1)", "profile": 5}, "profile"),
                               ({"code": "print(1)", "language": "javascript"}, "language")]:
            with self.subTest(payload=payload):
                status, _, data = server.post_json("/execute", payload)
                self.assertEqual(status, 422, data)
                self.assertEqual(json.loads(data)["field"], field)

    def test_422_unknown_profile(self):
        status, body = server.execute("print(1)", profile="no-such-profile")
        self.assertEqual(status, 422)
        self.assertEqual(body["field"], "profile")
        self.assertIn("minimal", body["error"])  # lists the available ones

    def test_422_invalid_utf8_in_code(self):
        raw = b'{"code": "print(\'\xff\xfe\')"}'
        status, _, data = server.post_json("/execute", raw)
        self.assertEqual(status, 422)
        self.assertIn("UTF-8", json.loads(data)["error"])
        # A lone surrogate escape is not UTF-8 either.
        status, _, data = server.post_json("/execute", b'{"code": "print(\'\\udc80\')"}')
        self.assertEqual(status, 422)

    def test_422_deep_json(self):
        deep = "[" * 200 + "]" * 200
        status, _, data = server.post_json("/execute", '{"code": "print(1)", "x": ' + deep + "}")
        self.assertEqual(status, 422)
        self.assertIn("nested deeper", json.loads(data)["error"])
        # Far deeper than any recursion limit: still a clean 422 (within the body cap).
        status, _, _ = server.post_json("/execute", "[" * 200000)
        self.assertEqual(status, 422)

    def test_404_and_405(self):
        status, _, _ = server.get("/nope")
        self.assertEqual(status, 404)
        status, headers, _ = server.get("/execute")
        self.assertEqual(status, 405)
        self.assertEqual(headers["allow"], "POST")
        status, _, _ = server.post_json("/healthz", {})
        self.assertEqual(status, 405)

    def test_malformed_http(self):
        answer = raw_request(server.port, b"THIS IS NOT HTTP\r\n\r\n")
        self.assertTrue(answer.startswith(b"HTTP/1.1 400"), answer[:100])

    def test_expect_100_continue(self):
        body = json.dumps({"code": "print(7)"}).encode()
        req = (b"POST /execute HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nExpect: 100-continue\r\n"
               b"Connection: close\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n")
        import socket
        s = socket.create_connection(("127.0.0.1", server.port), timeout=30)
        try:
            s.sendall(req)
            first = s.recv(100)
            self.assertTrue(first.startswith(b"HTTP/1.1 100 Continue"), first)
            s.sendall(body)
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
        finally:
            s.close()
        self.assertIn(b"HTTP/1.1 200", data)
        self.assertIn(b'"stdout":"7\\n"', data)

    def test_request_id_header(self):
        status, headers, _ = server.post_json("/execute", {"code": "print(1)"})
        self.assertTrue(headers["x-request-id"].startswith("req_"))

    def test_keep_alive_serves_several_requests(self):
        conn = server.connection()
        try:
            for i in range(3):
                conn.request("POST", "/execute", body=json.dumps({"code": f"print({i})"}),
                             headers={"Content-Type": "application/json"})
                resp = conn.getresponse()
                self.assertEqual(resp.status, 200)
                self.assertEqual(json.loads(resp.read())["stdout"], f"{i}\n")
        finally:
            conn.close()


class TestV1Execute(unittest.TestCase):
    def test_success_shape(self):
        server.wait_pools_ready()  # warm mode: a run is ready, so this one is handed over
        status, body = server.execute("print('hi')\n21 * 2", path="/v1/execute", profile="minimal")
        self.assertEqual(status, 200)
        self.assertEqual(body["stdout"], "hi\n")
        self.assertEqual(body["exit_code"], 0)
        self.assertIsNone(body["signal"])
        self.assertIs(body["timed_out"], False)
        self.assertEqual(body["result"], "42")
        self.assertEqual(body["results"], [{"is_main_result": True, "data": {"text/plain": "42"}}])
        self.assertIsNone(body["error"])
        self.assertIsNone(body["kill_reason"])
        self.assertEqual(body["truncated"], {"stdout": False, "stderr": False, "results": False, "files": False})
        self.assertEqual(body["files"], [])  # the run wrote no file
        self.assertGreater(body["duration_ms"], 0)
        self.assertIn("cpu_ms", body["usage"])
        # Warm runs report the runner's own peak (its end event), cold ones their init's rusage:
        # either way a Python process's resident memory, megabytes.
        self.assertGreater(body["usage"]["max_rss_kb"], 1000)
        self.assertTrue(body["request_id"].startswith("req_"))
        self.assertEqual(body["profile"]["name"], "minimal")
        self.assertEqual(body["profile"]["timeout_s"], 10.0)
        self.assertEqual(body["profile"]["clamped"], [])
        self.assertIn("seccomp", body["isolation"])
        self.assertTrue(body["isolation"]["seccomp"]["enforced"])
        self.assertTrue(body["isolation"]["pid_namespace"]["enforced"])
        assert_mode(self, body)  # "warm" or "cold", as AIRLOCK_E2E_MODE asks
        # A run's own host uid (and gid), when the server is root; null otherwise.
        if os.geteuid() == 0:
            self.assertIsInstance(body["isolation"]["host_uid"], int)
            self.assertTrue(body["isolation"]["host_ids"]["enforced"])
            self.assertIn(str(body["isolation"]["host_uid"]), body["isolation"]["host_ids"]["detail"])
        else:
            self.assertIsNone(body["isolation"]["host_uid"])
            self.assertFalse(body["isolation"]["host_ids"]["enforced"])
        for name, layer in body["isolation"].items():
            if name not in ("mode", "landlock_abi", "cgroup_version", "host_uid"):
                self.assertIsInstance(layer, dict, name)
                self.assertIn("enforced", layer, name)

    def test_error_object_has_users_line_numbers_and_no_host_path(self):
        status, body = server.execute("x = 1\ny = 2\n\ndef f():\n    return 1 / 0\n\nf()", path="/v1/execute")
        self.assertEqual(status, 200)
        err = body["error"]
        self.assertEqual(err["name"], "ZeroDivisionError")
        self.assertEqual(err["value"], "division by zero")
        self.assertIn("line 5", err["traceback"])
        self.assertIn("line 7", err["traceback"])
        # The server's own checkout (wherever it is on this host) must not show either.
        self.assertTrue(os.access(os.path.join(SOURCE_DIR, "CMakeLists.txt"), os.R_OK), SOURCE_DIR)
        for leak in ("/sandbox", "airlock_runner", "/tmp/", SOURCE_DIR + "/"):
            self.assertNotIn(leak, err["traceback"])
            self.assertNotIn(leak, body["stderr"])

    def test_violation_objects(self):
        status, body = server.execute("import os\nimport subprocess", path="/v1/execute", profile="minimal")
        self.assertEqual(status, 400)
        self.assertEqual(body["error"], "Code validation failed")
        v = body["violations"][0]
        self.assertEqual(set(v) >= {"rule", "message", "line", "col"}, True)
        self.assertEqual(v["line"], 1)
        self.assertEqual(v["col"], 8)
        self.assertEqual(v["rule"], "import-not-allowed")
        self.assertEqual(body["violations"][1]["line"], 2)

    def test_limits_clamped_and_echoed(self):
        status, body = server.execute("print(1)", path="/v1/execute", timeout=2,
                                      limits={"memory": "64Mi", "pids": 100000, "output": 1000})
        self.assertEqual(status, 200, body)
        p = body["profile"]
        self.assertEqual(p["timeout_s"], 2)
        self.assertEqual(p["memory_bytes"], 64 << 20)
        self.assertEqual(p["output_bytes"], 1000)
        self.assertLess(p["pids"], 100000)
        self.assertIn("pids", p["clamped"])

    def test_bad_limit(self):
        status, body = server.execute("print(1)", path="/v1/execute", limits={"memroy": 1})
        self.assertEqual(status, 422)
        self.assertEqual(body["field"], "limits.memroy")
        status, body = server.execute("print(1)", path="/v1/execute", limits={"memory": "12Qi"})
        self.assertEqual(status, 422)
        self.assertEqual(body["field"], "limits.memory")

    def test_timeout_kill_reason(self):
        pace = trivial_run_seconds(server)
        status, body = server.execute("while True:\n    pass", path="/v1/execute", timeout=0.5)
        self.assertEqual(status, 200)
        assert_mode(self, body)
        self.assertEqual(body["kill_reason"], "timeout")
        self.assertIs(body["timed_out"], True)
        self.assertEqual(body["signal"], 9)
        assert_paced(self, body["duration_ms"] / 1000, 3, pace, "a run with a 0.5 s timeout (its duration_ms)")

    def test_memory_kill_is_200(self):
        status, body = server.execute("x = bytearray(200 * 1024 * 1024)\nprint('ALLOCATED')", path="/v1/execute",
                                      limits={"memory": "64Mi"})
        self.assertEqual(status, 200)
        self.assertNotIn("ALLOCATED", body["stdout"])
        self.assertTrue(body["kill_reason"] == "memory" or "MemoryError" in body["stderr"], body)

    def test_output_truncated(self):
        status, body = server.execute("for i in range(2000):\n    print('x' * 99)", path="/v1/execute")
        self.assertEqual(status, 200)
        self.assertIs(body["truncated"]["stdout"], True)
        self.assertEqual(len(body["stdout"]), 51200)

    def test_invalid_utf8_output_is_replaced(self):
        code = "import sys\nsys.stdout.buffer.write(b'ok \\xff\\xfe end\\n')"
        status, body = server.execute(code, path="/v1/execute", profile="general")
        self.assertEqual(status, 200, body)
        self.assertEqual(body["stdout"], "ok \ufffd\ufffd end\n")

    def test_warnings_listed(self):
        status, body = server.execute("import hashlib\nprint(hashlib.md5(b'x').hexdigest())", path="/v1/execute",
                                      profile="general")
        self.assertEqual(status, 200, body)
        self.assertTrue(any(w["rule"] == "weak-crypto" for w in body["warnings"]), body["warnings"])


class TestDisplayResults(unittest.TestCase):
    def test_matplotlib_figure_arrives_as_png(self):
        code = ("import matplotlib.pyplot as plt\n"
                "plt.plot([1, 2, 3], [1, 4, 9])\n"
                "plt.show()\n"
                "'done'\n")
        status, _, data = server.post_json("/v1/execute", {"code": code, "profile": "visualization", "timeout": 30},
                                           timeout=60)
        body = json.loads(data)
        self.assertEqual(status, 200, body)
        self.assertIsNone(body["error"], body["stderr"])
        figures = [r for r in body["results"] if not r["is_main_result"]]
        self.assertEqual(len(figures), 1, body["results"])
        import base64
        png = base64.b64decode(figures[0]["data"]["image/png"])
        self.assertTrue(png.startswith(b"\x89PNG\r\n\x1a\n"))
        self.assertEqual(body["result"], "'done'")


class TestProfiles(unittest.TestCase):
    def test_profile_is_the_peers_shape(self):
        status, _, data = server.get("/profile")
        self.assertEqual(status, 200)
        p = json.loads(data)
        self.assertEqual(p["name"], "minimal")
        self.assertTrue(p["description"].endswith("\n"))
        self.assertEqual(p["allowed_imports"], sorted(["collections", "csv", "datetime", "decimal", "fractions",
                                                       "functools", "itertools", "json", "math", "operator",
                                                       "random", "re", "statistics", "string", "textwrap",
                                                       "typing"]))
        self.assertEqual(p["blocklist_entries"], 0)
        self.assertEqual(p["scan_stages"], {"pre": ["ast_scan"], "post": []})
        self.assertNotIn("resource", p["allowed_imports"])
        self.assertIn("seccomp", p["isolation"])

    def test_profile_list_and_one(self):
        status, _, data = server.get("/v1/profiles")
        self.assertEqual(status, 200)
        body = json.loads(data)
        self.assertEqual(body["default"], "general")  # /v1's default; /execute's is minimal (issue 25)
        self.assertEqual(body["defaults"]["execute"], "minimal")
        names = [p["name"] for p in body["profiles"]]
        self.assertIn("minimal", names)
        self.assertIn("data-science", names)
        status, _, data = server.get("/v1/profiles/data-science")
        self.assertEqual(status, 200)
        ds = json.loads(data)
        self.assertIn("numpy", ds["allowed_imports"])
        self.assertEqual(ds["blocklist_entries"], len(ds["blocklist"]))
        status, _, _ = server.get("/v1/profiles/nope")
        self.assertEqual(status, 404)

    def test_request_names_a_profile(self):
        status, body = server.execute("import os\nprint(os.getcwd())", profile="general")
        self.assertEqual(status, 200, body)
        self.assertEqual(body["stdout"], "/home/user\n")

    def test_each_profile_takes_the_expected_path(self):
        for profile in ("minimal", "general", "data-science"):
            with self.subTest(profile=profile):
                server.wait_pools_ready(profiles=[profile])
                status, body = server.execute("print(sum(range(5)))", path="/v1/execute", profile=profile)
                self.assertEqual(status, 200, body)
                self.assertEqual(body["stdout"], "10\n")
                assert_mode(self, body)


if __name__ == "__main__":
    unittest.main()
