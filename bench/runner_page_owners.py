#!/usr/bin/env python3
"""Which of the zygote's pages a warm run's program copies, and what lives on them (issue 24).

bench/runner_pages.py says how many pages each part of the runner's per-run path adds, by
stubbing parts out. This says which pages: it loads the runner as a zygote does, forks a child
that does what a warm run's program does (warm_rehearse(), then warm_main() of the server's
request for `print(1)`), and reads the child's /proc/self/pagemap before and after. A page the
child shared with its parent before ("present", not "exclusively mapped", bit 56) and owns
after was copied on write by the child: those are the run's copy-on-write faults, not its
fresh allocations. Then, in the same child (nothing it does after the second read counts), it
walks every object it can reach from the garbage collector's lists and the interpreter's
roots, and names each copied page after the objects that start on it: the runner's functions
and code objects, other modules' functions, strings, dicts, types... A page no object starts
on is memory that is not a Python object (an interpreter structure, a C library's data, a
stack, the allocator's own headers, or the middle of a large object).

    bench/runner_page_owners.py --url http://127.0.0.1:8000 [--profile minimal] [--phase run|rehearsal|both|cell]
                                [--top 40] [--json F]

--phase says which part is counted: `run` (default) the request after the rehearsal (what a
run pays on the request's time), `rehearsal` the rehearsal alone, `both` the two (the run's
copies in all, on the runner's Python lean path), `program` what a warm run's program runs (the
zygote's lean path in C++ when --lean-module has it, src/exec/lean_cell.cc), `cell` only exec(compile("print(1)")) in the fork (the issue's reference). The table counts pages by the kinds of objects on them (a page with a runner
function and a string counts in both rows), and by mapping. Standard library only; the
interpreter is /usr/bin/python3, the one the sandboxes run. A measurement, not a test.
"""

import argparse
import bisect
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cpu_per_run import ZYGOTE_PRELUDE, PYTHON, RUNNER, lean_module_arg, runner_request, write_json
from sessions import Client

