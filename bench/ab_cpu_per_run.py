#!/usr/bin/env python3
"""A/B: the CPU one warm run costs on two airlock binaries, interleaved, counted per process.

bench/cpu_per_run.py counts the whole machine's CPU (/proc/stat), which is what a run costs
on a quiet machine, and meaningless on a busy one (a shared CI or build machine). This one
counts only airlock's own processes: the CPU of every process in each server's tree (the
server, its zygotes, their runs and each run's init, which the kernel adds to their reapers'
counts once reaped: utime + stime + cutime + cstime of each live process of the tree), around
a closed loop of POST /v1/execute `print(1)` on c keep-alive connections. Servers A and B are
started side by side with the same flags, and measured in turns (A, B, A, B, ...), so that
what the rest of the machine does weighs on both alike. It prints each round and the median
per run of each, and B/A.

    bench/ab_cpu_per_run.py --a /tmp/airlock-before --b build/src/cli/airlock \\
        [--profile minimal] [-n 1000] [-c 8] [--rounds 5] [--json F]

Run as root from the source tree (profiles/). Standard library only.
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cpu_per_run import closed_loop
from sessions import Client  # one keep-alive connection, retried once (bench/sessions.py)

TICK = os.sysconf("SC_CLK_TCK")


def tree_cpu_s(root):
    """CPU seconds of `root` and every live process below it, each with its reaped children."""
    parent, cpu = {}, {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(name)
        parent[pid] = int(fields[1])
        cpu[pid] = sum(int(x) for x in fields[11:15]) / TICK  # utime stime cutime cstime
    total = 0.0
    for pid in cpu:
        p = pid
        while p in parent and p != root and p > 1:
            p = parent[p]
        if p == root:
            total += cpu[pid]
    return total


def start(binary, port, profile, log):
    cmd = [binary, "serve", "--listen", f"127.0.0.1:{port}", "--profiles", "profiles", "--audit-log", "/dev/null",
           "--pool-size", "4"]
    proc = subprocess.Popen(cmd, stdout=log, stderr=log, start_new_session=True)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            status, _ = Client(f"http://127.0.0.1:{port}", "").request("POST", "/v1/execute",
                                                                       {"code": "print(1)", "profile": profile})
            if status == 200:
                return proc
        except OSError:
            pass
        time.sleep(0.5)
    proc.kill()
    raise SystemExit(f"{binary} did not serve on port {port} within 180 s")


def measure(url, pid, profile, n, c):
    clients = [Client(url, "") for _ in range(c)]
    errors = []
    time.sleep(1.0)  # the pool refills after whatever came before
    t0, w0 = tree_cpu_s(pid), time.monotonic()
    closed_loop(clients, {"code": "print(1)", "profile": profile}, n, errors)
    time.sleep(0.5)  # the last runs' teardown (reaper threads, zygotes reaping)
    t1, w1 = tree_cpu_s(pid), time.monotonic()
    if errors:
        raise SystemExit(f"{len(errors)} wrong answers from {url}, e.g. {errors[0]}")
    return {"cpu_ms_per_run": (t1 - t0) * 1000 / n, "runs_per_s": n / (w1 - w0 - 0.5)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", required=True, help="the airlock binary to compare against")
    ap.add_argument("--b", required=True, help="the airlock binary measured")
    ap.add_argument("--profile", default="minimal")
    ap.add_argument("-n", type=int, default=1000, help="runs per round and binary")
    ap.add_argument("-c", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--port", type=int, default=18731, help="A's port; B's is the next")
    ap.add_argument("--json", help="write the raw results here")
    args = ap.parse_args()

    log = tempfile.TemporaryFile()
    servers = {}
    try:
        for name, binary, port in (("A", args.a, args.port), ("B", args.b, args.port + 1)):
            servers[name] = (start(binary, port, args.profile, log), f"http://127.0.0.1:{port}")
        rounds = {"A": [], "B": []}
        for i in range(args.rounds):
            for name in ("A", "B") if i % 2 == 0 else ("B", "A"):
                proc, url = servers[name]
                r = measure(url, proc.pid, args.profile, args.n, args.c)
                rounds[name].append(r)
                print(f"round {i + 1} {name}: {r['cpu_ms_per_run']:.3f} ms of CPU per run "
                      f"({r['runs_per_s']:.0f} runs/s, load {os.getloadavg()[0]:.1f})", flush=True)
        med = {k: statistics.median(r["cpu_ms_per_run"] for r in v) for k, v in rounds.items()}
        print(f"\nmedian ms of CPU per warm run ({args.profile}, c={args.c}, n={args.n} x {args.rounds}): "
              f"A {med['A']:.3f}, B {med['B']:.3f}, B/A {med['B'] / med['A']:.3f}")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"a": args.a, "b": args.b, "profile": args.profile, "n": args.n, "c": args.c,
                           "rounds": rounds, "median": med, "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                           "nproc": os.cpu_count(), "uname": os.uname().release}, f, indent=1)
    finally:
        for proc, _ in servers.values():
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
    return 0


if __name__ == "__main__":
    sys.exit(main())
