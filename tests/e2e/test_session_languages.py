"""Sessions in six languages (issue 22, docs/api.md "Sessions"): Python, JavaScript, TypeScript,
R, Java and bash, each a live interpreter in a session's sandbox, through a real `airlock serve`.

A session's language is POST /v1/sessions's "language"; a call naming another language runs in
the session's context of that language (made on first use), in the same sandbox, the same
/home/user. For every language this asserts what a user relies on: state kept from one call to
the next, stdout and stderr, the last value, an error, the files it writes seen in the shared
workspace (and by a context of another language), a context whose interpreter exits started
afresh and said so; and, for each language but Python, that the kernel layers hold: a host file
outside cannot be read, a host listener cannot be reached. Python's attacks are
test_kernel_attacks' and test_escape_vectors' (run as session calls too).

Assumption about the host, probed: the interpreters of scripts/setup.sh (nodejs,
node-typescript, r-base-core, default-jdk-headless). A missing one is a skip, a failure under
AIRLOCK_MUST_WORK=1.
"""

import json
import os
import shutil
import socket
import unittest
import urllib.parse

from airlock_server import AirlockServer, plant_host_secret, scaled

PROFILE = "general"
# What each language needs on the host (the server says the same, naming the package).
NEEDS = {
    "javascript": ["/usr/bin/node"],
    "typescript": ["/usr/bin/node", "/usr/share/nodejs/typescript/package.json"],
    "r": ["/usr/bin/Rscript"],
    "java": ["/usr/bin/java", "/usr/bin/jshell"],
    "bash": ["/usr/bin/bash"],
}
TIMEOUT_MAX = 60  # general's timeout_max
LANGUAGES = ("python", "javascript", "typescript", "r", "java", "bash")
OTHERS = LANGUAGES[1:]

# Per language: a cell that sets x, one that reads it (as the last value, or printed by bash) and
# what comes back; a cell printing to stdout and to stderr; a cell that fails with "boom"; a cell
# that writes NAME in its working directory (/home/user) with TEXT.
SET_X = {
    "python": "x = 41",
    "javascript": "let x = 41",
    "typescript": "let x: number = 41",
    "r": "x <- 41",
    "java": "int x = 41;",
    "bash": "x=41",
}
READ_X = {
    "python": ("x + 1", "42"),
    "javascript": ("x + 1", "42"),
    "typescript": ("x + 1", "42"),
    "r": ("x + 1", "[1] 42"),
    "java": ("x + 1", "42"),
    "bash": ("echo $((x + 1))", None),  # no last value in bash: its stdout
}
PRINT = {
    "python": "import sys\nprint('to-out')\nprint('to-err', file=sys.stderr)",
    "javascript": "console.log('to-out'); console.error('to-err')",
    "typescript": "console.log('to-out'); console.error('to-err')",
    "r": "cat('to-out\\n'); message('to-err')",
    "java": 'System.out.println("to-out"); System.err.println("to-err");',
    "bash": "echo to-out; echo to-err >&2",
}
FAIL = {
    "python": "raise ValueError('boom')",
    "javascript": "throw new Error('boom')",
    "typescript": "throw new Error('boom')",
    "r": "stop('boom')",
    "java": 'throw new RuntimeException("boom");',
}
WRITE = {
    "python": "open('from_{l}.txt', 'w').write('{l} wrote')",
    "javascript": "require('fs').writeFileSync('from_{l}.txt', '{l} wrote')",
    "typescript": "require('fs').writeFileSync('from_{l}.txt', '{l} wrote')",
    "r": "cat('{l} wrote', file = 'from_{l}.txt')",
    "java": 'java.nio.file.Files.writeString(java.nio.file.Path.of("from_{l}.txt"), "{l} wrote");',
    "bash": "printf '%s' '{l} wrote' > from_{l}.txt",
}

server = None


def missing(language):
    return [p for p in NEEDS.get(language, []) if not os.access(p, os.R_OK)]


