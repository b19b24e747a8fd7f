"""A host package upgrade while the server serves (docs/security.md, "Host ids, upgrades and
masked host identifiers"): dpkg and ldconfig replace files by renaming a new copy over the
old one, so any file a sandbox got by a bind mount made earlier is then an unlinked inode.
The warm pool's zygote made its binds when it started, and its runs bind from the zygote's
root: before the fix, each new warm run failed at step 'mount' and the pool silently went
cold for the rest of the server's life.

Here the server runs in a private mount namespace whose /etc and /dev are private tmpfs
copies of the host's (set up by `unshare` before it execs the server), so the renames below
change nothing on the host or for any other server. Each file the mount plan binds or
copies is renamed over by a same-content copy (`cp -a F F.tmp && mv F.tmp F`, as dpkg does),
then runs must be warm again within a few seconds. A second test makes the zygote unable
to start (a directory where /dev/null was) and checks that /readyz and /metrics say the pool is
degraded, and why, then that it recovers by itself once /dev/null is back.
"""

import json
import os
import signal
import subprocess
import time
import unittest

from airlock_server import AirlockServer, assert_mode, expected_mode, metric_value

# What isolation/mounts.cc binds or copies as files (kEtcPaths' files and symlinks,
# kDevices), plus one file dpkg would replace inside each directory it binds.
PLAN_FILES = [
    "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/localtime", "/etc/matplotlibrc", "/etc/mime.types",
    "/etc/nsswitch.conf", "/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom",
]
FILES_IN_BOUND_DIRS = ["/etc/ld.so.conf.d", "/etc/fonts", "/etc/python3", "/etc/python3.11", "/etc/alternatives"]

# Runs before the server (in its new mount namespace): /etc and /dev become private copies.
PRIVATE_ETC_DEV = r"""
set -e
d=$(mktemp -d /tmp/airlock-upgrade-XXXXXX)
mount -t tmpfs -o mode=0755 tmpfs "$d"
cp -a /etc "$d/etc"
mount --bind "$d/etc" /etc
mkdir "$d/dev" "$d/dev/shm" "$d/dev/pts"
for f in null zero full random urandom tty fd stdin stdout stderr; do
  if [ -e /dev/$f ] || [ -L /dev/$f ]; then cp -a /dev/$f "$d/dev/"; fi
done
mount --bind "$d/dev" /dev
umount -l "$d" && rmdir "$d"
exec "$@"
"""


def in_server_ns(pid, script):
    """Runs a shell script in the server's mount namespace; returns its stdout."""
    p = subprocess.run(["nsenter", "-t", str(pid), "-m", "/bin/sh", "-c", script], capture_output=True,
                       text=True, timeout=60)
    if p.returncode != 0:
        raise AssertionError(f"in the server's namespace: {script!r} failed: {p.stderr}")
    return p.stdout


def can_unshare():
    if os.geteuid() != 0:
        return "needs root (a private mount namespace for the server)"
    try:
        subprocess.run(["unshare", "--mount", "--propagation", "private", "true"], check=True, timeout=30,
                       capture_output=True)
        subprocess.run(["nsenter", "--version"], check=True, timeout=30, capture_output=True)
    except (OSError, subprocess.SubprocessError) as e:
        return f"unshare/nsenter unusable: {e}"
    return None


