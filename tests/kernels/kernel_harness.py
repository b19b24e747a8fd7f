"""Drives one airlock kernel program directly, as the server does inside a sandbox: fd 3 the
control pipe (call frames), fd 4 the event channel (JSON lines), stdout and stderr pipes.

    with Kernel(["/usr/bin/node", "-e", source, "--", "javascript", "/tmp"]) as k:
        r = k.call("1 + 1")          # r.stdout, r.stderr, r.events, r.result, r.error, r.end
"""

import json
import os
import select
import signal
import subprocess
import time


class CallResult:
    def __init__(self, stdout, stderr, events):
        self.stdout = stdout
        self.stderr = stderr
        self.events = events
        mains = [e for e in events if e.get("type") == "result" and e.get("is_main_result")]
        self.result = mains[-1]["data"].get("text/plain") if mains else None
        errors = [e for e in events if e.get("type") == "error"]
        self.error = errors[-1] if errors else None
        ends = [e for e in events if e.get("type") == "end"]
        self.end = ends[-1] if ends else None

    def __repr__(self):
        return f"CallResult(stdout={self.stdout!r}, stderr={self.stderr!r}, events={self.events!r})"


class Kernel:
    def __init__(self, argv, env=None, cwd="/tmp", pass_fds_extra=None):
        self.control_r, self.control_w = os.pipe()
        self.events_r, self.events_w = os.pipe()
        os.set_blocking(self.events_r, False)
        base = {"PATH": "/usr/bin:/bin", "HOME": cwd, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
        base.update(env or {})
        fds = {3: self.control_r, 4: self.events_w}
        fds.update(pass_fds_extra or {})

        def child_fds():
            # The kernel's fds 3, 4, ... as the sandbox's init gives them.
            tmp = {k: os.dup(v) for k, v in fds.items()}
            for k, v in tmp.items():
                os.dup2(v, k)
                os.set_inheritable(k, True)
            os.setsid()

        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=base, cwd=cwd,
                                     preexec_fn=child_fds, pass_fds=tuple(fds.keys()))
        os.close(self.control_r)
        os.close(self.events_w)
        for f in (self.proc.stdout, self.proc.stderr):
            os.set_blocking(f.fileno(), False)
        self.calls = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        try:
            os.close(self.control_w)
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        os.close(self.events_r)

    def send(self, frame):
        payload = json.dumps(frame).encode()
        os.write(self.control_w, b"C" + len(payload).to_bytes(8, "little") + payload)

    def interrupt(self):
        os.killpg(self.proc.pid, signal.SIGINT)

    def call(self, code, env=None, timeout=60, interrupt_after=None):
        self.calls += 1
        frame = {"frame": "call", "code": code, "call": self.calls}
        if env:
            frame["env"] = env
        self.send(frame)
        out, err, chan = b"", b"", b""
        start = time.monotonic()
        interrupted = False
        while True:
            if interrupt_after is not None and not interrupted and time.monotonic() - start > interrupt_after:
                self.interrupt()
                interrupted = True
            if time.monotonic() - start > timeout:
                raise TimeoutError(f"no end event in {timeout} s: {out!r} {err!r} {chan!r}")
            fds = [self.proc.stdout.fileno(), self.proc.stderr.fileno(), self.events_r]
            ready, _, _ = select.select(fds, [], [], 0.05)
            for fd in ready:
                try:
                    data = os.read(fd, 65536)
                except BlockingIOError:
                    continue
                if fd == fds[0]:
                    out += data
                elif fd == fds[1]:
                    err += data
                else:
                    chan += data
                    if not data:
                        raise EOFError(f"the kernel ended: {out!r} {err!r} {self.proc.poll()}")
            events = [json.loads(l) for l in chan.decode().splitlines() if l.strip()]
            if any(e.get("type") == "end" and e.get("call") == self.calls for e in events):
                # The end event comes after the streams were flushed.
                for f, name in ((self.proc.stdout, "out"), (self.proc.stderr, "err")):
                    try:
                        more = os.read(f.fileno(), 1 << 20)
                    except BlockingIOError:
                        more = b""
                    if name == "out":
                        out += more
                    else:
                        err += more
                return CallResult(out.decode(errors="replace"), err.decode(errors="replace"), events)