def setUpModule():
    global server
    absent = {l: missing(l) for l in OTHERS if missing(l)}
    if absent and os.environ.get("AIRLOCK_MUST_WORK") == "1":
        raise AssertionError(f"interpreters missing on this host (scripts/setup.sh installs them): {absent}")
    server = AirlockServer(extra_args=["--session-interrupt-grace", "1"]).start()
    server.wait_pools_ready(profiles=[PROFILE])


def tearDownModule():
    if server:
        server.cleanup()


def lines_with(prefix, text):
    return [line for line in text.splitlines() if line.startswith(prefix)]


class LanguageSessions(unittest.TestCase):
    def setUp(self):
        self.made = []

    def tearDown(self):
        for sid in self.made:
            server.request("DELETE", f"/v1/sessions/{sid}")

    def need(self, language):
        if missing(language):
            self.skipTest(f"{language}: {missing(language)} not on this host")

    def new(self, language=None, expect=201, **fields):
        body = {"profile": PROFILE, **fields}
        if language is not None:
            body["language"] = language
        status, _, data = server.post_json("/v1/sessions", body, timeout=scaled(120))
        doc = json.loads(data)
        self.assertEqual(status, expect, doc)
        if status == 201:
            self.made.append(doc["id"])
        return doc

    def call(self, sid, code, expect=200, ends_context=False, **fields):
        # The profile's longest timeout unless the test sets one: a kernel's first cell on a busy
        # host (JShell compiles each snippet in its JVM) must not be cut by a timeout that no
        # test is about; a cell that hangs still ends.
        fields.setdefault("timeout", TIMEOUT_MAX)
        status, _, data = server.post_json(f"/v1/sessions/{sid}/execute", {"code": code, **fields},
                                           timeout=scaled(180))
        doc = json.loads(data)
        self.assertEqual(status, expect, doc)
        if status == 200 and fields["timeout"] == TIMEOUT_MAX and not ends_context:
            self.assertIsNone(doc["kill_reason"], doc)
        return doc

    def file(self, sid, name):
        status, _, data = server.request("GET", f"/v1/sessions/{sid}/files/{urllib.parse.quote(name)}")
        return status, data