class HostUpgradeTest(unittest.TestCase):
    def setUp(self):
        why = can_unshare()
        if why:
            if os.environ.get("AIRLOCK_MUST_WORK") == "1":
                self.fail(why)
            self.skipTest(why)
        wrapper = ["unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", PRIVATE_ETC_DEV,
                   "airlock-upgrade"]
        self.server = AirlockServer(wrapper=wrapper, extra_args=["--pool-size", "2"] if expected_mode() == "warm"
                                    else None)
        self.server.start(wait_ready=False)
        deadline = time.monotonic() + 120
        while self.server.readyz()[0] != 200:
            if time.monotonic() > deadline or self.server.proc.poll() is not None:
                self.server.stop()
                self.fail(f"server not ready; stderr: {''.join(self.server.stderr_lines)[-3000:]}")
            time.sleep(0.1)

    def wait_general_ready(self):
        # Four zygotes start at once: slow on a loaded host.
        self.server.wait_pools_ready(timeout=180, profiles=["general"])

    def tearDown(self):
        self.server.cleanup()

    def run_once(self):
        status, body = self.server.execute("import os; print(open('/etc/ld.so.conf').read()[:1])",
                                           path="/v1/execute", profile="general", timeout=20)
        self.assertEqual(status, 200, body)
        self.assertEqual(body["exit_code"], 0, body)
        return body["isolation"].get("mode")

    def test_runs_stay_warm_across_renamed_plan_files(self):
        pid = self.server.proc.pid
        self.wait_general_ready()
        self.assertEqual(self.run_once(), expected_mode() or "cold")
        # Every file mount a run has (its /proc/self/mountinfo), besides the known list.
        status, body = self.server.execute(
            "import os\n"
            "for line in open('/proc/self/mountinfo'):\n"
            "    p = line.split()[4]\n"
            "    if os.path.isfile(p) or p.startswith('/dev/'): print(p)\n", path="/v1/execute", profile="general")
        self.assertEqual(status, 200, body)
        mounted = [p for p in body["stdout"].split() if p.startswith(("/etc/", "/dev/"))]
        names = " ".join(sorted(set(PLAN_FILES + mounted)))
        dirs = " ".join(FILES_IN_BOUND_DIRS)
        replaced = in_server_ns(pid, f"""
for f in {names}; do
  if [ -e "$f" ] || [ -L "$f" ]; then cp -a "$f" "$f.tmp" && mv -f "$f.tmp" "$f" && echo "$f"; fi
done
for d in {dirs}; do
  f=$(find "$d" -maxdepth 1 \\( -type f -o -type l \\) | sort | head -n 1)
  if [ -n "$f" ]; then cp -a "$f" "$f.tmp" && mv -f "$f.tmp" "$f" && echo "$f"; fi
done
""").split()
        self.assertIn("/etc/ld.so.cache", replaced)
        self.assertIn("/dev/null", replaced)

        # The runs made before the renames may still be handed out; count warm runs made
        # after them: more than the pool holds, and the last ones warm.
        # A new zygote takes a few seconds to start (its imports); more on a loaded host.
        target = 2
        modes = []
        start = time.monotonic()
        deadline = start + 60
        while time.monotonic() < deadline:
            modes.append(self.run_once())
            if expected_mode() != "warm" and len(modes) >= 3:
                break
            if modes.count("warm") > target + 1 and modes[-2:] == ["warm", "warm"]:
                break
        if expected_mode() == "warm":
            self.assertGreater(modes.count("warm"), target + 1,
                               f"warm runs did not resume after the renames: {modes}; stderr: "
                               f"{''.join(self.server.stderr_lines)[-3000:]}")
            self.assertEqual(modes[-2:], ["warm", "warm"], modes)
            print(f"warm again {time.monotonic() - start:.1f} s after the renames: {modes}")
            # Every pool replaces its zygote after the renames, and a pool whose runs failed their
            # setup meanwhile says degraded (reason run_setup) until its new zygote is up; the
            # slow ones (visualization imports matplotlib) take longer than general. Each must
            # recover by itself: wait for that, bounded.
            recover_by = time.monotonic() + 90
            while True:
                status, ready = self.server.readyz()
                self.assertEqual(status, 200, ready)
                degraded = {n: p for n, p in ready["pools"].items() if p.get("state") == "degraded"}
                if not degraded:
                    break
                self.assertLess(time.monotonic(), recover_by, f"pools still degraded 90 s after the renames: {ready}")
                time.sleep(0.5)
        else:
            self.assertEqual(set(modes), {"cold"}, modes)

    def test_pool_that_cannot_refill_is_degraded_in_readyz_and_metrics(self):
        if expected_mode() != "warm":
            self.skipTest("a pool only exists on the warm path")
        pid = self.server.proc.pid
        self.wait_general_ready()
        # A device that cannot be bound onto a file: every new zygote fails to start.
        in_server_ns(pid, "mv /dev/null /dev/null.saved && mkdir /dev/null")
        zygotes = [p for p in self.zygote_pids(pid)]
        self.assertTrue(zygotes, "no zygote found")
        for z in zygotes:
            os.kill(z, signal.SIGKILL)
        deadline = time.monotonic() + 20
        ready = {}
        while time.monotonic() < deadline:
            _, ready = self.server.readyz()
            if any(p.get("reason") == "zygote_start" for p in ready["pools"].values()):
                break
            time.sleep(0.1)
        degraded = {n: p for n, p in ready["pools"].items() if p.get("reason") == "zygote_start"}
        self.assertTrue(degraded, f"no pool says degraded: {ready}")
        name, pool = next(iter(degraded.items()))
        self.assertEqual(pool.get("state"), "degraded", pool)
        metrics = self.server.metrics()
        self.assertEqual(metric_value(metrics, "airlock_pool_degraded", profile=name, reason="zygote_start"), 1.0,
                         metrics)
        self.assertGreaterEqual(metric_value(metrics, "airlock_pool_failures_total", profile=name,
                                             reason="zygote_start") or 0, 1, metrics)
        # Fixed on the host: the pool recovers by itself (backoff) and says so.
        in_server_ns(pid, "rmdir /dev/null && mv /dev/null.saved /dev/null")
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            _, ready = self.server.readyz()
            pool = ready["pools"][name]
            if pool.get("state") != "degraded" and pool.get("ready", 0) > 0:
                break
            time.sleep(0.2)
        self.assertNotEqual(ready["pools"][name].get("state"), "degraded", ready)
        self.assertEqual(metric_value(self.server.metrics(), "airlock_pool_degraded", profile=name) or 0, 0)
        self.wait_general_ready()
        assert_mode(self, self.server.execute("print(1)", path="/v1/execute", profile="general")[1])

    @staticmethod
    def zygote_pids(server_pid):
        """The server's direct children that are zygotes (the zygote is pid 1 of its namespace
        and the server's child)."""
        out = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/status") as f:
                    status = dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    cmd = f.read()
            except OSError:
                continue
            if int(status["PPid"]) == server_pid and b"__zygote" in cmd:
                out.append(int(entry))
        return out


if __name__ == "__main__":
    unittest.main()
