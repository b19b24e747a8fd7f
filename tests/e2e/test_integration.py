"""Realistic programs over HTTP: the fips-agents sidecar's integration cases
(research/peers.md §c.2), ported as our own tests against POST /execute."""

import concurrent.futures
import json
import time
import unittest

from airlock_server import AirlockServer, assert_paced, trivial_run_seconds

server = None


def setUpModule():
    global server
    server = AirlockServer().start()


def tearDownModule():
    if server:
        server.cleanup()


def run_ok(test, code, **fields):
    status, body = server.execute(code, timeout=fields.pop("timeout", 10), **fields)
    test.assertEqual(status, 200, body)
    test.assertEqual(body["exit_code"], 0, body)
    return body["stdout"]


class TestRealisticComputations(unittest.TestCase):
    def test_statistical_analysis(self):
        out = run_ok(self, "import statistics\n"
                           "data = list(range(10, 101, 10))\n"
                           "print(f'mean={statistics.mean(data)}')\n"
                           "print(f'median={statistics.median(data)}')\n"
                           "print(f'stdev={statistics.stdev(data):.4f}')\n")
        self.assertIn("mean=55", out)
        self.assertIn("median=55", out)
        self.assertIn("stdev=30.2765", out)

    def test_json_data_processing(self):
        out = run_ok(self, "import json\n"
                           "rows = [{'name': 'alice', 'score': 91}, {'name': 'bob', 'score': 40},\n"
                           "        {'name': 'carol', 'score': 77}]\n"
                           "passed = [dict(r, grade='pass') for r in rows if r['score'] >= 50]\n"
                           "print(json.dumps(passed))\n")
        rows = json.loads(out)
        self.assertEqual(len(rows), 2)
        self.assertEqual({r["name"] for r in rows}, {"alice", "carol"})
        self.assertTrue(all(r["grade"] == "pass" for r in rows))

    def test_regex_extraction(self):
        out = run_ok(self, "import re\n"
                           "text = 'Write to ann@example.com, bob.smith@test.org; cc: x_y@mail.net and z@q.io.'\n"
                           "for m in re.findall(r'[\\w.]+@[\\w.]+\\.\\w+', text):\n"
                           "    print(m)\n")
        self.assertEqual(out.split(), ["ann@example.com", "bob.smith@test.org", "x_y@mail.net", "z@q.io"])

    def test_date_arithmetic(self):
        out = run_ok(self, "from datetime import date\nprint((date(2025, 1, 1) - date(2024, 1, 2)).days)\n")
        self.assertEqual(out.strip(), "365")

    def test_combinatorics(self):
        out = run_ok(self, "import math, itertools\n"
                           "print(math.comb(10, 3), len(list(itertools.combinations(range(10), 3))))\n")
        self.assertEqual(out.split(), ["120", "120"])

    def test_fibonacci_lru_cache(self):
        out = run_ok(self, "from functools import lru_cache\n"
                           "@lru_cache(maxsize=None)\n"
                           "def fib(n):\n"
                           "    return n if n < 2 else fib(n - 1) + fib(n - 2)\n"
                           "print(fib(20))\n")
        self.assertEqual(out.strip(), "6765")

    def test_io_import_blocked_use_print_csv(self):
        status, body = server.execute("import io\nbuf = io.StringIO()")
        self.assertEqual(status, 400)
        self.assertTrue(any("io" in v for v in body["violations"]), body)
        out = run_ok(self, "rows = [('apple', 3, 1.50), ('pear', 10, 2.00), ('plum', 120, 2.3)]\n"
                           "print('product,qty,price')\n"
                           "total = 0\n"
                           "for name, qty, price in rows:\n"
                           "    print(f'{name},{qty},{price:.2f}')\n"
                           "    total += qty * price\n"
                           "print(f'total={total:.2f}')\n")
        self.assertIn("product,qty,price", out)
        self.assertIn("apple", out)
        self.assertIn("total=300.50", out)

    def test_decimal_precision(self):
        out = run_ok(self, "from decimal import Decimal, ROUND_HALF_UP\n"
                           "price = Decimal('19.99')\n"
                           "tax = (price * Decimal('0.0875')).quantize(Decimal('0.01'), ROUND_HALF_UP)\n"
                           "print(f'tax={tax}')\nprint(f'total={price + tax}')\n")
        self.assertIn("tax=1.75", out)
        self.assertIn("total=21.74", out)

    def test_multi_module_computation(self):
        out = run_ok(self, "import json, math, statistics, collections\n"
                           "scores = [72, 85, 91, 72, 68, 95, 72, 88, 91, 80]\n"
                           "print(json.dumps({'mean': statistics.mean(scores),\n"
                           "                  'most_common': collections.Counter(scores).most_common(1)[0][0],\n"
                           "                  'log_mean': math.log(statistics.mean(scores)),\n"
                           "                  'frequency': dict(collections.Counter(scores))}))\n")
        data = json.loads(out)
        self.assertAlmostEqual(data["mean"], 81.4)
        self.assertEqual(data["most_common"], 72)
        self.assertIn("log_mean", data)
        self.assertIn("frequency", data)


