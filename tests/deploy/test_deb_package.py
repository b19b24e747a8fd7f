"""The Debian package (cmake/Packaging.cmake, `cpack -G DEB`): what it installs and
where, its dependencies and maintainer scripts, and that the binary as installed
(/usr/bin/airlock beside /usr/share/airlock/profiles) serves with the profiles of
its own tree, not the source tree's. Installing it with apt in a fresh Debian
container and calling the service: `scripts/deb.sh --test` (needs podman)."""

import json
import os
import shutil
import subprocess
import tempfile
import time
import unittest
import urllib.request

from deploy_common import need_tool

BUILD_DIR = os.environ.get("AIRLOCK_BUILD_DIR")


class DebPackage(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not BUILD_DIR:
            raise unittest.SkipTest("AIRLOCK_BUILD_DIR is not set (run through ctest)")
        need_tool("dpkg-deb", "dpkg")
        need_tool("dpkg-shlibdeps", "dpkg-dev")
        cls.tmp = tempfile.TemporaryDirectory(prefix="airlock-deb-")
        out = os.path.join(cls.tmp.name, "out")
        p = subprocess.run(["cpack", "-G", "DEB", "-B", out, "--config", os.path.join(BUILD_DIR, "CPackConfig.cmake")],
                           capture_output=True, text=True, timeout=600, cwd=BUILD_DIR)
        if p.returncode != 0:
            raise AssertionError(f"cpack failed:\n{p.stdout}\n{p.stderr}")
        debs = [f for f in os.listdir(out) if f.endswith(".deb")]
        assert len(debs) == 1, debs
        cls.deb = os.path.join(out, debs[0])

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def field(self, name):
        return subprocess.run(["dpkg-deb", "-f", self.deb, name], capture_output=True, text=True,
                              check=True).stdout.strip()

    def test_files_and_their_modes(self):
        listing = subprocess.run(["dpkg-deb", "-c", self.deb], capture_output=True, text=True, check=True).stdout
        entries = {}
        for line in listing.splitlines():
            parts = line.split()
            entries[parts[5]] = parts[0]
        for path in ("./usr/bin/airlock", "./usr/lib/airlock/entrypoint"):
            self.assertRegex(entries.get(path, ""), r"^-rwxr-xr-x", path)
        for path in ("./usr/share/airlock/profiles/minimal.yaml", "./usr/share/airlock/profiles/data-science.yaml",
                     "./usr/share/airlock/profiles/general.yaml", "./usr/share/airlock/profiles/visualization.yaml",
                     "./usr/lib/systemd/system/airlock.service", "./etc/default/airlock",
                     "./usr/share/doc/airlock/deploy.md"):
            self.assertRegex(entries.get(path, ""), r"^-rw-r--r--", path)
        # Nothing outside the places a package may own.
        for path in entries:
            self.assertRegex(path, r"^\./(usr/(bin|lib|share)|etc/default)(/|$)|^\./(usr|etc)?/?$", path)

    def test_control_depends_and_scripts(self):
        self.assertEqual(self.field("Package"), "airlock")
        depends = self.field("Depends")
        for dep in ("libseccomp2", "libre2", "libyaml-cpp", "python3", "python3-numpy", "python3-pandas",
                    "python3-scipy", "python3-matplotlib"):
            self.assertIn(dep, depends)
        with tempfile.TemporaryDirectory() as control:
            subprocess.run(["dpkg-deb", "-e", self.deb, control], check=True)
            self.assertEqual(sorted(os.listdir(control)),
                             ["conffiles", "control", "md5sums", "postinst", "postrm", "prerm"])
            with open(os.path.join(control, "conffiles")) as f:
                self.assertEqual(f.read().split(), ["/etc/default/airlock"])

    def test_installed_binary_finds_the_installed_profiles(self):
        root = os.path.join(self.tmp.name, "root")
        subprocess.run(["dpkg-deb", "-x", self.deb, root], check=True)
        # One profile fewer than the source tree: the server must list exactly these three.
        os.remove(os.path.join(root, "usr/share/airlock/profiles/general.yaml"))
        proc = subprocess.Popen([os.path.join(root, "usr/bin/airlock"), "serve", "--listen", "127.0.0.1:0",
                                 "--audit-log", "", "--pool-size", "0"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            first = proc.stdout.readline()
            if not first.startswith("airlock: listening on http://"):
                if proc.poll() is not None and b"cannot run sandboxes" in proc.stderr.read().encode():
                    if os.environ.get("AIRLOCK_MUST_WORK") != "1":
                        self.skipTest("this host cannot run sandboxes")
                self.fail(f"the installed airlock did not start: {first!r}")
            base = first.strip().split("listening on ", 1)[1]
            deadline = time.monotonic() + 60
            while True:
                try:
                    with urllib.request.urlopen(base + "/readyz", timeout=5) as r:
                        if r.status == 200:
                            break
                except OSError:
                    pass
                self.assertLess(time.monotonic(), deadline, "not ready in 60 s")
                time.sleep(0.2)
            with urllib.request.urlopen(base + "/v1/profiles", timeout=10) as r:
                body = json.load(r)
            names = sorted(p["name"] for p in body["profiles"]) if isinstance(body, dict) else sorted(body)
            self.assertEqual(names, ["data-science", "minimal", "visualization"])
            req = urllib.request.Request(base + "/execute", data=json.dumps({"code": "print(6*7)"}).encode(),
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=60) as r:
                result = json.load(r)
            self.assertEqual((result["exit_code"], result["stdout"]), (0, "42\n"), result)
        finally:
            proc.terminate()
            proc.wait(timeout=60)


if __name__ == "__main__":
    unittest.main()
