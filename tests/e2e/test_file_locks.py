"""File locks of a run (issue 15.2, issue 23.1), through the HTTP server, cold, warm and session.

Every lock call of a run goes to the run's init (src/isolation/lock_supervisor.h), which carries it
out itself on its own duplicate of the caller's open file description: on the run's own tmpfs
(the working directory, /dev/shm) with the kernel's semantics, and on anything else (the host's
/usr, the bound devices, the airlock binary, pipes, sockets) as a success that locks nothing.

What is checked here is what the host sees: no lock of a run ever shows in the host's
/proc/locks on a file the run shares with the host, and a host process's lock on such a file is
never refused while the run goes on, including while threads of the run flip the descriptor a
lock call names between its own file and a shared one (the race the lock supervisor had while it
let the kernel re-run checked calls). And inside the run, that the locks on its own files keep
the kernel's semantics for every lock command.
"""

import fcntl
import json
import os
import struct
import threading
import time
import unittest

from airlock_server import AirlockServer, assert_mode

PROFILE = "general"
# Files a run shares with the host (read-only binds, bound devices, the cold path's interpreter).
SHARED = ["/dev/null", "/dev/zero", "/dev/urandom", "/usr/lib/python3.11/os.py", "/usr/lib",
          os.path.realpath("/usr/bin/python3")]

server = None


def setUpModule():
    global server
    server = AirlockServer().start()
    unittest.addModuleCleanup(server.cleanup)


def proc_locks_key(path):
    """How /proc/locks names the inode of `path`: MAJ:MIN:INODE (hex device numbers)."""
    st = os.stat(path)
    return f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"


def ancestors(pid):
    """The host pids above `pid` (its parent, grandparent, ...); [] when it is gone."""
    out = []
    while pid > 1 and len(out) < 64:
        try:
            with open(f"/proc/{pid}/status") as f:
                pid = next(int(line.split()[1]) for line in f if line.startswith("PPid:"))
        except (OSError, StopIteration, ValueError):
            break
        out.append(pid)
    return out


