#!/usr/bin/env python3
"""Latency of MCP `execute_python` (Streamable HTTP, /mcp) next to the HTTP API for the same
code: one-shot (`tools/call` vs `POST /v1/execute`) and in a session (`tools/call` with
session_id vs `POST /v1/sessions/{id}/execute`). Calls are interleaved (one of each, a pause
for the warm pool to refill, again) so that load drifts hit both alike. Stdlib only.

    bench/mcp_latency.py --airlock build/src/cli/airlock [--runs 100] [--code 'print(1)'] [--json out.json]

Starts its own `airlock serve` on a free loopback port (token auth on, as a remote MCP client
would meet it). Prints p50/p90/p99 in milliseconds per case, and the difference of the medians
(what the MCP adapter adds).
"""
import argparse, http.client, json, os, secrets, statistics, subprocess, sys, time


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, int(round(p / 100.0 * len(xs) + 0.5)) - 1))]


class Client:
    def __init__(self, port, token):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        # Accept: application/json alone (with text/event-stream, /v1/execute would stream).
        self.h = {"Authorization": f"Bearer {token}", "Content-Type": "application/json", "Accept": "application/json"}
        self.mcp_session = None
        self.next_id = 0

    def request(self, method, path, body=None, headers=None):
        h = dict(self.h)
        h.update(headers or {})
        self.conn.request(method, path, body=None if body is None else json.dumps(body), headers=h)
        r = self.conn.getresponse()
        data = r.read()
        return r.status, r, data

    def mcp(self, method, params=None):
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params or {}}
        extra = {"Accept": "application/json, text/event-stream"}  # what MCP clients send
        if self.mcp_session:
            extra.update({"Mcp-Session-Id": self.mcp_session, "MCP-Protocol-Version": "2025-11-25"})
        status, r, data = self.request("POST", "/mcp", msg, extra)
        if method == "initialize":
            self.mcp_session = r.getheader("Mcp-Session-Id")
        if status != 200:
            sys.exit(f"/mcp {method}: HTTP {status} {data[:300]!r}")
        return json.loads(data)["result"]


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return (time.perf_counter() - t) * 1000, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--airlock", required=True)
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--code", default="print(1)")
    ap.add_argument("--pause", type=float, default=0.15, help="seconds between one-shot calls (pool refill)")
    ap.add_argument("--json")
    a = ap.parse_args()
    token = secrets.token_hex(16)
    here = os.path.dirname(os.path.abspath(__file__))
    proc = subprocess.Popen([a.airlock, "serve", "--listen", "127.0.0.1:0", "--profiles",
                             os.path.join(here, "..", "profiles"), "--pool-size", "2", "--audit-log", "/dev/null"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env={**os.environ, "AIRLOCK_TOKENS": f"bench:{token}"})
    try:
        first = proc.stdout.readline().decode()
        if not first.startswith("airlock: listening on http://"):
            sys.exit(f"airlock serve did not start: {first!r}")
        port = int(first.strip().rsplit(":", 1)[1])
        c = Client(port, token)
        for _ in range(600):
            status, _, data = c.request("GET", "/readyz")
            if status == 200 and all(p["ready"] > 0 for p in json.loads(data)["pools"].values()):
                break
            time.sleep(0.2)
        c.mcp("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                             "clientInfo": {"name": "bench", "version": "0"}})
        expect = subprocess.run([sys.executable, "-c", a.code], capture_output=True, text=True).stdout

        def v1():
            status, _, data = c.request("POST", "/v1/execute", {"code": a.code})
            assert status == 200 and json.loads(data)["stdout"] == expect, (status, data[:300])

        def mcp_call(extra=None):
            args = {"code": a.code}
            args.update(extra or {})
            r = c.mcp("tools/call", {"name": "execute_python", "arguments": args})
            assert not r["isError"] and r["structuredContent"]["stdout"] == expect, r

        status, _, data = c.request("POST", "/v1/sessions", {})
        sid = json.loads(data)["id"]
        made = c.mcp("tools/call", {"name": "create_session", "arguments": {}})
        msid = made["structuredContent"]["session_id"]

        def v1_session():
            status, _, data = c.request("POST", f"/v1/sessions/{sid}/execute", {"code": a.code})
            assert status == 200 and json.loads(data)["stdout"] == expect, (status, data[:300])

        cases = {"POST /v1/execute": [], "MCP execute_python (one-shot)": [],
                 "POST /v1/sessions/{id}/execute": [], "MCP execute_python (session_id)": []}
        for i in range(a.runs + 5):
            samples = [timed(v1)[0]]
            time.sleep(a.pause)
            samples.append(timed(mcp_call)[0])
            time.sleep(a.pause)
            samples.append(timed(v1_session)[0])
            samples.append(timed(lambda: mcp_call({"session_id": msid}))[0])
            if i >= 5:  # warm-up
                for name, s in zip(cases, samples):
                    cases[name].append(s)
        c.request("DELETE", f"/v1/sessions/{sid}")
        c.mcp("tools/call", {"name": "close_session", "arguments": {"session_id": msid}})
        load = os.getloadavg()[0]
        print(f"code {a.code!r}, {a.runs} calls each, interleaved; load {load:.1f}")
        print("| case | p50 ms | p90 ms | p99 ms |")
        print("|---|---:|---:|---:|")
        for name, xs in cases.items():
            print(f"| {name} | {pct(xs, 50):.2f} | {pct(xs, 90):.2f} | {pct(xs, 99):.2f} |")
        names = list(cases)
        for a_name, b_name in ((names[1], names[0]), (names[3], names[2])):
            d = statistics.median(cases[a_name]) - statistics.median(cases[b_name])
            # Paired difference: each MCP call against the HTTP call made just before it.
            paired = statistics.median([x - y for x, y in zip(cases[a_name], cases[b_name])])
            print(f"{a_name} - {b_name}: median difference {d:+.2f} ms, median of paired differences {paired:+.2f} ms")
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"code": a.code, "runs": a.runs, "load": load, "samples_ms": cases}, f)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


if __name__ == "__main__":
    main()
