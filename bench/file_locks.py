#!/usr/bin/env python3
"""Times file lock calls inside a run (every one is a round trip to the run's init, which
carries it out: docs/security.md, "File locks on shared files"). One `airlock run` per binary
and round, interleaved, each timing in the sandbox: flock, a POSIX lock (lockf), an OFD lock,
each lock + unlock on a file of the run's working directory, and a SQLite transaction there
(BEGIN IMMEDIATE, one insert, COMMIT). Stdlib only.

    bench/file_locks.py --airlock build/src/cli/airlock [--airlock old/airlock] [--rounds 5]

Prints, per binary and measure, the median over the rounds of each round's mean (µs per call,
µs per transaction).
"""
import argparse, json, statistics, subprocess, sys

PROGRAM = r"""
import fcntl, json, os, sqlite3, struct, time
fd = os.open('/tmp/f', os.O_RDWR | os.O_CREAT)
out = {}
def per_call(name, lock, unlock, n=2000):
    t = time.perf_counter()
    for _ in range(n):
        lock(); unlock()
    out[name] = (time.perf_counter() - t) / (2 * n) * 1e6
fl = lambda t: struct.pack('hhqqi4x', t, 0, 0, 0, 0)
per_call('flock', lambda: fcntl.flock(fd, fcntl.LOCK_EX), lambda: fcntl.flock(fd, fcntl.LOCK_UN))
per_call('lockf', lambda: fcntl.lockf(fd, fcntl.LOCK_EX), lambda: fcntl.lockf(fd, fcntl.LOCK_UN))
per_call('ofd', lambda: fcntl.fcntl(fd, 37, fl(fcntl.F_WRLCK)), lambda: fcntl.fcntl(fd, 37, fl(fcntl.F_UNLCK)))
c = sqlite3.connect('/tmp/db', isolation_level=None)
c.execute('create table t(x)')
t = time.perf_counter()
for i in range(500):
    c.execute('begin immediate'); c.execute('insert into t values (?)', (i,)); c.execute('commit')
out['sqlite_txn'] = (time.perf_counter() - t) / 500 * 1e6
print(json.dumps(out))
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--airlock", action="append", required=True, help="an airlock binary (repeatable)")
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    results = {b: [] for b in a.airlock}
    for _ in range(a.rounds):
        for b in a.airlock:
            r = subprocess.run([b, "run", "--timeout", "120", "-"], input=PROGRAM, capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit(f"{b}: rc={r.returncode} {r.stderr[-500:]}")
            results[b].append(json.loads(r.stdout.strip().splitlines()[-1]))
    for b, rounds in results.items():
        cells = ", ".join(f"{k} {statistics.median(x[k] for x in rounds):.1f}"
                          for k in ("flock", "lockf", "ofd", "sqlite_txn"))
        print(f"{b}: µs per call: {cells} (median of {len(rounds)} rounds)")


if __name__ == "__main__":
    main()
