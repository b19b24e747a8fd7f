#!/usr/bin/env python3
"""Times the cold path: one `airlock run` per program (a fresh process, fresh
namespaces, a fresh python3), next to the floors of this machine: a bare
`python3 -I -B` and the same inside `unshare`. Stdlib only.

    bench/cold_run.py --airlock build/src/cli/airlock [--runs 50] [--url http://127.0.0.1:8000]

Prints p50/p90/p99 per case in milliseconds, and the airlock-reported
duration_ms (launch to reap, inside the binary) from --json.
"""
import argparse, json, os, shutil, statistics, subprocess, sys, tempfile, time

def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, int(round(p / 100.0 * len(xs) + 0.5)) - 1))]

def time_cmd(argv, runs, stdin_text=None, check_out=None):
    samples = []
    for i in range(runs + 3):
        t = time.perf_counter()
        r = subprocess.run(argv, input=stdin_text, capture_output=True, text=True)
        dt = (time.perf_counter() - t) * 1000
        if r.returncode != 0 or (check_out is not None and r.stdout != check_out):
            sys.exit(f"wrong answer from {argv}: rc={r.returncode} out={r.stdout!r} err={r.stderr[-300:]!r}")
        if i >= 3:  # warm-up runs are not recorded
            samples.append(dt)
    return samples

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--airlock", required=True)
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--url", help="an airlock serve (or the peer) to time POST /execute print(1) against")
    a = ap.parse_args()
    py = "/usr/bin/python3"
    rows = []
    rows.append(("python3 -I -B -c 'print(1)' (no sandbox)", time_cmd([py, "-I", "-B", "-c", "print(1)"], a.runs, check_out="1\n")))
    if shutil.which("unshare") and os.geteuid() == 0:
        rows.append(("unshare -Upmnif + python3", time_cmd(["unshare", "-Upmnif", "--mount-proc", py, "-I", "-B", "-c", "print(1)"], a.runs, check_out="1\n")))
    rows.append(("airlock run - (print(1))", time_cmd([a.airlock, "run", "-"], a.runs, stdin_text="print(1)\n", check_out="1\n")))
    inner = []
    for _ in range(a.runs):
        r = subprocess.run([a.airlock, "run", "--json", "-"], input="print(1)\n", capture_output=True, text=True)
        inner.append(json.loads(r.stdout)["duration_ms"])
    rows.append(("  of which launch..reap (duration_ms)", inner))
    rows.append(("airlock run - (import numpy)", time_cmd([a.airlock, "run", "--memory", "512M", "-"], max(10, a.runs // 5), stdin_text="import numpy\nprint(int(numpy.arange(10).sum()))\n", check_out="45\n")))
    if a.url:
        import http.client, urllib.parse
        u = urllib.parse.urlparse(a.url)
        if u.hostname not in ("127.0.0.1", "localhost", "::1"):
            sys.exit("--url must be a loopback address")
        conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=60)
        samples = []
        for i in range(a.runs + 3):
            t = time.perf_counter()
            conn.request("POST", "/execute", body=json.dumps({"code": "print(1)", "timeout": 10}),
                         headers={"Content-Type": "application/json"})
            r = conn.getresponse(); body = json.loads(r.read())
            dt = (time.perf_counter() - t) * 1000
            if r.status != 200 or body.get("stdout") != "1\n":
                sys.exit(f"wrong answer from {a.url}: {r.status} {body}")
            if i >= 3:
                samples.append(dt)
        rows.append(("HTTP POST /execute print(1), c=1", samples))
    print(f"{'case':45} {'n':>4} {'p50':>8} {'p90':>8} {'p99':>8}  (ms)")
    for name, xs in rows:
        print(f"{name:45} {len(xs):4d} {pct(xs,50):8.1f} {pct(xs,90):8.1f} {pct(xs,99):8.1f}")

if __name__ == "__main__":
    main()
