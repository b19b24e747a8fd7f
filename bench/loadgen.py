#!/usr/bin/env python3
"""Load generator for servers that speak the `/execute` API: airlock and the
fips-agents code-sandbox sidecar ("the peer"), side by side in one run.

Standard library only (Python 3.11). One keep-alive HTTP/1.1 connection per
worker thread, reconnected after an error; loopback targets only. Every answer
is checked; a wrong answer is an error, counted apart from transport errors and
unexpected HTTP statuses. Exit code 0 when every answer was correct, 1
otherwise, 2 for a usage error or a target that does not answer.

    # airlock and the peer, side by side, every workload, c=1 and c=8
    bench/loadgen.py --target airlock=http://127.0.0.1:8000 \\
        --target peer=http://127.0.0.1:8100,api=peer,url.data-science=http://127.0.0.1:8101 \\
        --concurrency 1,8 --requests 200 --markdown --json /tmp/bench.json

    # soak: 100,000 print(1) at c=8 against one airlock, watching the server
    bench/loadgen.py --target airlock=http://127.0.0.1:8000 --soak 100000 \\
        --concurrency 8 --server-pid "$(pgrep -o -f 'airlock serve')"

See bench/README.md for what every workload checks and how to start the peer.
"""

from __future__ import annotations

import argparse
import base64
import collections
import datetime
import http.client
import ipaddress
import json
import os
import platform
import socket
import sys
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

# ---------------------------------------------------------------------------
# Workloads.


@dataclass
class Response:
    """One answer as the checks see it."""

    api: str  # "airlock" or "peer"
    path: str  # the route that was called, e.g. "/v1/execute"
    status: int
    body: Any  # parsed JSON, or None when the body was not JSON
    latency_s: float

    @property
    def v1(self) -> bool:
        return self.path.startswith("/v1/")


# A check returns None when the answer is right, else a short reason.
Check = Callable[[Response], Optional[str]]


def _stdout_is(expected: str) -> Check:
    def check(r: Response) -> Optional[str]:
        b = r.body
        if b.get("exit_code") != 0:
            return f"exit_code {b.get('exit_code')!r}, stderr {str(b.get('stderr'))[-200:]!r}"
        if b.get("stdout") != expected:
            return f"stdout {str(b.get('stdout'))[:120]!r}, expected {expected!r}"
        return None

    return check


def _check_matplotlib(r: Response) -> Optional[str]:
    b = r.body
    if b.get("exit_code") != 0:
        return f"exit_code {b.get('exit_code')!r}, stderr {str(b.get('stderr'))[-200:]!r}"
    if r.api != "airlock" or not r.v1:
        return None  # the peer (and airlock's /execute shape) has no figure channel: success is all
    for res in b.get("results") or []:
        png = (res.get("data") or {}).get("image/png") if isinstance(res, dict) else None
        if isinstance(png, str):
            try:
                head = base64.b64decode(png[:16] + "=" * (-len(png[:16]) % 4))
            except ValueError:
                return "results[].data['image/png'] is not base64"
            if head.startswith(b"\x89PNG"):
                return None
            return "results[].data['image/png'] does not start with the PNG signature"
    return f"no image/png in results ({len(b.get('results') or [])} results)"


_BIG = 200_000


def _check_stdout_big(r: Response) -> Optional[str]:
    b = r.body
    out = b.get("stdout") or ""
    if b.get("exit_code") != 0:
        return f"exit_code {b.get('exit_code')!r}, kill_reason {b.get('kill_reason')!r}"
    if not out.startswith("x" * min(1000, len(out))) or not out:
        return f"stdout does not start with the x's: {out[:60]!r}"
    if len(out) >= _BIG and out[:_BIG] == "x" * _BIG:
        return None  # delivered whole
    if r.v1:
        # airlock's own shape says so in a field.
        if (b.get("truncated") or {}).get("stdout") is True:
            return None
        return f"stdout cut to {len(out)} chars without truncated.stdout"
    # The sidecar shape: a marker at the end of stdout (or in stderr).
    if "truncat" in out[-200:].lower() or "truncat" in str(b.get("stderr", "")).lower():
        return None
    return f"stdout silently cut to {len(out)} chars"


def _check_timeout(r: Response) -> Optional[str]:
    b = r.body
    t = TIMEOUT_S
    if r.v1:
        if b.get("kill_reason") != "timeout" or b.get("timed_out") is not True:
            return f"kill_reason {b.get('kill_reason')!r}, timed_out {b.get('timed_out')!r}"
    elif b.get("timed_out") is not True:
        return f"timed_out {b.get('timed_out')!r}, exit_code {b.get('exit_code')!r}"
    if r.latency_s < 0.95 * t:
        return f"came back after {r.latency_s * 1000:.0f} ms, before the {t:g} s timeout"
    if r.latency_s > t + 1.0:
        return f"came back after {r.latency_s * 1000:.0f} ms, more than 1 s past the {t:g} s timeout"
    return None


def _check_rejected(r: Response) -> Optional[str]:
    v = r.body.get("violations")
    if not v:
        return f"400 without violations: {json.dumps(r.body)[:200]}"
    if "socket" not in json.dumps(v):
        return f"violations do not name socket: {json.dumps(v)[:200]}"
    return None


TIMEOUT_S = 1.0

PANDAS_CODE = (
    "import pandas as pd\n"
    "df = pd.DataFrame({'k': ['a', 'b', 'a', 'c', 'b', 'a'], 'v': [1, 2, 3, 4, 5, 6]})\n"
    "g = df.groupby('k')['v'].agg(['sum', 'count'])\n"
    "print(g.reset_index().to_csv(index=False), end='')\n"
)
MATPLOTLIB_CODE = (
    "import matplotlib.pyplot as plt\n"
    "fig, ax = plt.subplots(figsize=(4, 3))\n"
    "ax.plot([1, 2, 3, 4], [1, 4, 9, 16])\n"
    "ax.set_title('squares')\n"
    "plt.show()\n"
)


