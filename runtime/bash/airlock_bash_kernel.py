"""airlock's bash kernel: one persistent bash in a session's sandbox, driven by this small
program, which speaks the runner's session protocol (runtime/python/airlock_runner.py,
"Sessions"; model/runner_protocol.h) with the server.

Started by the sandbox's init as

    /usr/bin/python3 -I -S -B /proc/self/fd/5 <cwd>

(this file arrives on fd 5, a sealed memfd), with fd 3 the control pipe (calls: b"C", an 8-byte
little-endian length, a JSON frame {"frame":"call","code":str,"call":int,"env":{str:str}}) and
fd 4 the event channel (JSON lines, ASCII). It starts `bash --noprofile --norc` once, whose
stdout and stderr are the kernel's (the cell's output goes straight to the server), and runs
each cell in it with `eval`, so that `cd`, variables, functions and aliases stay for the next
cell. Per call: the cell's output, then {"type":"end","exit_code":<the cell's $?>,"call":n}. A
cell that ends bash (`exit 3`) ends the kernel with bash's status and no end event: the call's
answer says its context ended, and the next call starts a fresh one.

The bash reads the cells from a pipe of its own (fd 5 in bash: the length of each part in
characters on a line, then the part), never from its stdin (/dev/null), so a cell that reads
its input cannot eat the next one; it writes each cell's status on fd 6. The call's "env" is
exported for that call only: a prologue saves each variable and an epilogue puts it back (or
unsets it), in bash itself, as the Python runner does it in Python. Names that are not shell
identifiers are skipped (the server refuses them first); values are single-quoted.

SIGINT from the server reaches the process group: the command running in the cell gets it and
stops; bash, which traps it, goes on with the cell's next command, as a script does. A cell
that keeps running past the server's grace is restarted by the server.

Not a security boundary: the sandbox is. The server treats fd 4 as untrusted.
"""

import json
import os
import re
import signal
import subprocess
import sys

CONTROL, EVENTS = 3, 4
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

# bash's side: reads three parts (prologue, cell, epilogue) per call, runs them, reports $?.
_LOOP = r"""
trap '' PIPE
trap ':' INT
__airlock_part() {
  local n
  IFS= read -r -u 5 n || exit 0
  IFS= read -r -N "$n" -u 5 "$1" || exit 0
}
while :; do
  __airlock_part __airlock_pre
  __airlock_part __airlock_cell
  __airlock_part __airlock_post
  eval "$__airlock_pre"
  eval "$__airlock_cell"
  __airlock_status=$?
  eval "$__airlock_post"
  printf '%s\n' "$__airlock_status" >&6
done
"""


def _quote(value):
    return "'" + value.replace("'", "'\\''") + "'"


def _env_parts(env):
    pre, post = [], []
    for name, value in (env or {}).items():
        if type(name) is not str or type(value) is not str or not _NAME.match(name):
            continue
        value = value.replace("\0", "")
        pre.append(f"if [[ -v {name} ]]; then __airlock_had_{name}=1; __airlock_old_{name}=\"${name}\"; "
                   f"else __airlock_had_{name}=0; fi; export {name}={_quote(value)}")
        post.append(f"if [[ $__airlock_had_{name} == 1 ]]; then export {name}=\"$__airlock_old_{name}\"; "
                    f"else unset {name}; fi; unset __airlock_had_{name} __airlock_old_{name}")
    return "\n".join(pre), "\n".join(post)


def _read_exact(fd, size):
    chunks = []
    while size > 0:
        try:
            data = os.read(fd, min(size, 1 << 20))
        except InterruptedError:
            continue
        if not data:
            return None
        chunks.append(data)
        size -= len(data)
    return b"".join(chunks)


def _next_call():
    head = _read_exact(CONTROL, 9)
    if head is None or head[:1] != b"C":
        return None
    size = int.from_bytes(head[1:], "little")
    if size > 256 << 20:
        return None
    return _read_exact(CONTROL, size)


def _emit(events):
    data = "".join(json.dumps(e, ensure_ascii=True) + "\n" for e in events).encode("ascii")
    while data:
        try:
            n = os.write(EVENTS, data)
        except InterruptedError:
            continue
        except OSError:
            os._exit(0)  # the server is gone
        data = data[n:]


def _part(text):
    # Valid UTF-8, no NUL (bash drops it), and a newline at the end so no part is empty; the
    # length is in characters, as bash's `read -N` counts them in a UTF-8 locale.
    text = text.encode("utf-8", "replace").decode("utf-8").replace("\0", "") + "\n"
    return f"{len(text)}\n{text}".encode("utf-8")


def main(argv):
    cwd = argv[-1] if len(argv) > 1 else "/home/user"
    try:
        os.chdir(cwd)
    except OSError as e:
        sys.stderr.write(f"airlock: the context's working directory {cwd}: {e.strerror}\n")
        return 2
    cells_r, cells_w = os.pipe()
    status_r, status_w = os.pipe()
    # A handler (not SIG_IGN, which bash would inherit and could not trap): the kernel itself
    # ignores the server's SIGINT, bash and the cell's command get theirs.
    signal.signal(signal.SIGINT, lambda *_: None)

    def child_fds():
        os.dup2(cells_r, 5)
        os.dup2(status_w, 6)
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    bash = subprocess.Popen(["/usr/bin/bash", "--noprofile", "--norc", "-c", _LOOP, "airlock-bash"],
                            stdin=subprocess.DEVNULL, pass_fds=(5, 6), preexec_fn=child_fds,
                            close_fds=True, restore_signals=True)
    os.close(cells_r)
    os.close(status_w)
    status = os.fdopen(status_r, "rb", buffering=0)
    while True:
        payload = _next_call()
        if payload is None:
            break
        call = None
        try:
            frame = json.loads(payload)
            call = frame.get("call") if type(frame.get("call")) is int else None
            code = frame.get("code")
            if type(code) is not str:
                raise ValueError("a call frame needs code (a string)")
            pre, post = _env_parts(frame.get("env") if isinstance(frame.get("env"), dict) else None)
        except (ValueError, AttributeError) as e:
            _emit([{"type": "error", "name": "AirlockRunnerError", "value": str(e), "traceback": str(e)},
                   {"type": "end", "exit_code": 2, **({"call": call} if call is not None else {})}])
            continue
        try:
            os.write(cells_w, _part(pre) + _part(code) + _part(post))
        except OSError:
            pass  # bash is gone: its status says how
        line = b""
        while not line.endswith(b"\n"):
            try:
                more = status.read(1)
            except InterruptedError:
                continue
            if not more:
                break
            line += more
        if not line.endswith(b"\n"):
            # bash ended in the cell (exit, a fatal signal): so does the kernel, with its status
            # and no end event, so that the server sees this call end its context (and starts a
            # fresh one for the next), rather than the next call finding it gone.
            code = bash.wait()
            return code if code >= 0 else 128 - code
        end = {"type": "end", "exit_code": int(line.strip() or b"0")}
        if call is not None:
            end["call"] = call
        _emit([end])
    os.close(cells_w)
    bash.wait()
    return 0


if __name__ == "__main__":
    sys.stdout.flush()
    os._exit(main(sys.argv))
