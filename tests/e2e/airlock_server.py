"""Starts `airlock serve` for end-to-end tests and talks HTTP to it (stdlib only).

    server = AirlockServer(extra_args=["--max-concurrent", "2"])
    server.start()                      # waits for GET /readyz
    status, headers, body = server.post_json("/execute", {"code": "print(1)"})
    server.stop()                       # SIGTERM, waits, returns the exit code

The binary comes from $AIRLOCK_BINARY (CTest sets it). When this host cannot run
sandboxes at all, tests skip, unless AIRLOCK_MUST_WORK=1 (CI), where they fail. Waits whose
length depends on the host (pools filling) are multiplied by $AIRLOCK_TEST_TIMEOUT_SCALE
(default 1; see scaled()).

$AIRLOCK_E2E_MODE picks the execution path every server of the suite uses (CTest registers
each module once per mode):
  cold  `--pool-size 0` is added (unless the test passed its own --pool-size): every run
        gets a fresh sandbox and a fresh python3;
  warm  the default pool: after /readyz answers 200, start() also waits until every pool
        listed in the /readyz body has a ready run, so runs really take the warm path.
  session  the default pool, and every execute() of a test goes through a session instead:
        a fresh session of the request's profile (for /execute without one, minimal, that
        door's default), a first call (`pass`), then the test's
        code as the session's second call (the session is deleted after). Security tests
        run so (CMakeLists.txt lists which modules) show that a session's later calls are
        held exactly as a one-shot run; `isolation.mode` is "session".
  unset whatever the binary does by default; a response without `isolation.mode` is
        tolerated then.
Tests assert the path a run took with `assert_mode(test, body)` (or compare
`body["isolation"]["mode"]` with `expected_mode()`).
"""

import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODES = ("cold", "warm", "session")


def timeout_scale():
    """$AIRLOCK_TEST_TIMEOUT_SCALE (default 1): a factor for the timeouts of waits whose length
    depends on the host (zygotes starting, pools filling). Slow or shared hosts raise it."""
    text = os.environ.get("AIRLOCK_TEST_TIMEOUT_SCALE", "1")
    try:
        scale = float(text)
    except ValueError:
        raise AssertionError(f"AIRLOCK_TEST_TIMEOUT_SCALE={text!r}: expected a positive number") from None
    if not scale > 0:
        raise AssertionError(f"AIRLOCK_TEST_TIMEOUT_SCALE={text!r}: expected a positive number")
    return scale


def scaled(seconds):
    """`seconds` times timeout_scale()."""
    return seconds * timeout_scale()


