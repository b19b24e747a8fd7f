"""Escape attempts over HTTP: the fips-agents sidecar's escape vectors that apply to an HTTP
service (research/peers.md §c.1, labels V, X and R), ported as our own tests.

  V  POST /execute answers 400 with violations (one containing the given substring).
  X  400 passes; a 200 must not show the escape marker (and must fail where stated).
  R  the code runs (200) and its output shows the attack came to nothing.

Every X payload is also run under the `general` profile, where the analyzer only observes:
there nothing but the kernel layers stands between the payload and the host, so those runs
are the real test of containment.
"""

import json
import unittest

from airlock_server import AirlockServer

server = None


def setUpModule():
    global server
    server = AirlockServer().start()


def tearDownModule():
    if server:
        server.cleanup()


class EscapeCase(unittest.TestCase):
    def assertRejected(self, code, substring=None, min_violations=1, profile=None):
        fields = {"profile": profile} if profile else {}
        status, body = server.execute(code, **fields)
        self.assertEqual(status, 400, f"not rejected: {body}")
        self.assertEqual(body["error"], "Code validation failed")
        self.assertGreaterEqual(len(body["violations"]), min_violations, body)
        if substring:
            self.assertTrue(any(substring in v for v in body["violations"]),
                            f"no violation mentions {substring!r}: {body['violations']}")
        return body

    def assertContained(self, code, marker, must_fail=False, profiles=("minimal", "general")):
        for profile in profiles:
            with self.subTest(profile=profile):
                status, body = server.execute(code, profile=profile)
                if status == 400:
                    self.assertTrue(body["violations"])
                    continue
                self.assertEqual(status, 200, body)
                self.assertNotIn(marker, body["stdout"], body)
                if must_fail:
                    self.assertNotEqual(body["exit_code"], 0, body)

    def assertRuns(self, code, profile=None):
        fields = {"profile": profile} if profile else {}
        status, body = server.execute(code, **fields)
        self.assertEqual(status, 200, body)
        return body


# Payloads shared by the V and X classes: each tries to reach the host and prints a marker.
GLOBALS_ESCAPE = ("b = globals()['__builtins__']\n"
                  "imp = b['__import__'] if isinstance(b, dict) else b.__import__\n"
                  "print('ESCAPED:', imp('os').popen('id').read())\n")
ATTRGETTER_ESCAPE = ("import operator, json\n"
                     "b = operator.attrgetter('__builtins__')(json)\n"
                     "print('ESCAPED:', b['__import__']('os').getcwd())\n")
TRACEBACK_ESCAPE = ("try:\n    1 / 0\nexcept Exception as e:\n"
                    "    g = e.__traceback__.tb_frame.f_globals\n"
                    "    print('ESCAPED:', g['__builtins__'].__import__('os').getcwd())\n")
GENERATOR_ESCAPE = ("def gen():\n    yield 1\n"
                    "g = gen()\n"
                    "print('ESCAPED:', g.gi_frame.f_globals['__builtins__'].__import__('os').getcwd())\n")
CHR_ESCAPE = ("name = chr(95) * 2 + 'builtins' + chr(95) * 2\n"
              "b = globals()[name]\n"
              "print('ESCAPED:', b.__import__('os').getcwd())\n")
BYTES_ESCAPE = ("name = bytes([95, 95, 98, 117, 105, 108, 116, 105, 110, 115, 95, 95]).decode()\n"
                "b = globals()[name]\n"
                "print('ESCAPED:', b.__import__('os').getcwd())\n")
METACLASS_ESCAPE = ("class M(type):\n"
                    "    def __new__(mcs, name, bases, ns):\n"
                    "        b = globals()['__builtins__']\n"
                    "        print('ESCAPED:', b.__import__('os').getcwd())\n"
                    "        return super().__new__(mcs, name, bases, ns)\n"
                    "class A(metaclass=M):\n    pass\n")


