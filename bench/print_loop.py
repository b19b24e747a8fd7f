#!/usr/bin/env python3
"""What line-buffered output costs a print loop (issue 25): a run's stdout and stderr are
line-buffered, so that what it printed survives a kill; Python's own stdout is block-buffered
when it is not a terminal.

Each request runs, in one sandbox, the same loop of N `print(i)` twice, once with stdout
block-buffered (8 KiB, Python's default for a pipe) and once line-buffered (airlock's), in an
order that alternates between requests, and times each loop inside the run
(time.perf_counter, stdout flushed at the end of each). Both loops write to the same pipe, which
the same server reads, so the difference is the buffering alone: one write(2) per line instead
of one per 8 KiB, and the server's reads that follow. Also reported: the wall time of the whole
request (client side) and its CPU (usage.cpu_ms), which hold both loops; and the floor: the same
two loops in a bare `python3` on the host writing into a pipe that `cat` drains (no sandbox, no
server).

The output goes past the profile's output cap (50 KiB in the shipped profiles: the rest is read
and dropped, as for any run); --profile names another profile (one with a larger cap keeps it).

    bench/print_loop.py --url http://127.0.0.1:8000 [-n 20] [--prints 10000,100000] [--json F]
"""

import argparse
import ast
import json
import statistics
import sys
import time

from sessions import Client  # one keep-alive connection, retried once (bench/sessions.py)

CODE = """\
import sys, time
def loop(n, line):
    sys.stdout.reconfigure(line_buffering=line)
    t = time.perf_counter()
    for i in range(n):
        print(i)
    sys.stdout.flush()
    return (time.perf_counter() - t) * 1000
order = {order!r}
times = {{}}
for line in order:
    times["line" if line else "block"] = loop({n}, line)
sys.stdout.reconfigure(line_buffering=True)
times
"""


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, int(round(p / 100.0 * len(xs) + 0.5)) - 1))]


def floor(n_prints, runs):
    """The same loops on the host: python3 into a pipe that cat drains (the times on stderr)."""
    import subprocess

    block, line = [], []
    for i in range(runs + 2):
        order = [False, True] if i % 2 == 0 else [True, False]
        code = CODE.format(n=n_prints, order=order).replace("\ntimes\n", "\nprint(repr(times), file=sys.stderr)\n")
        with open("/dev/null", "wb") as null:
            cat = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=null)
            p = subprocess.run(["/usr/bin/python3", "-I", "-S", "-c", code], stdout=cat.stdin,
                               stderr=subprocess.PIPE, text=True, timeout=120)
            cat.stdin.close()
            cat.wait()
        if p.returncode != 0:
            sys.exit(f"floor failed: {p.stderr[-400:]}")
        times = ast.literal_eval(p.stderr.strip())
        if i >= 2:
            block.append(times["block"])
            line.append(times["line"])
    return {"prints": n_prints, "runs": runs, "block_ms": block, "line_ms": line}


def measure(url, profile, n_prints, runs):
    c = Client(url)
    block, line, wall, cpu = [], [], [], []
    for i in range(runs + 2):
        order = [False, True] if i % 2 == 0 else [True, False]
        code = CODE.format(n=n_prints, order=order)
        t = time.perf_counter()
        status, payload = c.request("POST", "/v1/execute", {"code": code, "profile": profile, "timeout": 60})
        dt = (time.perf_counter() - t) * 1000
        body = json.loads(payload)
        if status != 200 or body.get("exit_code") != 0 or not body.get("result"):
            sys.exit(f"wrong answer: {status} {json.dumps(body)[:600]}")
        times = ast.literal_eval(body["result"])  # the cell's last expression: a dict of two floats
        if i < 2:
            continue  # warm-up
        block.append(times["block"])
        line.append(times["line"])
        wall.append(dt)
        cpu.append(body["usage"]["cpu_ms"])
    return {"prints": n_prints, "runs": runs, "profile": profile, "mode": body["isolation"].get("mode"),
            "block_ms": block, "line_ms": line, "wall_ms": wall, "cpu_ms": cpu}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:8000")
    ap.add_argument("-n", type=int, default=20, help="measured requests per size (2 more are warm-up)")
    ap.add_argument("--prints", default="10000,100000", help="loop lengths, comma-separated")
    ap.add_argument("--profile", default="general")
    ap.add_argument("--json", help="write the raw numbers here")
    args = ap.parse_args()
    rows = []
    print(f"{'prints':>8} {'mode':>5} | {'block p50':>9} {'line p50':>9} {'line/block':>10} "
          f"{'per print':>10} | {'request p50':>11} {'cpu p50':>8}", flush=True)
    for n in [int(x) for x in args.prints.split(",")]:
        f = floor(n, args.n)
        b, l = statistics.median(f["block_ms"]), statistics.median(f["line_ms"])
        print(f"{n:>8} {'floor':>5} | {b:>7.1f}ms {l:>7.1f}ms {l / b:>9.2f}x {(l - b) * 1000 / n:>8.2f}us |")
        r = measure(args.url, args.profile, n, args.n)
        r["floor"] = f
        rows.append(r)
        b, l = statistics.median(r["block_ms"]), statistics.median(r["line_ms"])
        print(f"{n:>8} {r['mode']:>5} | {b:>7.1f}ms {l:>7.1f}ms {l / b:>9.2f}x {(l - b) * 1000 / n:>8.2f}us | "
              f"{statistics.median(r['wall_ms']):>9.1f}ms {statistics.median(r['cpu_ms']):>6.0f}ms")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
