#!/usr/bin/env python3
"""The CPU one run costs (issue 11), against the floors its isolation sets, in one run.

For each profile (default: minimal and data-science) it measures whole-machine CPU
(`/proc/stat`: user + nice + system + irq + softirq) per run at concurrency c (default 8):

  fork            a Python interpreter that imported the profile's `preimport` modules (as a
                  zygote does, then gc.freeze()) forks a child that exits at once; c children
                  in flight at a time
  fork+ns         the same, the child first calling unshare(user, mount, net, ipc, uts)
  fork+ns-net     the same without the network namespace (what a run pays when it shares its
                  zygote's: see docs/benchmarks.md)
  clone(ns-net+pid)  one clone(2) into a run's namespaces as the default server makes them
                  (user, pid, mount, ipc, uts; the network namespace shared), the child
                  exiting at once: what a run whose program is its own process costs
  clone(ns-net+pid), init forks   the same, the child (pid 1 of its namespace) forking a
                  second copy of the interpreter and waiting for it, as a warm run's init forks
                  its program: the difference to the row above is what the init's copy costs
  fork, runner    the floor's interpreter loads airlock's Python runner as a zygote does
                  (runtime/python/airlock_runner.py: its site completion, the profile's
                  preimport and warm-ups, gc.freeze()); each child runs what a warm run's program
                  runs in Python, the rehearsal then the request's `print(1)` cell, its output
                  to /dev/null, and exits: the runner's own CPU in a fresh fork, with no
                  isolation, no server and no HTTP
  fork, cell      the interpreter of `fork, runner`, each child running the cell alone
                  (exec(compile("print(1)")), output to /dev/null): the pages a run's program
                  must write, against which the runner's are set (issue 24: at most 1.5x)
  clone(ns-net+pid), runner   the same child cloned into a run's namespaces (pid 1 there)
  airlock warm    POST /v1/execute of `print(1)` to a running airlock (warm pool), closed loop
                  on c keep-alive connections; this process's own CPU (the load generator) is
                  subtracted
  airlock cold    the same against a second airlock started with `--pool-size 0` (--cold-url)

Each row also gets its minor page faults per run (much of what a fork of a large interpreter
costs is the pages it copies): for a floor those of its children (wait4) and of
the parent meanwhile (a page shared with the children is copied when the parent writes it too);
for an airlock row the page faults charged to the cgroup its zygotes and runs live in (memory
controller's pgfault: each run's init and program, and the zygotes that fork them; nothing else
of the host should run there, e.g. a second airlock started by the same service), and the
server's own (/proc/PID/stat). The server is found by the port it listens on: run this on its
host, as root.

It prints airlock warm / (fork+ns), the issue's ratio (target <= 2.5), airlock warm / fork, the
cold ratio and the runner's faults / the cell's (issue 24: target <= 1.5). It
says when a zygote of the profile was replaced (recycled or restarted) during an airlock row: that
zygote's start-up (seconds of CPU for data-science) is then in the row.

    bench/cpu_per_run.py --url http://127.0.0.1:8000 [--cold-url http://127.0.0.1:8001] \
        [-n 1500] [-c 8] [--profiles minimal,data-science] [--json F]

Root (or unprivileged user namespaces) is needed for the fork+ns floor. Standard library only.
The floors' interpreter is /usr/bin/python3, the one the sandboxes run.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

from sessions import Client  # one keep-alive connection, retried once (bench/sessions.py)

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
CLONE_NEWPID = 0x20000000
NS_ALL = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable

# Python source for the benches that load the runner as a zygote does (src/exec/zygote_main.cc),
# put before their own scripts. load_runner: the runner and its helpers, loaded as kBootstrap
# loads them, then the profile's preimport (`rehearsals`: the zygote's walks of the lean path,
# when not its own number). fill_pools: what FillAllocatorPools does once the runner is loaded
# and frozen, every free block of every started pool of CPython's small-object allocator taken
# and kept, so that a fork's allocations start pools of their own.
ZYGOTE_PRELUDE = """
def load_runner(path, mods, rehearsals=None):
    import os, types
    helpers = {}  # its helper modules' sources, beside it, as the zygote has them embedded
    for name in ("airlock_charts", "airlock_display"):
        with open(os.path.join(os.path.dirname(path), name + ".py"), "rb") as f:
            helpers[name] = f.read()
    runner = types.ModuleType("airlock_runner")
    runner.__file__ = "/sandbox/airlock_runner.py"
    with open(path, "rb") as f:
        exec(compile(f.read(), "/sandbox/airlock_runner.py", "exec"), runner.__dict__)
    runner.complete_site()
    if rehearsals is not None:
        runner._ZYGOTE_REHEARSALS = rehearsals
    runner.zygote_preimport(mods, helpers)
    return runner