@dataclass
class Workload:
    name: str
    code: str
    profile: str  # airlock's profile name; targets map it (see PROFILE_MAP)
    check: Check
    timeout: Optional[float] = None
    expect_status: int = 200
    slow: bool = False  # takes seconds by design: fewer requests and warm-ups by default
    doc: str = ""


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in [
        Workload("hello", "print(1)", "minimal", _stdout_is("1\n"), doc='print(1) -> stdout "1\\n"'),
        Workload("cpu", "print(sum(i*i for i in range(10**6)))", "minimal",
                 _stdout_is("333332833333500000\n"), doc="sum of squares to 1e6 -> exact number"),
        Workload("numpy", "import numpy as np\nprint(int(np.arange(10).sum()))", "data-science",
                 _stdout_is("45\n"), doc='numpy arange sum -> "45"'),
        Workload("pandas", PANDAS_CODE, "data-science", _stdout_is("k,sum,count\na,10,3\nb,7,2\nc,4,1\n"),
                 doc="DataFrame groupby sum/count -> exact CSV"),
        Workload("matplotlib", MATPLOTLIB_CODE, "visualization", _check_matplotlib,
                 doc="figure + plt.show() -> image/png in /v1 results (elsewhere: exit 0)"),
        Workload("stdout_big", f'print("x" * {_BIG})', "minimal", _check_stdout_big,
                 doc="200 KB of stdout -> delivered whole, or the truncation reported"),
        Workload("timeout", "while True:\n    pass", "minimal", _check_timeout, timeout=TIMEOUT_S, slow=True,
                 doc="busy loop, timeout 1 s -> a timeout answer between 0.95 and 2.0 s"),
        Workload("rejected", "import socket", "minimal", _check_rejected, expect_status=400,
                 doc="import socket -> 400 with violations naming socket"),
    ]
}

# Profile names per API: the peer calls its profiles as airlock does, but has no
# figure support at all (matplotlib is not importable there), so the
# visualization workloads are skipped on it. None = unsupported.
PROFILE_MAP: dict[str, dict[str, Optional[str]]] = {
    "airlock": {},
    "peer": {"visualization": None},
}

# ---------------------------------------------------------------------------
# Targets.


@dataclass
class Target:
    name: str
    url: str
    api: str = ""  # "airlock" | "peer"; probed when not given
    path: str = ""  # the execute route; airlock: /v1/execute, peer: /execute
    token: str = ""
    profile_urls: dict[str, str] = field(default_factory=dict)  # peer: profile -> URL of the instance serving it
    profile_map: dict[str, Optional[str]] = field(default_factory=dict)
    served: dict[str, str] = field(default_factory=dict)  # profile name (target's) -> base URL
    info: dict[str, Any] = field(default_factory=dict)

    def map_profile(self, profile: str) -> Optional[str]:
        if profile in self.profile_map:
            return self.profile_map[profile]
        return PROFILE_MAP.get(self.api, {}).get(profile, profile)

    def route(self, wl: Workload) -> tuple[Optional[str], Optional[str], str]:
        """(base URL, profile name as sent, why-not) for a workload on this target."""
        prof = self.map_profile(wl.profile)
        if prof is None:
            return None, None, f"{self.name} ({self.api}) has no {wl.profile} profile"
        url = self.served.get(prof)
        if url is None:
            if self.api == "peer":
                return None, prof, (f"no {self.name} instance serves profile {prof!r} "
                                    f"(start one and add url.{wl.profile}=URL to the target)")
            return None, prof, f"{self.name} has no profile {prof!r} (it has {sorted(self.served)})"
        return url, prof, ""


def parse_target(spec: str, default_token: str) -> Target:
    name, eq, rest = spec.partition("=")
    if not eq or not name or not rest:
        raise ValueError(f"--target {spec!r}: expected NAME=URL[,api=airlock|peer][,path=...][,url.PROFILE=URL]"
                         "[,map.PROFILE=NAME|-][,token=T]")
    parts = rest.split(",")
    t = Target(name=name, url=parts[0].rstrip("/"), token=default_token)
    for p in parts[1:]:
        k, eq, v = p.partition("=")
        if not eq:
            raise ValueError(f"--target {spec!r}: option {p!r} is not KEY=VALUE")
        if k == "api":
            if v not in ("airlock", "peer"):
                raise ValueError(f"--target {spec!r}: api must be airlock or peer, not {v!r}")
            t.api = v
        elif k == "path":
            t.path = v if v.startswith("/") else "/" + v
        elif k == "token":
            t.token = v
        elif k.startswith("url."):
            t.profile_urls[k[4:]] = v.rstrip("/")
        elif k.startswith("map."):
            t.profile_map[k[4:]] = None if v in ("-", "") else v
        else:
            raise ValueError(f"--target {spec!r}: unknown option {k!r} (api, path, token, url.PROFILE, map.PROFILE)")
    return t


def split_url(url: str, allow_remote: bool) -> tuple[str, int]:
    u = urllib.parse.urlsplit(url)
    if u.scheme != "http" or not u.hostname:
        raise ValueError(f"{url!r}: only http://HOST:PORT URLs are supported")
    host = u.hostname
    port = u.port or 80
    if not allow_remote:
        try:
            addrs = {ai[4][0] for ai in socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)}
        except socket.gaierror as e:
            raise ValueError(f"{url!r}: cannot resolve {host}: {e}") from None
        if not addrs or not all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addrs):
            raise ValueError(f"{url!r} is not a loopback address; pass --allow-remote to load a remote server")
    return host, port


