"""Host identifiers a run must not see (docs/security.md, "Host ids, upgrades and masked host
identifiers", part 4): the host's kernel command line and boot id (which tell tenants they share
a machine), the server binary's host path (a warm run's process image is the zygote, which is
the airlock binary), and what container runtimes mask in /proc by default. Checked from inside
real runs, on the path $AIRLOCK_E2E_MODE picks.
"""

import json
import os
import unittest

from airlock_server import AirlockServer, assert_mode, binary

server = None

# runc/podman's default maskedPaths under /proc (files get /dev/null, directories an empty
# read-only tmpfs), plus the two host identifiers; and their readonlyPaths.
MASKED_FILES = ["/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats",
                "/proc/sched_debug", "/proc/cmdline", "/proc/sys/kernel/random/boot_id"]
MASKED_DIRS = ["/proc/acpi", "/proc/asound", "/proc/scsi"]
READ_ONLY = ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"]

PROBE = r"""
import json, os
out = {}
for p in MASKED_FILES:
    try:
        with open(p, 'rb') as f:
            out[p] = f.read(4096).decode(errors='replace')
    except OSError as e:
        out[p] = 'error:' + type(e).__name__
for p in MASKED_DIRS:
    try:
        out[p] = sorted(os.listdir(p))
    except OSError as e:
        out[p] = 'error:' + type(e).__name__
with open('/proc/self/maps') as f:
    out['maps'] = ' '.join(sorted({line.split(None, 5)[5].strip() for line in f if len(line.split(None, 5)) > 5}))
out['exe'] = os.readlink('/proc/self/exe')
with open('/proc/self/mountinfo') as f:
    out['mountinfo'] = '\n'.join(' '.join(line.split()[3:6]) for line in f)
print(json.dumps(out))
"""


def setUpModule():
    global server
    server = AirlockServer().start()


def tearDownModule():
    if server:
        server.cleanup()


def host_read(path):
    try:
        with open(path, "rb") as f:
            return f.read(4096).decode(errors="replace")
    except OSError:
        return None


class HostIdentifiersTest(unittest.TestCase):
    def probe(self):
        code = (f"MASKED_FILES = {MASKED_FILES!r}\nMASKED_DIRS = {MASKED_DIRS!r}\n" + PROBE)
        status, body = server.execute(code, path="/v1/execute", profile="general", timeout=30)
        self.assertEqual(status, 200, body)
        assert_mode(self, body)
        self.assertEqual(body["exit_code"], 0, body)
        return json.loads(body["stdout"])

    def test_kernel_command_line_and_boot_id_are_not_the_hosts(self):
        seen = self.probe()
        for path in ("/proc/cmdline", "/proc/sys/kernel/random/boot_id"):
            host = host_read(path)
            self.assertTrue(host, f"the host has no {path}")
            self.assertNotEqual(seen[path], host, f"a run reads the host's {path}")
            self.assertNotIn(host.strip(), seen["maps"] + seen["mountinfo"])

    def test_runtime_masked_paths_read_nothing(self):
        seen = self.probe()
        for path in MASKED_FILES:
            if host_read(path) is None and not os.path.exists(path):
                continue  # this kernel has no such file
            value = seen[path]
            self.assertTrue(value == "" or value.startswith("error:"), f"{path} in a run: {value[:200]!r}")
        for path in MASKED_DIRS:
            if not os.path.isdir(path):
                continue
            self.assertIn(seen[path], ([], "error:FileNotFoundError", "error:PermissionError"),
                          f"{path} in a run lists {seen[path]}")

    def test_read_only_proc_paths(self):
        mounts = {}
        for line in self.probe()["mountinfo"].splitlines():
            fields = line.split()
            mounts[fields[1]] = fields[2].split(",")
        for path in READ_ONLY:
            if not os.path.exists(path):
                continue
            self.assertIn(path, mounts, f"{path} is not a read-only mount in a run")
            self.assertIn("ro", mounts[path], f"{path}: {mounts[path]}")

    def test_server_binary_path_is_not_visible(self):
        seen = self.probe()
        host_path = os.path.realpath(binary())
        for where in ("maps", "exe", "mountinfo"):
            self.assertNotIn(host_path, seen[where], f"the server binary's host path in a run's {where}")
            self.assertNotIn(os.path.dirname(host_path), seen[where],
                             f"the server binary's host directory in a run's {where}")


if __name__ == "__main__":
    unittest.main()