def load_lean(runner, module_dir):
    # The zygote's lean path in C++ (src/exec/lean_cell.cc), built as the test module
    # _airlock_lean, prepared as the zygote prepares it; None without it ("": the runner's
    # Python lean path, as a zygote whose C++ path is off).
    if not module_dir:
        return None
    import sys
    sys.path.insert(0, module_dir)
    import _airlock_lean
    _airlock_lean.prepare(runner.__dict__, runner.zygote_prepare_lean())
    return _airlock_lean


def run_program(runner, lean, request):
    # What a warm run's program runs (zygote_main.cc, RunProgram): the C++ lean path when it
    # takes the request; else, after the rehearsal of the Python lean path (made only when
    # there is no C++ one), warm_main. Returns the exit code.
    if lean is None:
        runner.warm_rehearse()
    else:
        code = lean.run(request, -1)
        if code is not None:
            return code
    return runner.warm_main(request, -1)


def fill_pools():
    import ctypes
    malloc = ctypes.pythonapi.PyObject_Malloc
    malloc.restype, malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    for size in range(16, 513, 16):
        for _ in range((256 << 10) // size):
            if malloc(size) & 0x3FFF == 48:
                break
"""

# The floor, run by /usr/bin/python3 in a process of its own: argv = modules flags n c.
# Prints the number of children that failed to unshare (they must be 0), the minor page faults
# of the children (wait4) and those of the parent meanwhile (its pages shared with the children
# are copied when it writes them too).
FLOOR = ZYGOTE_PRELUDE + r"""
import ctypes, gc, importlib, json, os, resource, sys
mods = [m for m in sys.argv[1].split(",") if m]
flags, n, c, shape = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
SYS_CLONE, SIGCHLD = 56, 17  # x86-64
run = None
if shape.startswith("runner"):
    runner = load_runner(sys.argv[6], mods)  # as the zygote loads it
    lean = load_lean(runner, sys.argv[8])
    # The request as the zygote hands it to warm_main: a dict (made there with the C API; here
    # before the fork, so that a child only touches it, a page or two as the zygote's fresh one).
    request, devnull = json.loads(sys.argv[7]), os.open("/dev/null", os.O_WRONLY)

    def run():
        for fd in (1, 2, 3):
            os.dup2(devnull, fd)
        if shape == "runner-cell":
            # Only the cell, compiled and run by the interpreter itself: the pages a run's program
            # must write (the issue's reference for the runner's).
            exec(compile("print(1)", "main.py", "exec"), {"__name__": "__main__"})
            sys.stdout.flush()
            os._exit(0)
        os._exit(run_program(runner, lean, request))
for m in mods:
    importlib.import_module(m)
libc = ctypes.CDLL(None, use_errno=True)
gc.collect()
gc.freeze()
if run is not None:
    fill_pools()
sys.stdout.write("ready\n"); sys.stdout.flush()
sys.stdin.readline()
failed = started = running = child_faults = 0
own_faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
while started < n or running:
    while running < c and started < n:
        if shape in ("fork", "runner", "runner-cell"):
            pid = os.fork()
            if pid == 0:
                if flags and libc.unshare(flags) != 0:
                    os._exit(3)
                if run:
                    run()
                os._exit(0)
        else:
            # As a warm run is made: one clone(2) into the namespaces (a pid namespace too), the
            # child being the namespace's init; with shape "init" it forks the program (a second
            # copy of the interpreter) and waits for it, as a run's init does.
            pid = libc.syscall(SYS_CLONE, flags | SIGCHLD, 0, 0, 0, 0)
            if pid == 0:
                if run:
                    run()
                if shape == "init":
                    q = os.fork()
                    if q == 0:
                        os._exit(0)
                    os.waitpid(q, 0)
                os._exit(0)
            if pid < 0:
                os._exit(4)
        started += 1
        running += 1
    _, status, usage = os.wait4(-1, 0)
    running -= 1
    child_faults += usage.ru_minflt
    if status != 0:
        failed += 1
own_faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - own_faults
sys.stdout.write(f"{failed} {child_faults} {own_faults}\n"); sys.stdout.flush()
"""


def machine_cpu_s():
    """Busy CPU seconds of the whole machine so far (all cores)."""
    with open("/proc/stat") as f:
        fields = f.readline().split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq = (int(x) for x in fields[:7])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


RUNNER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "runtime", "python", "airlock_runner.py")


def runner_request(profile_json):
    """The config a warm run's program gets for `print(1)` on /v1/execute, as the server writes it
    (model::RunnerConfigToJson; read off a run's control socket with strace): the profile's
    policy, the result caps, and the files a /v1 run reports (so the runner scans its working
    directory before and after the cell)."""
    return json.dumps({"allowed_imports": None if profile_json.get("any_import") else profile_json.get("allowed_imports"),
                       "blocklist": profile_json.get("blocklist", []),
                       "capture_figures": bool(profile_json.get("matplotlib")), "code": "print(1)",
                       "filename": "main.py", "max_out_bytes": 10 << 20, "max_out_files": 64,
                       "max_result_bytes": 4 << 20, "max_result_values": 65536, "max_results": 16,
                       "preimport": profile_json.get("preimport", []), "result_fd": 3,
                       "runtime_imports_mode": "enforce"}, separators=(",", ":"))


# The zygote's lean path in C++ built as a Python module by the default build (tests/unit/runtime).
DEFAULT_LEAN_MODULE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "tests", "unit",
                                       "runtime")


def lean_module_arg(ap):
    """--lean-module for the benches that run a warm run's program (its default: the build's)."""
    default = DEFAULT_LEAN_MODULE_DIR if os.path.exists(os.path.join(DEFAULT_LEAN_MODULE_DIR, "_airlock_lean.so")) else ""
    ap.add_argument("--lean-module", default=default,
                    help="the directory of _airlock_lean.so, the zygote's lean path in C++ as the build makes it "
                         "for tests ('': none, a warm run's program then runs the runner's Python lean path "
                         f"as a zygote without it does; default: {default or 'none built'})")


def floor(mods, flags, n, c, shape="fork", request=None, lean_dir=""):
    # The runner floors start their interpreter as the zygote does (isolated, no site).
    extra = [RUNNER, request, lean_dir] if shape.startswith("runner") else []
    opts = ["-I", "-S"] if extra else []
    # In an empty directory, as a run's working directory is: the runner scans it before and
    # after the cell (files a run wrote are reported), and the bench's own directory is large.
    workdir = tempfile.TemporaryDirectory(prefix="airlock-cpu-per-run-")
    p = subprocess.Popen([PYTHON] + opts +
                         ["-c", FLOOR, ",".join(mods), str(flags), str(n), str(c), shape] + extra,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=workdir.name)
    assert p.stdout.readline().strip() == "ready", "the floor's interpreter did not start"
    t0, w0 = machine_cpu_s(), time.monotonic()
    p.stdin.write("go\n")
    p.stdin.flush()
    failed, child_faults, parent_faults = (int(x) for x in p.stdout.readline().split())
    t1, w1 = machine_cpu_s(), time.monotonic()
    p.wait()
    workdir.cleanup()
    if failed:
        what = "ran the runner to a non-zero exit" if extra else f"failed to unshare({flags:#x}): run as root"
        raise SystemExit(f"{failed} of {n} floor children ({shape}) {what}")
    return {"cpu_ms_per_run": (t1 - t0) * 1000 / n, "runs_per_s": n / (w1 - w0), "n": n,
            "minflt_per_run": child_faults / n, "parent_minflt_per_run": parent_faults / n}


def memory_cgroup(pid):
    """The directory of pid's memory cgroup (v1's memory controller, or v2's unified tree)."""
    with open(f"/proc/{pid}/cgroup") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            if "memory" in controllers.split(","):
                return "/sys/fs/cgroup/memory" + path
            if controllers == "" and os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
                return "/sys/fs/cgroup" + path
    return None


def runs_cgroup(server):
    """The cgroup the server makes its zygotes' and runs' cgroups in (the parent of a zygote's),
    or None. Every process of a run is charged there, also one that is killed before its
    parent reaps it (which /proc/PID/stat's cminflt of its reaper never sees)."""
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/stat") as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) == server:
                    path = memory_cgroup(int(name))
                    if path and path != memory_cgroup(server):
                        return os.path.dirname(path)
        except (OSError, ValueError, IndexError):
            continue
    return None


def cgroup_faults(path):
    """Page faults (minor and major) of everything ever charged to the cgroup at path and below."""
    with open(os.path.join(path, "memory.stat")) as f:
        stat = dict(line.split() for line in f)
    return int(stat["total_pgfault"] if "total_pgfault" in stat else stat["pgfault"])


def proc_minflt(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[7])


def listening_pid(url):
    """The process listening on url's port on this host (None: not found, or not ours to see)."""
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                for line in f.readlines()[1:]:
                    cols = line.split()
                    if cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:
                        inodes.add(f"socket:[{cols[9]}]")
        except OSError:
            pass
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            for fd in os.listdir(f"/proc/{name}/fd"):
                if os.readlink(f"/proc/{name}/fd/{fd}") in inodes:
                    return int(name)
        except OSError:
            continue
    return None


def zygote_replacements(url, token, profile):
    """Zygotes of `profile` replaced so far (recycled after their run count or age, or restarted):
    each start of one is a new interpreter importing the profile's modules, seconds of CPU for
    data-science, that lands in whichever window it falls in."""
    status, data = Client(url, token).request("GET", "/metrics")
    if status != 200:
        return None
    total = 0
    for line in data.decode().splitlines():
        for name in ("airlock_zygote_recycles_total", "airlock_zygote_restarts_total"):
            if line.startswith(f'{name}{{profile="{profile}"}} '):
                total += int(float(line.split()[-1]))
    return total


def closed_loop(clients, body, count, errors):
    """POSTs `body` (a print(1) run) to /v1/execute `count` times in all, one thread per client
    (a closed loop: each sends its next request when it has its answer); a wrong answer goes to
    `errors`."""
    left = iter(range(count))
    lock = threading.Lock()

    def worker(cl):
        while True:
            with lock:
                if next(left, None) is None:
                    return
            status, data = cl.request("POST", "/v1/execute", body)
            if status != 200 or json.loads(data).get("stdout") != "1\n":
                errors.append((status, data[:300]))

    ts = [threading.Thread(target=worker, args=(cl,)) for cl in clients]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def airlock(url, token, profile, n, c, warmup):
    body = {"code": "print(1)", "profile": profile}
    clients = [Client(url, token) for _ in range(c)]
    errors = []

    def load(count):
        closed_loop(clients, body, count, errors)

    load(warmup)
    time.sleep(1.0)  # the pool refills after the warm-up
    z0 = zygote_replacements(url, token, profile)
    server = listening_pid(url)
    cgroup = runs_cgroup(server) if server else None
    if cgroup:
        faults0, server0 = cgroup_faults(cgroup), proc_minflt(server)
    t0, own0, w0 = machine_cpu_s(), time.process_time(), time.monotonic()
    load(n)
    t1, own1, w1 = machine_cpu_s(), time.process_time(), time.monotonic()
    z1 = zygote_replacements(url, token, profile)
    if errors:
        raise SystemExit(f"{len(errors)} wrong answers from {url}, e.g. {errors[0]}")
    out = {"cpu_ms_per_run": ((t1 - t0) - (own1 - own0)) * 1000 / n,
           "loadgen_cpu_ms_per_run": (own1 - own0) * 1000 / n,
           "runs_per_s": n / (w1 - w0), "n": n,
           "zygotes_replaced": None if z0 is None or z1 is None else z1 - z0}
    if cgroup:
        # The zygotes and runs (init and program): the pool refills the runs taken (each pays its
        # fork and rehearsal up front) before the second count.
        time.sleep(1.0)
        out["minflt_per_run"] = (cgroup_faults(cgroup) - faults0) / n
        out["server_minflt_per_run"] = (proc_minflt(server) - server0) / n
        out["runs_cgroup"] = cgroup
    return out


def print_rows(title, names, rows, cell):
    """A Markdown table: one line per name, one column per profile of rows ({profile: {name: r}}),
    each cell(r) ("" where the profile has no such row); lines of empty cells are left out."""
    print(f"| {title} | " + " | ".join(rows) + " |")
    print("|---|" + "---:|" * len(rows))
    for name in names:
        cells = [cell(r[name]) if name in r else "" for r in rows.values()]
        if any(cells):
            print(f"| {name} | " + " | ".join(cells) + " |")


def write_json(path, out):
    """The raw results at path (None: nowhere)."""
    if path:
        with open(path, "w") as f:
            json.dump(out, f, indent=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:8000", help="an airlock with its warm pool")
    ap.add_argument("--cold-url", help="an airlock started with --pool-size 0")
    ap.add_argument("--token", default=os.environ.get("AIRLOCK_TOKEN", ""))
    ap.add_argument("--profiles", default="minimal,data-science")
    ap.add_argument("-n", type=int, default=1500, help="runs per cell (cold: a fifth)")
    ap.add_argument("-c", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--json", help="write the raw results here")
    lean_module_arg(ap)
    args = ap.parse_args()

    out = {"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "c": args.c, "n": args.n,
           "runner_program": "C++ lean path (lean_cell.cc)" if args.lean_module else "Python lean path",
           "loadavg_before": os.getloadavg(), "nproc": os.cpu_count(), "uname": os.uname().release,
           "profiles": {}}
    for profile in args.profiles.split(","):
        status, data = Client(args.url, args.token).request("GET", f"/v1/profiles/{profile}")
        if status != 200:
            raise SystemExit(f"GET /v1/profiles/{profile}: {status} {data[:200]!r}")
        prof = json.loads(data)
        mods = prof.get("preimport", [])
        row = {"preimport": mods}
        row["fork"] = floor(mods, 0, args.n, args.c)
        row["fork+ns"] = floor(mods, NS_ALL, args.n, args.c)
        row["fork+ns-net"] = floor(mods, NS_ALL & ~CLONE_NEWNET, args.n, args.c)
        # What a warm run's own shape adds (shared network namespace, as the default server):
        # the pid namespace, then the run's init being a second copy of the interpreter.
        run_ns = (NS_ALL & ~CLONE_NEWNET) | CLONE_NEWPID
        row["clone(ns-net+pid)"] = floor(mods, run_ns, args.n, args.c, "clone")
        row["clone(ns-net+pid), init forks"] = floor(mods, run_ns, args.n, args.c, "init")
        request = runner_request(prof)
        row["fork, cell"] = floor(mods, 0, args.n, args.c, "runner-cell", request, args.lean_module)
        row["fork, runner"] = floor(mods, 0, args.n, args.c, "runner", request, args.lean_module)
        row["clone(ns-net+pid), runner"] = floor(mods, run_ns, args.n, args.c, "runner-clone", request,
                                                  args.lean_module)
        row["airlock warm"] = airlock(args.url, args.token, profile, args.n, args.c, args.warmup)
        if args.cold_url:
            row["airlock cold"] = airlock(args.cold_url, args.token, profile, max(50, args.n // 5), args.c, 10)
        base = row["fork+ns"]["cpu_ms_per_run"]
        row["ratio warm"] = row["airlock warm"]["cpu_ms_per_run"] / base
        row["ratio runner"] = row["clone(ns-net+pid), runner"]["cpu_ms_per_run"] / base
        row["ratio warm / fork"] = row["airlock warm"]["cpu_ms_per_run"] / row["fork"]["cpu_ms_per_run"]
        # The page target: the runner's faults against a fork that runs the cell alone.
        row["ratio runner faults"] = row["fork, runner"]["minflt_per_run"] / row["fork, cell"]["minflt_per_run"]
        if "airlock cold" in row:
            row["ratio cold"] = row["airlock cold"]["cpu_ms_per_run"] / base
        out["profiles"][profile] = row
    out["loadavg_after"] = os.getloadavg()

    names = ["fork", "fork+ns", "fork+ns-net", "clone(ns-net+pid)", "clone(ns-net+pid), init forks",
             "fork, cell", "fork, runner", "clone(ns-net+pid), runner", "airlock warm", "airlock cold"]
    profiles = list(out["profiles"])
    print(f"whole-machine CPU per run, c={args.c}, n={args.n} "
          f"(load {out['loadavg_before'][0]:.1f} -> {out['loadavg_after'][0]:.1f})\n")

    def cpu(r):
        return f"{r['cpu_ms_per_run']:.1f} ({r['runs_per_s']:.0f}/s)"

    def faults(r):
        if "parent_minflt_per_run" in r:
            return f"{r['minflt_per_run']:.0f} ({r['parent_minflt_per_run']:.0f})"
        return f"{r['minflt_per_run']:.0f} (server {r['server_minflt_per_run']:.0f})" if "minflt_per_run" in r else ""

    print_rows("per run, ms of CPU (runs/s)", names, out["profiles"], cpu)
    print()
    print_rows("minor page faults per run: children (parent)", names, out["profiles"], faults)
    print()
    labels = {"ratio runner": "clone(ns-net+pid), runner / (fork+ns)", "ratio warm": "airlock warm / (fork+ns)",
              "ratio cold": "airlock cold / (fork+ns)", "ratio warm / fork": "airlock warm / fork",
              "ratio runner faults": "faults: fork, runner / fork, cell"}
    for key, label in labels.items():
        cells = [f"**{out['profiles'][p][key]:.1f}x**" if key in out["profiles"][p] else "" for p in profiles]
        if any(cells):
            print(f"| {label} | " + " | ".join(cells) + " |")
    for p in profiles:
        for name in ("airlock warm", "airlock cold"):
            r = out["profiles"][p].get(name)
            if r and r.get("zygotes_replaced"):
                print(f"\n{name}, {p}: {r['zygotes_replaced']} zygote(s) replaced during the measurement "
                      "(--pool-recycle / --pool-recycle-seconds): their start-up is in this row")
    write_json(args.json, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