class TestGuardrailBypasses(EscapeCase):
    def test_globals_builtins_access(self):
        self.assertRejected(GLOBALS_ESCAPE)

    def test_operator_attrgetter_bypass(self):
        self.assertRejected(ATTRGETTER_ESCAPE)

    def test_exception_traceback_frame_walk(self):
        self.assertRejected(TRACEBACK_ESCAPE)

    def test_generator_frame_walk(self):
        self.assertRejected(GENERATOR_ESCAPE)

    def test_vars_builtins_access(self):
        self.assertRejected("import math\nprint('ESCAPED:', vars(math)['__builtins__'])")

    def test_dynamic_chr_construction(self):
        self.assertRejected(CHR_ESCAPE)

    def test_bytes_decode_dunder_construction(self):
        self.assertRejected(BYTES_ESCAPE)

    def test_format_string_attribute_traversal(self):
        self.assertRejected("def f():\n    pass\nprint('ESCAPED: {0.__globals__}'.format(f))")

    def test_class_chain_reconnaissance(self):
        self.assertRejected("print('ESCAPED:', ().__class__.__bases__[0].__dict__)")

    def test_metaclass_globals_escape(self):
        self.assertRejected(METACLASS_ESCAPE)

    def test_operator_methodcaller_bypass(self):
        self.assertRejected("import operator\nf = operator.methodcaller('__init__')\nprint('ESCAPED:', f(object()))")

    def test_functools_reduce_attrgetter_chain(self):
        self.assertRejected("from functools import reduce\nfrom operator import attrgetter\n"
                            "x = reduce(lambda o, a: attrgetter(a)(o), ['__class__', '__bases__'], ())\n"
                            "print('ESCAPED:', x)")

    def test_locals_builtins_access(self):
        self.assertRejected("print('ESCAPED:', locals()['__builtins__'])")

    def test_bare_builtins_name_reference(self):
        self.assertRejected("b = __builtins__\nprint('ESCAPED:', b.__import__('os'))")

    def test_bare_builtins_open_method(self):
        self.assertRejected("print('ESCAPED:', __builtins__.open('/etc/passwd').read())")


class TestModuleAttributeTraversal(EscapeCase):
    def test_random_os_escape(self):
        self.assertRejected("import random\nrandom._os.system('id')")

    def test_random_os_environ_leak(self):
        self.assertRejected("import random\nprint(dict(random._os.environ))")

    def test_random_os_runtime_purge(self):
        # The sidecar deletes random._os at run time; here the name is harmless (the run has
        # no secret in its environment, no network, a private /tmp), but reaching for it
        # must still not print anything of the host's environment.
        body = self.assertRuns("import random\nprint('has _os:', 'ok')")
        self.assertEqual(body["stdout"], "has _os: ok\n")
        self.assertContained("import random\nprint('ENV:', dict(random._os.environ))", "AIRLOCK_BINARY")


class TestEvalBypasses(EscapeCase):
    HINTS = ("import typing\n"
             "class X:\n"
             "    a: 'type(print(\"ESCAPED\", __import__(\"os\").getcwd()))'\n"
             "typing.get_type_hints(X)\n")

    def test_typing_get_type_hints_eval_bypass(self):
        status, body = server.execute(self.HINTS)
        if status == 200:
            self.assertNotIn("ESCAPED", body["stdout"])
            self.assertNotEqual(body["exit_code"], 0)
        else:
            self.assertEqual(status, 400)

    def test_typing_get_type_hints_blocked_by_ast(self):
        self.assertRejected(self.HINTS, "get_type_hints")

    def test_get_type_hints_direct_import_blocked(self):
        self.assertRejected("from typing import get_type_hints\nprint(get_type_hints)", "get_type_hints")

    def test_typing_eval_env_leak(self):
        code = ("import typing\nclass X:\n"
                "    a: 'print(__import__(\"os\").environ.get(\"HOME\"))'\n"
                "typing.get_type_hints(X)\n")
        for profile in ("minimal", "general"):
            status, body = server.execute(code, profile=profile)
            if status == 200:
                # The run's own HOME is its workspace, /home/user; the server's never shows.
                for home in ("/root", "/Users"):
                    self.assertNotIn(home, body["stdout"])
                self.assertNotIn("/home", body["stdout"].replace("/home/user", ""))


class TestExecutionEscapes(EscapeCase):
    """The bypasses above, executed where the analyzer lets them through (general profile)."""

    def test_globals_escape_executes(self):
        self.assertContained(GLOBALS_ESCAPE.replace("popen('id').read()", "getuid()") +
                             "print('HOSTROOT', open('/etc/shadow').read())\n", "HOSTROOT")

    def test_operator_attrgetter_escape_executes(self):
        self.assertContained(ATTRGETTER_ESCAPE + "import os\nprint('HOSTFILES', os.listdir('/root'))\n", "HOSTFILES")

    def test_traceback_frame_escape_executes(self):
        self.assertContained(TRACEBACK_ESCAPE + "import os\nprint('HOSTPID', os.kill(1, 0))\n", "HOSTPID")

    def test_generator_frame_escape_executes(self):
        self.assertContained(GENERATOR_ESCAPE + "import socket\nsocket.create_connection(('1.1.1.1', 80), 2)\n"
                             "print('NETWORK')\n", "NETWORK")

    def test_dynamic_chr_escape_executes(self):
        self.assertContained(CHR_ESCAPE + "import os\nos.setuid(0)\nprint('ROOT')\n", "ROOT")

    def test_bytes_decode_escape_executes(self):
        self.assertContained(BYTES_ESCAPE + "import os\nprint('HOSTPROC', os.listdir('/proc/1/root'))\n",
                             "HOSTPROC")

    def test_metaclass_escape_executes(self):
        self.assertContained(METACLASS_ESCAPE + "import os\nos.mkdir('/usr/pwned')\nprint('WROTE_USR')\n",
                             "WROTE_USR")


