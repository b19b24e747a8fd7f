#!/usr/bin/env python3
"""Measures sessions (issue 10) against the requests they are compared with, in one run:

  rejected        POST /v1/execute of `import socket` (400, no process): an HTTP round trip
  oneshot         POST /v1/execute of `print(1)` (a warm one-shot run)
  create          POST /v1/sessions, timed alone (then DELETE, untimed; c=1 only)
  call            POST /v1/sessions/{id}/execute of `x = x + 1` in a live session (each
                  worker has its own session, made before the clock starts)
  peer accumulated (with --peer): the fips-agents sidecar has no sessions, so an agent resends
                  everything each call: call k runs `x = 0` plus k lines of `x = x + 1`

Closed loop per worker, keep-alive connection per worker, latency from just before the request
is written to when its body is read. Targets (DESIGN §5, issue 10): a call in a live session
costs at most 3x a `rejected` request at c=1 (p50); creating a session at most a warm one-shot
`print(1)` (p50).

    bench/sessions.py --url http://127.0.0.1:8000 -n 300 [--peer http://127.0.0.1:8100] [--json F]
"""

import argparse
import http.client
import json
import os
import sys
import threading
import time
import urllib.parse


def pct(xs, p):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = max(0, min(len(xs) - 1, int(round(p / 100 * len(xs) + 0.5)) - 1))
    return xs[k]


class Client:
    def __init__(self, url, token=""):
        u = urllib.parse.urlsplit(url)
        self.host, self.port = u.hostname, u.port or 80
        self.headers = {"Content-Type": "application/json"}
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        self.conn = None

    def request(self, method, path, body=None):
        for attempt in range(2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=120)
            try:
                data = None if body is None else json.dumps(body)
                self.conn.request(method, path, body=data, headers=self.headers)
                resp = self.conn.getresponse()
                payload = resp.read()
                return resp.status, payload
            except (OSError, http.client.HTTPException):
                self.conn.close()
                self.conn = None
                if attempt:
                    raise
        raise AssertionError("unreachable")


def measure(clients, n, op):
    """Runs `op(client, i)` n times spread over the clients (closed loop); returns latencies (ms)
    of the calls that returned True, the wall time and the error count."""
    lat, errors = [], [0]
    lock = threading.Lock()
    counter = iter(range(n))

    def worker(c):
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                return
            t0 = time.perf_counter()
            ok = op(c, i)
            dt = (time.perf_counter() - t0) * 1000
            with lock:
                if ok:
                    lat.append(dt)
                else:
                    errors[0] += 1

    threads = [threading.Thread(target=worker, args=(c,)) for c in clients]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return lat, time.perf_counter() - start, errors[0]


def summary(name, c, lat, wall, errors):
    return {"workload": name, "c": c, "n": len(lat), "errors": errors, "p50": pct(lat, 50),
            "p90": pct(lat, 90), "p99": pct(lat, 99), "req_s": len(lat) / wall if wall else 0}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:8000")
    ap.add_argument("--token", default=os.environ.get("AIRLOCK_TOKEN", ""))
    ap.add_argument("--peer", help="the fips-agents sidecar's URL (minimal profile)")
    ap.add_argument("-n", type=int, default=300, help="measured requests per cell")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--json", help="write the raw results here")
    args = ap.parse_args()

    rows = []

    def rejected(c, i):
        s, b = c.request("POST", "/v1/execute", {"code": "import socket", "profile": "minimal"})
        return s == 400 and b"socket" in b

    def oneshot(c, i):
        s, b = c.request("POST", "/v1/execute", {"code": "print(1)", "profile": "minimal"})
        return s == 200 and json.loads(b)["stdout"] == "1\n"

    for cc in (1, 8):
        clients = [Client(args.url, args.token) for _ in range(cc)]
        measure(clients, args.warmup, rejected)
        rows.append(summary("rejected", cc, *measure(clients, args.n, rejected)))
        measure(clients, args.warmup, oneshot)
        rows.append(summary("oneshot print(1)", cc, *measure(clients, args.n, oneshot)))
        if cc == 1:
            # The create alone is timed (the DELETE after it is not): what an agent waits for
            # before its first call.
            c = clients[0]
            create_lat, errors = [], 0
            t_all = time.perf_counter()
            for i in range(min(args.n, 100) + 5):
                t0 = time.perf_counter()
                s, b = c.request("POST", "/v1/sessions", {"profile": "minimal"})
                dt = (time.perf_counter() - t0) * 1000
                if s != 201:
                    errors += 1
                    continue
                if i >= 5:
                    create_lat.append(dt)
                c.request("DELETE", f"/v1/sessions/{json.loads(b)['id']}")
            rows.append(summary("session create", 1, create_lat, time.perf_counter() - t_all, errors))
        sessions = {}
        for c in clients:
            for _ in range(100):  # the pool refills after the creates above
                s, b = c.request("POST", "/v1/sessions", {"profile": "minimal"})
                if s != 503:
                    break
                time.sleep(0.1)
            if s != 201:
                raise SystemExit(f"cannot create a session: {s} {b[:200]!r}")
            sessions[id(c)] = json.loads(b)["id"]
            c.request("POST", f"/v1/sessions/{sessions[id(c)]}/execute", {"code": "x = 0"})

        def call(c, i):
            s, b = c.request("POST", f"/v1/sessions/{sessions[id(c)]}/execute", {"code": "x = x + 1\nx"})
            return s == 200 and json.loads(b)["result"] is not None

        measure(clients, args.warmup, call)
        rows.append(summary("session call x = x + 1", cc, *measure(clients, args.n, call)))
        for c in clients:
            c.request("DELETE", f"/v1/sessions/{sessions[id(c)]}")

        if args.peer:
            pclients = [Client(args.peer) for _ in range(cc)]
            steps = {}

            def accumulated(c, i):
                k = steps.get(id(c), 0) + 1
                steps[id(c)] = k
                code = "x = 0\n" + "x = x + 1\n" * k + "print(x)\n"
                s, b = c.request("POST", "/execute", {"code": code})
                return s == 200 and json.loads(b)["stdout"] == f"{k}\n"

            measure(pclients, 5, accumulated)
            rows.append(summary("peer: accumulated script", cc, *measure(pclients, min(args.n, 100), accumulated)))

    print(f"{'workload':<28} {'c':>2} {'n':>5} {'err':>4} {'p50 ms':>8} {'p90':>8} {'p99':>8} {'req/s':>8}")
    for r in rows:
        print(f"{r['workload']:<28} {r['c']:>2} {r['n']:>5} {r['errors']:>4} {r['p50']:>8.2f} {r['p90']:>8.2f} "
              f"{r['p99']:>8.2f} {r['req_s']:>8.1f}")
    by = {(r["workload"], r["c"]): r for r in rows}
    call1, rej1 = by[("session call x = x + 1", 1)], by[("rejected", 1)]
    create, one = by[("session create", 1)], by[("oneshot print(1)", 1)]
    ratio_call = call1["p50"] / rej1["p50"]
    ratio_create = create["p50"] / one["p50"]
    print(f"\nsession call / rejected, c=1, p50: {ratio_call:.2f}x (target <= 3x: "
          f"{'met' if ratio_call <= 3 else 'NOT met'})")
    print(f"session create / oneshot print(1), c=1, p50: {ratio_create:.2f}x (target <= 1x: "
          f"{'met' if ratio_create <= 1 else 'NOT met'})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "call_over_rejected": ratio_call, "create_over_oneshot": ratio_create,
                       "loadavg": os.getloadavg()}, f, indent=2)
    return 0 if all(r["errors"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
