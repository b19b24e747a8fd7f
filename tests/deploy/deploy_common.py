"""Shared by tests/deploy: paths, and skip-or-fail when a tool is missing."""

import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
import unittest

SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEPLOY_DIR = os.path.join(SOURCE_DIR, "deploy")


def must_work():
    return os.environ.get("AIRLOCK_MUST_WORK") == "1"


def need_tool(name, package):
    """The tool's path; skips the test when it is absent (fails under AIRLOCK_MUST_WORK=1)."""
    path = shutil.which(name)
    if path:
        return path
    message = f"{name} is not installed (apt-get install {package}; scripts/setup.sh does)"
    if must_work():
        raise AssertionError(message)
    raise unittest.SkipTest(message)


def free_port():
    """A loopback TCP port nobody listens on right now."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def render_nginx_conf(upstream_ports, listen_port, location_extra=""):
    """deploy/nginx/airlock.conf as shipped, with its example servers replaced by
    127.0.0.1:<port> for each of `upstream_ports` and `listen 8080` by the loopback
    `listen_port`. `location_extra` (test-only directives, e.g. add_header) goes at
    the top of its `location /`. Fails if the shipped file no longer has the lines
    this substitutes, so the tests always run the file as shipped."""
    with open(os.path.join(DEPLOY_DIR, "nginx", "airlock.conf")) as f:
        conf = f.read()
    anchors = ("    hash $airlock_route consistent;\n", "listen 8080;", "    location / {\n")
    for anchor in anchors:
        if conf.count(anchor) != 1:
            raise AssertionError(f"deploy/nginx/airlock.conf: expected exactly one {anchor!r} (the tests substitute it)")
    servers = "".join(f"    server 127.0.0.1:{p};\n" for p in upstream_ports)
    conf, removed = re.subn(r"(?m)^    server airlock-\d\.airlock:8000;\n", "", conf)
    if removed == 0:
        raise AssertionError("deploy/nginx/airlock.conf: no example `server airlock-N.airlock:8000;` lines to replace")
    conf = conf.replace(anchors[0], anchors[0] + servers)
    conf = conf.replace(anchors[1], f"listen 127.0.0.1:{listen_port};")
    conf = conf.replace(anchors[2], anchors[2] + location_extra)
    return conf


class Nginx:
    """A real nginx (in the foreground, its own prefix in a temporary directory) serving
    render_nginx_conf(upstream_ports, ...) on a free loopback port; stop() ends it."""

    def __init__(self, upstream_ports, location_extra="", timeout=20):
        binary = need_tool("nginx", "nginx-light")
        self.tmp = tempfile.TemporaryDirectory(prefix="airlock-nginx-")
        self.port = free_port()
        conf = render_nginx_conf(upstream_ports, self.port, location_extra)
        os.makedirs(os.path.join(self.tmp.name, "logs"))
        main = os.path.join(self.tmp.name, "nginx.conf")
        with open(main, "w") as f:
            f.write("daemon off; master_process off; pid nginx.pid; error_log stderr;\nevents {}\n"
                    "http {\n access_log off;\n client_body_temp_path body; proxy_temp_path proxy;\n"
                    + conf + "}\n")
        # nginx logs to a file (a pipe nobody reads could fill and stall it).
        self.error_log = os.path.join(self.tmp.name, "error.log")
        with open(self.error_log, "wb") as log:
            self.proc = subprocess.Popen([binary, "-p", self.tmp.name, "-c", main],
                                         stdout=subprocess.DEVNULL, stderr=log)
        deadline = time.monotonic() + timeout
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise AssertionError("nginx did not start: " + self.stderr)
                time.sleep(0.05)

    def stop(self):
        """Ends nginx (SIGTERM, then SIGKILL after 20 s) and removes its prefix; keeps its
        error log in self.stderr."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.tmp is not None:
            with open(self.error_log, "rb") as f:
                self.stderr = f.read().decode(errors="replace")
            self.tmp.cleanup()
            self.tmp = None