class TestEachLanguage(LanguageSessions):
    def test_state_output_value_and_error(self):
        for language in LANGUAGES:
            with self.subTest(language=language):
                self.need(language)
                s = self.new(language)
                self.assertEqual(s["language"], language)
                sid = s["id"]
                first = self.call(sid, SET_X[language])
                self.assertIsNone(first["error"], first)
                self.assertEqual(first["execution_count"], 1)
                code, value = READ_X[language]
                r = self.call(sid, code)
                self.assertIsNone(r["error"], r)
                self.assertEqual(r["execution_count"], 2)
                if value is None:
                    self.assertEqual(r["stdout"], "42\n", r)
                else:
                    self.assertEqual(r["result"], value, r)
                    main = [x for x in r["results"] if x.get("is_main_result")]
                    self.assertEqual(len(main), 1, r)
                # The response says which interpreter ran it; Python's shape is unchanged.
                if language == "python":
                    self.assertNotIn("context", r)
                else:
                    self.assertEqual(r["context"]["language"], language, r)
                    self.assertFalse(r["context"]["restarted"], r)
                    self.assertEqual([w["rule"] for w in r["warnings"]], ["no_static_check"], r)
                self.assertTrue(r["session"]["alive"], r)
                # The same sandbox and layers as the session's own (its report).
                self.assertEqual(r["isolation"]["mode"], "session")
                self.assertEqual(r["isolation"]["host_uid"], s["isolation"]["host_uid"])
                for layer in ("seccomp", "landlock", "pid_namespace", "mount_namespace", "network_namespace"):
                    self.assertTrue(r["isolation"][layer]["enforced"], (layer, r["isolation"]))

                p = self.call(sid, PRINT[language])
                self.assertEqual(p["stdout"], "to-out\n", p)
                self.assertEqual(p["stderr"], "to-err\n", p)

                if language == "bash":
                    e = self.call(sid, "echo oops >&2; false")
                    self.assertEqual(e["exit_code"], 1, e)
                    self.assertEqual(e["stderr"], "oops\n", e)
                else:
                    e = self.call(sid, FAIL[language])
                    self.assertIsNotNone(e["error"], e)
                    self.assertIn("boom", e["error"]["value"], e)
                    self.assertTrue(e["error"]["name"], e)
                    self.assertEqual(e["exit_code"], 1, e)
                self.assertTrue(e["session"]["alive"], e)
                # An error does not lose the state.
                again = self.call(sid, code)
                if value is None:
                    self.assertEqual(again["stdout"], "42\n", again)
                else:
                    self.assertEqual(again["result"], value, again)
                status, data = server.request("GET", f"/v1/sessions/{sid}")[0::2]
                self.assertEqual(json.loads(data)["execution_count"], 5)

    def test_files_are_written_to_the_shared_workspace(self):
        for language in LANGUAGES:
            with self.subTest(language=language):
                self.need(language)
                sid = self.new(language)["id"]
                r = self.call(sid, WRITE[language].format(l=language))
                self.assertIsNone(r["error"], r)
                status, data = self.file(sid, f"from_{language}.txt")
                self.assertEqual((status, data), (200, f"{language} wrote".encode()))

    def test_a_context_whose_interpreter_exits_starts_afresh(self):
        self.need("bash")
        sid = self.new("bash")["id"]
        self.call(sid, "x=5")
        r = self.call(sid, "echo before; exit 3", ends_context=True)
        self.assertEqual(r["stdout"], "before\n")
        self.assertTrue(r["context"]["restarted"], r)
        self.assertIn("exited with code 3", r["context"]["end_reason"])
        self.assertTrue(r["session"]["alive"], r)
        r = self.call(sid, "echo \"x=[$x]\"")
        self.assertEqual(r["stdout"], "x=[]\n", r)  # a fresh bash: its state is gone
        self.assertFalse(r["context"]["restarted"], r)
        self.assertEqual(r["execution_count"], 1)

    def test_an_r_context_that_quits_starts_afresh(self):
        self.need("r")
        sid = self.new("r")["id"]
        self.call(sid, "x <- 5")
        r = self.call(sid, "cat('before\\n'); quit(status = 4)", ends_context=True)
        self.assertEqual((r["stdout"], r["stderr"]), ("before\n", ""), r)  # nothing of the kernel's own
        self.assertTrue(r["context"]["restarted"], r)
        self.assertIn("exited with code 4", r["context"]["end_reason"])
        r = self.call(sid, "exists('x')")
        self.assertEqual(r["result"], "[1] FALSE", r)

    def test_a_timeout_interrupts_the_cell_and_the_context_lives(self):
        self.need("bash")
        sid = self.new("bash")["id"]
        self.call(sid, "y=7")
        r = self.call(sid, "sleep 60", timeout=2)
        self.assertEqual(r["kill_reason"], "timeout", r)
        self.assertTrue(r["session"]["interrupted"], r)
        self.assertTrue(r["session"]["alive"], r)
        r = self.call(sid, "echo $y")
        self.assertEqual(r["stdout"], "7\n", r)

    def test_refusals(self):
        self.need("r")
        # A language the profile does not allow (minimal: python only), one that does not exist.
        doc = self.new("r", expect=422, profile="minimal")
        self.assertEqual(doc["field"], "language")
        self.assertIn("minimal", doc["error"])
        doc = self.new("cobol", expect=422)
        self.assertEqual(doc["field"], "language")
        sid = self.new("python")["id"]
        doc = self.call(sid, "1", expect=422, language="cobol")
        self.assertEqual(doc["field"], "language")
        # Input files go to the workspace for every context; only Python takes them inline.
        doc = self.call(sid, "ls", expect=422, language="bash",
                        files=[{"path": "a.txt", "content": "hi"}])
        self.assertEqual(doc["field"], "files")
        # The session lives on through all this.
        self.assertEqual(self.call(sid, "1 + 1")["result"], "2")


