#!/usr/bin/env python3
"""Which parts of the runner's per-run path cost a warm run its pages (issue 24).

A warm run's program is a fork of its zygote; CPython 3.11 writes the reference count of every
object it touches, so each page of the zygote that the run's Python path touches is copied
(a minor page fault and a page copied). This loads the runner as a zygote does
(runtime/python/airlock_runner.py: site completion, the profile's preimport and warm-ups,
gc.freeze()), forks children that do what a warm run's program does (warm_rehearse(), then
warm_main() of the request the server sends for `print(1)` on /v1/execute, in an empty working
directory, output to /dev/null) and counts their minor faults (getrusage in the child, median
of -k forks). The request reaches warm_main as the zygote hands it: a dict (made with the C API
in src/exec/zygote_main.cc; here with json.loads in the child before the count starts, which
leaves out the few fresh pages that allocation takes). Then it does the same with one part of
the path replaced by a stub in the parent before the fork, so that the difference is what that
part adds to the pages a run writes (the union: a part whose pages others touch anyway adds
nothing):

  cell alone    the child only runs exec(compile("print(1)")): the floor of a run's program
  as is         the program as a warm print(1) runs it: the zygote's lean path in C++
                (src/exec/lean_cell.cc, built as the test module _airlock_lean: --lean-module),
                or, without it, the runner's Python lean path
  python lean path  the runner's Python lean path (_lean_run, after warm_rehearse()), as a
                zygote without the C++ one runs it; the rows below change that path, and
                their difference is to this row
  whole path    the lean path switched off: Runner.run, as a request the lean path does not
                take (a session, input files, a seed, top-level await...) goes
  bytes in      the request as JSON bytes, parsed by the json module in the run (the zygote's
                fallback for a request its C++ decoder leaves alone)
  no split      the cell compiled in one piece (_split_cell stubbed; no last value shown)
  no guard      the import guard is not installed
  no files      the working directory is not scanned (before and after the cell)
  no reseed     the run's random generators are not reseeded after the fork
  no rehearsal  warm_rehearse() is skipped (a run then pays its pages on the request's time)
  one zygote rehearsal  the zygote walks the lean path once instead of until its bytecode has
                settled (zygote_preimport's rehearsals)
  pools not filled  the zygote leaves the free blocks of CPython's allocator pools as they are
                (zygote_main.cc's FillAllocatorPools, which every other row does as the zygote
                does, with ctypes)

The stubs change what the runner does: they are measurements of what a rewrite could save,
never a configuration.

    bench/runner_pages.py --url http://127.0.0.1:8000 [--profiles minimal,data-science] [-k 15] [--json F]

The server is only asked for each profile's preimport and policy (GET /v1/profiles/NAME).
Standard library only; the interpreter is /usr/bin/python3, the one the sandboxes run.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cpu_per_run import ZYGOTE_PRELUDE, PYTHON, RUNNER, lean_module_arg, runner_request, write_json
from sessions import Client  # one keep-alive connection, retried once (bench/sessions.py)

VARIANTS = ["cell alone", "as is", "python lean path", "whole path", "bytes in", "no split", "no guard", "no files", "no reseed",
            "no rehearsal", "one zygote rehearsal", "pools not filled"]

# Run by /usr/bin/python3 -I -S: argv = runner preimport request variant k lean-module-dir. Prints
# the children's minor faults, one a line.
CHILD = ZYGOTE_PRELUDE + r"""
import gc, json, os, resource, sys
path, mods, request, variant, k = sys.argv[1], [m for m in sys.argv[2].split(",") if m], sys.argv[3], sys.argv[4], int(sys.argv[5])
runner = load_runner(path, mods, rehearsals=1 if variant == "one zygote rehearsal" else None)
lean = load_lean(runner, sys.argv[6] if variant in ("as is", "pools not filled") else "")
raw = request.encode()
if variant == "whole path":
    runner._lean_request = lambda raw: None
