"""The Containerfile, airlock.service and the Debian maintainer scripts, read as
text (building and running the image is scripts/image.sh's job): the runtime
stage is the slim Debian the issue names, the health check is `airlock check`,
the unit listens on loopback, reads a tokens file, drains on stop and restarts
on failure."""

import os
import re
import subprocess
import unittest

from deploy_common import DEPLOY_DIR, SOURCE_DIR


def read(*parts):
    with open(os.path.join(*parts)) as f:
        return f.read()


def unit_settings(text):
    settings = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";", "[")):
            continue
        key, _, value = line.partition("=")
        settings.setdefault(key, []).append(value)
    return settings


class Containerfile(unittest.TestCase):
    def setUp(self):
        self.text = read(SOURCE_DIR, "Containerfile")
        self.instructions = [l for l in self.text.splitlines() if l and not l.startswith((" ", "#"))]

    def test_a_build_stage_and_a_slim_runtime_stage(self):
        froms = [l.split()[1:] for l in self.instructions if l.startswith("FROM ")]
        self.assertEqual(len(froms), 2, froms)
        self.assertEqual(froms[0], ["debian:bookworm-slim", "AS", "build"])
        self.assertEqual(froms[1], ["debian:bookworm-slim"])
        runtime = self.text.split("\nFROM debian:bookworm-slim\n", 1)[1]
        self.assertIn("COPY --from=build", runtime)
        # Nothing of the toolchain in the runtime stage.
        for tool in ("build-essential", "cmake", "-dev"):
            self.assertNotIn(tool, runtime)
        self.assertNotRegex(self.text, r":latest\b")

    def test_entrypoint_healthcheck_and_defaults(self):
        self.assertIn('ENTRYPOINT ["/usr/lib/airlock/entrypoint"]', self.instructions)
        health = [l for l in self.text.replace("\\\n", " ").splitlines() if l.startswith("HEALTHCHECK")]
        self.assertEqual(len(health), 1)
        self.assertRegex(health[0], r'CMD \["/usr/lib/airlock/entrypoint", "check"\]')
        self.assertIn("AIRLOCK_LISTEN=0.0.0.0:8000", self.text)
        self.assertIn("AIRLOCK_TOKENS_FILE=", self.text)
        self.assertIn("STOPSIGNAL SIGTERM", self.instructions)

    def test_the_build_context_leaves_out_builds_and_git(self):
        ignored = read(SOURCE_DIR, ".containerignore").split()
        for entry in (".git", "build", "build-*"):
            self.assertIn(entry, ignored)


class SystemdUnit(unittest.TestCase):
    def setUp(self):
        self.text = read(DEPLOY_DIR, "systemd", "airlock.service")
        self.s = unit_settings(self.text)

    def test_loopback_tokens_file_drain_and_restart(self):
        env = dict(e.split("=", 1) for e in self.s["Environment"])
        self.assertTrue(env["AIRLOCK_LISTEN"].startswith("127.0.0.1:"))
        self.assertEqual(env["AIRLOCK_TOKENS_FILE"], "/etc/airlock/tokens")
        self.assertEqual(self.s["ExecStart"], ["/usr/lib/airlock/entrypoint serve"])
        self.assertEqual(self.s["Restart"], ["on-failure"])
        self.assertEqual(self.s["KillSignal"], ["SIGTERM"])
        self.assertEqual(self.s["KillMode"], ["mixed"])
        self.assertGreater(int(self.s["TimeoutStopSec"][0]), float(env["AIRLOCK_DRAIN_GRACE"]) + 5)
        self.assertEqual(self.s["Delegate"], ["yes"])
        self.assertEqual(self.s["EnvironmentFile"], ["-/etc/default/airlock"])

    def test_systemd_accepts_the_unit(self):
        analyze = "/usr/bin/systemd-analyze"
        if not os.path.exists(analyze):
            self.skipTest("systemd-analyze is not installed")
        # ExecStart must exist for `verify`: point it at /bin/true in a copy.
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "airlock.service")
            with open(path, "w") as f:
                f.write(self.text.replace("/usr/lib/airlock/entrypoint", "/bin/true"))
            p = subprocess.run([analyze, "verify", path], capture_output=True, text=True, timeout=60)
            # Complaints about the unit's own lines ("airlock.service:26: Failed to parse ...").
            problems = re.findall(r"airlock\.service:\d+: .*", p.stdout + p.stderr)
            self.assertEqual(problems, [], p.stdout + p.stderr)


class MaintainerScripts(unittest.TestCase):
    def test_postinst_makes_a_private_tokens_file_once(self):
        text = read(DEPLOY_DIR, "debian", "postinst")
        self.assertIn("if [ ! -e /etc/airlock/tokens ]", text)
        self.assertIn("chmod 0600 /etc/airlock/tokens", text)
        self.assertIn("umask 077", text)
        for script in ("postinst", "prerm", "postrm"):
            path = os.path.join(DEPLOY_DIR, "debian", script)
            self.assertTrue(os.access(path, os.X_OK), script)
            subprocess.run(["/bin/sh", "-n", path], check=True)


if __name__ == "__main__":
    unittest.main()