class TestSharedWorkspace(LanguageSessions):
    def test_python_and_bash_contexts_share_home_user(self):
        self.need("bash")
        sid = self.new("python")["id"]
        self.call(sid, "state = 'py-kept'\nopen('/home/user/py.txt', 'w').write('from python')")
        r = self.call(sid, "cat py.txt; echo; pwd; echo from bash > sh.txt; z=9", language="bash")
        self.assertEqual(r["stdout"], "from python\n/home/user\n", r)
        self.assertEqual(r["context"]["language"], "bash")
        bash_context = r["context"]["id"]
        r = self.call(sid, "print(open('sh.txt').read().strip(), state)")
        self.assertEqual(r["stdout"], "from bash py-kept\n", r)
        self.assertEqual(r["execution_count"], 2)  # Python's own count
        r = self.call(sid, "echo z=$z; ls /home/user", language="bash")
        self.assertEqual(r["context"]["id"], bash_context)  # the same bash, its state kept
        self.assertEqual(r["stdout"].split(), ["z=9", "py.txt", "sh.txt"], r)
        self.assertEqual(r["execution_count"], 2)
        # What the file routes see is the same workspace.
        self.assertEqual(self.file(sid, "sh.txt"), (200, b"from bash\n"))

    def test_every_language_in_one_session(self):
        sid = self.new("python")["id"]
        for language in OTHERS:
            if missing(language):
                continue
            with self.subTest(language=language):
                r = self.call(sid, WRITE[language].format(l=language), language=language)
                self.assertIsNone(r["error"], r)
        present = [l for l in OTHERS if not missing(l)]
        r = self.call(sid, "import os\nprint(sorted(f for f in os.listdir('.') if f.startswith('from_')))")
        self.assertEqual(r["stdout"], repr(sorted(f"from_{l}.txt" for l in present)) + "\n", r)


def read_attempts(paths):
    """Per language but Python: a cell that tries to read each path, printing READ or DENIED."""
    js = ("const fs = require('fs');\n"
          f"for (const p of {json.dumps(paths)}) {{\n"
          "  try { console.log('READ', p, fs.readFileSync(p).subarray(0, 200).toString()); }\n"
          "  catch (e) { console.log('DENIED', p, e.code); }\n"
          "}\n")
    java_paths = ", ".join(json.dumps(p) for p in paths)
    r_paths = ", ".join(json.dumps(p) for p in paths)
    return {
        "javascript": js,
        "typescript": js,
        "r": (f"for (p in c({r_paths})) {{\n"
              "  got <- tryCatch(readLines(p, n = 1, warn = FALSE), error = function(e) NULL,\n"
              "                  warning = function(w) NULL)\n"
              "  if (is.null(got)) cat('DENIED', p, '\\n') else cat('READ', p, got, '\\n')\n"
              "}\n"),
        "java": (f"for (String p : new String[] {{{java_paths}}}) {{\n"
                 "  try { System.out.println(\"READ \" + p + \" \" + new String(\n"
                 "        java.nio.file.Files.readAllBytes(java.nio.file.Path.of(p)))); }\n"
                 "  catch (Exception e) { System.out.println(\"DENIED \" + p + \" \" + e); }\n"
                 "}\n"),
        "bash": ("for p in " + " ".join("'" + p + "'" for p in paths) + "; do\n"
                 "  if c=$(head -c 200 \"$p\" 2>/dev/null); then echo \"READ $p $c\"; else echo \"DENIED $p\"; fi\n"
                 "done\n"),
    }