class TestInfoLeaks(EscapeCase):
    def test_proc_self_environ_leak(self):
        self.assertContained("import builtins\nenv = builtins.open('/proc/self/environ').read()\n"
                             "print('ENV_LEAK:' if 'AIRLOCK' in env or 'PWD=' in env else 'clean', env)", "ENV_LEAK:")

    def test_tmp_listing_leak(self):
        # Each run has its own /tmp: files of other runs (or of the host) are never there.
        status, body = server.execute("import os\nopen('/tmp/mine', 'w').write('x')\n"
                                      "others = [f for f in os.listdir('/tmp') if f not in ('mine', '.matplotlib')]\n"
                                      "print('TMP_FILES:' if others else 'private', others)", profile="general")
        self.assertEqual(status, 200, body)
        self.assertNotIn("TMP_FILES:", body["stdout"])
        self.assertRejected("import os\nprint('TMP_FILES:', os.listdir('/tmp'))")

    def test_format_string_globals_leak(self):
        self.assertRejected("def f():\n    pass\nprint('LEAKED_GLOBALS: {0.__globals__}'.format(f))")


class TestResourceExhaustion(EscapeCase):
    def test_tmp_fill_exhaustion(self):
        # 100 MB into a 64 MiB working directory: the write fails, the host disk is untouched.
        code = ("chunk = 'x' * (1 << 20)\n"
                "with open('/tmp/fill', 'w') as f:\n"
                "    for i in range(100):\n"
                "        f.write(chunk)\n"
                "print('FILLED /tmp')\n")
        self.assertContained(code, "FILLED /tmp", must_fail=True)


class TestNetworkEscape(EscapeCase):
    def test_localhost_probe(self):
        code = ("import socket\ns = socket.socket()\ns.settimeout(2)\n"
                f"s.connect(('127.0.0.1', {server.port}))\nprint('CONNECTED')\n")
        self.assertContained(code, "CONNECTED", must_fail=True)

    def test_af_alg_socket_blocked(self):
        self.assertContained("import socket\ns = socket.socket(38, socket.SOCK_SEQPACKET, 0)\nprint('AF_ALG_OPEN')",
                             "AF_ALG_OPEN", must_fail=True)

    def test_splice_syscall_blocked(self):
        # splice between two pipes moves no file data; what matters is that no page-cache
        # page of a read-only file can be written through it (Copy Fail): the
        # read-only file below must keep its content.
        code = ("import os\nr, w = os.pipe()\n"
                "fd = os.open('/usr/lib/os-release', os.O_RDONLY)\n"
                "try:\n    n = os.splice(fd, w, 16)\nexcept (OSError, AttributeError) as e:\n    n = -1\n"
                "os.write(w, b'X' * 16)\n"
                "print('SPLICE_WROTE' if open('/usr/lib/os-release').read(1) == 'X' else 'intact', n)\n")
        self.assertContained(code, "SPLICE_WROTE")

    def test_udp_and_inet_sockets_refused(self):
        code = ("import socket\n"
                "try:\n"
                "    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
                "    s.sendto(b'x', ('8.8.8.8', 53))\n"
                "    print('UDP_SENT')\n"
                "except OSError as e:\n"
                "    print('refused', e.errno)\n")
        self.assertContained(code, "UDP_SENT")


