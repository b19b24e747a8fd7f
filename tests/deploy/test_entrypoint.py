"""deploy/entrypoint.sh (the image's entrypoint and airlock.service's ExecStart):
AIRLOCK_* variables become `airlock serve` flags, arguments given last win, and a
flag the binary does not know (--allowed-host before it exists) is not passed."""

import os
import stat
import subprocess
import tempfile
import unittest

from deploy_common import DEPLOY_DIR

ENTRYPOINT = os.path.join(DEPLOY_DIR, "entrypoint.sh")

# A stand-in for /usr/bin/airlock (a shell script: quick to start): prints its
# arguments NUL-terminated; `serve --help` lists --allowed-host only when
# STUB_KNOWS_ALLOWED_HOST=1.
STUB = """#!/bin/sh
if [ "$*" = "serve --help" ]; then
  echo "--listen --tokens-file"
  [ "$STUB_KNOWS_ALLOWED_HOST" = 1 ] && echo "--allowed-host --allowed-origin"
  exit 0
fi
printf '%s\\0' "$@"
"""


class Entrypoint(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.stub = os.path.join(self.tmp.name, "airlock")
        with open(self.stub, "w") as f:
            f.write(STUB)
        os.chmod(self.stub, stat.S_IRWXU)

    def tearDown(self):
        self.tmp.cleanup()

    def run_entrypoint(self, args=(), **env):
        full = {"PATH": os.environ["PATH"], "AIRLOCK_BIN": self.stub, "AIRLOCK_CGROUP_REMOUNT": "0"}
        full.update(env)
        p = subprocess.run(["/bin/sh", ENTRYPOINT, *args], env=full, capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        return p.stdout.split("\0")[:-1], p.stderr

    def test_nothing_set_is_plain_serve(self):
        argv, _ = self.run_entrypoint()
        self.assertEqual(argv, ["serve"])
        argv, _ = self.run_entrypoint(["serve"])
        self.assertEqual(argv, ["serve"])

    def test_variables_become_flags_and_arguments_come_last(self):
        tokens = os.path.join(self.tmp.name, "tokens")
        open(tokens, "w").close()
        argv, _ = self.run_entrypoint(
            ["serve", "--pool-size", "2", "--listen", "127.0.0.1:9"],
            AIRLOCK_LISTEN="0.0.0.0:8000", AIRLOCK_TOKENS_FILE=tokens, AIRLOCK_AUDIT_LOG="none",
            AIRLOCK_MAX_CONCURRENT="3", AIRLOCK_MAX_QUEUE="5", AIRLOCK_DRAIN_GRACE="7",
            AIRLOCK_POOL_SIZE="1", AIRLOCK_ALLOW_DEGRADED="cgroup", AIRLOCK_PROFILES="/p",
            AIRLOCK_DEFAULT_PROFILE="minimal", AIRLOCK_INSECURE="1")
        # --pool-size and --listen are arguments: theirs win, the variables' are not passed.
        self.assertEqual(argv, [
            "serve", "--tokens-file", tokens, "--profiles", "/p",
            "--default-profile", "minimal", "--audit-log", "", "--max-concurrent", "3", "--max-queue", "5",
            "--drain-grace", "7", "--allow-degraded", "cgroup", "--insecure",
            "--pool-size", "2", "--listen", "127.0.0.1:9"])

    def test_a_missing_tokens_file_is_not_passed_and_is_said(self):
        argv, err = self.run_entrypoint(AIRLOCK_TOKENS_FILE="/nonexistent/tokens")
        self.assertEqual(argv, ["serve"])
        self.assertIn("/nonexistent/tokens does not exist", err)

    def test_values_with_spaces_and_quotes_stay_one_argument(self):
        argv, _ = self.run_entrypoint(["--audit-log", "a b'c"], AIRLOCK_PROFILES="/x y/'z'")
        self.assertEqual(argv, ["serve", "--profiles", "/x y/'z'", "--audit-log", "a b'c"])

    def test_allowed_hosts_only_when_the_binary_knows_the_flag(self):
        argv, err = self.run_entrypoint(AIRLOCK_ALLOWED_HOSTS="a.example, b.example")
        self.assertEqual(argv, ["serve"])
        self.assertIn("no --allowed-host flag", err)
        argv, _ = self.run_entrypoint(AIRLOCK_ALLOWED_HOSTS="a.example, b.example",
                                      AIRLOCK_ALLOWED_ORIGINS="https://ui.example",
                                      STUB_KNOWS_ALLOWED_HOST="1")
        self.assertEqual(argv, ["serve", "--allowed-host", "a.example", "--allowed-host", "b.example",
                                "--allowed-origin", "https://ui.example"])

    def test_check_gets_allow_degraded_and_other_commands_pass_through(self):
        argv, _ = self.run_entrypoint(["check", "--json"], AIRLOCK_ALLOW_DEGRADED="cgroup,landlock",
                                      AIRLOCK_LISTEN="0.0.0.0:1")
        self.assertEqual(argv, ["check", "--allow-degraded=cgroup,landlock", "--json"])
        argv, _ = self.run_entrypoint(["run", "-"], AIRLOCK_LISTEN="0.0.0.0:1")
        self.assertEqual(argv, ["run", "-"])


class EntrypointWithTheRealBinary(unittest.TestCase):
    """The flags the entrypoint makes are ones airlock accepts: an empty --audit-log and a
    variable overridden by an argument (airlock refuses an option given twice)."""

    def test_serve_starts_from_variables_and_arguments(self):
        binary = os.environ.get("AIRLOCK_BINARY")
        if not binary:
            self.skipTest("AIRLOCK_BINARY is not set (run through ctest)")
        env = {"PATH": os.environ["PATH"], "AIRLOCK_BIN": binary, "AIRLOCK_CGROUP_REMOUNT": "0",
               "AIRLOCK_LISTEN": "127.0.0.1:8000", "AIRLOCK_AUDIT_LOG": "none", "AIRLOCK_POOL_SIZE": "0",
               "AIRLOCK_DRAIN_GRACE": "1", "AIRLOCK_MAX_CONCURRENT": "2"}
        p = subprocess.Popen(["/bin/sh", ENTRYPOINT, "serve", "--listen", "127.0.0.1:0"], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            first = p.stdout.readline()
            if not first.startswith("airlock: listening on http://127.0.0.1:"):
                p.kill()
                self.fail(f"airlock did not start from the entrypoint: {first!r} {p.stderr.read()}")
        finally:
            p.terminate()
            p.wait(timeout=60)
        self.assertEqual(p.returncode, 0)


if __name__ == "__main__":
    unittest.main()