# Run by /usr/bin/python3 -I -S: argv = runner preimport request phase lean-module-dir. Prints one
# JSON line.
CHILD = ZYGOTE_PRELUDE + r"""
import gc, json, os, struct, sys, types
path, mods, request, phase = sys.argv[1], [m for m in sys.argv[2].split(",") if m], sys.argv[3], sys.argv[4]
runner = load_runner(path, mods)
lean = load_lean(runner, sys.argv[5] if phase == "program" else "")
PAGE = os.sysconf("SC_PAGE_SIZE")
devnull = os.open("/dev/null", os.O_WRONLY)

def mappings():
    out = []
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            if "w" in parts[1] and "p" in parts[1]:
                out.append((lo, hi, parts[5] if len(parts) > 5 else "[anon]"))
    return out

def snapshot(maps):
    # One bytes object per mapping (a fresh allocation each: read() of a large size mmaps).
    fd = os.open("/proc/self/pagemap", os.O_RDONLY)
    try:
        return [os.pread(fd, 8 * ((hi - lo) // PAGE), 8 * (lo // PAGE)) for lo, hi, _ in maps]
    finally:
        os.close(fd)

gc.collect()
gc.freeze()
fill_pools()  # as the zygote does (src/exec/zygote_main.cc)
pid = os.fork()
if pid == 0:
    os.dup2(devnull, 1)  # stderr stays: a failure of this script shows
    os.dup2(devnull, 3)
    arg = json.loads(request.encode())
    maps = mappings()
    if phase == "run":
        runner.warm_rehearse()
    first = snapshot(maps)
    if phase in ("rehearsal", "both"):
        runner.warm_rehearse()
    if phase in ("run", "both"):
        runner.warm_main(arg, -1)
    if phase == "program":
        run_program(runner, lean, arg)
    if phase == "cell":
        exec(compile("print(1)", "main.py", "exec"), {"__name__": "__main__"})
        sys.stdout.flush()
    second = snapshot(maps)
    copied = {}
    for (lo, hi, name), a, b in zip(maps, first, second):
        n = min(len(a), len(b)) // 8
        va = struct.unpack("%dQ" % n, a[:8 * n])
        vb = struct.unpack("%dQ" % n, b[:8 * n])
        for i in range(n):
            x, y = va[i], vb[i]
            if (x >> 63) & 1 and not (x >> 56) & 1 and (y >> 56) & 1:
                copied[(lo // PAGE) + i] = name
    del first, second
    # Every object reachable from the gc's lists (frozen ones included) and the interpreter,
    # with its address range (the gc header before it for a tracked type; a dict's keys table,
    # a separate block, as one more range).
    seen = {}
    stack = list(gc.get_objects()) + [sys.modules, sys.__dict__, sys.intern]
    while stack:
        o = stack.pop()
        i = id(o)
        if i in seen:
            continue
        seen[i] = o
        if type(o) in (str, int, float, bytes):
            continue
        try:
            stack.extend(gc.get_referents(o))
        except Exception:
            pass
        if type(o) is types.CodeType:
            stack.extend(o.co_consts)
            stack.extend(o.co_names)
            stack.extend(o.co_varnames)
    runner_file = "/sandbox/airlock_runner.py"
    owner = {}  # id of a dict or tuple -> what holds it
    for o in list(seen.values()):
        t = type(o)
        if t is types.ModuleType:
            owner[id(o.__dict__)] = "module " + o.__name__
        elif isinstance(o, type):
            d = gc.get_referents(o)
            for x in d:
                if type(x) is dict:
                    owner.setdefault(id(x), "class " + o.__qualname__)
        elif t is types.CodeType:
            for x in (o.co_consts, o.co_names):
                owner.setdefault(id(x), "code " + o.co_qualname)
        elif t is types.FunctionType:
            owner.setdefault(id(o.__dict__), "function " + o.__qualname__)
    def where(filename):
        return "runner" if filename == runner_file else os.path.basename(filename).split(".")[0]
    def describe(o):
        t = type(o)
        if t is types.FunctionType:
            return f"function {where(o.__code__.co_filename)}:{o.__qualname__}"
        if t is types.CodeType:
            return f"code {where(o.co_filename)}:{o.co_qualname}"
        if t is str:
            return "str " + repr(o[:32])
        if t in (dict, tuple):
            return f"{t.__name__} of {owner.get(id(o), '?')}"
        if t is types.ModuleType:
            return "module " + o.__name__
        if isinstance(o, type):
            return "type " + o.__qualname__
        if t is int:
            return "int"
        if t in (types.BuiltinFunctionType, types.MethodDescriptorType, types.GetSetDescriptorType,
                 types.MemberDescriptorType, types.WrapperDescriptorType, types.ClassMethodDescriptorType):
            return t.__name__ + " " + o.__qualname__
        return t.__name__  # (no attribute of an instance is read: a lazy module would import)
    ranges = []
    import ctypes
    for i, o in seen.items():
        try:
            size = sys.getsizeof(o)
        except Exception:
            size = 16
        head = 16 if gc.is_tracked(o) or gc.is_finalized(o) else 0
        ranges.append((i - head, i - head + size, describe(o)))
        if type(o) is dict and size > 64:
            keys = ctypes.c_void_p.from_address(i + 32).value
            if keys:
                ranges.append((keys, keys + size - 64, "keys of " + describe(o)))
    ranges.sort()
    result = {"pid": os.getpid(), "page": PAGE, "copied": {str(p): n for p, n in copied.items()}, "ranges": ranges}
    with open(os.environ["OWNERS_OUT"], "w") as f:
        json.dump(result, f)
    os._exit(0)
_, status = os.waitpid(pid, 0)
if status:
    sys.stderr.write(f"the forked child ended with status {status:#x}\n")
    sys.exit(1)
"""


def static_symbols(binary):
    """[(address, size, name)] of the interpreter's exported data (nm -D), sorted; [] without nm."""
    try:
        text = subprocess.run(["nm", "-D", "-S", "--defined-only", os.path.realpath(binary)], capture_output=True,
                              text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return []
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2] in "BbDd":
            out.append((int(parts[0], 16), int(parts[1], 16), parts[3]))
    return sorted(out)


def not_an_object(addr, mapping, symbols):
    """What a write that fell outside every live object it could name wrote to."""
    if mapping == "[anon]" and addr % POOL < POOL_HEADER:
        return "(a pymalloc pool's header: a block allocated or freed in a shared pool)"
    if mapping in ("[anon]", "[heap]"):
        return f"(no live object: a freed block, a frame or C data; {mapping})"
    if mapping == "[stack]":
        return "(the C stack)"
    for start, size, name in symbols:
        if start <= addr < start + max(size, 1):
            return f"(the interpreter's static data: {name})"
    return f"(static data of {os.path.basename(mapping)}, not an exported symbol)"