class TestProcessEscape(EscapeCase):
    def test_signal_parent_process(self):
        self.assertRejected("import os, signal\nppid = os.getppid()\nos.kill(ppid, signal.SIGTERM)",
                            min_violations=3)

    def test_blocked_process_calls(self):
        cases = [
            ("import os\nos.kill(1, 9)", "os.kill"),
            ("import os\nprint(os.getppid())", "os.getppid"),
            ("import os\nprint(os.getpid())", "os.getpid"),
            ("import os\nos.fork()", "os.fork"),
            ("import os\nos.abort()", "os.abort"),
            ("import signal\nsignal.raise_signal(9)", "signal"),
            ("print(object.__getattribute__(1, 'real'))", "__getattribute__"),
            ("class X:\n    pass\nx = X()\nx.__getattr__('anything')", "__getattr__"),
            ("import re\nprint(re.enum.bltns)", "bltns"),
            ("import json\nprint(json.codecs.builtins)", "builtins"),
            ("myopen = open\nprint(myopen)", "open"),
            ("print([open][0]('/etc/passwd').read())", "open"),
            ("print(print.__self__)", "__self__"),
            ("import json\njson.codecs.open('/etc/passwd').read()", "codecs"),
            ("class X:\n    pass\nx = X()\nx.open('/etc/passwd')", "open"),
            ("import json\nprint(json.__loader__.get_data('/etc/passwd'))", "__loader__"),
        ]
        for code, substring in cases:
            with self.subTest(code=code):
                self.assertRejected(code, substring)

    def test_kill_host_processes_contained(self):
        # Under `general` the calls run: the run's pid namespace holds only its own processes.
        code = ("import os, signal\n"
                "killed = []\n"
                "for pid in range(1, 400):\n"
                "    try:\n"
                "        os.kill(pid, 0)\n"
                "        killed.append(pid)\n"
                "    except OSError:\n"
                "        pass\n"
                "print('visible', killed)\n"
                "print('HOST_PIDS' if any(p > 50 for p in killed) else 'none')\n")
        body = self.assertRuns(code, profile="general")
        self.assertNotIn("HOST_PIDS", body["stdout"])


class TestMemoryLimitBypasses(EscapeCase):
    def test_resource_import_blocked_by_guardrails(self):
        self.assertRejected("import resource\nresource.setrlimit(resource.RLIMIT_AS, (-1, -1))")

    def test_resource_not_in_runtime_allowlist(self):
        status, _, data = server.get("/profile")
        self.assertNotIn("resource", json.loads(data)["allowed_imports"])

    def test_resource_transitive_via_allowed_modules(self):
        mods = ("collections csv datetime decimal fractions functools itertools json math operator random re "
                "statistics string textwrap typing").split()
        code = "import " + ", ".join(mods) + "\n"
        code += "for i, m in enumerate([" + ", ".join(mods) + "]):\n"
        code += "    if hasattr(m, 'resource'):\n        print('FOUND:', i)\nprint('DONE')\n"
        body = self.assertRuns(code)
        self.assertNotIn("FOUND:", body["stdout"])
        self.assertIn("DONE", body["stdout"])

    def test_large_allocation_stopped(self):
        # 30 s, not the default 10: under a loaded host, faulting in the limit's worth of
        # pages before the OOM kill took longer than 10 s (CI at load 39).
        status, body = server.execute("x = bytearray(600 * 1024 * 1024)\nprint('ALLOCATED')", timeout=30)
        self.assertEqual(status, 200)
        self.assertNotIn("ALLOCATED", body["stdout"])
        self.assertTrue("MemoryError" in body["stderr"] or "memory" in (body["error"] or ""), body)


class TestPreimportAttackSurface(EscapeCase):
    def test_preimport_builtins_dunder_blocked(self):
        self.assertRejected("import json\nprint(json.__builtins__)", "__builtins__")

    def test_preimport_dict_dunder_blocked(self):
        self.assertRejected("import json\nprint(json.__dict__)")

    def test_pandas_eval_blocked(self):
        self.assertRejected("import pandas\npandas.eval('__import__(\"os\")')", "eval", profile="data-science")

    def test_numpy_lib_os_alias_blocked(self):
        self.assertRejected("import numpy\nprint(numpy.lib.os.getcwd())", "os", profile="data-science")

    def test_preimport_open_removed_from_builtins(self):
        self.assertContained("try:\n    print('ESCAPED', open('/etc/hostname').read())\nexcept NameError:\n    pass",
                             "ESCAPED", profiles=("minimal",))

    def test_preimport_cached_open_reference(self):
        body = self.assertRuns("import json\nprint('OPEN_REFS:', [x for x in dir(json) if 'open' in x.lower()])")
        self.assertIn("OPEN_REFS: []", body["stdout"])

    def test_preimport_exec_still_in_builtins(self):
        self.assertRejected("exec('import os')")

    def test_runtime_import_hook(self):
        # The analyzer cannot see an import built at run time; the run's import hook refuses it.
        status, body = server.execute("m = 'o' + 's'\nimport importlib\n")
        self.assertEqual(status, 400)  # importlib itself is not allowed
        status, body = server.execute("import json\nprint(json.loads('1'))\nimport collections.abc\nprint('ok')")
        self.assertEqual(status, 200, body)
        self.assertEqual(body["stdout"], "1\nok\n")


class TestLandlockNetworkEvasion(EscapeCase):
    def test_landlock_udp_not_covered_by_abi4(self):
        self.assertRejected("import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)")


if __name__ == "__main__":
    unittest.main()