def trivial_run_seconds(server, profile="minimal", runs=3, headers=None):
    """What a run costs on this host now: the median wall time of `runs` one-shot trivial runs
    (`print(1)` of `profile` on `server`, through POST /v1/execute with `headers`, its pool made
    ready first), sandbox set-up, interpreter and answer included. In session mode, through a
    session (a session made, a first call, then the run as its second call), as the tests' runs go.

    A verdict that rests on how soon airlock answered scales its bound with this (paced()):
    another process keeping the cores busy slows the bound as it slows the run, while a hang (no
    answer at all, or one at a limit's end instead of at once) still fails. The failure message
    says what was measured."""
    server.wait_pools_ready(profiles=[profile])
    took = []
    for _ in range(runs):
        start = time.monotonic()
        if expected_mode() == "session" and headers is None:
            status, body = server.execute("print(1)\n", path="/v1/execute", profile=profile, timeout=30)
        else:
            status, _, data = server.post_json("/v1/execute", {"code": "print(1)\n", "profile": profile,
                                                               "timeout": 30}, headers=headers)
            body = json.loads(data) if status == 200 else data[:300]
        took.append(time.monotonic() - start)
        if status != 200 or not isinstance(body, dict) or body.get("stdout") != "1\n":
            raise AssertionError(f"a trivial run failed: {status} {body!r}")
    return sorted(took)[len(took) // 2]


def paced(floor_s, pace_s, factor=4):
    """A bound of `floor_s` seconds on a quiet host, plus `factor` trivial runs of this host now
    (trivial_run_seconds)."""
    return floor_s + factor * pace_s


def assert_paced(test, elapsed_s, floor_s, pace_s, what, factor=4):
    """Asserts that `what` took less than paced(floor_s, pace_s, factor), saying what was measured."""
    bound = paced(floor_s, pace_s, factor)
    test.assertLess(elapsed_s, bound, f"{what} took {elapsed_s:.2f} s, over its bound of {bound:.2f} s "
                                      f"({floor_s} s + {factor} x {pace_s:.2f} s, what a print(1) run takes here now)")


# How long the warm pools may take to have a ready run (zygotes start, import, fork): 120 s
# times $AIRLOCK_TEST_TIMEOUT_SCALE.
POOLS_READY_TIMEOUT = 120


def binary():
    path = os.environ.get("AIRLOCK_BINARY")
    if not path:
        raise unittest.SkipTest("AIRLOCK_BINARY is not set (run through ctest)")
    return path


def expected_mode():
    """'cold', 'warm' or 'session' as $AIRLOCK_E2E_MODE says; None when it is unset."""
    mode = os.environ.get("AIRLOCK_E2E_MODE") or None
    if mode is not None and mode not in MODES:
        raise AssertionError(f"AIRLOCK_E2E_MODE={mode!r}: expected one of {MODES}")
    return mode


_pool_flag_cache = {}


def supports_pool_size():
    """Whether `airlock serve` knows --pool-size (binaries from before the warm path do not)."""
    path = binary()
    if path not in _pool_flag_cache:
        try:
            p = subprocess.run([path, "serve", "--help"], capture_output=True, timeout=30)
            _pool_flag_cache[path] = b"--pool-size" in p.stdout + p.stderr
        except (OSError, subprocess.TimeoutExpired):
            _pool_flag_cache[path] = False
    return _pool_flag_cache[path]


def assert_server_alive(test, server):
    """Asserts that `server` is still running and answers /healthz (after an attack)."""
    test.assertIsNone(server.proc.poll(), "the server died")
    status, _, _ = server.get("/healthz")
    test.assertEqual(status, 200)


def assert_mode(test, body):
    """Asserts that a /v1/execute response took the path $AIRLOCK_E2E_MODE asks for.

    A missing `isolation.mode` is tolerated when the mode is unset, and in cold mode with a
    binary that has no warm path at all (no --pool-size), where every run is cold anyway."""
    mode = expected_mode()
    actual = body.get("isolation", {}).get("mode")
    if actual is None and (mode is None or (mode == "cold" and not supports_pool_size())):
        return
    if mode is None:
        test.assertIn(actual, MODES, body.get("isolation"))
        return
    if actual is None:
        test.fail(f"AIRLOCK_E2E_MODE={mode} but the response has no isolation.mode (a binary without the "
                  f"warm path?); isolation: {body.get('isolation')}")
    test.assertEqual(actual, mode, f"the run took the {actual!r} path; isolation: {body.get('isolation')}")


def v1_to_compat(body):
    """A /v1 response in the fips /execute shape (what a compat test expects)."""
    err = body.get("error")
    if err:
        error = f"{err['name']}: {err['value']}" if err.get("value") else err["name"]
    elif body.get("kill_reason"):
        error = f"Killed ({body['kill_reason']}): {body.get('kill_detail', '')}"
    else:
        error = None
    stderr = body["stderr"]
    if body.get("timed_out"):
        if stderr and not stderr.endswith("\n"):
            stderr += "\n"
        stderr += "Execution timed out"
    return {"stdout": body["stdout"], "stderr": stderr,
            "exit_code": -body["signal"] if body.get("signal") else body["exit_code"],
            "timed_out": body["timed_out"], "result": body.get("result"), "error": error,
            "isolation": body.get("isolation", {})}


def metric_value(text, name, **labels):
    """The sum of every sample of `name` in Prometheus text whose labels include `labels`;
    None when there is no such sample."""
    total = None
    for line in text.splitlines():
        if not line.startswith(name) or line.startswith("#"):
            continue
        head, _, value = line.rpartition(" ")
        metric, _, label_text = head.partition("{")
        if metric != name:
            continue
        have = {}
        for part in label_text.rstrip("}").split(","):
            if "=" in part:
                k, _, v = part.partition("=")
                have[k.strip()] = v.strip().strip('"')
        if all(have.get(k) == str(v) for k, v in labels.items()):
            total = (total or 0.0) + float(value)
    return total


def plant_host_secret(prefix):
    """A world-readable file in a world-searchable temp directory of the host, holding a random
    token: only the sandbox's mount namespace and Landlock stand between a run and it.
    Returns (directory, path, token); the caller removes the directory."""
    import secrets

    d = tempfile.mkdtemp(prefix=prefix)
    os.chmod(d, 0o755)
    token = "TOP-SECRET-" + secrets.token_hex(6)
    path = os.path.join(d, "secret.txt")
    with open(path, "w") as f:
        f.write(token)
    os.chmod(path, 0o644)
    return d, path, token


def host_processes():
    """Every process of the host: {pid: {"ppid", "uid", "comm", "cmdline", "state"}} (best
    effort: a process may exit while this reads). `state` is /proc/PID/status's letter: "Z" for
    a zombie (dead, its exit not yet reaped: it holds nothing but its pid; its cmdline reads
    empty)."""
    procs = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as f:
                status = dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
            procs[int(entry)] = {"ppid": int(status["PPid"].strip()),
                                 "uid": int(status["Uid"].split()[0]),
                                 "comm": status["Name"].strip(),
                                 "cmdline": cmdline,
                                 "state": status.get("State", "?").strip()[:1]}
        except (OSError, KeyError, ValueError):
            continue
    return procs


def copy_profiles(dest, extra=None):
    """Fills the directory `dest` with the source tree's profiles plus `extra` ({name: YAML
    text}, each written as NAME.yaml) and returns it: a profiles directory for a server that
    needs profiles of its own beside the built-in ones."""
    src = os.path.join(SOURCE_DIR, "profiles")
    for name in os.listdir(src):
        if name.endswith(".yaml"):
            shutil.copy(os.path.join(src, name), dest)
    for name, text in (extra or {}).items():
        with open(os.path.join(dest, name + ".yaml"), "w") as f:
            f.write(text)
    return dest


def descendants(pid, procs=None):
    """Host pids whose ancestors include `pid` (from host_processes())."""
    procs = procs if procs is not None else host_processes()
    children = {}
    for p, info in procs.items():
        children.setdefault(info["ppid"], []).append(p)
    found, todo = [], list(children.get(pid, []))
    while todo:
        p = todo.pop()
        found.append(p)
        todo.extend(children.get(p, []))
    return sorted(found)


class AirlockServer:
    def __init__(self, extra_args=None, env=None, profiles_dir=None, wrapper=None):
        self.extra_args = list(extra_args or [])
        # A command the server runs under (e.g. ["unshare", "--mount", ...]): it must exec
        # the rest of its arguments, so that self.proc.pid is the server's pid.
        self.wrapper = list(wrapper or [])
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
        if (expected_mode() == "cold" and not any(a.startswith("--pool-size") for a in self.extra_args)
                and supports_pool_size()):
            args += ["--pool-size", "0"]
        args = self.wrapper + args + self.extra_args
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

    def wait_ready(self, timeout=30 + POOLS_READY_TIMEOUT):
        # /readyz answers 200 once the self-test passed and each door's default profile's pool
        # had a warm run (or cannot make one): its pools may take a while on a busy host.
        deadline = time.monotonic() + scaled(timeout)
        last = None
        while time.monotonic() < deadline:
            try:
                status, _, body = self.get("/readyz")
                if status == 200:
                    if expected_mode() == "warm":
                        try:
                            took = self.wait_pools_ready()
                        except AssertionError:
                            self.stop()
                            raise
                        print(f"\n[ host    ] the warm pools had a ready run {took:.1f} s after /readyz "
                              f"(limit {scaled(POOLS_READY_TIMEOUT):.0f} s)", file=sys.stderr)
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

    def readyz(self):
        """(status, parsed body) of GET /readyz."""
        status, _, body = self.get("/readyz")
        return status, json.loads(body)

    def pools(self):
        """The `pools` object of /readyz; None when the binary reports none (no warm path)."""
        return self.readyz()[1].get("pools")

    def wait_pools_ready(self, timeout=None, profiles=None, full=False):
        """Waits until every pool in /readyz (or those of `profiles`) has a ready run (with
        `full`, as many as its target: a baseline of the server's processes and cgroups taken
        before is short of the refills still on their way); does nothing when /readyz lists no
        pools (--pool-size 0, or a binary without a warm path).
        `timeout` defaults to POOLS_READY_TIMEOUT and is scaled by $AIRLOCK_TEST_TIMEOUT_SCALE.
        Returns how many seconds it waited."""
        timeout = scaled(POOLS_READY_TIMEOUT if timeout is None else timeout)
        start = time.monotonic()
        deadline = start + timeout
        pools = None
        while True:
            status, body = self.readyz()
            pools = body.get("pools")
            if not pools:
                return time.monotonic() - start
            wanted = {name: p for name, p in pools.items()
                      if (profiles is None or name in profiles) and p.get("target", 1) > 0}
            if status == 200 and all(p.get("ready", 0) >= (p.get("target", 1) if full else 1)
                                     for p in wanted.values()):
                return time.monotonic() - start
            if time.monotonic() > deadline:
                raise AssertionError(f"warm pools not ready after {timeout:.0f} s: {body}; stderr: "
                                     f"{''.join(self.stderr_lines)[-4000:]}")
            time.sleep(0.05)

    def metrics(self):
        status, _, data = self.get("/metrics")
        if status != 200:
            raise AssertionError(f"GET /metrics answered {status}: {data[:200]!r}")
        return data.decode()

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
        except (ConnectionError, http.client.RemoteDisconnected) as e:
            self.raise_if_gone(f"{method} {path}", e)
            raise
        finally:
            conn.close()

    def raise_if_gone(self, what, cause):
        """When the server process has ended, raises an AssertionError saying how (exit code or
        signal) and how its stderr ends, so that the first test to meet a dead server says why
        it died, not only "connection refused"."""
        if self.proc is None:
            return
        try:
            rc = self.proc.wait(2)
        except subprocess.TimeoutExpired:
            return  # alive: the error is the connection's own
        how = f"was killed by {signal.Signals(-rc).name}" if rc < 0 else f"exited with code {rc}"
        err = "".join(self.stderr_lines)[-6000:]
        raise AssertionError(f"the server {how} (pid {self.proc.pid}) before it answered {what} "
                             f"({cause!r}); its stderr ends:\n{err}") from cause

    def get(self, path, headers=None):
        return self.request("GET", path, headers=headers)

    def post_json(self, path, payload, headers=None, timeout=60):
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        body = payload if isinstance(payload, (bytes, str)) else json.dumps(payload)
        status, hdrs, data = self.request("POST", path, body=body, headers=h, timeout=timeout)
        return status, hdrs, data

    def execute(self, code, path="/execute", **fields):
        """POST {code, **fields}; returns (status, parsed JSON body). In session mode (module
        docstring) the code runs as the second call of a fresh session instead."""
        if expected_mode() == "session" and path in ("/execute", "/v1/execute"):
            return self.execute_in_session(code, compat=path == "/execute", **fields)
        payload = {"code": code}
        payload.update(fields)
        status, _, data = self.post_json(path, payload)
        return status, json.loads(data)

    def execute_in_session(self, code, compat=False, timeout=None, **fields):
        """Runs `code` as the second call of a new session made with `fields` (profile,
        limits); returns (status, body) of that call, in the /execute shape when `compat`."""
        create = {k: v for k, v in fields.items() if k in ("profile", "limits", "language")}
        if compat:
            create.setdefault("profile", "minimal")  # /execute's default, which a session does not have
        deadline = time.monotonic() + scaled(60)
        while True:
            status, _, data = self.post_json("/v1/sessions", create)
            if status != 503 or time.monotonic() > deadline:
                break
            time.sleep(0.2)  # no warm run ready yet
        if status != 201:
            return status, json.loads(data)
        sid = json.loads(data)["id"]
        try:
            status, _, data = self.post_json(f"/v1/sessions/{sid}/execute", {"code": "pass"})
            if status != 200:
                raise AssertionError(f"the first call of a session failed: {status} {data!r}")
            call = {"code": code}
            if timeout is not None:
                call["timeout"] = timeout
            status, _, data = self.post_json(f"/v1/sessions/{sid}/execute", call,
                                             timeout=60 + (timeout or 10) * 2)
            body = json.loads(data)
            if status == 200 and compat:
                body = v1_to_compat(body)
            elif status == 400 and compat and isinstance(body.get("violations"), list):
                # The fips shape of a rejection: one "Line N: message" string each.
                body["violations"] = [f"Line {v['line']}: {v['message']}" if isinstance(v, dict) else v
                                      for v in body["violations"]]
            return status, body
        finally:
            self.request("DELETE", f"/v1/sessions/{sid}")

    def audit_records(self):
        if not os.path.exists(self.audit_path):
            return []
        with open(self.audit_path, encoding="utf-8") as f:
            # A record the server is still appending (no newline yet) is read next time: a
            # reader can see a write half done.
            return [json.loads(line) for line in f if line.strip() and line.endswith("\n")]

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