def simple_get(url: str, path: str, token: str = "", timeout: float = 5.0) -> tuple[int, Any]:
    host, port = split_url(url, allow_remote=True)  # already vetted by the caller
    c = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        c.request("GET", path, headers=headers)
        r = c.getresponse()
        data = r.read()
        try:
            return r.status, json.loads(data)
        except ValueError:
            return r.status, data.decode("utf-8", "replace")
    finally:
        c.close()


def probe_target(t: Target, allow_remote: bool) -> None:
    """Learns the API (when not given), the execute route, and which profiles each URL serves."""
    split_url(t.url, allow_remote)
    for u in t.profile_urls.values():
        split_url(u, allow_remote)
    try:
        st, body = simple_get(t.url, "/v1/profiles", t.token)
    except OSError as e:
        raise RuntimeError(f"target {t.name}: {t.url} does not answer: {e}") from None
    if not t.api:
        t.api = "airlock" if st == 200 and isinstance(body, dict) and "profiles" in body else "peer"
    if not t.path:
        t.path = "/v1/execute" if t.api == "airlock" else "/execute"
    if t.api == "airlock":
        if st != 200 or not isinstance(body, dict):
            raise RuntimeError(f"target {t.name}: GET {t.url}/v1/profiles answered {st}; is it airlock? "
                               "(a token may be needed: --token or token=)")
        for p in body.get("profiles", []):
            t.served[p["name"]] = t.url
        t.info["default_profile"] = body.get("default")
        if t.profile_urls:
            raise RuntimeError(f"target {t.name}: url.PROFILE is for the peer; airlock serves every profile "
                               "at one URL")
        return
    # The peer serves one profile per process: ask each instance which.
    for u in [t.url] + list(t.profile_urls.values()):
        try:
            st, body = simple_get(u, "/profile", t.token)
        except OSError as e:
            raise RuntimeError(f"target {t.name}: {u} does not answer: {e}") from None
        if st != 200 or not isinstance(body, dict) or "name" not in body:
            raise RuntimeError(f"target {t.name}: GET {u}/profile answered {st}: {str(body)[:200]}")
        if body["name"] in t.served and t.served[body["name"]] != u:
            raise RuntimeError(f"target {t.name}: {u} and {t.served[body['name']]} both serve {body['name']}")
        t.served[body["name"]] = u
    for prof, u in t.profile_urls.items():
        mapped = t.map_profile(prof)
        if mapped is not None and t.served.get(mapped) != u:
            served_there = [n for n, x in t.served.items() if x == u]
            raise RuntimeError(f"target {t.name}: url.{prof}={u} serves {served_there}, not {mapped!r}")


# ---------------------------------------------------------------------------
# Requests.


@dataclass
class Prepared:
    wl: Workload
    host: str
    port: int
    path: str
    body: bytes
    headers: dict[str, str]
    sock_timeout: float


def prepare(t: Target, wl: Workload) -> tuple[Optional[Prepared], str]:
    url, prof, why = t.route(wl)
    if url is None:
        return None, why
    req: dict[str, Any] = {"code": wl.code}
    if t.api == "airlock" and prof:
        req["profile"] = prof  # the peer ignores the field; its profile is per process
    if wl.timeout is not None:
        req["timeout"] = wl.timeout
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if t.token:
        headers["Authorization"] = f"Bearer {t.token}"
    host, port = split_url(url, allow_remote=True)
    return Prepared(wl, host, port, t.path, json.dumps(req).encode(), headers,
                    (wl.timeout or 30.0) + 30.0), ""


class Connection(http.client.HTTPConnection):
    """HTTPConnection with Nagle off, so a request never waits for a delayed ACK."""

    def connect(self) -> None:
        super().connect()
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class Client:
    """One worker's keep-alive connections, one per host:port, reopened after an error."""

    def __init__(self) -> None:
        self.conns: dict[tuple[str, int], http.client.HTTPConnection] = {}

    def post(self, p: Prepared) -> tuple[int, bytes]:
        key = (p.host, p.port)
        c = self.conns.get(key)
        if c is None:
            c = Connection(p.host, p.port, timeout=p.sock_timeout)
            self.conns[key] = c
        c.timeout = p.sock_timeout
        if c.sock is not None:
            c.sock.settimeout(p.sock_timeout)
        try:
            c.request("POST", p.path, body=p.body, headers=p.headers)
            r = c.getresponse()
            data = r.read()
            if r.will_close:
                self.drop(key)
            return r.status, data
        except BaseException:
            self.drop(key)
            raise

    def drop(self, key: tuple[str, int]) -> None:
        c = self.conns.pop(key, None)
        if c is not None:
            c.close()

    def close(self) -> None:
        for k in list(self.conns):
            self.drop(k)


# kind: "ok" | "transport" | "wrong" | "status"
Record = tuple[str, str, float, int, str]  # (workload, kind, latency_s, status, message)


def one_request(client: Client, api: str, p: Prepared) -> Record:
    t0 = time.perf_counter()
    try:
        status, data = client.post(p)
    except (OSError, http.client.HTTPException) as e:
        return (p.wl.name, "transport", time.perf_counter() - t0, 0, f"{type(e).__name__}: {e}")
    lat = time.perf_counter() - t0
    try:
        body = json.loads(data)
    except ValueError:
        body = None
    if status != p.wl.expect_status:
        return (p.wl.name, "status", lat, status, f"HTTP {status}: {data[:200].decode('utf-8', 'replace')}")
    if not isinstance(body, dict):
        return (p.wl.name, "wrong", lat, status, f"body is not a JSON object: {data[:200]!r}")
    try:
        why = p.wl.check(Response(api, p.path, status, body, lat))
    except Exception as e:  # a malformed answer must not kill the worker
        why = f"check raised {type(e).__name__}: {e}"
    return (p.wl.name, "wrong" if why else "ok", lat, status, why or "")


