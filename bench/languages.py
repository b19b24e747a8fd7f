#!/usr/bin/env python3
"""Cold start of each language (issue 14): airlock's run next to the bare interpreter, in one run.

For python, javascript and bash it times, one request at a time (c=1):

  bare        the interpreter on the host, no sandbox: `python3 -I -S -c 'print(1)'`,
              `node -e 'console.log(1)'`, `bash -c 'echo 1'` (a fresh process each time)
  airlock     POST /v1/execute of the same one-liner with that `language` under the `general`
              profile, to a running `airlock serve` (--url); JavaScript and bash always take
              the cold path; python takes the warm path unless the server runs --pool-size 0
              (the response's isolation.mode is recorded)

and reports p50/p90 wall milliseconds, airlock's per-run CPU from the response (usage.cpu_ms,
the run's cgroup) and the difference between airlock and bare at p50: what the sandbox and the
runner add. Standard library only.

    bench/languages.py --url http://127.0.0.1:8000 [--cold-url http://127.0.0.1:8001] [-n 40] [--json F]
"""

import argparse
import json
import statistics
import subprocess
import sys
import time

from sessions import Client  # one keep-alive connection, retried once (bench/sessions.py)

CASES = {
    "python": (["/usr/bin/python3", "-I", "-S", "-c", "print(1)"], "print(1)"),
    "javascript": (["/usr/bin/node", "-e", "console.log(1)"], "console.log(1)"),
    "bash": (["/usr/bin/bash", "-c", "echo 1"], "echo 1"),
}


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, int(round(p / 100.0 * len(xs) + 0.5)) - 1))]


def time_bare(argv, n):
    out = []
    for i in range(n + 3):
        t = time.perf_counter()
        r = subprocess.run(argv, capture_output=True, text=True)
        dt = (time.perf_counter() - t) * 1000
        if r.returncode != 0 or r.stdout != "1\n":
            sys.exit(f"wrong answer from {argv}: rc={r.returncode} out={r.stdout!r} err={r.stderr[-300:]!r}")
        if i >= 3:
            out.append(dt)
    return out


def time_airlock(url, language, code, n):
    c = Client(url)
    wall, cpu, modes = [], [], set()
    for i in range(n + 3):
        t = time.perf_counter()
        status, payload = c.request("POST", "/v1/execute", {"code": code, "language": language, "profile": "general"})
        dt = (time.perf_counter() - t) * 1000
        body = json.loads(payload)
        if status != 200 or body.get("stdout") != "1\n":
            sys.exit(f"wrong answer from airlock ({language}): {status} {str(body)[:400]}")
        if i >= 3:
            wall.append(dt)
            cpu.append(body["usage"]["cpu_ms"])
            modes.add(body["isolation"]["mode"])
    return wall, cpu, sorted(modes)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True, help="airlock serve (its default pool)")
    ap.add_argument("--cold-url", help="a second airlock serve started with --pool-size 0 (python's cold path)")
    ap.add_argument("-n", type=int, default=40)
    ap.add_argument("--json", help="write the raw figures here")
    a = ap.parse_args()
    rows = []
    for language, (argv, code) in CASES.items():
        bare = time_bare(argv, a.n)
        targets = [(a.url, "")]
        if language == "python" and a.cold_url:
            targets.append((a.cold_url, " (--pool-size 0)"))
        for url, note in targets:
            wall, cpu, modes = time_airlock(url, language, code, a.n)
            rows.append({"language": language + note, "modes": modes,
                         "bare_p50_ms": statistics.median(bare), "bare_p90_ms": pct(bare, 90),
                         "airlock_p50_ms": statistics.median(wall), "airlock_p90_ms": pct(wall, 90),
                         "airlock_cpu_ms_p50": statistics.median(cpu),
                         "added_p50_ms": statistics.median(wall) - statistics.median(bare)})
    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    print(f"cold start per language, c=1, n={a.n}, load {load}")
    print(f"{'language':<28} {'path':<8} {'bare p50':>9} {'p90':>7} {'airlock p50':>12} {'p90':>7} "
          f"{'run CPU':>8} {'added':>7}")
    for r in rows:
        print(f"{r['language']:<28} {','.join(r['modes']):<8} {r['bare_p50_ms']:>8.1f}ms {r['bare_p90_ms']:>6.1f} "
              f"{r['airlock_p50_ms']:>11.1f}ms {r['airlock_p90_ms']:>6.1f} {r['airlock_cpu_ms_p50']:>6.0f}ms "
              f"{r['added_p50_ms']:>6.1f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"n": a.n, "load": float(load), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
