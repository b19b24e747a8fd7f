"""Starts `airlock serve` for end-to-end tests and talks HTTP to it (stdlib only).

    server = AirlockServer(extra_args=["--max-concurrent", "2"])
    server.start()                      # waits for GET /readyz
    status, headers, body = server.post_json("/execute", {"code": "print(1)"})
    server.stop()                       # SIGTERM, waits, returns the exit code

The binary comes from $AIRLOCK_BINARY (CTest sets it). When this host cannot run
sandboxes at all, tests skip, unless AIRLOCK_MUST_WORK=1 (CI), where they fail.
"""

import http.client
import json
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time
import unittest

SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def binary():
    path = os.environ.get("AIRLOCK_BINARY")
    if not path:
        raise unittest.SkipTest("AIRLOCK_BINARY is not set (run through ctest)")
    return path


class AirlockServer:
    def __init__(self, extra_args=None, env=None, profiles_dir=None):
        self.extra_args = list(extra_args or [])
        self.env = dict(os.environ)
        self.env.pop("AIRLOCK_TOKENS", None)
        if env:
            self.env.update(env)
        self.profiles_dir = profiles_dir or os.path.join(SOURCE_DIR, "profiles")
        self.tmp = tempfile.TemporaryDirectory(prefix="airlock-e2e-")
        self.audit_path = os.path.join(self.tmp.name, "audit.jsonl")
        self.proc = None
        self.port = None
        self.stdout_lines = []
        self.stderr_lines = []
        self._readers = []

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self, wait_ready=True, audit_to_stdout=False):
        args = [binary(), "serve", "--listen", "127.0.0.1:0", "--profiles", self.profiles_dir]
        args += ["--audit-log", "-" if audit_to_stdout else self.audit_path]
        args += self.extra_args
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.env)
        first = self.proc.stdout.readline().decode()
        if not first.startswith("airlock: listening on http://"):
            err = self.proc.stderr.read().decode(errors="replace") if self.proc.poll() is not None else ""
            self.proc.kill()
            self.proc.wait()
            self.proc.stdout.close()
            self.proc.stderr.close()
            raise AssertionError(f"server did not start: first line {first!r}; stderr: {err}")
        self.port = int(first.strip().rsplit(":", 1)[1])
        self._readers = [
            threading.Thread(target=self._drain, args=(self.proc.stdout, self.stdout_lines), daemon=True),
            threading.Thread(target=self._drain, args=(self.proc.stderr, self.stderr_lines), daemon=True),
        ]
        for t in self._readers:
            t.start()
        if wait_ready:
            self.wait_ready()
        return self

    @staticmethod
    def _drain(stream, sink):
        for line in iter(stream.readline, b""):
            sink.append(line.decode(errors="replace"))

    def wait_ready(self, timeout=30):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            try:
                status, _, body = self.get("/readyz")
                if status == 200:
                    return
                last = body
                detail = json.loads(body).get("detail", "")
                if "self-test failed" in detail or "self-test ran" in detail:
                    break
            except OSError as e:
                last = str(e)
            time.sleep(0.05)
        self.stop()
        message = f"server not ready: {last!r}; stderr: {''.join(self.stderr_lines)}"
        if os.environ.get("AIRLOCK_MUST_WORK") == "1":
            raise AssertionError(message)
        raise unittest.SkipTest(message)

    def stop(self, sig=signal.SIGTERM, timeout=30):
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for t in self._readers:
            t.join(5)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream and not stream.closed:
                stream.close()
        return self.proc.returncode

    def cleanup(self):
        """Stops the server and fails if it did not drain cleanly (exit code 0, no sanitizer report)."""
        rc = self.stop()
        self.tmp.cleanup()
        err = "".join(self.stderr_lines)
        for marker in ("AddressSanitizer", "LeakSanitizer", "runtime error:"):
            if marker in err:
                raise AssertionError(f"the server reported {marker}:\n{err}")
        if rc not in (0, None):
            raise AssertionError(f"the server exited {rc} after SIGTERM; stderr:\n{err}")

    # -- HTTP ----------------------------------------------------------------------------------

    def connection(self, timeout=60):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def request(self, method, path, body=None, headers=None, timeout=60):
        conn = self.connection(timeout)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            resp = conn.getresponse()
            data = resp.read()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data
        finally:
            conn.close()

    def get(self, path, headers=None):
        return self.request("GET", path, headers=headers)

    def post_json(self, path, payload, headers=None, timeout=60):
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        body = payload if isinstance(payload, (bytes, str)) else json.dumps(payload)
        status, hdrs, data = self.request("POST", path, body=body, headers=h, timeout=timeout)
        return status, hdrs, data

    def execute(self, code, path="/execute", **fields):
        """POST {code, **fields}; returns (status, parsed JSON body)."""
        payload = {"code": code}
        payload.update(fields)
        status, _, data = self.post_json(path, payload)
        return status, json.loads(data)

    def audit_records(self):
        if not os.path.exists(self.audit_path):
            return []
        with open(self.audit_path, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]

    def wait_for_audit(self, predicate, timeout=10):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = [r for r in self.audit_records() if predicate(r)]
            if found:
                return found
            time.sleep(0.05)
        return []


def raw_request(port, data, read=True, timeout=30):
    """Sends raw bytes; returns what the server answered before closing (or the timeout)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(data)
        if not read:
            return b""
        chunks = []
        while True:
            try:
                chunk = s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        s.close()