def run_phase(clients: list[Client], api: str, jobs: list[Prepared], n: Optional[int],
              duration: Optional[float], pace_s: float = 0.0) -> tuple[list[Record], float]:
    """Runs len(clients) workers until n requests were started or duration passed.

    Request i uses jobs[i % len(jobs)]. A worker waits pace_s before each request (0: a closed
    loop, the next request as soon as the answer is in). Returns the records and the wall time
    of the phase.
    """
    counter = iter(range(n if n is not None else 1 << 62))
    lock = threading.Lock()
    out: list[list[Record]] = [[] for _ in clients]
    start = time.perf_counter()
    deadline = start + duration if duration is not None else None

    def worker(i: int) -> None:
        client = clients[i]
        recs = out[i]
        while True:
            if deadline is not None and time.perf_counter() >= deadline:
                return
            with lock:
                ticket = next(counter, None)
            if ticket is None:
                return
            if pace_s > 0:
                time.sleep(pace_s)
            recs.append(one_request(client, api, jobs[ticket % len(jobs)]))

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(len(clients))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    elapsed = time.perf_counter() - start
    return [r for rs in out for r in rs], elapsed


# ---------------------------------------------------------------------------
# Statistics.


def pct(sorted_xs: list[float], p: float) -> float:
    """Nearest-rank percentile of a sorted list."""
    if not sorted_xs:
        return float("nan")
    k = max(1, min(len(sorted_xs), int(-(-p * len(sorted_xs) // 100))))
    return sorted_xs[k - 1]


def summarize(records: list[Record], elapsed: float) -> dict[str, Any]:
    ok = sorted(r[2] * 1000 for r in records if r[1] == "ok")
    kinds = collections.Counter(r[1] for r in records)
    statuses = collections.Counter(str(r[3]) for r in records)
    samples: list[str] = []
    for r in records:
        if r[1] != "ok" and len(samples) < 3 and r[4] not in samples:
            samples.append(r[4])
    return {
        "count": len(records),
        "ok": len(ok),
        "errors": {"transport": kinds["transport"], "wrong_answer": kinds["wrong"], "status": kinds["status"]},
        "error_samples": samples,
        "statuses": dict(statuses),
        "latency_ms": {
            "p50": pct(ok, 50), "p90": pct(ok, 90), "p99": pct(ok, 99),
            "max": ok[-1] if ok else float("nan"), "min": ok[0] if ok else float("nan"),
            "mean": sum(ok) / len(ok) if ok else float("nan"),
        },
        "elapsed_s": elapsed,
        "throughput_rps": len(ok) / elapsed if elapsed > 0 else float("nan"),
    }


def n_errors(s: dict[str, Any]) -> int:
    return sum(s["errors"].values())


# ---------------------------------------------------------------------------
# Benchmark mode.


def effective_counts(wl: Workload, c: int, args: argparse.Namespace) -> tuple[Optional[int], int]:
    n = args.requests_for.get(wl.name, args.requests)
    if n is None and args.duration is None:
        n = 100
    warm = args.warmup if args.warmup is not None else 3
    if wl.slow and wl.name not in args.requests_for:
        # A 1 s busy loop per request: a few rounds of the workers say enough.
        n = 4 * c if n is None else min(n, 4 * c)
        warm = min(warm, 1)
    return n, warm


def run_bench(args: argparse.Namespace, targets: list[Target], workloads: list[Workload],
              concurrencies: list[int]) -> dict[str, Any]:
    results: list[dict[str, Any]] = []
    for wl in workloads:
        for c in concurrencies:
            for t in targets:
                prep, why = prepare(t, wl)
                row: dict[str, Any] = {"target": t.name, "api": t.api, "workload": wl.name,
                                       "profile": wl.profile, "concurrency": c}
                if prep is None:
                    row["skipped"] = why
                    results.append(row)
                    log(args, f"{t.name:>10} {wl.name:<10} c={c:<3} skipped: {why}")
                    continue
                row["profile_sent"] = t.map_profile(wl.profile)
                row["pace_ms"] = args.pace
                n, warm = effective_counts(wl, c, args)
                clients = [Client() for _ in range(c)]
                try:
                    warm_recs, _ = run_phase(clients, t.api, [prep], warm, None) if warm else ([], 0.0)
                    recs, elapsed = run_phase(clients, t.api, [prep], n, args.duration, args.pace / 1000.0)
                finally:
                    for cl in clients:
                        cl.close()
                s = summarize(recs, elapsed)
                s["warmup"] = len(warm_recs)
                s["warmup_errors"] = sum(1 for r in warm_recs if r[1] != "ok")
                if s["warmup_errors"]:
                    s["error_samples"] += [r[4] for r in warm_recs if r[1] != "ok"][:1]
                row.update(s)
                results.append(row)
                lat = s["latency_ms"]
                log(args, f"{t.name:>10} {wl.name:<10} c={c:<3} n={s['count']:<5} err={n_errors(s)}"
                          f"+{s['warmup_errors']}w p50={lat['p50']:.2f} p99={lat['p99']:.2f} ms "
                          f"{s['throughput_rps']:.1f} req/s")
                for m in s["error_samples"]:
                    log(args, f"{'':>10}   error: {m}")
    return {"results": results, "ratios": ratios(results, targets, args.baseline)}


def ratios(results: list[dict[str, Any]], targets: list[Target], baseline: Optional[str]) -> list[dict[str, Any]]:
    if len(targets) < 2:
        return []
    if baseline:
        ref = baseline
    else:
        ref = next((t.name for t in targets if t.api == "airlock"), targets[0].name)
    by_key = {(r["target"], r["workload"], r["concurrency"]): r for r in results if "skipped" not in r}
    out = []
    for r in results:
        if r["target"] != ref or "skipped" in r:
            continue
        for t in targets:
            if t.name == ref:
                continue
            o = by_key.get((t.name, r["workload"], r["concurrency"]))
            if o is None:
                continue
            a, b = r["latency_ms"]["p50"], o["latency_ms"]["p50"]
            ra, rb = r["throughput_rps"], o["throughput_rps"]
            out.append({
                "workload": r["workload"], "concurrency": r["concurrency"], "ref": ref, "other": t.name,
                "ref_p50_ms": a, "other_p50_ms": b, "ref_rps": ra, "other_rps": rb,
                # > 1 means the reference (airlock) is faster / serves more.
                "p50_ratio": b / a if a and a == a and b == b else float("nan"),
                "throughput_ratio": ra / rb if rb and ra == ra and rb == rb else float("nan"),
            })
    return out


# ---------------------------------------------------------------------------
# Soak mode: resource sampling of the server.


def read_proc_children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = collections.defaultdict(list)
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat", "rb") as f:
                s = f.read().decode("ascii", "replace")
        except OSError:
            continue
        # comm may hold spaces and parentheses: the fields after the last ')' are fixed.
        rest = s[s.rfind(")") + 2:].split()
        if len(rest) > 1:
            kids[int(rest[1])].append(int(d))
    return kids


def descendants(pid: int) -> list[int]:
    kids = read_proc_children()
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for k in kids.get(p, []):
            out.append(k)
            todo.append(k)
    return out


def cgroup_roots(pid: int) -> list[str]:
    """The server's own cgroup directory in the memory, pids and cpu v1 hierarchies (and cgroup2)."""
    roots: list[str] = []
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return roots
    own: dict[str, str] = {}
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        for ctrl in (parts[1].split(",") if parts[1] else [""]):
            own[ctrl] = parts[2]
    seen = set()
    for ctrl in ("memory", "pids", "cpu"):
        base = f"/sys/fs/cgroup/{ctrl}"
        if ctrl in own and os.path.isdir(base):
            d = os.path.realpath(base + own[ctrl])
            if d not in seen and os.path.isdir(d):
                seen.add(d)
                roots.append(d)
    if "" in own:  # cgroup2: /sys/fs/cgroup itself or /sys/fs/cgroup/unified
        for base in ("/sys/fs/cgroup/unified", "/sys/fs/cgroup"):
            if os.path.exists(base + "/cgroup.controllers"):
                d = os.path.realpath(base + own[""])
                if d not in seen and os.path.isdir(d):
                    seen.add(d)
                    roots.append(d)
                break
    return roots


def count_cgroups(roots: list[str], ours: set[int]) -> tuple[int, int]:
    """(ours, all): airlock cgroup directories under the server's own cgroups.

    "all" counts every directory whose name contains "airlock" or starts with "run-" (a cold
    run, a zygote) or "warm-" (a warm run, ready or running).
    "ours" leaves out run-PID-N and warm-PID-N directories of live processes that are not the server or one
    of its descendants (other airlock servers on the host share the pids and cpu hierarchies);
    a run directory of a dead process counts, since nobody will remove it.
    """
    n_ours = n_all = 0
    for root in roots:
        for dirpath, dirnames, _ in os.walk(root):
            if dirpath.count("/") - root.count("/") >= 6:
                dirnames[:] = []
            for d in dirnames:
                if "airlock" not in d and not d.startswith(("run-", "warm-")):
                    continue
                n_all += 1
                if d.startswith(("run-", "warm-")):
                    pid_s = d.split("-")[1] if d.count("-") >= 2 else ""
                    if pid_s.isdigit() and int(pid_s) not in ours and os.path.exists(f"/proc/{pid_s}"):
                        continue
                n_ours += 1
    return n_ours, n_all


@dataclass
class Sample:
    label: str
    done: int
    rss_kb: int
    fds: int
    procs: int
    mounts: int
    cgroups: int
    cgroups_all: int
    t: float = 0.0
    chunk: Optional[dict[str, Any]] = None


class Watcher:
    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.ours: set[int] = {pid}
        self.roots = cgroup_roots(pid)

    def sample(self, label: str, done: int) -> Sample:
        pid = self.pid
        rss = 0
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        desc = descendants(pid)
        self.ours.update(desc)
        with open(f"/proc/{pid}/mountinfo") as f:
            mounts = sum(1 for _ in f)
        cg, cg_all = count_cgroups(self.roots, self.ours)
        return Sample(label, done, rss, fds, len(desc), mounts, cg, cg_all, time.time())


COUNTS = ("fds", "procs", "mounts", "cgroups")


def in_flight(metrics: Optional[Client], host: str, port: int, token: str) -> Optional[int]:
    """airlock_executions_in_flight from /metrics, or None when it cannot be read."""
    if metrics is None:
        return None
    key = (host, port)
    c = metrics.conns.get(key)
    try:
        if c is None:
            c = Connection(host, port, timeout=5)
            metrics.conns[key] = c
        c.request("GET", "/metrics", headers={"Authorization": f"Bearer {token}"} if token else {})
        r = c.getresponse()
        text = r.read().decode("utf-8", "replace")
        if r.will_close:
            metrics.drop(key)
        if r.status != 200:
            return None
        for line in text.splitlines():
            if line.startswith("airlock_executions_in_flight "):
                return int(float(line.split()[1]))
    except (OSError, http.client.HTTPException, ValueError):
        metrics.drop(key)
    return None


def settle(w: Watcher, label: str, done: int, base: Optional[Sample], flight: Callable[[], Optional[int]],
           limit_s: float = 5.0) -> Sample:
    """Waits up to limit_s for runs to end: in-flight 0 and the counts equal to base (or steady)."""
    end = time.monotonic() + limit_s
    prev: Optional[Sample] = None
    while True:
        s = w.sample(label, done)
        busy = flight()
        if busy in (0, None):
            if base is not None and all(getattr(s, k) == getattr(base, k) for k in COUNTS):
                return s
            if base is None and prev is not None and all(getattr(s, k) == getattr(prev, k) for k in COUNTS):
                return s
        if time.monotonic() >= end:
            return s
        prev = s
        time.sleep(0.2)


def run_soak(args: argparse.Namespace, t: Target, workloads: list[Workload], c: int) -> dict[str, Any]:
    pid = args.server_pid
    if not os.path.exists(f"/proc/{pid}/status"):
        raise RuntimeError(f"--server-pid {pid}: no such process")
    jobs = []
    for wl in workloads:
        prep, why = prepare(t, wl)
        if prep is None:
            raise RuntimeError(f"soak: workload {wl.name} cannot run on {t.name}: {why}")
        jobs.append(prep)
    w = Watcher(pid)
    host, port = split_url(t.url, allow_remote=True)
    metrics = Client() if t.api == "airlock" else None
    flight = lambda: in_flight(metrics, host, port, t.token)  # noqa: E731
    clients = [Client() for _ in range(c)]
    warm = args.warmup if args.warmup is not None else 100
    all_recs: list[Record] = []
    samples: list[Sample] = []
    try:
        in_flight(metrics, host, port, t.token)  # open the metrics connection before the first sample
        warm_recs, _ = run_phase(clients, t.api, jobs, warm, None) if warm else ([], 0.0)
        base = settle(w, "after warm-up", 0, None, flight)
        samples.append(base)
        log(args, f"soak: after {len(warm_recs)} warm-up requests: rss {base.rss_kb / 1024:.1f} MiB, "
                  f"fds {base.fds}, procs {base.procs}, mounts {base.mounts}, cgroups {base.cgroups} "
                  f"({base.cgroups_all} airlock dirs in reach)")
        done = 0
        started = time.perf_counter()
        for i in range(1, 11):
            target_done = args.soak * i // 10
            n = target_done - done
            if n <= 0:
                continue
            recs, elapsed = run_phase(clients, t.api, jobs, n, None)
            done = target_done
            all_recs.extend(recs)
            s = w.sample(f"{i * 10}%", done)
            s.chunk = summarize(recs, elapsed)
            samples.append(s)
            log(args, f"soak: {done}/{args.soak}  rss {s.rss_kb / 1024:.1f} MiB  fds {s.fds}  procs {s.procs}  "
                      f"mounts {s.mounts}  cgroups {s.cgroups}  p50 {s.chunk['latency_ms']['p50']:.2f} ms  "
                      f"{s.chunk['throughput_rps']:.1f} req/s  errors {n_errors(s.chunk)}")
        total_elapsed = time.perf_counter() - started
        end = settle(w, "end (settled)", done, base, flight)
        samples.append(end)
    finally:
        for cl in clients:
            cl.close()
        if metrics is not None:
            metrics.close()

    problems = []
    limit_kb = base.rss_kb * 1.10 + 8 * 1024
    if end.rss_kb > limit_kb:
        problems.append(f"RSS grew from {base.rss_kb / 1024:.1f} to {end.rss_kb / 1024:.1f} MiB "
                        f"(limit {limit_kb / 1024:.1f} MiB: +10% + 8 MiB)")
    for k in COUNTS:
        if getattr(end, k) != getattr(base, k):
            problems.append(f"{k}: {getattr(base, k)} after warm-up, {getattr(end, k)} at the end")
    overall = summarize(all_recs, total_elapsed)
    overall["warmup"] = len(warm_recs)
    overall["warmup_errors"] = sum(1 for r in warm_recs if r[1] != "ok")
    per_wl = {}
    for wl in workloads:
        per_wl[wl.name] = summarize([r for r in all_recs if r[0] == wl.name], total_elapsed)
    return {
        "target": t.name, "api": t.api, "server_pid": pid, "concurrency": c,
        "workloads": [wl.name for wl in workloads], "requests": args.soak,
        "cgroup_roots": w.roots,
        "samples": [{k: v for k, v in s.__dict__.items()} for s in samples],
        "overall": overall, "per_workload": per_wl,
        "problems": problems, "flat": not problems,
    }


# ---------------------------------------------------------------------------
# Output.


def fmt(x: float, digits: int = 2) -> str:
    if x != x:  # NaN
        return "-"
    if x >= 1000:
        return f"{x:,.0f}"
    if x >= 100:
        return f"{x:.1f}"
    return f"{x:.{digits}f}"


def table(headers: list[str], rows: list[list[str]], markdown: bool, right: set[int]) -> str:
    if markdown:
        lines = ["| " + " | ".join(headers) + " |",
                 "|" + "|".join("---:" if i in right else "---" for i in range(len(headers))) + "|"]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(lines)
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.rjust(widths[i]) if i in right else c.ljust(widths[i]) for i, c in enumerate(cells))

    return "\n".join([line(headers), line(["-" * wd for wd in widths])] + [line(r) for r in rows])


def render_bench(rep: dict[str, Any], markdown: bool) -> str:
    headers = ["target", "workload", "profile", "c", "n", "errors t/w/s", "p50 ms", "p90 ms", "p99 ms",
               "max ms", "req/s"]
    rows = []
    skipped = []
    for r in rep["results"]:
        if "skipped" in r:
            skipped.append(f"{r['target']} {r['workload']} c={r['concurrency']}: {r['skipped']}")
            continue
        e = r["errors"]
        lat = r["latency_ms"]
        err = f"{e['transport']}/{e['wrong_answer']}/{e['status']}"
        if r.get("warmup_errors"):
            err += f" (+{r['warmup_errors']} warm-up)"
        prof = r["profile_sent"] or r["profile"]
        c = str(r["concurrency"]) + (f" +{r['pace_ms']:g}ms" if r.get("pace_ms") else "")
        rows.append([r["target"], r["workload"], prof, c, str(r["count"]), err,
                     fmt(lat["p50"]), fmt(lat["p90"]), fmt(lat["p99"]), fmt(lat["max"]),
                     fmt(r["throughput_rps"], 1)])
    out = [table(headers, rows, markdown, {3, 4, 6, 7, 8, 9, 10})]
    if skipped:
        out.append("\nSkipped:\n" + "\n".join(("- " if markdown else "  ") + s for s in skipped))
    if rep["ratios"]:
        rh = ["workload", "c", "ref", "other", "ref p50 ms", "other p50 ms", "p50 other/ref",
              "ref req/s", "other req/s", "req/s ref/other"]
        rr = [[x["workload"], str(x["concurrency"]), x["ref"], x["other"], fmt(x["ref_p50_ms"]),
               fmt(x["other_p50_ms"]), fmt(x["p50_ratio"], 1) + "x", fmt(x["ref_rps"], 1),
               fmt(x["other_rps"], 1), fmt(x["throughput_ratio"], 1) + "x"] for x in rep["ratios"]]
        out.append("\nRatios (above 1x: the reference target is faster / serves more):\n")
        out.append(table(rh, rr, markdown, {1, 4, 5, 6, 7, 8, 9}))
    return "\n".join(out)


def render_soak(rep: dict[str, Any], markdown: bool) -> str:
    headers = ["sample", "requests", "RSS MiB", "fds", "procs", "mounts", "cgroups", "(airlock dirs)",
               "p50 ms", "p99 ms", "req/s", "errors"]
    rows = []
    for s in rep["samples"]:
        ch = s.get("chunk")
        rows.append([s["label"], str(s["done"]), f"{s['rss_kb'] / 1024:.1f}", str(s["fds"]), str(s["procs"]),
                     str(s["mounts"]), str(s["cgroups"]), str(s["cgroups_all"]),
                     fmt(ch["latency_ms"]["p50"]) if ch else "", fmt(ch["latency_ms"]["p99"]) if ch else "",
                     fmt(ch["throughput_rps"], 1) if ch else "", str(n_errors(ch)) if ch else ""])
    out = [table(headers, rows, markdown, set(range(1, len(headers))))]
    o = rep["overall"]
    out.append(f"\n{rep['requests']} requests ({', '.join(rep['workloads'])}) at c={rep['concurrency']} "
               f"against {rep['target']} (pid {rep['server_pid']}): {o['ok']} correct, "
               f"errors transport/wrong/status {o['errors']['transport']}/{o['errors']['wrong_answer']}/"
               f"{o['errors']['status']}, p50 {fmt(o['latency_ms']['p50'])} ms, "
               f"p99 {fmt(o['latency_ms']['p99'])} ms, {fmt(o['throughput_rps'], 1)} req/s")
    for m in o["error_samples"]:
        out.append(f"  error: {m}")
    if rep["problems"]:
        out.append("NOT FLAT: " + "; ".join(rep["problems"]))
    else:
        out.append("flat: RSS within +10% + 8 MiB; fds, processes, mounts and cgroups unchanged")
    return "\n".join(out)


def log(args: argparse.Namespace, msg: str) -> None:
    if not args.quiet:
        print(msg, file=sys.stderr, flush=True)


def loadavg() -> Optional[list[float]]:
    try:
        with open("/proc/loadavg") as f:
            return [float(x) for x in f.read().split()[:3]]
    except OSError:
        return None


def json_safe(x: Any) -> Any:
    if isinstance(x, float) and x != x:
        return None
    if isinstance(x, dict):
        return {k: json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_safe(v) for v in x]
    return x


# ---------------------------------------------------------------------------
# Command line.


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="loadgen.py", description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="workloads:\n" + "\n".join(f"  {w.name:<11} [{w.profile}] {w.doc}" for w in WORKLOADS.values()) +
               "\n\ntarget options (after NAME=URL, comma-separated):\n"
               "  api=airlock|peer   the API (probed when not given: airlock answers GET /v1/profiles)\n"
               "  path=/execute      the execute route (airlock default /v1/execute, peer /execute)\n"
               "  url.PROFILE=URL    peer: another instance serving PROFILE (the peer serves one profile per process)\n"
               "  map.PROFILE=NAME   send NAME for airlock's PROFILE; map.PROFILE=- marks it unsupported\n"
               "  token=T            bearer token for this target (default --token)")
    ap.add_argument("--target", action="append", default=[], metavar="NAME=URL[,opt=val...]",
                    help="a server to load; repeat to compare (default airlock=http://127.0.0.1:8000)")
    ap.add_argument("--workloads", "-w", default="", help="comma-separated (default: all; soak: hello)")
    ap.add_argument("--concurrency", "-c", default="1", help="workers, e.g. 8 or 1,8 (default 1)")
    ap.add_argument("--requests", "-n", type=int, default=None,
                    help="requests per (target, workload, concurrency) (default 100 unless --duration)")
    ap.add_argument("--requests-for", default="", metavar="WL=N,...",
                    help="per-workload request counts, e.g. timeout=16,matplotlib=20 "
                         "(default for timeout: min(--requests, 4*c))")
    ap.add_argument("--duration", "-d", type=float, default=None,
                    help="seconds per (target, workload, concurrency); with --requests, whichever ends first")
    ap.add_argument("--pace", type=float, default=0.0, metavar="MS",
                    help="each worker waits MS before each request (default 0: closed loop); "
                         "with a pause the warm pool is full when a request comes, as when an agent "
                         "calls now and then; req/s then counts the pauses too")
    ap.add_argument("--warmup", type=int, default=None,
                    help="requests per cell not counted (default 3; timeout 1; soak 100)")
    ap.add_argument("--baseline", default=None, help="target the ratios are relative to (default: first airlock)")
    ap.add_argument("--json", dest="json_out", default=None, metavar="FILE", help="write machine-readable results")
    ap.add_argument("--markdown", action="store_true", help="print tables in Markdown (for docs/benchmarks.md)")
    ap.add_argument("--token", default=os.environ.get("AIRLOCK_TOKEN", ""),
                    help="bearer token for every target (default $AIRLOCK_TOKEN)")
    ap.add_argument("--soak", type=int, default=None, metavar="N",
                    help="soak mode: N requests against one target, watching --server-pid for leaks")
    ap.add_argument("--server-pid", type=int, default=None, help="soak: the server's pid")
    ap.add_argument("--allow-remote", action="store_true", help="allow targets that are not loopback")
    ap.add_argument("--quiet", "-q", action="store_true", help="no progress lines on stderr")
    args = ap.parse_args(argv)

    try:
        spec, args.requests_for = args.requests_for, {}
        for item in filter(None, (x.strip() for x in spec.split(","))):
            k, eq, v = item.partition("=")
            if not eq or k not in WORKLOADS or not v.isdigit() or int(v) < 1:
                raise ValueError(f"--requests-for {item!r}: expected WORKLOAD=N with a known workload")
            args.requests_for[k] = int(v)
        args.concurrency_list = [int(x) for x in args.concurrency.split(",") if x.strip()]
        if not args.concurrency_list or any(c < 1 or c > 256 for c in args.concurrency_list):
            raise ValueError("--concurrency: 1..256, comma-separated")
    except ValueError as e:
        ap.error(str(e))
    if args.requests is not None and not 1 <= args.requests <= 10_000_000:
        ap.error("--requests: 1..10,000,000")
    if args.duration is not None and not 0 < args.duration <= 86_400:
        ap.error("--duration: 0 < S <= 86400")
    if args.warmup is not None and args.warmup < 0:
        ap.error("--warmup must be >= 0")
    names = [x.strip() for x in args.workloads.split(",") if x.strip()]
    for n in names:
        if n not in WORKLOADS:
            ap.error(f"unknown workload {n!r}; known: {', '.join(WORKLOADS)}")
    if args.soak is not None:
        if args.soak < 1 or args.soak > 10_000_000:
            ap.error("--soak: 1..10,000,000 requests")
        if args.server_pid is None:
            ap.error("--soak needs --server-pid PID (the server to watch)")
        if len(args.concurrency_list) != 1:
            ap.error("--soak takes one --concurrency value")
        if len(args.target) > 1:
            ap.error("--soak runs against one --target")
        names = names or ["hello"]
    else:
        names = names or list(WORKLOADS)
    args.workload_list = [WORKLOADS[n] for n in names]
    if not args.target:
        args.target = ["airlock=http://127.0.0.1:8000"]
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    try:
        targets = [parse_target(s, args.token) for s in args.target]
        if len({t.name for t in targets}) != len(targets):
            raise ValueError("two --target entries have the same name")
        for t in targets:
            probe_target(t, args.allow_remote)
        if args.baseline and args.baseline not in {t.name for t in targets}:
            raise ValueError(f"--baseline {args.baseline}: no such target")
    except (ValueError, RuntimeError) as e:
        print(f"loadgen: {e}", file=sys.stderr)
        return 2
    for t in targets:
        log(args, f"target {t.name}: {t.url} api={t.api} path={t.path} profiles={sorted(t.served)}")

    meta = {
        "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "argv": sys.argv, "python": platform.python_version(), "kernel": platform.release(),
        "cpus": os.cpu_count(), "loadavg_start": loadavg(),
        "targets": [{"name": t.name, "url": t.url, "api": t.api, "path": t.path, "served": t.served}
                    for t in targets],
    }
    try:
        if args.soak is not None:
            rep = run_soak(args, targets[0], args.workload_list, args.concurrency_list[0])
            text = render_soak(rep, args.markdown)
            o = rep["overall"]
            ok = n_errors(o) == 0 and o["warmup_errors"] == 0 and rep["flat"]
            report = {"meta": meta, "soak": rep}
        else:
            rep = run_bench(args, targets, args.workload_list, args.concurrency_list)
            text = render_bench(rep, args.markdown)
            ran = [r for r in rep["results"] if "skipped" not in r]
            ok = all(n_errors(r) == 0 and r["warmup_errors"] == 0 for r in ran) and bool(ran)
            report = {"meta": meta, **rep}
    except RuntimeError as e:
        print(f"loadgen: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("loadgen: interrupted", file=sys.stderr)
        return 130
    meta["loadavg_end"] = loadavg()
    la0, la1 = meta["loadavg_start"], meta["loadavg_end"]
    header = (f"{meta['time']}, {meta['cpus']} CPUs, kernel {meta['kernel']}, Python {meta['python']}, "
              f"load average {la0[0] if la0 else '?'} at start, {la1[0] if la1 else '?'} at end")
    print(("_" + header + "_" if args.markdown else header) + "\n")
    print(text)
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(json_safe(report), f, indent=1)
            f.write("\n")
    if not ok:
        print("\nloadgen: some answers were wrong, or the server was not flat (see above)", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