class HostLockWatch:
    """Watches, from the host, every lock on SHARED while a run of `server` goes on: samples
    /proc/locks and takes a host write lock (lockf F_TLOCK) on /dev/null, as often as it can.

    The host is shared (other test processes probe these files too, the other modes of this
    module among them), so a lock counts as the run's when its holder is a process under the
    server, or when it is an OFD lock (no holder pid; no test takes one on these files).
    `seen` lists the run's locks found, `refused` the host lockf calls a run's lock refused,
    `others` what other host processes held meanwhile (for the message)."""

    def __init__(self, server):
        self.server_pid = server.proc.pid
        self.keys = {proc_locks_key(p): p for p in SHARED}
        self.seen, self.others = [], []
        self.refused = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _entries(self):
        found = set()
        with open("/proc/locks") as f:
            for line in f:
                fields = line.split()
                # "1: OFDLCK ADVISORY WRITE -1 00:05:4 0 EOF"; a waiter's line has "->" first.
                fields = [x for x in fields[1:] if x != "->"]
                if len(fields) >= 5 and fields[4] in self.keys:
                    found.add((" ".join(fields[:3]), int(fields[3]), self.keys[fields[4]]))
        return found

    def _the_runs(self, pid):
        return pid == -1 or self.server_pid in ancestors(pid)

    def _run(self):
        null = os.open("/dev/null", os.O_RDWR | os.O_CLOEXEC)
        me = os.getpid()
        try:
            while not self._stop.is_set():
                self.samples += 1
                try:
                    fcntl.lockf(null, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    fcntl.lockf(null, fcntl.LOCK_UN)
                except OSError:
                    # Whose lock was in the way (F_GETLK names a POSIX holder, -1 for OFD)?
                    req = struct.pack("hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
                    holder = struct.unpack("hhqqi4x", fcntl.fcntl(null, fcntl.F_GETLK, req))[4]
                    if self._the_runs(holder):
                        self.refused += 1
                    else:
                        self.others.append(("refused by", holder))
                for kind, pid, path in self._entries():
                    if pid == me:
                        continue  # our own probe
                    entry = f"{kind} {pid} {path}"
                    (self.seen if self._the_runs(pid) else self.others).append(entry)
                time.sleep(0.002)
        finally:
            os.close(null)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def report(self):
        return (f"sampled {self.samples} times; the run's locks: {sorted(set(self.seen))}; host lockf refused by "
                f"the run {self.refused} times; other host processes' locks meanwhile (not counted): "
                f"{sorted(set(map(str, self.others)))[:5]}")


# The race: the main thread makes every kind of lock call on descriptor N, naming the run's own
# file, while a second thread keeps re-pointing N (dup2) at /dev/null (read-write) and at
# Python's os.py. A supervisor that checks N and then lets the kernel re-run the call loses
# within a few hundred calls. Each lock is released through the own file's descriptor, so the
# run's own locks never pile up; a call that waits longer than a second (a lock the race put on
# a shared file can make the run wait on itself) is interrupted and counted.
FLIP_RACE = r"""
import fcntl, os, signal, struct, threading, time
F_OFD_SETLK, F_OFD_SETLKW = 37, 38
def fl(kind):
    return struct.pack('hhqqi4x', kind, os.SEEK_SET, 0, 0, 0)
own = os.open('/tmp/own.lock', os.O_RDWR | os.O_CREAT, 0o600)
null = os.open('/dev/null', os.O_RDWR)
lib = os.open('/usr/lib/python3.11/os.py', os.O_RDONLY)
N = 200
os.dup2(own, N)
stop = threading.Event()
def flip():
    while not stop.is_set():
        os.dup2(null, N); os.dup2(own, N); os.dup2(lib, N); os.dup2(own, N)
ofd_unlock = lambda: fcntl.fcntl(own, F_OFD_SETLK, fl(fcntl.F_UNLCK))
posix_unlock = lambda: fcntl.lockf(own, fcntl.LOCK_UN)
flock_unlock = lambda: fcntl.flock(own, fcntl.LOCK_UN)
calls = [
    (lambda: fcntl.fcntl(N, F_OFD_SETLK, fl(fcntl.F_WRLCK)), ofd_unlock),
    (lambda: fcntl.fcntl(N, F_OFD_SETLK, fl(fcntl.F_RDLCK)), ofd_unlock),
    (lambda: fcntl.fcntl(N, F_OFD_SETLKW, fl(fcntl.F_RDLCK)), ofd_unlock),
    (lambda: fcntl.lockf(N, fcntl.LOCK_EX | fcntl.LOCK_NB), posix_unlock),
    (lambda: fcntl.lockf(N, fcntl.LOCK_SH | fcntl.LOCK_NB), posix_unlock),
    (lambda: fcntl.lockf(N, fcntl.LOCK_SH), posix_unlock),
    (lambda: fcntl.flock(N, fcntl.LOCK_EX | fcntl.LOCK_NB), flock_unlock),
    (lambda: fcntl.flock(N, fcntl.LOCK_SH), flock_unlock),
]
class Stuck(Exception):
    pass
since = [0.0]
def watchdog(signum, frame):
    if since[0] and time.monotonic() - since[0] > 1.0:
        raise Stuck()
signal.signal(signal.SIGALRM, watchdog)
signal.setitimer(signal.ITIMER_REAL, 0.25, 0.25)
flipper = threading.Thread(target=flip)
flipper.start()
n, stuck, errors = 0, 0, {}
end = time.monotonic() + SECONDS
while time.monotonic() < end:
    for lock, unlock in calls:
        n += 1
        try:
            since[0] = time.monotonic()
            lock()
        except OSError as e:
            errors[e.errno] = errors.get(e.errno, 0) + 1
        except Stuck:
            stuck += 1
        finally:
            since[0] = 0.0
        unlock()
signal.setitimer(signal.ITIMER_REAL, 0)
stop.set()
flipper.join()
print('CALLS', n, 'STUCK', stuck, 'ERRORS', sorted(errors.items()), flush=True)
time.sleep(1.5)  # whatever the race won is held while the host looks
"""


class TestLockRace(unittest.TestCase):
    def test_flipping_the_descriptor_never_locks_a_shared_file(self):
        server.wait_pools_ready(profiles=[PROFILE])
        with HostLockWatch(server) as watch:
            status, body = server.execute(FLIP_RACE.replace("SECONDS", "10"), path="/v1/execute",
                                          profile=PROFILE, timeout=40)
        self.assertEqual(status, 200, body)
        assert_mode(self, body)
        self.assertEqual(body["exit_code"], 0, {k: body.get(k) for k in ("stdout", "stderr", "kill_reason",
                                                                         "kill_detail", "usage", "duration_ms")})
        calls = int(body["stdout"].split()[1])
        print(f"\n[ host    ] {body['stdout'].strip()}: against a thread flipping the descriptor; the host "
              f"sampled its locks {watch.samples} times", flush=True)
        self.assertGreater(calls, 100, body["stdout"])
        self.assertGreater(watch.samples, 10)
        self.assertEqual(sorted(set(watch.seen)), [], f"the host saw a run's locks on shared files ({calls} calls): "
                                                      + watch.report())
        self.assertEqual(watch.refused, 0, f"a run's lock refused a host lockf(F_TLOCK) on /dev/null ({calls} calls): "
                                           + watch.report())


# Every lock command on every kind of file a run can open that is not its own: each succeeds
# (or fails as the kernel would on that descriptor: EBADF for a write lock on a read-only one),
# F_GETLK reports no conflict, and the host sees none of it. Then all of them are taken again
# and held while the host looks.
ELSEWHERE = r"""
import fcntl, json, os, socket, struct, time
F_OFD_GETLK, F_OFD_SETLK, F_OFD_SETLKW = 36, 37, 38
R, W, U = fcntl.F_RDLCK, fcntl.F_WRLCK, fcntl.F_UNLCK
def fl(kind, pid=0):
    return struct.pack('hhqqi4x', kind, os.SEEK_SET, 0, 0, pid)
fds = {
    'usr': os.open('/usr/lib/python3.11/os.py', os.O_RDONLY),
    'usr-dir': os.open('/usr/lib', os.O_RDONLY | os.O_DIRECTORY),
    'dev-null': os.open('/dev/null', os.O_RDWR),
    'dev-zero': os.open('/dev/zero', os.O_RDWR),
    'dev-urandom': os.open('/dev/urandom', os.O_RDONLY),
    'exe': os.open('/proc/self/exe', os.O_RDONLY),
    'etc': os.open('/etc/passwd', os.O_RDONLY),
    'proc': os.open('/proc/self/status', os.O_RDONLY),
    'pipe': os.pipe()[1],
    'socket': socket.socketpair()[0].detach(),
    'memfd': os.memfd_create('m'),
    'eventfd': os.eventfd(0),
}
def attempt(name, fd):
    try:
        r = commands[name](fd)
        return 'ok:' + 'RWU'[struct.unpack('hhqqi4x', r)[0]] if 'getlk' in name else 'ok'
    except OSError as e:
        return e.errno
commands = {
    'flock-sh-nb': lambda fd: fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB),
    'flock-ex-nb': lambda fd: fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB),
    'flock-ex': lambda fd: fcntl.flock(fd, fcntl.LOCK_EX),
    'flock-un': lambda fd: fcntl.flock(fd, fcntl.LOCK_UN),
    'setlk-r': lambda fd: fcntl.fcntl(fd, fcntl.F_SETLK, fl(R)),
    'setlk-w': lambda fd: fcntl.fcntl(fd, fcntl.F_SETLK, fl(W)),
    'setlkw-r': lambda fd: fcntl.fcntl(fd, fcntl.F_SETLKW, fl(R)),
    'setlkw-w': lambda fd: fcntl.fcntl(fd, fcntl.F_SETLKW, fl(W)),
    'getlk-w': lambda fd: fcntl.fcntl(fd, fcntl.F_GETLK, fl(W)),
    'setlk-u': lambda fd: fcntl.fcntl(fd, fcntl.F_SETLK, fl(U)),
    'ofd-setlk-r': lambda fd: fcntl.fcntl(fd, F_OFD_SETLK, fl(R)),
    'ofd-setlk-w': lambda fd: fcntl.fcntl(fd, F_OFD_SETLK, fl(W)),
    'ofd-setlkw-r': lambda fd: fcntl.fcntl(fd, F_OFD_SETLKW, fl(R)),
    'ofd-setlkw-w': lambda fd: fcntl.fcntl(fd, F_OFD_SETLKW, fl(W)),
    'ofd-getlk-w': lambda fd: fcntl.fcntl(fd, F_OFD_GETLK, fl(W)),
    'ofd-setlk-u': lambda fd: fcntl.fcntl(fd, F_OFD_SETLK, fl(U)),
}
results = {kind: {name: attempt(name, fd) for name in commands} for kind, fd in fds.items()}
print('RESULTS', json.dumps(results), flush=True)
for fd in fds.values():
    for name in ('flock-ex-nb', 'setlk-r', 'setlk-w', 'ofd-setlk-r', 'ofd-setlk-w'):
        attempt(name, fd)
time.sleep(2)  # held while the host looks
"""

# Descriptor modes of ELSEWHERE's files: 'r' read-only, 'w' write-only, 'rw' both.
ELSEWHERE_MODES = {"usr": "r", "usr-dir": "r", "dev-null": "rw", "dev-zero": "rw", "dev-urandom": "r", "exe": "r",
                   "etc": "r", "proc": "r", "pipe": "w", "socket": "rw", "memfd": "rw", "eventfd": "rw"}


def expected_elsewhere(mode):
    """What each command of ELSEWHERE gives on a descriptor of `mode`, as the kernel would
    answer it on a file with no lock of anyone: EBADF (9) for a lock the mode cannot take."""
    out = {}
    for name in ("flock-sh-nb", "flock-ex-nb", "flock-ex", "flock-un"):
        out[name] = "ok"
    for prefix in ("setlk", "ofd-setlk"):
        out[f"{prefix}-r"] = out[f"{prefix}w-r"] = "ok" if "r" in mode else 9
        out[f"{prefix}-w"] = out[f"{prefix}w-w"] = "ok" if "w" in mode else 9
        out[f"{prefix}-u"] = "ok"
    out["getlk-w"] = out["ofd-getlk-w"] = "ok:U"
    return out


class TestLocksElsewhere(unittest.TestCase):
    def test_every_lock_command_on_every_shared_kind_of_file(self):
        server.wait_pools_ready(profiles=[PROFILE])
        with HostLockWatch(server) as watch:
            status, body = server.execute(ELSEWHERE, path="/v1/execute", profile=PROFILE, timeout=30)
        self.assertEqual(status, 200, body)
        assert_mode(self, body)
        self.assertEqual(body["exit_code"], 0, body["stderr"])
        results = json.loads(body["stdout"].split("RESULTS ", 1)[1].splitlines()[0])
        for kind, mode in ELSEWHERE_MODES.items():
            self.assertEqual(results[kind], expected_elsewhere(mode), kind)
        self.assertEqual(sorted(set(watch.seen)), [], "the host saw a run's locks on shared files: " + watch.report())
        self.assertEqual(watch.refused, 0, "a run's lock refused a host lockf(F_TLOCK) on /dev/null: " + watch.report())


# The run's own files keep the kernel's semantics for every lock command. A matrix: the run
# (the parent) holds one kind of lock on one of its own kinds of file, and a child process,
# with a descriptor of its own, tries every other kind without waiting; then the rules of
# POSIX locks that init emulates (docs/security.md): one process's locks never conflict with
# each other whichever descriptor names the file, are released when it ends or closes the
# file, are not inherited by a fork, and the waiting commands wait until the holder releases.
OWN = r"""
import fcntl, json, os, struct, sys
F_OFD_GETLK, F_OFD_SETLK, F_OFD_SETLKW = 36, 37, 38
R, W, U = fcntl.F_RDLCK, fcntl.F_WRLCK, fcntl.F_UNLCK
def fl(kind, start=0, length=0, whence=os.SEEK_SET, pid=0):
    return struct.pack('hhqqi4x', kind, whence, start, length, pid)
parent = os.getpid()
def attempt(call):
    try:
        call()
        return 'ok'
    except OSError as e:
        return e.errno
def getlk(fd, cmd, start=0, length=0):
    t, _, s, n, pid = struct.unpack('hhqqi4x', fcntl.fcntl(fd, cmd, fl(W, start, length)))
    if t == U:
        return 'U'
    return '%s%d+%d:%s' % ('RW'[t], s, n, 'parent' if pid == parent else pid)
def unlock_all(fd):
    fcntl.flock(fd, fcntl.LOCK_UN)
    fcntl.fcntl(fd, fcntl.F_SETLK, fl(U))
    fcntl.fcntl(fd, F_OFD_SETLK, fl(U))
def in_child(work):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            out = work()
        except BaseException as e:
            out = repr(e)
        os.write(w, json.dumps(out).encode())
        os._exit(0)
    os.close(w)
    data = b''
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return json.loads(data)
os.mkfifo('/tmp/fifo')
os.mkdir('/tmp/dir')
OWN_FILES = {'tmp': ('/tmp/f', os.O_RDWR | os.O_CREAT), 'shm': ('/dev/shm/f', os.O_RDWR | os.O_CREAT),
             'fifo': ('/tmp/fifo', os.O_RDWR), 'dir': ('/tmp/dir', os.O_RDONLY)}
TAKE = {
    'flock-sh': lambda fd: fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB),
    'flock-ex': lambda fd: fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB),
    'posix-r': lambda fd: fcntl.fcntl(fd, fcntl.F_SETLK, fl(R)),
    'posix-w': lambda fd: fcntl.fcntl(fd, fcntl.F_SETLK, fl(W)),
    'ofd-r': lambda fd: fcntl.fcntl(fd, F_OFD_SETLK, fl(R)),
    'ofd-w': lambda fd: fcntl.fcntl(fd, F_OFD_SETLK, fl(W)),
}
matrix = {}
for kind, (path, flags) in OWN_FILES.items():
    for held, take in TAKE.items():
        fd = os.open(path, flags)
        got = attempt(lambda: take(fd))
        def probe():
            cfd = os.open(path, flags)
            out = {}
            for name, try_ in TAKE.items():
                out[name] = attempt(lambda: try_(cfd))
                unlock_all(cfd)
            out['getlk'] = getlk(cfd, fcntl.F_GETLK)
            out['ofd-getlk'] = getlk(cfd, F_OFD_GETLK)
            return out
        matrix[kind + ' ' + held] = dict(take=got, **in_child(probe))
        unlock_all(fd)
        os.close(fd)
print('MATRIX', json.dumps(matrix), flush=True)

rules = {}
a = os.open('/tmp/f', os.O_RDWR)
b = os.open('/tmp/f', os.O_RDWR)
# One process, two descriptions: a read lock through one, a write lock through the other, no conflict;
# the child sees the write lock, and an unlock through the first descriptor releases it.
rules['upgrade-through-another-fd'] = [attempt(lambda: fcntl.fcntl(a, fcntl.F_SETLK, fl(R))),
                                       attempt(lambda: fcntl.fcntl(b, fcntl.F_SETLK, fl(W))),
                                       in_child(lambda: getlk(os.open('/tmp/f', os.O_RDWR), fcntl.F_GETLK))]
fcntl.fcntl(a, fcntl.F_SETLK, fl(U))
rules['unlock-through-another-fd'] = in_child(lambda: getlk(os.open('/tmp/f', os.O_RDWR), fcntl.F_GETLK))
# Ranges merge and split as POSIX locks do; SEEK_CUR counts from the descriptor's position.
fcntl.fcntl(a, fcntl.F_SETLK, fl(W, 0, 100))
fcntl.fcntl(b, fcntl.F_SETLK, fl(U, 40, 20))
os.lseek(a, 200, os.SEEK_SET)
fcntl.fcntl(a, fcntl.F_SETLK, fl(R, 10, 5, os.SEEK_CUR))
rules['ranges'] = in_child(lambda: [getlk(os.open('/tmp/f', os.O_RDWR), fcntl.F_GETLK, *r)
                                    for r in ((0, 0), (45, 1), (60, 10), (150, 100), (215, 0))])
fcntl.fcntl(a, fcntl.F_SETLK, fl(U))
# A fork does not inherit POSIX locks; it shares OFD locks with the description it inherits.
fcntl.fcntl(a, fcntl.F_SETLK, fl(W))
rules['fork-posix'] = in_child(lambda: attempt(lambda: fcntl.fcntl(a, fcntl.F_SETLK, fl(W))))
fcntl.fcntl(a, fcntl.F_SETLK, fl(U))
fcntl.fcntl(a, F_OFD_SETLK, fl(W))
rules['fork-ofd'] = in_child(lambda: attempt(lambda: fcntl.fcntl(a, F_OFD_SETLK, fl(W))))
fcntl.fcntl(a, F_OFD_SETLK, fl(U))
# Released when the holder ends, or closes the file while it lives on.
def hold_and_exit():
    fcntl.fcntl(os.open('/tmp/f', os.O_RDWR), fcntl.F_SETLK, fl(W))
    return 'held'
rules['released-at-exit'] = [in_child(hold_and_exit), attempt(lambda: fcntl.fcntl(a, fcntl.F_SETLK, fl(W)))]
fcntl.fcntl(a, fcntl.F_SETLK, fl(U))
r, w = os.pipe()
go_r, go_w = os.pipe()
pid = os.fork()
if pid == 0:
    f = open('/tmp/f', 'r+')
    fcntl.lockf(f, fcntl.LOCK_EX)
    os.write(w, b'L')
    os.read(go_r, 1)
    f.close()
    os.write(w, b'C')
    os.read(go_r, 1)  # lives on until the parent has looked
    os._exit(0)
os.read(r, 1)
locked = attempt(lambda: fcntl.fcntl(a, fcntl.F_SETLK, fl(W)))
os.write(go_w, b'g')
os.read(r, 1)
closed = attempt(lambda: fcntl.fcntl(a, fcntl.F_SETLK, fl(W)))
os.write(go_w, b'g')
os.waitpid(pid, 0)
rules['released-at-close'] = [locked, closed]
fcntl.fcntl(a, fcntl.F_SETLK, fl(U))
# The waiting commands wait for the holder: the parent marks the release in a file before it
# releases, and the child, once granted, says whether the mark was there.
WAIT = {'posix': (lambda fd: fcntl.fcntl(fd, fcntl.F_SETLK, fl(W)), lambda fd: fcntl.fcntl(fd, fcntl.F_SETLKW, fl(W)),
                  lambda fd: fcntl.fcntl(fd, fcntl.F_SETLK, fl(U))),
        'ofd': (lambda fd: fcntl.fcntl(fd, F_OFD_SETLK, fl(W)), lambda fd: fcntl.fcntl(fd, F_OFD_SETLKW, fl(W)),
                lambda fd: fcntl.fcntl(fd, F_OFD_SETLK, fl(U))),
        'flock': (lambda fd: fcntl.flock(fd, fcntl.LOCK_EX), lambda fd: fcntl.flock(fd, fcntl.LOCK_EX),
                  lambda fd: fcntl.flock(fd, fcntl.LOCK_UN))}
for name, (take, wait, release) in WAIT.items():
    take(a)
    if os.path.exists('/tmp/released'):
        os.unlink('/tmp/released')
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        fd = os.open('/tmp/f', os.O_RDWR)
        os.write(w, b'w')
        wait(fd)
        os.write(w, b'1' if os.path.exists('/tmp/released') else b'0')
        os._exit(0)
    os.read(r, 1)
    os.sched_yield()
    open('/tmp/released', 'w').close()
    release(a)
    rules['wait-' + name] = os.read(r, 1).decode()
    os.waitpid(pid, 0)
# The kernel's argument checks.
rules['invalid'] = [attempt(lambda: fcntl.fcntl(a, fcntl.F_SETLK, fl(7))),
                    attempt(lambda: fcntl.fcntl(a, F_OFD_SETLK, fl(W, pid=1))),
                    attempt(lambda: fcntl.fcntl(a, fcntl.F_SETLK, fl(W, whence=9))),
                    attempt(lambda: fcntl.fcntl(a, fcntl.F_GETLK, fl(U))),
                    attempt(lambda: fcntl.fcntl(os.open('/tmp/f', os.O_RDONLY), fcntl.F_SETLK, fl(W)))]
print('RULES', json.dumps(rules), flush=True)
"""

LOCKS = ("flock-sh", "flock-ex", "posix-r", "posix-w", "ofd-r", "ofd-w")


def expected_own_matrix():
    """What the kernel answers OWN's matrix with: flock locks conflict with flock locks only,
    POSIX and OFD locks with each other; a lock conflicts when either side is exclusive."""
    def family(name):
        return "flock" if name.startswith("flock") else "record"

    def exclusive(name):
        return name.endswith(("-ex", "-w"))

    out = {}
    for kind in ("tmp", "shm", "fifo", "dir"):
        for held in LOCKS:
            # A directory cannot be opened for writing, and a write lock needs a writable descriptor.
            takes = not (kind == "dir" and held in ("posix-w", "ofd-w"))
            row = {"take": "ok" if takes else 9}
            for probe in LOCKS:
                if kind == "dir" and probe in ("posix-w", "ofd-w"):
                    row[probe] = 9
                elif takes and family(probe) == family(held) and (exclusive(probe) or exclusive(held)):
                    row[probe] = 11  # EAGAIN
                else:
                    row[probe] = "ok"
            conflict = takes and family(held) == "record"
            holder = "parent" if held.startswith("posix") else -1
            row["getlk"] = row["ofd-getlk"] = f"{'W' if exclusive(held) else 'R'}0+0:{holder}" if conflict else "U"
            out[f"{kind} {held}"] = row
    return out


EXPECTED_RULES = {
    "upgrade-through-another-fd": ["ok", "ok", "W0+0:parent"],
    "unlock-through-another-fd": "U",
    "ranges": ["W0+40:parent", "U", "W60+40:parent", "R210+5:parent", "U"],
    "fork-posix": 11,
    "fork-ofd": "ok",
    "released-at-exit": ["held", "ok"],
    "released-at-close": [11, "ok"],
    "wait-posix": "1",
    "wait-ofd": "1",
    "wait-flock": "1",
    "invalid": [22, 22, 22, 22, 9],
}


class TestLocksOnOwnFiles(unittest.TestCase):
    def test_every_lock_command_keeps_the_kernels_semantics(self):
        server.wait_pools_ready(profiles=[PROFILE])
        status, body = server.execute(OWN, path="/v1/execute", profile=PROFILE, timeout=30)
        self.assertEqual(status, 200, body)
        assert_mode(self, body)
        self.assertEqual(body["exit_code"], 0, body["stderr"])
        out = body["stdout"]
        matrix = json.loads(out.split("MATRIX ", 1)[1].splitlines()[0])
        expected = expected_own_matrix()
        for key in expected:
            self.assertEqual(matrix[key], expected[key], f"holder and file: {key}")
        rules = json.loads(out.split("RULES ", 1)[1].splitlines()[0])
        self.assertEqual(rules, EXPECTED_RULES)


if __name__ == "__main__":
    unittest.main()