def connect_attempts(targets):
    """Per language but Python: a cell that tries a TCP connection to each (host, port)."""
    js = ("const net = require('net');\n"
          f"for (const [host, port] of {json.dumps(targets)}) {{\n"
          "  await new Promise((done) => {\n"
          "    const s = net.connect({ host, port });\n"
          "    s.setTimeout(2000);\n"
          "    s.on('connect', () => { console.log('CONNECTED', host, port); s.destroy(); done(); });\n"
          "    s.on('error', (e) => { console.log('DENIED', host, port, e.code); done(); });\n"
          "    s.on('timeout', () => { console.log('DENIED', host, port, 'timeout'); s.destroy(); done(); });\n"
          "  });\n"
          "}\n")
    r_targets = ", ".join(f"list({json.dumps(h)}, {p})" for h, p in targets)
    java_targets = ", ".join(f"{{{json.dumps(h)}, \"{p}\"}}" for h, p in targets)
    return {
        "javascript": js,
        "typescript": js,
        "r": (f"for (t in list({r_targets})) {{\n"
              "  msg <- tryCatch({\n"
              "    con <- socketConnection(t[[1]], t[[2]], open = 'r+b', blocking = TRUE, timeout = 2)\n"
              "    close(con); 'CONNECTED'\n"
              "  }, error = function(e) paste('DENIED', conditionMessage(e)),\n"
              "     warning = function(w) paste('DENIED', conditionMessage(w)))\n"
              "  cat(msg, t[[1]], t[[2]], '\\n')\n"
              "}\n"),
        "java": (f"for (String[] t : new String[][] {{{java_targets}}}) {{\n"
                 "  try (var s = new java.net.Socket()) {\n"
                 "    s.connect(new java.net.InetSocketAddress(t[0], Integer.parseInt(t[1])), 2000);\n"
                 "    System.out.println(\"CONNECTED \" + t[0] + \" \" + t[1]);\n"
                 "  } catch (Exception e) { System.out.println(\"DENIED \" + t[0] + \" \" + t[1] + \" \" + e); }\n"
                 "}\n"),
        "bash": ("for t in " + " ".join(f"{h}/{p}" for h, p in targets) + "; do\n"
                 "  if (exec 3<>/dev/tcp/$t) 2>/dev/null; then echo CONNECTED $t; else echo DENIED $t; fi\n"
                 "done\n"),
    }


class TestAttacksInEachLanguage(LanguageSessions):
    """The kernel layers are the whole boundary for these languages (no analyzer reads them)."""

    def attempt_in_each_language(self, code_by_language, success, attempts):
        """Runs each language's cell in one Python session's context of that language; asserts that
        no line says `success` and that each of the `attempts` printed DENIED. Yields each answer
        for the caller's own checks."""
        sid = self.new("python")["id"]
        for language, code in code_by_language.items():
            with self.subTest(language=language):
                self.need(language)
                r = self.call(sid, code, language=language)
                self.assertIsNone(r["error"], r)
                self.assertEqual(lines_with(success, r["stdout"]), [], r["stdout"])
                self.assertEqual(len(lines_with("DENIED", r["stdout"])), attempts, r["stdout"])
                yield r

    def test_cannot_read_host_files(self):
        d, secret, token = plant_host_secret("airlock-e2e-ctx-host-")
        try:
            paths = [secret, "/proc/1/root" + secret, "/proc/self/root" + secret,
                     f"/proc/{server.proc.pid}/environ", "/proc/1/root/etc/shadow"]
            for r in self.attempt_in_each_language(read_attempts(paths), "READ", len(paths)):
                self.assertNotIn(token, r["stdout"] + r["stderr"])
        finally:
            shutil.rmtree(d, ignore_errors=True)

    def test_cannot_reach_host_listeners(self):
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        listener.setblocking(False)
        targets = [("127.0.0.1", listener.getsockname()[1]), ("127.0.0.1", server.port)]
        try:
            for _ in self.attempt_in_each_language(connect_attempts(targets), "CONNECTED", len(targets)):
                with self.assertRaises(BlockingIOError, msg="the host's listener got a connection"):
                    listener.accept()
        finally:
            listener.close()


if __name__ == "__main__":
    unittest.main()
