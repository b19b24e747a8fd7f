#!/usr/bin/env python3
"""The system calls one warm run costs the server and its zygotes, counted by strace.

Attaches `strace -c` to a running airlock (every thread of the server, following the threads
it starts; and, in a second strace, every zygote of its tree without following their runs),
sends n POST /v1/execute `print(1)` on c keep-alive connections, waits for the pool to refill,
detaches and prints each table's calls per run, largest first. strace slows what it traces
(each call stops the thread twice), so this counts calls, not time: read the CPU per run in
bench/cpu_per_run.py. The runs themselves (their init and program) are not traced; their
faults and CPU are in bench/cpu_per_run.py's rows.

    bench/server_syscalls.py --url http://127.0.0.1:8000 [--profile minimal] [-n 300] [-c 8] [--json F]

Run as root on the server's host (strace attaches by pid; the server is found by its port).
Standard library and strace only.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cpu_per_run import closed_loop, listening_pid, write_json
from sessions import Client  # one keep-alive connection, retried once (bench/sessions.py)


def children(pid):
    """The live child processes of pid."""
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(name))
            except OSError:
                pass
    return out


def attach(pids, follow, out):
    """strace -c on every thread of pids (follow: and on the processes and threads they start)."""
    cmd = ["strace", "-c", "-U", "calls,errors,name", "-o", out]
    if follow:
        cmd.append("-f")
    for pid in pids:
        for tid in os.listdir(f"/proc/{pid}/task"):
            cmd += ["-p", tid]
    proc = subprocess.Popen(cmd, stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # attached (strace stops and resumes each thread)
    return proc


def table(path, n):
    """strace -c's summary at path as {name: [calls per run, errors per run]}."""
    rows = {}
    with open(path) as f:
        for line in f:
            cols = line.split()
            if len(cols) >= 2 and cols[0].isdigit() and cols[-1] != "total":
                calls, name = int(cols[0]), cols[-1]
                errors = int(cols[1]) if len(cols) == 3 else 0
                rows[name] = [calls / n, errors / n]
    return dict(sorted(rows.items(), key=lambda kv: -kv[1][0]))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:8000", help="an airlock with its warm pool")
    ap.add_argument("--token", default=os.environ.get("AIRLOCK_TOKEN", ""))
    ap.add_argument("--profile", default="minimal")
    ap.add_argument("-n", type=int, default=300)
    ap.add_argument("-c", type=int, default=8)
    ap.add_argument("--json", help="write the raw results here")
    args = ap.parse_args()

    server = listening_pid(args.url)
    if server is None:
        raise SystemExit(f"no process of this host listens on {args.url}")
    body = {"code": "print(1)", "profile": args.profile}
    clients = [Client(args.url, args.token) for _ in range(args.c)]
    errors = []
    closed_loop(clients, body, 20, errors)  # connections open, pool warm
    time.sleep(1.0)
    zygotes = children(server)
    tmp = tempfile.mkdtemp()
    tracers = [attach([server], True, os.path.join(tmp, "server")),
               attach(zygotes, False, os.path.join(tmp, "zygotes"))]
    try:
        closed_loop(clients, body, args.n, errors)
        time.sleep(1.5)  # the pool refills: each run taken is replaced, its fork in the count
    finally:
        for t in tracers:
            t.send_signal(signal.SIGINT)
            t.wait(timeout=60)
    if errors:
        raise SystemExit(f"{len(errors)} wrong answers from {args.url}, e.g. {errors[0]}")
    out = {"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "profile": args.profile, "n": args.n,
           "c": args.c, "uname": os.uname().release,
           "server": table(os.path.join(tmp, "server"), args.n),
           "zygotes": table(os.path.join(tmp, "zygotes"), args.n)}
    for name in ("server", "zygotes"):
        rows = out[name]
        total = sum(r[0] for r in rows.values())
        print(f"\n{name}: {total:.1f} system calls per warm run ({args.profile}, n={args.n}, c={args.c})\n")
        print("| call | per run | failed per run |")
        print("|---|---:|---:|")
        for call, (calls, failed) in rows.items():
            if calls >= 0.05:
                print(f"| {call} | {calls:.2f} | {failed:.2f} |" if failed else f"| {call} | {calls:.2f} | |")
    write_json(args.json, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