class TestGuardrailEdgeCases(unittest.TestCase):
    def test_shadowing_open_builtin_still_blocked(self):
        status, body = server.execute("def open(p):\n    return p\nprint(open('x'))")
        self.assertEqual(status, 400)
        self.assertTrue(any("open" in v for v in body["violations"]), body)

    def test_string_containing_eval_is_allowed(self):
        out = run_ok(self, "x = \"eval('dangerous')\"\nprint(x)")
        self.assertEqual(out, "eval('dangerous')\n")

    def test_lambda_with_eval_name_attribute_is_blocked(self):
        status, body = server.execute("f = lambda: 1\nf.__name__ = 'eval'\nprint(f())")
        self.assertEqual(status, 400, body)

    def test_chained_string_methods_allowed(self):
        out = run_ok(self, "print('  hello sandbox  '.strip().upper().replace('  ', ' '))")
        self.assertEqual(out.strip(), "HELLO SANDBOX")

    def test_list_comprehension_with_math(self):
        out = run_ok(self, "import math\nprint([round(math.sqrt(i), 4) for i in (1, 5)])")
        self.assertIn("1.0", out)
        self.assertIn("2.2361", out)

    def test_multiple_violations_all_reported(self):
        status, body = server.execute("import os\nimport subprocess\nimport socket\n"
                                      "eval('1')\nexec('x = 1')\nopen('/etc/passwd')\n")
        self.assertEqual(status, 400)
        v = body["violations"]
        self.assertGreaterEqual(len(v), 5)
        for word in ("os", "subprocess", "eval", "open"):
            self.assertTrue(any(word in s for s in v), (word, v))

    def test_unicode_identifiers_and_strings(self):
        out = run_ok(self, "größe = 2\nprint('hello 世界', größe)")
        self.assertIn("世界", out)
        self.assertIn("2", out)

    def test_deeply_nested_safe_builtins(self):
        out = run_ok(self, "print(sum(map(int, list(filter(lambda x: x < 10, sorted(set(range(20))))))))")
        self.assertEqual(out.strip(), "45")


class TestConcurrency(unittest.TestCase):
    def test_parallel_requests(self):
        cases = [("print(2 ** 10)", "1024"), ("print(sum(range(101)))", "5050"),
                 ("import math\nprint(round(math.pi, 5))", "3.14159"), ("print('hello' * 3)", "hellohellohello"),
                 ("print(list(range(1, 6)))", "[1, 2, 3, 4, 5]")]
        with concurrent.futures.ThreadPoolExecutor(5) as pool:
            results = list(pool.map(lambda c: server.execute(c[0]), cases))
        for (code, expected), (status, body) in zip(cases, results):
            self.assertEqual(status, 200)
            self.assertEqual(body["exit_code"], 0)
            self.assertIn(expected, body["stdout"])


class TestOutputLimits(unittest.TestCase):
    def test_large_stdout_is_truncated(self):
        status, body = server.execute("for i in range(1000):\n    print('x' * 100)")
        self.assertEqual(status, 200)
        self.assertLessEqual(len(body["stdout"].encode()), 55 * 1024)
        self.assertIn("[output truncated at 50 KB]", body["stdout"])

    def test_binary_like_output(self):
        status, body = server.execute("data = bytes(range(32, 128))\nprint(repr(data))\nprint(len(data))")
        self.assertEqual(status, 200)
        self.assertIn("96", body["stdout"])


class TestErrorRecovery(unittest.TestCase):
    def test_open_call_blocked(self):
        status, body = server.execute("open('/etc/passwd').read()")
        self.assertEqual(status, 400)
        self.assertTrue(any("open" in v for v in body["violations"]))

    def test_infinite_loop_timeout(self):
        pace = trivial_run_seconds(server)
        start = time.monotonic()
        status, body = server.execute("while True:\n    pass", timeout=1.0)
        self.assertEqual(status, 200)
        self.assertIs(body["timed_out"], True)
        assert_paced(self, time.monotonic() - start, 8, pace, "a run with a 1 s timeout")

    def test_memory_intensive_code(self):
        status, body = server.execute("x = [0] * (10 ** 8)\nprint(len(x))")
        self.assertEqual(status, 200)
        self.assertIsInstance(body["exit_code"], int)
        self.assertIsInstance(body["timed_out"], bool)
        self.assertNotEqual(body["exit_code"], 0)

    def test_system_exit_code_propagated(self):
        status, body = server.execute("raise SystemExit(42)")
        self.assertEqual(body["exit_code"], 42)
        self.assertIs(body["timed_out"], False)

    def test_server_survives_a_run_that_kills_itself(self):
        # Exhausting the pids limit and the memory limit must leave the server serving.
        status, body = server.execute("x = 'a' * (1 << 33)")
        self.assertEqual(status, 200)
        out = run_ok(self, "print('still here')")
        self.assertEqual(out, "still here\n")


if __name__ == "__main__":
    unittest.main()