elif variant == "no split":
    runner._split_cell = lambda text, filename, lines: (compile(text, filename, "exec"), None)
elif variant == "no guard":
    runner.ImportGuard.install = lambda self: None
elif variant == "no files":
    runner._scan_files = lambda: ({}, True)
elif variant == "no reseed":
    runner._reseed_after_fork = lambda seed: None
elif variant == "no rehearsal":
    runner.warm_rehearse = lambda: None
devnull = os.open("/dev/null", os.O_WRONLY)
gc.collect()
gc.freeze()
if variant != "pools not filled":
    fill_pools()
for _ in range(k):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        for fd in (1, 2, 3):
            os.dup2(devnull, fd)
        arg = raw if variant == "bytes in" else json.loads(raw)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        if variant == "cell alone":
            exec(compile("print(1)", "main.py", "exec"), {"__name__": "__main__"})
            sys.stdout.flush()
        else:
            run_program(runner, lean, arg)
        os.write(w, str(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before).encode())
        os._exit(0)
    os.close(w)
    out = os.read(r, 64)
    os.close(r)
    os.waitpid(pid, 0)
    print(int(out), flush=True)
"""


def measure(mods, request, variant, k, workdir, lean_dir):
    out = subprocess.run([PYTHON, "-I", "-S", "-c", CHILD, RUNNER, ",".join(mods), request, variant, str(k), lean_dir],
                         cwd=workdir, capture_output=True, text=True, check=True).stdout
    return statistics.median(int(x) for x in out.split())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:8000", help="an airlock, asked for its profiles")
    ap.add_argument("--token", default=os.environ.get("AIRLOCK_TOKEN", ""))
    ap.add_argument("--profiles", default="minimal,data-science")
    ap.add_argument("-k", type=int, default=15, help="forks per variant (the median is kept)")
    ap.add_argument("--variants", default=",".join(VARIANTS), help="which rows (default: all)")
    ap.add_argument("--json", help="write the raw results here")
    lean_module_arg(ap)
    args = ap.parse_args()

    variants = [v for v in args.variants.split(",") if v]
    unknown = set(variants) - set(VARIANTS) - {""}
    if unknown or not {"cell alone", "as is"} <= set(variants):
        raise SystemExit(f"--variants: unknown {sorted(unknown)}, or 'cell alone' and 'as is' missing")
    out = {"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "k": args.k, "uname": os.uname().release,
           "as_is": "C++ lean path (lean_cell.cc)" if args.lean_module else "Python lean path", "profiles": {}}
    with tempfile.TemporaryDirectory() as workdir:
        for profile in args.profiles.split(","):
            status, data = Client(args.url, args.token).request("GET", f"/v1/profiles/{profile}")
            if status != 200:
                raise SystemExit(f"GET /v1/profiles/{profile}: {status} {data[:200]!r}")
            prof = json.loads(data)
            mods, request = prof.get("preimport", []), runner_request(prof)
            out["profiles"][profile] = {v: measure(mods, request, v, args.k, workdir, args.lean_module)
                                        for v in variants}
    profiles = list(out["profiles"])
    print(f"minor page faults of a warm run's program (median of {args.k} forks), and what each part adds\n")
    print("| the child runs | " + " | ".join(profiles) + " |")
    print("|---|" + "---:|" * len(profiles))
    for v in variants:
        cells = []
        for p in profiles:
            row = out["profiles"][p]
            base = "as is" if v in ("pools not filled",) or "python lean path" not in row else "python lean path"
            delta = "" if v in ("cell alone", "as is", "python lean path") else f" ({row[v] - row[base]:+.0f})"
            cells.append(f"{row[v]:.0f}{delta}")
        print(f"| {v} | " + " | ".join(cells) + " |")
    cells = [f"**{out['profiles'][p]['as is'] / out['profiles'][p]['cell alone']:.1f}x**" for p in profiles]
    print("| as is / cell alone | " + " | ".join(cells) + " |")
    write_json(args.json, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
