#!/usr/bin/env python3
"""The E2B adapter's cost (issue 12): the same code through each door of one server, in turns.

  e2b          POST :49999/execute (E2B's NDJSON stream, the SDK's request) in the default context
  session      POST /v1/sessions/{id}/execute, streamed (Accept: application/x-ndjson): the same
               session call without the adapter
  session_json the same call answered as one JSON object
  oneshot      POST /v1/execute (a fresh warm sandbox per call; what E2B's state costs against)

Closed loop, c=1, one keep-alive connection per door, the doors interleaved call by call (so
load drifts hit all alike); latency from just before the request is written to when the whole
body (through end_of_execution) is read.

    airlock serve --e2b --listen 127.0.0.1:8000 &
    bench/e2b.py --url http://127.0.0.1:8000 --e2b http://127.0.0.1:49999 -n 300 --code 'x = 1'
"""

import argparse
import http.client
import json
import sys
import time
import urllib.parse


def pct(xs, p):
    xs = sorted(xs)
    k = max(0, min(len(xs) - 1, int(round(p / 100 * len(xs) + 0.5)) - 1))
    return xs[k]


def conn(url):
    u = urllib.parse.urlsplit(url)
    return http.client.HTTPConnection(u.hostname, u.port, timeout=120)


def call(c, path, body, accept=None):
    headers = {"Content-Type": "application/json"}
    if accept:
        headers["Accept"] = accept
    t0 = time.perf_counter()
    c.request("POST", path, body=json.dumps(body), headers=headers)
    r = c.getresponse()
    data = r.read()
    ms = (time.perf_counter() - t0) * 1000
    if r.status not in (200, 201):
        sys.exit(f"{path}: {r.status} {data[:300]!r}")
    return ms, data


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="http://127.0.0.1:8000")
    ap.add_argument("--e2b", default="http://127.0.0.1:49999")
    ap.add_argument("-n", type=int, default=300)
    ap.add_argument("--code", default="x = 1")
    ap.add_argument("--json", help="write the numbers here")
    a = ap.parse_args()

    api, e2b = conn(a.url), conn(a.e2b)
    _, made = call(api, "/v1/sessions", {})
    sid = json.loads(made)["id"]
    doors = {
        "e2b": lambda: call(e2b, "/execute", {"code": a.code}),
        "session": lambda: call(api, f"/v1/sessions/{sid}/execute", {"code": a.code}, "application/x-ndjson"),
        "session_json": lambda: call(api, f"/v1/sessions/{sid}/execute", {"code": a.code}),
        "oneshot": lambda: call(api, "/v1/execute", {"code": a.code}),
    }
    for f in doors.values():  # warm-up: the E2B default context is made here
        for _ in range(5):
            f()
    times = {k: [] for k in doors}
    for _ in range(a.n):
        for k, f in doors.items():
            times[k].append(f()[0])
    out = {k: {"p50_ms": round(pct(v, 50), 3), "p90_ms": round(pct(v, 90), 3), "p99_ms": round(pct(v, 99), 3)}
           for k, v in times.items()}
    out["e2b_minus_session_p50_ms"] = round(out["e2b"]["p50_ms"] - out["session"]["p50_ms"], 3)
    print(json.dumps(out, indent=2))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"n": a.n, "code": a.code, **out}, f, indent=2)
    api.request("DELETE", f"/v1/sessions/{sid}")
    api.getresponse().read()


if __name__ == "__main__":
    main()
