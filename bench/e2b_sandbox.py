#!/usr/bin/env python3
"""An E2B sandbox's own costs (issue 22): what an agent's E2B calls cost against airlock, each
next to an HTTP round trip that starts no process, on one server, one keep-alive connection
per kind, interleaved call by call in a rotating order (so a load drift hits all alike).

  health    GET /health on envd's port: the HTTP round trip, no process, no sandbox
  create    POST /v1/sessions (a new sandbox with its Python interpreter, handed over from the
            warm pool: what an E2B sandbox is here), then DELETE it (not timed)
  context   POST /contexts (createCodeContext(): a new Python interpreter started inside the
            caller's sandbox), then DELETE /contexts/{id} (not timed)
  command   envd's process.Process/Start of `echo hi` over Connect (what commands.run('echo hi')
            sends), read to the end of its stream: a process started by the sandbox's init
  cell      POST /execute `x = 1` in the live default context (runCode)

Latency from just before the request is written to when the whole answer is read.

    airlock serve --e2b-listen 127.0.0.1:49899,49883 --listen 127.0.0.1:8000 --audit-log '' &
    bench/e2b_sandbox.py --url http://127.0.0.1:8000 --e2b http://127.0.0.1:49899 -n 100 --json out.json
"""

import argparse
import http.client
import json
import struct
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


def timed(c, method, path, body=None, headers=None, ok=(200, 201, 204)):
    t0 = time.perf_counter()
    c.request(method, path, body=body, headers=headers or {})
    r = c.getresponse()
    data = r.read()
    ms = (time.perf_counter() - t0) * 1000
    if r.status not in ok:
        sys.exit(f"{method} {path}: {r.status} {data[:300]!r}")
    return ms, data


def envelope(obj):
    raw = json.dumps(obj).encode()
    return struct.pack(">BI", 0, len(raw)) + raw


def frames(data):
    out = []
    while len(data) >= 5:
        flags, n = struct.unpack(">BI", data[:5])
        out.append((flags, json.loads(data[5:5 + n])))
        data = data[5 + n:]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="http://127.0.0.1:8000")
    ap.add_argument("--e2b", default="http://127.0.0.1:49999")
    ap.add_argument("-n", type=int, default=100)
    ap.add_argument("--json", help="write the numbers here")
    a = ap.parse_args()

    jh = {"Content-Type": "application/json"}
    kinds = {k: conn(a.e2b) for k in ("health", "context", "command", "cell")}
    kinds["create"] = conn(a.url)
    extra, api_extra = conn(a.e2b), conn(a.url)

    def health():
        return timed(kinds["health"], "GET", "/health")[0]

    def create():
        ms, data = timed(kinds["create"], "POST", "/v1/sessions", json.dumps({}), jh)
        timed(api_extra, "DELETE", "/v1/sessions/" + json.loads(data)["id"])
        return ms

    def context():
        ms, data = timed(kinds["context"], "POST", "/contexts", json.dumps({"language": "python"}), jh)
        timed(extra, "DELETE", "/contexts/" + json.loads(data)["id"])
        return ms

    def command():
        ms, data = timed(kinds["command"], "POST", "/process.Process/Start",
                         envelope({"process": {"cmd": "/bin/bash", "args": ["-l", "-c", "echo hi"]}, "stdin": False}),
                         {"Content-Type": "application/connect+json", "Connect-Protocol-Version": "1"})
        fs = frames(data)
        if not fs or fs[-1][0] != 2 or fs[-1][1].get("error") or not any("end" in f[1].get("event", {}) for f in fs):
            sys.exit(f"command: {fs!r}")
        return ms

    def cell():
        ms, data = timed(kinds["cell"], "POST", "/execute", json.dumps({"code": "x = 1"}), jh)
        if b'"error"' in data:
            sys.exit(f"cell: {data[:300]!r}")
        return ms

    order = [health, create, context, command, cell]
    for f in order:  # warm every path (the default context is made by the first cell)
        f()
    cell()
    times = {f.__name__: [] for f in order}
    for i in range(a.n):
        rot = order[i % len(order):] + order[:i % len(order)]
        for f in rot:
            times[f.__name__].append(f())
    rows = {}
    print(f"{'kind':8} {'p50 ms':>8} {'p90':>8} {'p99':>8} {'x health p50':>13}")
    h50 = pct(times["health"], 50)
    for k, xs in times.items():
        rows[k] = {"p50": pct(xs, 50), "p90": pct(xs, 90), "p99": pct(xs, 99), "n": len(xs)}
        print(f"{k:8} {rows[k]['p50']:8.2f} {rows[k]['p90']:8.2f} {rows[k]['p99']:8.2f} {rows[k]['p50'] / h50:13.1f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rows": rows, "raw": times}, f)


if __name__ == "__main__":
    main()
