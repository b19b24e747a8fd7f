#!/usr/bin/env python3
"""Memory of idle sessions as their cgroups are charged (docs/deploy.md, "sessions per GiB").

Starts `airlock serve` (its own audit log, loopback), waits for the profile's pool, sums the
memory charged to every cgroup of that server (memory.usage_in_bytes on cgroup v1,
memory.current on v2: the ready runs of the pool), creates N sessions of the profile, runs
one call in each (`--code`), waits for the pool to refill and the charges to settle, sums
again, and prints (after - before) / N: what one idle session costs, its interpreter, its
/tmp and the kernel memory charged to it, as the kernel accounts it against its limit.

    bench/session_memory.py --binary build/src/cli/airlock --profile data-science -n 20 \\
        --code 'import numpy as np, pandas as pd; x = 1'
"""

import argparse
import http.client
import json
import os
import subprocess
import sys
import tempfile
import time


def cgroup_dirs(server_pid):
    """Every cgroup directory the server made for its runs and sessions (named *-<pid>-<n>)."""
    found = []
    for root in ("/sys/fs/cgroup/memory", "/sys/fs/cgroup/unified", "/sys/fs/cgroup"):
        if not os.path.isdir(root):
            continue
        for d, subdirs, _ in os.walk(root):
            for s in subdirs:
                if f"-{server_pid}-" in s:
                    found.append(os.path.join(d, s))
            if d.count("/") > 9:
                subdirs[:] = []
        if found:
            return found
    return found


def charged(server_pid):
    total = 0
    for d in cgroup_dirs(server_pid):
        for name in ("memory.usage_in_bytes", "memory.current"):
            try:
                with open(os.path.join(d, name)) as f:
                    total += int(f.read())
                break
            except OSError:
                continue
    return total


def request(port, method, path, payload=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        body = json.dumps(payload) if payload is not None else None
        conn.request(method, path, body=body, headers={"Content-Type": "application/json"} if body else {})
        r = conn.getresponse()
        return r.status, json.loads(r.read() or b"null")
    finally:
        conn.close()


def wait_pool(port, profile, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, body = request(port, "GET", "/readyz")
        pool = (body or {}).get("pools", {}).get(profile, {})
        if status == 200 and pool.get("ready", 0) >= pool.get("target", 1):
            return
        time.sleep(0.2)
    raise SystemExit(f"the {profile} pool did not fill in {timeout} s")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default="build/src/cli/airlock")
    ap.add_argument("--profiles", default=os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                                       "profiles"))
    ap.add_argument("--profile", default="minimal")
    ap.add_argument("-n", type=int, default=20)
    ap.add_argument("--code", default="x = 1")
    ap.add_argument("--settle", type=float, default=3.0, help="seconds to wait before each reading")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="airlock-memory-") as tmp:
        proc = subprocess.Popen([args.binary, "serve", "--listen", "127.0.0.1:0", "--profiles", args.profiles,
                                 "--audit-log", os.path.join(tmp, "audit.jsonl"), "--pool-size", "2",
                                 "--max-sessions", str(args.n), "--session-memory", "1000G"],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        try:
            port = int(proc.stdout.readline().decode().strip().rsplit(":", 1)[1])
            wait_pool(port, args.profile)
            time.sleep(args.settle)
            before = charged(proc.pid)
            for _ in range(args.n):
                while True:
                    status, body = request(port, "POST", "/v1/sessions", {"profile": args.profile})
                    if status != 503:
                        break
                    time.sleep(0.1)
                if status != 201:
                    raise SystemExit(f"POST /v1/sessions: {status} {body}")
                status, call = request(port, "POST", f"/v1/sessions/{body['id']}/execute", {"code": args.code})
                if status != 200 or call.get("exit_code") != 0:
                    raise SystemExit(f"the call failed: {status} {call}")
            wait_pool(port, args.profile)
            time.sleep(args.settle)
            after = charged(proc.pid)
        finally:
            proc.terminate()
            proc.wait(60)
    per = (after - before) / args.n
    print(json.dumps({"profile": args.profile, "sessions": args.n, "code": args.code,
                      "charged_before_bytes": before, "charged_after_bytes": after,
                      "per_session_bytes": round(per), "per_session_mib": round(per / 2**20, 2),
                      "sessions_per_gib": round(2**30 / per) if per > 0 else None}))


if __name__ == "__main__":
    sys.exit(main())
