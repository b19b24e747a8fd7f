#!/usr/bin/env python3
"""The E2B adapter's cost (issue 12): the same code through each door of one server, in turns.

  e2b          POST :49999/execute (E2B's NDJSON stream, the SDK's request) in the default context
  session      POST /v1/sessions/{id}/execute, streamed (Accept: application/x-ndjson), {id} the
               E2B default context's own session: the same call without the adapter
  session_json the same call answered as one JSON object
  oneshot      POST /v1/execute (a fresh warm sandbox per call; what E2B's state costs against)

Closed loop, c=1, one keep-alive connection per door, the session-call doors interleaved call by
call in a rotating order (so load drifts hit all alike), one-shot apart; latency from just before the request is written to when the whole
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
    # The E2B default context is a session: the session doors call that very
    # session, so the only difference is the adapter.
    call(e2b, "/execute", {"code": "pass"})
    e2b.request("GET", "/contexts")
    sid = json.loads(e2b.getresponse().read())[0]["id"]
    doors = {
        "e2b": lambda: call(e2b, "/execute", {"code": a.code}),
        "session": lambda: call(api, f"/v1/sessions/{sid}/execute", {"code": a.code}, "application/x-ndjson"),
        "session_json": lambda: call(api, f"/v1/sessions/{sid}/execute", {"code": a.code}),
        "oneshot": lambda: call(api, "/v1/execute", {"code": a.code}),
    }
    for f in doors.values():  # warm-up
        for _ in range(5):
            f()
    times = {k: [] for k in doors}
    # The session-call doors interleaved, their order rotated each round (so
    # that none always follows another); one-shot runs after them, apart: a
    # one-shot run's teardown (kill, cgroup removal) runs on after its answer
    # and would slow whichever call came next.
    calls = [k for k in doors if k != "oneshot"]
    for i in range(a.n):
        for j in range(len(calls)):
            k = calls[(i + j) % len(calls)]
            times[k].append(doors[k]()[0])
    for _ in range(a.n):
        times["oneshot"].append(doors["oneshot"]()[0])
    out = {k: {"p50_ms": round(pct(v, 50), 3), "p90_ms": round(pct(v, 90), 3), "p99_ms": round(pct(v, 99), 3)}
           for k, v in times.items()}
    out["e2b_minus_session_p50_ms"] = round(out["e2b"]["p50_ms"] - out["session"]["p50_ms"], 3)
    print(json.dumps(out, indent=2))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"n": a.n, "code": a.code, **out}, f, indent=2)


if __name__ == "__main__":
    main()