POOL, POOL_HEADER = 16 << 10, 48  # CPython 3.11's obmalloc: 16 KiB pools, a 48-byte header


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:8000", help="an airlock, asked for its profiles")
    ap.add_argument("--token", default=os.environ.get("AIRLOCK_TOKEN", ""))
    ap.add_argument("--profile", default="minimal")
    ap.add_argument("--phase", default="run", choices=["run", "rehearsal", "both", "program", "cell"])
    ap.add_argument("--top", type=int, default=60, help="list this many culprits")
    ap.add_argument("--json", help="write the raw results here")
    lean_module_arg(ap)
    args = ap.parse_args()

    status, data = Client(args.url, args.token).request("GET", f"/v1/profiles/{args.profile}")
    if status != 200:
        raise SystemExit(f"GET /v1/profiles/{args.profile}: {status} {data[:200]!r}")
    prof = json.loads(data)
    mods, request = prof.get("preimport", []), runner_request(prof)
    with tempfile.TemporaryDirectory() as workdir:
        owners_out = os.path.join(workdir, "owners.json")
        perf_out = os.path.join(workdir, "perf.data")
        cmd = [PYTHON, "-I", "-S", "-c", CHILD, RUNNER, ",".join(mods), request, args.phase, args.lean_module]
        perf = ["perf", "record", "-q", "-e", "exceptions:page_fault_user", "-o", perf_out, "--"]
        out = subprocess.run(perf + cmd, cwd=workdir, capture_output=True, text=True,
                             env=dict(os.environ, OWNERS_OUT=owners_out))
        if out.returncode != 0 or not os.path.exists(owners_out):
            raise SystemExit(f"the child failed (exit {out.returncode}): {out.stdout[-1000:]}{out.stderr[-2000:]}")
        with open(owners_out) as f:
            res = json.load(f)
        script = subprocess.run(["perf", "script", "-i", perf_out, "-F", "pid,trace"], capture_output=True,
                                text=True, check=True).stdout
    page = res["page"]
    copied = {int(p): m for p, m in res["copied"].items()}
    # The first write fault of the child on each copied page: the write that copied it.
    first = {}
    for line in script.splitlines():
        parts = line.split()
        if len(parts) < 4 or int(parts[0]) != res["pid"]:
            continue
        fields = dict(x.split("=", 1) for x in parts[1:] if "=" in x)
        addr, code = int(fields["address"], 16), int(fields["error_code"], 16)
        if code & 2 and addr // page in copied and addr // page not in first:
            first[addr // page] = addr
    symbols = static_symbols(PYTHON)
    ranges = res["ranges"]
    starts = [r[0] for r in ranges]
    culprits, groups = {}, {}
    for p in copied:
        addr = first.get(p)
        if addr is None:
            what = "(no write fault seen)"
        else:
            what = not_an_object(addr, copied[p], symbols)
            last = bisect.bisect_right(starts, addr) - 1  # the last range starting at or before addr
            k = last
            while k >= 0 and k > last - 50:
                lo, hi, desc = ranges[k]
                if lo <= addr < hi:
                    what = desc
                    break
                k -= 1
        culprits[what] = culprits.get(what, 0) + 1
        group = what.split(" ", 1)[0] if not what.startswith("(") else what.split(":")[0].split(";")[0].rstrip(")") + ")"
        if what.startswith(("function runner", "code runner")):
            group += " (runner)"
        groups[group] = groups.get(group, 0) + 1
    print(f"{args.profile}, phase {args.phase}: {len(copied)} pages copied on write, "
          f"{len(first)} with their first write fault seen\n")
    print("| what the first write to a copied page wrote | pages |\n|---|---:|")
    for k, v in sorted(groups.items(), key=lambda kv: -kv[1]):
        print(f"| {k} | {v} |")
    print("\n| the object written | pages |\n|---|---:|")
    for k, v in sorted(culprits.items(), key=lambda kv: (-kv[1], kv[0]))[:args.top]:
        print(f"| {k.replace('|', '/')} | {v} |")
    write_json(args.json, {"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "profile": args.profile,
                           "phase": args.phase, "uname": os.uname().release, "copied": len(copied),
                           "groups": groups, "culprits": culprits})
    return 0


if __name__ == "__main__":
    sys.exit(main())
