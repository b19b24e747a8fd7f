"""airlock's in-sandbox runner: runs one cell of user code and reports what it produced.

Invoked inside the kernel sandbox as

    /usr/bin/python3 -I -B -S /sandbox/airlock_runner.py /sandbox/config.json   (see complete_site)

with only the standard library (numpy and matplotlib are used when present). The config is a
JSON object written by the server:

    code_path             str   file holding the user's code (UTF-8)
    code                  str   the code itself, instead of code_path (the warm path)
    filename              str   name shown in tracebacks (default: basename of code_path)
    allowed_imports       [str] | null   top-level modules user code may import; null = all
    runtime_imports_mode  "enforce" | "observe"   observe: allow, warn on stderr
    blocklist             [[module, attr], ...]   accepted and ignored here (see below)
    preimport             [str] modules imported before the import hook exists (trusted)
    capture_figures       bool  matplotlib figures become image/png display results (with their chart)
    result_fd             int | null   fd of the result channel (default 3)
    max_result_bytes      int   total bytes of result events (default 1 MiB)
    max_results           int   number of result events, main result included (default 16)
    max_result_values     int   JSON values (scalars, arrays, objects) in the results' data, all
                          results together (default 65536: the server's kMaxResultValues)
    seed                  int | null   reseeds `random` and numpy's global generator
    stream                bool  the server streams this run's output (default false): an uncaught
                          exception's traceback is sent once, as the error event, and not also
                          written to stderr (E2B's shape; a plain run's stderr has it, as
                          `python3 main.py` prints it)
    syntax_check          str | null   the server's analyzer found a syntax error (its message): the
                          cell is compiled and never run; Python's SyntaxError is reported as
                          any run's, and code Python compiles after all is not run either (an
                          AirlockAnalyzerError error event says so, exit code 1)
    session               bool  this run is a session (see below)
    call                  int   a session's call number, echoed in its end event
    env                   {str: str}   environment variables set for the user's code (os.environ,
                          and so every process it starts), after the interpreter and the runner
                          started: they cannot change how the sandbox itself starts. The server
                          validates the names (service.cc); in a session's first request they
                          hold for the session's life, in a call only for that call (see below)

Sessions: the first request has "session": true (its code is ignored). The run then keeps its
interpreter, its __main__ namespace, its import hook and its working directory, and takes calls
on the control socket (warm: the fd warm_main was given; cold, when the server had no warm run:
the result fd, a socket then, carries the calls in and the events out): b"C" + an 8-byte little-endian
length + a config JSON like the first (code inline, "call": n) runs one cell, whose events end with
{"type":"end",...,"call":n} (stdout and stderr flushed before it). A call may instead be the lean
frame {"frame": "call", "code": str, "call": n, "stream": bool, "syntax_check": str, "files": [...],
"env": {str: str}} (the last four optional): everything else is the first request's (the profile's
policy does not change over a session's life), which spares parsing and checking the whole config
each call. A call's "env" is set for that call only: afterwards each of its variables is set back
to what it was before the call (or removed), as E2B does with an execution's env vars. The server
interrupts a cell
with SIGINT to this process (KeyboardInterrupt in the cell; ignored between cells and in the
runner's own code). End of file on the control socket ends the session (os._exit). The server
reads a call's output until that end event and owns every timeout: a cell that ignores the
interrupt is killed with its session.
    files                 [{"path": str, "content": base64 str}]   written into the working
                          directory (the cwd) before the code runs; parents created, nothing
                          followed (see _open_beneath)
    max_out_files         int   files the run created or changed in the working directory that
                          are reported back as "file" events (default 0: none looked for)
    max_out_bytes         int   their total content bytes (default 0)
    program               [str] | null   another language's program (an argv, argv[0] an absolute
                          path): the runner places the input files, runs it with its own standard
                          streams and without the result channel, waits for it, and reports the
                          files it wrote and its exit status; no result or error event (see
                          Runner.run_program). The code is then only the program's file.

In a warm pool (DESIGN §3) the server's zygote embeds CPython, loads this file as a module, calls
zygote_preimport() once, and in each forked run (after every kernel layer is in force) calls
warm_main() with the config (a dict the zygote decoded, or its JSON), the code inline; the run
reseeds `random` and numpy first. A one-shot request that needs nothing but the cell takes the
lean path (_lean_run, below), which writes fewer of the zygote's pages and reports the same.

The cell runs like a Jupyter/E2B cell: if the last statement is an expression (not followed by
`;`), its value becomes the main result instead of being printed; top-level `await` works;
`display()` is a builtin (as in IPython), and values, figures and PIL images become mime bundles
(airlock_display.py: rich reprs, PNG, E2B's "e2b/chart" and "e2b/data"). A cell indented as a
whole (as notebooks and E2B's SDK tests send it) has its common indentation removed by the
server before it is analyzed and run (service.cc), as IPython's cell transform does. The
code is compiled under `filename`, so tracebacks carry the user's own line numbers, and only
frames other than the runner's are shown. Exit status follows `python3 main.py`: 0, 1 after an
uncaught exception or a syntax error, n for SystemExit(n). 2 means the runner itself failed
(unreadable config, internal error); stderr then says why.

Result channel: after user code, atexit handlers and non-daemon threads are done and stdout and
stderr are flushed, the runner writes JSON lines (ASCII, lone surrogates backslash-escaped) to
the result fd, then calls os._exit with the exit code:

    {"type":"result","is_main_result":false,"data":{mime: value}}  per display (display(), figures), in order
    {"type":"result","is_main_result":true,"data":{...}}            the last expression's value
    {"type":"truncated","what":"results","dropped":n}               when caps dropped or cut results
    {"type":"file","path":p,"size":n,"content":b64,"truncated":t}     per file created or changed
    {"type":"truncated","what":"files","dropped":n}                 when file caps left files out
    {"type":"error","name":..,"value":..,"traceback":..}            uncaught exception, SyntaxError
    {"type":"end","exit_code":n,"max_rss_kb":k}                     always last

max_rss_kb is the peak resident memory of this process or of any child it waited for. A warm
run's program closes every fd right after the end event and exits; the server may answer from
the end event once stdout, stderr and the channel are all at end of file, without waiting for
the process to be torn down. If the process dies without the end event (os._exit in user code,
a kill), the server must go by the process status.

Files: after the code, atexit handlers and threads, the working directory is walked (regular
files only, lstat, no symlink followed, at most _FILES_MAX_SCAN entries and _FILES_MAX_DEPTH
levels, mounts not entered, the runtime's own caches skipped) and every regular file that is new
or whose size, mtime or inode changed since just before the code ran is reported, sorted by path,
up to max_out_files. Contents share max_out_bytes in that order: a file that does not fit whole
gets the prefix that fits (maybe empty) and "truncated": true; "size" is always its real size.
Files left out (over the count, names that are not UTF-8, a walk cut by its bounds) are counted in
a truncated event with "what": "files". Files are opened O_NOFOLLOW | O_NONBLOCK (a FIFO never
blocks) and checked to be regular after opening.

Caps: the main result is budgeted first, then display results in order until max_results or
the byte or value budget is used up. A result that does not fit whole is shrunk (E2B's chart and data
left out first, then its other formats, largest first, then its text/plain cut) and the run's
results are reported truncated; a figure's PNG, a chart's points and a DataFrame's data are not
even made past the bytes (and JSON values) left. Error value and traceback are cut at 64 KiB each.

Helper modules: airlock_display.py (mime bundles, display(), the PIL hooks) and
airlock_charts.py (a figure's chart). Whoever loads the runner may register them in sys.modules
first (the zygote from their embedded source, a cold run's bootstrap from their build-time
bytecode); otherwise the runner compiles them from the files beside it. Their frames are the
runner's: kept out of user tracebacks, and their imports are not the user's.

What this is not: a security boundary. The kernel sandbox (namespaces, Landlock, seccomp,
limits) is the boundary; this file is policy and early feedback:

* The import allowlist decides "user code" by the code object's filename of the importing frame
  (frames compiled from `filename`), not by `__name__` (spoofable: fips-agents pentest C3).
  Anonymous code (compile/exec/eval, filename "<string>" etc.) is attributed to its caller.
  Still, user code that can reach compile() with a forged filename, `sys.modules`, importlib
  internals, `globals()` or frame objects can get around it; the static analyzer rejects those
  constructs in profiles that care, and the kernel sandbox contains whatever is left.
* Imports that C code performs on the user's behalf (datetime.strptime importing _strptime) are
  recognised by the call shape PyImport_Import uses and allowed; user code could imitate that
  shape with `__import__(name, globals(), globals(), [])`.
* The blocklist (module, attribute) pairs are enforced only by the static analyzer: deleting
  attributes at run time breaks the modules' own internals.
* The result fd is moved to a high number and its original number closed before user code
  runs, so a stray write to fd 3 fails. User code can still find the channel in /proc/self/fd
  (open() needs no import) and write fake events, before the runner's own or, from a daemon
  thread, interleaved with them: the server must treat the channel as untrusted data (size
  caps, schema checks, malformed lines dropped) and take the exit status from the process, not
  from the end event (a mismatch means the channel was tampered with).

Output buffering: stdout and stderr are line-buffered in every run (Python's own stdout is
block-buffered when it is not a terminal), so every line printed reaches the server as it is
printed and survives a kill (timeout, memory, pids, output, a signal): a block-buffered stdout
lost everything still in its buffer. What it costs a print loop: docs/benchmarks.md, "Line-
buffered output". The runner flushes stdout before anything it writes to stderr itself.
"""

import ast
import atexit
import builtins
import json
import linecache
import os
import sys
import types

# The runner's own code filename (a real path when run as a script, whatever name it was
# compiled under when embedded); frames with it never appear in user-facing tracebacks.
_RUNNER_FILE = sys._getframe().f_code.co_filename

EXIT_RUNNER_FAILURE = 2
_ERROR_FIELD_CAP = 64 * 1024
_CO_COROUTINE = 0x80  # inspect.CO_COROUTINE, without importing inspect
_TRUNCATION_MARK = "... [truncated by airlock]"
# A result's formats left out first when it does not fit: derived data (the PNG is the figure).
_SHRINK_FIRST = ("e2b/chart", "e2b/data")
# What a run may set with "env" is validated by the server; this is the runner's own sanity check.
_MAX_ENV = 256


# The helper modules (module docstring, "Helper modules"), once _load_helpers() ran, and the
# files whose frames are the runner's own (kept out of user tracebacks).
_charts = _display = None
_RUNNER_FILES = frozenset((_RUNNER_FILE,))


def _load_helpers(sources=None):
    """Loads the helper modules once: as sys.modules has them (a cold run's bootstrap registers
    them), else compiled from `sources` ({name: source}, the zygote's embedded copies) or from
    the files beside the runner. The zygote calls it after the profile's imports: its modules'
    objects then sit after those in memory, which keeps the pages a forked run writes as few as
    without them (measured: loaded first, ~5% more per warm run)."""
    global _charts, _display, _RUNNER_FILES
    if _display is not None:
        return
    here = os.path.dirname(globals().get("__file__") or _RUNNER_FILE)
    loaded = []
    for name in ("airlock_charts", "airlock_display"):
        module = sys.modules.get(name)
        if module is None:
            path = os.path.join(here, name + ".py")
            if sources is not None and name in sources:
                text = sources[name]
            else:
                with open(path, "rb") as f:
                    text = f.read()
            code = compile(text, path, "exec", dont_inherit=True)
            module = types.ModuleType(name)
            module.__file__ = path
            exec(code, module.__dict__)
            sys.modules[name] = module
        loaded.append(module)
    _RUNNER_FILES = frozenset([_RUNNER_FILE] + [m.__file__ for m in loaded])
    _charts, _display = loaded


# Bounds of the walk that finds the files a run wrote (see "Files" above).
_FILES_MAX_SCAN = 4096
_FILES_MAX_DEPTH = 16
# The runtime's own writes in the working directory (HOME is the working directory).
_FILES_SKIP = frozenset((".airlock-matplotlib", ".matplotlib", ".cache/matplotlib", ".config/matplotlib",
                         ".cache/fontconfig"))


class ConfigError(Exception):
    """The config or the code file cannot be used; the server wrote something wrong."""


class Config:
    """The validated runner config (see the module docstring for the keys)."""

    def __init__(self, raw):
        if not isinstance(raw, dict):
            raise ConfigError("config must be a JSON object")
        self.result_fd = raw.get("result_fd", 3)
        if self.result_fd is not None and type(self.result_fd) is not int:
            raise ConfigError("result_fd must be an integer or null")
        self.code = _get(raw, "code", str, None)
        self.code_path = _get(raw, "code_path", str, None)
        if not self.code_path and self.code is None:
            raise ConfigError("code_path or code is required")
        self.code_path = self.code_path or "main.py"
        self.filename = _get(raw, "filename", str, os.path.basename(self.code_path)) or "main.py"
        allowed = raw.get("allowed_imports")
        if allowed is not None and not (
            isinstance(allowed, list) and all(isinstance(m, str) for m in allowed)
        ):
            raise ConfigError("allowed_imports must be a list of strings or null")
        self.allowed_imports = None if allowed is None else frozenset(allowed)
        self.mode = _get(raw, "runtime_imports_mode", str, "enforce")
        if self.mode not in ("enforce", "observe"):
            raise ConfigError("runtime_imports_mode must be 'enforce' or 'observe'")
        self.blocklist = _get(raw, "blocklist", list, [])  # analyzer-only, see docstring
        self.preimport = _get(raw, "preimport", list, [])
        if not all(isinstance(m, str) for m in self.preimport):
            raise ConfigError("preimport must be a list of strings")
        self.capture_figures = _get(raw, "capture_figures", bool, True)
        self.max_result_bytes = _get(raw, "max_result_bytes", int, 1 << 20)
        self.max_results = _get(raw, "max_results", int, 16)
        self.max_result_values = _get(raw, "max_result_values", int, 1 << 16)
        if self.max_result_bytes < 0 or self.max_results < 0 or self.max_result_values < 0:
            raise ConfigError("max_result_bytes, max_results and max_result_values must not be negative")
        self.seed = raw.get("seed")
        if self.seed is not None and type(self.seed) is not int:
            raise ConfigError("seed must be an integer or null")
        self.stream = _get(raw, "stream", bool, False)
        self.syntax_check = _get(raw, "syntax_check", str, None)
        self.session = _get(raw, "session", bool, False)
        self.call = _get(raw, "call", int, None)
        self.files = _input_files(raw.get("files"))
        self.env = _env(raw.get("env"))
        self.max_out_files = _get(raw, "max_out_files", int, 0)
        self.max_out_bytes = _get(raw, "max_out_bytes", int, 0)
        if self.max_out_files < 0 or self.max_out_bytes < 0:
            raise ConfigError("max_out_files and max_out_bytes must not be negative")
        self.program = _get(raw, "program", list, None)
        if self.program is not None and not (
            self.program and all(isinstance(a, str) and "\0" not in a for a in self.program)
            and self.program[0].startswith("/")
        ):
            raise ConfigError("program must be a non-empty list of strings, the first an absolute path")


def _valid_rel_path(path):
    """The server's rule (base/sandbox_path.h): relative, no empty/./.. component, no NUL."""
    if not path or "\0" in path or path.startswith("/") or len(path.encode("utf-8", "surrogateescape")) > 4095:
        return False
    return all(part not in ("", ".", "..") and len(part.encode("utf-8", "surrogateescape")) <= 255
               for part in path.split("/"))


def _input_files(raw):
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ConfigError("files must be a list")
    import binascii

    out = []
    for f in raw:
        if not isinstance(f, dict) or not isinstance(f.get("path"), str) or not isinstance(f.get("content"), str):
            raise ConfigError("files entries must be {path: str, content: base64 str}")
        if not _valid_rel_path(f["path"]):
            raise ConfigError(f"files: bad path {f['path']!r}")
        try:
            data = binascii.a2b_base64(f["content"], strict_mode=True)
        except (binascii.Error, ValueError):
            raise ConfigError(f"files: content of {f['path']!r} is not base64") from None
        out.append((f["path"], data))
    return out


def _env(raw):
    """The "env" of a config or call frame: {name: value}, names that can be set (non-empty, no
    "=" or NUL), values without NUL."""
    if raw is None:
        return {}
    if not isinstance(raw, dict) or len(raw) > _MAX_ENV or not all(
        isinstance(k, str) and isinstance(v, str) and k and "=" not in k and "\0" not in k + v
        for k, v in raw.items()
    ):
        raise ConfigError("env must be an object of at most 256 names (no '=' or NUL) to strings (no NUL)")
    return raw


def _get(raw, key, typ, default):
    value = raw.get(key, default)
    if value is None and default is None:
        return None
    if not isinstance(value, typ) or (typ is int and isinstance(value, bool)):
        raise ConfigError(f"{key} must be of type {typ.__name__}")
    return value


# ---------------------------------------------------------------------------------------------
# Result channel and events


def _clean(obj):
    """Returns obj with every str made encodable as UTF-8 (lone surrogates backslash-escaped),
    so the ASCII JSON we emit never holds a \\udXXX escape a strict parser rejects."""
    if isinstance(obj, str):
        try:
            obj.encode("utf-8")
            return obj
        except UnicodeEncodeError:
            return obj.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(obj, dict):
        return {_clean(str(k)): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return obj


def _encode_event(event):
    """One event as a JSON line (bytes). Raises ValueError/TypeError for unencodable data."""
    text = json.dumps(_clean(event), ensure_ascii=True, allow_nan=False, separators=(",", ":"))
    return text.encode("ascii") + b"\n"


def _end_event(exit_code, call=None):
    try:
        import resource

        peak = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                   resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    except Exception:  # noqa: BLE001 - the peak is a nicety; the end event is not
        peak = 0
    event = {"type": "end", "exit_code": exit_code, "max_rss_kb": peak}
    if call is not None:
        event["call"] = call
    return event


class ResultChannel:
    """The fd events are written to, moved out of the way of user code."""

    def __init__(self, fd):
        self._fd = None
        if fd is None or fd < 0:
            return
        try:
            os.fstat(fd)
        except OSError:
            return  # not open: run by hand, results are not wanted
        if fd <= 2:
            self._fd = fd  # a debugging setup; never close a standard stream
            return
        import fcntl

        for lowest in (900, 255, 64, 10):
            try:
                self._fd = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, lowest)
                break
            except OSError:
                continue  # EINVAL: RLIMIT_NOFILE is below `lowest`
        if self._fd is None:
            self._fd = fd
            return
        os.close(fd)

    def write(self, lines):
        if self._fd is None:
            return
        view = memoryview(b"".join(lines))
        try:
            while view:
                view = view[os.write(self._fd, view):]
        except OSError:
            pass  # the reader is gone; nothing left to tell it


class Room:
    """What a result may still take: bytes of its event line, JSON values of its data (the
    server keeps at most max_result_values of them in a response)."""

    __slots__ = ("bytes", "values")

    def __init__(self, size, values):
        self.bytes = size
        self.values = values


def _count_values(data):
    """The JSON values (scalars, arrays, objects) of data, counted as the server counts them."""
    count = 0
    stack = [data]
    while stack:
        item = stack.pop()
        count += 1
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return count


class ResultSink:
    """Collects display results while the cell runs and lays out the final events under the caps."""

    def __init__(self, max_results, max_bytes, max_values):
        self._max_results = max_results
        self._max_bytes = max_bytes
        self._max_values = max_values
        self._displays = []  # (encoded line, JSON values of its data)
        self._display_bytes = 0
        self._display_values = 0
        self._attempts = 0
        self.dropped = 0
        self.cut = False

    def main_room(self):
        return Room(self._max_bytes, self._max_values)

    def wants_more(self):
        """False once enough displays were collected that rendering more would be wasted."""
        return (self._attempts < self._max_results and self._display_bytes < self._max_bytes
                and self._display_values < self._max_values)

    def add_display(self, make_bundle):
        """Adds make_bundle(room)'s mime bundle (a (bundle, cut) pair) as a display result, or
        counts it as dropped. room: what is left for displays (a Room)."""
        if not self.wants_more():
            self.dropped += 1
            return
        self._attempts += 1
        room = Room(self._max_bytes - self._display_bytes, self._max_values - self._display_values)
        bundle, cut = make_bundle(room)
        self.cut = self.cut or cut
        fitted = self._fit(bundle, room, False)
        if fitted is None:
            self.dropped += 1
            return
        self._displays.append(fitted)
        self._display_bytes += len(fitted[0])
        self._display_values += fitted[1]

    def lines(self, main_bundle):
        """The result events in emission order: displays, then the main result."""
        out = []
        used, values = 0, 0
        slots = self._max_results
        main_line = None
        if main_bundle is not None:
            fitted = self._fit(main_bundle, self.main_room(), True) if slots > 0 else None
            if fitted is None:
                self.dropped += 1
            else:
                main_line = fitted[0]
                used, values = len(main_line), fitted[1]
                slots -= 1
        for line, n in self._displays:
            if slots <= 0 or used + len(line) > self._max_bytes or values + n > self._max_values:
                self.dropped += 1
                continue
            out.append(line)
            used += len(line)
            values += n
            slots -= 1
        if main_line is not None:
            out.append(main_line)
        if self.dropped or self.cut:
            out.append(
                _encode_event({"type": "truncated", "what": "results", "dropped": self.dropped})
            )
        return out

    def _fit(self, bundle, room, is_main):
        """(the result line of bundle within room, its JSON values), shrunk if need be (module
        docstring, "Caps"); None if not even a cut text/plain fits."""
        def encode(data):
            return _encode_event({"type": "result", "is_main_result": is_main, "data": data})

        sizes = {k: _count_values(v) for k, v in bundle.items()}
        values = sum(sizes.values())
        line = encode(bundle)
        if len(line) <= room.bytes and values <= room.values:
            return line, values
        self.cut = True
        data = dict(bundle)
        first = [k for k in _SHRINK_FIRST if k in data]
        rest = [k for k in data if k not in first and k != "text/plain"]
        rest.sort(key=lambda k: -len(data[k]) if isinstance(data[k], str) else -len(_encode_event(data[k])))
        for key in first + rest:
            del data[key]
            values -= sizes[key]
            line = encode(data)
            if len(line) <= room.bytes and values <= room.values:
                return line, values
        if room.values < 1:
            return None
        text = data.get("text/plain", "")
        # Cut text/plain; escapes make the encoded length exceed the char count, so shrink by
        # the measured excess until it fits (a few rounds at most).
        overhead = len(encode({"text/plain": _TRUNCATION_MARK}))
        keep = room.bytes - overhead
        while keep > 0:
            line = encode({"text/plain": text[:keep] + _TRUNCATION_MARK})
            excess = len(line) - room.bytes
            if excess <= 0:
                return line, 1
            keep -= max(excess, 1)
        return None


# ---------------------------------------------------------------------------------------------
# Import allowlist


def _import_machinery_dir():
    """importlib's directory, with a trailing separator. Found once (in a zygote, by its
    rehearsals): every run's guard asks, and the answer never changes."""
    global _importlib_dir
    if _importlib_dir is None:
        import importlib

        _importlib_dir = os.path.dirname(importlib.__file__) + os.sep
    return _importlib_dir


_importlib_dir = None


class ImportGuard:
    """The runtime import allowlist: builtins.__import__ wrapper, importlib wrappers and a
    sys.meta_path finder. Policy, not a boundary (see the module docstring)."""

    def __init__(self, allowed, observe, user_filename, warn):
        # `from __future__ import x` is a real import at run time; it must always work.
        self._allowed = None if allowed is None else frozenset(allowed) | {"__future__"}
        self._observe = observe
        self._user_filename = user_filename
        self._warn = warn
        self._warned = set()
        self._importlib_dir = _import_machinery_dir()
        self._getframe = sys._getframe
        self._orig_import = builtins.__import__
        self._wrapper_codes = set()
        self._post_import = []  # [module name, callback(module)] run once the module is loaded
        self._guarded_import = None  # the hooks install() puts in place (_make_hooks)
        self._finder = None
        self._import_module = None   # importlib.import_module's wrapper (_wrap_importlib)

    # -- decisions ------------------------------------------------------------------------

    def _is_allowed(self, fullname):
        allowed = self._allowed
        if allowed is None:
            return True
        top, dot, _ = fullname.partition(".")
        if top in allowed:
            return True
        if dot:
            parts = fullname.split(".")
            for i in range(2, len(parts) + 1):
                if ".".join(parts[:i]) in allowed:
                    return True
        return False

    def _is_machinery(self, code):
        name = code.co_filename
        return name.startswith("<frozen importlib.") or name.startswith(self._importlib_dir)

    def _origin(self, frame):
        """The first frame, walking outwards, that is neither import machinery nor anonymous
        code (compile/exec/eval); returns (origin frame, the machinery frame it called)."""
        callee = None
        while frame is not None:
            code = frame.f_code
            name = code.co_filename
            if name == self._user_filename:
                return frame, callee
            if self._is_machinery(code):
                callee = frame
            elif not (name.startswith("<") and not name.startswith("<frozen ")):
                return frame, callee
            frame = frame.f_back
        return None, callee

    def _is_user(self, frame):
        return frame is not None and frame.f_code.co_filename == self._user_filename

    def _deny(self, fullname):
        if self._observe:
            if fullname not in self._warned:
                self._warned.add(fullname)
                self._warn(f"airlock: observe: import of {fullname!r} would be blocked\n")
            return
        raise ImportError(f"import of {fullname!r} is not allowed (not in allowed imports)",
                          name=fullname)

    # -- hooks ----------------------------------------------------------------------------

    def install(self):
        self._make_hooks()
        builtins.__import__ = self._guarded_import
        if self._allowed is not None:
            self.after_import("importlib", self._wrap_importlib)
            sys.meta_path.insert(0, self._finder)
        self.run_post_import()

    def _make_hooks(self):
        """Makes the hooks install() puts in place, once. A zygote makes them for the lean path
        in C++ (zygote_prepare_lean), which then only puts them in place in each run: a run
        that made them would copy the pages of the code that makes them."""
        if self._guarded_import is not None:
            return
        guard = self
        orig_import = self._orig_import
        getframe = self._getframe
        import_name_op = __import__("opcode").opmap["IMPORT_NAME"]

        def guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
            if guard._allowed is not None and type(name) is str:
                caller = getframe(1)
                origin, _ = guard._origin(caller)
                if guard._is_user(origin) and not (
                    # PyImport_Import (C code importing on the user's behalf, e.g.
                    # datetime.strptime -> _strptime) passes the caller's globals twice and
                    # a list fromlist; the IMPORT_NAME bytecode never passes a list.
                    caller is origin
                    and level == 0
                    and type(fromlist) is list
                    and globals is not None
                    and globals is caller.f_globals
                    and locals is globals
                    and caller.f_code.co_code[caller.f_lasti] != import_name_op
                ):
                    absname = _absolute_name(name, globals, level)
                    if absname is not None and not guard._is_allowed(absname):
                        guard._deny(absname)
            try:
                return orig_import(name, globals, locals, fromlist, level)
            finally:
                if guard._post_import:
                    guard.run_post_import()

        self._wrapper_codes.add(guarded_import.__code__)
        self._guarded_import = guarded_import
        self._finder = _GuardFinder(self)

    def after_import(self, module_name, callback):
        """Calls callback(module) once module_name is fully imported (now, if it already is)."""
        self._post_import.append([module_name, callback])

    def run_post_import(self):
        for item in list(self._post_import):
            module = sys.modules.get(item[0])
            if module is None:
                continue
            if getattr(getattr(module, "__spec__", None), "_initializing", False):
                continue  # still executing its body; try again after a later import
            try:
                self._post_import.remove(item)
            except ValueError:
                continue  # another thread got it
            try:
                item[1](module)
            except Exception:
                pass  # a failed fixup must not turn into the user's ImportError

    def _wrap_importlib(self, importlib):
        self._make_import_module(importlib)
        importlib.import_module = self._import_module
        importlib.__import__ = self._guarded_import

    def _make_import_module(self, importlib):
        """Makes the wrapper of importlib.import_module that _wrap_importlib puts in place, once."""
        if self._import_module is not None:
            return
        guard = self
        getframe = self._getframe
        orig_import_module = importlib.import_module

        def import_module(name, package=None):
            origin, _ = guard._origin(getframe(1))
            if guard._is_user(origin):
                # None: import_module itself raises (bad name, relative without package).
                absname = None
                if isinstance(name, str):
                    bare = name.lstrip(".")
                    absname = _absolute_name(bare, {"__package__": package}, len(name) - len(bare))
                if absname is not None and not guard._is_allowed(absname):
                    guard._deny(absname)
            return orig_import_module(name, package)

        self._wrapper_codes.add(import_module.__code__)
        self._import_module = import_module

    def finder_check(self, fullname, frame):
        """The meta_path backstop for imports that bypass the wrappers (importlib internals)."""
        if self._is_allowed(fullname):
            return
        origin, callee = self._origin(frame)
        if origin is None or origin.f_code in self._wrapper_codes:
            return  # a wrapper already decided
        if callee is not None and callee.f_code.co_name == "_find_and_load":
            return  # C code (e.g. Cython) importing on the user's behalf
        if self._is_user(origin):
            self._deny(fullname)


class _GuardFinder:
    """sys.meta_path entry: never finds anything, only refuses."""

    def __init__(self, guard):
        self._guard = guard

    def find_spec(self, fullname, path=None, target=None):
        self._guard.finder_check(fullname, sys._getframe(1))
        return None

    def invalidate_caches(self):
        pass


def _absolute_name(name, globals, level):
    if level == 0:
        return name
    package = None
    if isinstance(globals, dict):
        package = globals.get("__package__")
        if package is None:
            package = getattr(globals.get("__spec__"), "parent", None)
    if not isinstance(package, str) or not package:
        return None  # the real import raises "attempted relative import with no parent"
    bits = package.rsplit(".", level - 1)
    if len(bits) < level:
        return None
    return f"{bits[0]}.{name}" if name else bits[0]


# ---------------------------------------------------------------------------------------------
# Source handling and tracebacks


def _split_lines(text):
    lines = text.split("\n")
    out = [line + "\n" for line in lines[:-1]]
    if lines[-1]:
        out.append(lines[-1])
    return out


def _decode_source(data, filename):
    """The code as text with newlines normalised, or raises SyntaxError as Python would."""
    # A BOM is dropped as "utf-8-sig" drops it, without that codec's Python function (a run's
    # pages) and so that the error's offset is one into `data`.
    if data[:3] == b"\xef\xbb\xbf":
        data = data[3:]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise SyntaxError(
            f"Non-UTF-8 code starting with '\\x{data[e.start]:02x}' in file {filename} on line "
            f"{line}, but no encoding declared; see https://peps.python.org/pep-0263/ for details"
        ) from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _compile_cell(text, filename, lines):
    """(body code, last-expression code or None). Raises SyntaxError with the user's line."""
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    try:
        if "\0" in text:
            lineno = text.count("\n", 0, text.index("\0")) + 1
            raise SyntaxError("source code cannot contain null bytes",
                              (filename, lineno, None, lines[lineno - 1].split("\0")[0]))
        tree = ast.parse(text, filename, "exec")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr) and not _ends_with_semicolon(
            tree.body[-1], lines
        ):
            last = ast.Expression(tree.body.pop().value)
        body = compile(tree, filename, "exec", flags=flags, dont_inherit=True)
        last_code = None
        if last is not None:
            last_code = compile(last, filename, "eval", flags=flags, dont_inherit=True)
        return body, last_code
    except SyntaxError as e:
        # Compiling an AST leaves `text` unset (Python would re-read the file by name).
        if e.text is None and e.filename == filename and e.lineno and e.lineno <= len(lines):
            e.text = lines[e.lineno - 1]
        raise


def _ends_with_semicolon(node, lines):
    """IPython's rule: a trailing `;` suppresses the display of the last expression."""
    if node.end_lineno is None or node.end_lineno > len(lines):
        return False
    rest = lines[node.end_lineno - 1].encode("utf-8")[node.end_col_offset:]
    return rest.decode("utf-8", "replace").lstrip().startswith(";")


def _strip_runner_frames(exc, user_filename, seen=None):
    """Removes the runner's frames (and whatever led to the first user frame) from exc and the
    exceptions chained to it, so a traceback reads as if `python3 main.py` had run."""
    if seen is None:
        seen = set()
    if exc is None or id(exc) in seen:
        return
    seen.add(id(exc))
    entries = []
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename not in _RUNNER_FILES:
            entries.append(tb)
        tb = tb.tb_next
    for i, entry in enumerate(entries):
        if entry.tb_frame.f_code.co_filename == user_filename:
            entries = entries[i:]  # e.g. asyncio frames that drove a top-level await
            break
    new_tb = None
    for entry in reversed(entries):
        new_tb = types.TracebackType(new_tb, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    exc.__traceback__ = new_tb
    _strip_runner_frames(exc.__cause__, user_filename, seen)
    _strip_runner_frames(exc.__context__, user_filename, seen)
    for sub in getattr(exc, "exceptions", None) or ():
        if isinstance(sub, BaseException):
            _strip_runner_frames(sub, user_filename, seen)


def _c_format_syntax_error(exc):
    """The interpreter's own rendering of a frameless SyntaxError (it places carets slightly
    differently from the traceback module, e.g. for IndentationError), or None.

    Only for errors without frames: the C printer reads source lines from disk by file name,
    not from linecache, so for frames it would show nothing or a stranger's main.py."""
    if exc.__cause__ is not None or (exc.__context__ is not None
                                     and not exc.__suppress_context__):
        return None
    import io

    saved = sys.stderr
    buf = io.StringIO()
    sys.stderr = buf
    try:
        sys.__excepthook__(type(exc), exc, None)
    finally:
        sys.stderr = saved
    return buf.getvalue() or None


def _safe_str(exc):
    try:
        return str(exc)
    except BaseException:
        return "<exception str() failed>"


def _cap_head(text, cap):
    return text if len(text) <= cap else text[:cap] + _TRUNCATION_MARK


def _cap_tail(text, cap):
    # The end of a traceback (the failing line, the exception) matters most.
    return text if len(text) <= cap else "[traceback truncated by airlock]\n" + text[-cap:]


# ---------------------------------------------------------------------------------------------
# The run


# ---------------------------------------------------------------------------------------------
# Files in and out of the working directory


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _open_beneath(rel, flags, mode=0o644, make_parents=False):
    """Opens rel below the cwd one component at a time, never following a symlink (O_NOFOLLOW
    on every component), creating parent directories when make_parents."""
    parts = rel.split("/")
    dfd = os.open(".", _DIR_FLAGS)
    try:
        for part in parts[:-1]:
            if make_parents:
                try:
                    os.mkdir(part, 0o755, dir_fd=dfd)
                except FileExistsError:
                    pass
            nfd = os.open(part, _DIR_FLAGS, dir_fd=dfd)
            os.close(dfd)
            dfd = nfd
        return os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode, dir_fd=dfd)
    finally:
        os.close(dfd)


def _is_regular(fd):
    return (os.fstat(fd).st_mode & 0o170000) == 0o100000


def _place_file(rel, data):
    fd = _open_beneath(rel, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, make_parents=True)
    try:
        if not _is_regular(fd):
            raise IsADirectoryError(21, "not a regular file", rel)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def _scan_files():
    """({relpath: (size, mtime_ns, ino)} of the regular files below the cwd, complete?).
    Bounded (_FILES_MAX_SCAN entries, _FILES_MAX_DEPTH levels); lstat only; mounts not entered."""
    files = {}
    complete = True
    scanned = 0
    try:
        root_dev = os.lstat(".").st_dev
    except OSError:
        return files, False
    stack = [("", ".", 0)]
    while stack:
        prefix, path, depth = stack.pop()
        try:
            it = os.scandir(path)
        except OSError:
            continue
        with it:
            for entry in it:
                scanned += 1
                if scanned > _FILES_MAX_SCAN:
                    return files, False
                rel = prefix + entry.name
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                kind = st.st_mode & 0o170000
                if kind == 0o100000:
                    files[rel] = (st.st_size, st.st_mtime_ns, st.st_ino)
                elif kind == 0o040000 and st.st_dev == root_dev and rel not in _FILES_SKIP:
                    if depth < _FILES_MAX_DEPTH:
                        stack.append((rel + "/", entry.path, depth + 1))
                    else:
                        complete = False
    return files, complete


def _read_capped(rel, budget):
    """(size, bytes) of regular file rel, at most budget bytes of it; None if not a regular file."""
    fd = _open_beneath(rel, os.O_RDONLY)
    try:
        if not _is_regular(fd):
            return None
        size = os.fstat(fd).st_size
        want = min(size, budget)
        chunks = []
        got = 0
        while got < want:
            chunk = os.read(fd, min(want - got, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        return size, b"".join(chunks)
    finally:
        os.close(fd)


def _setup_streams():
    """stdout and stderr as every run has them: UTF-8, line-buffered (module docstring, "Output
    buffering"), stderr escaping what UTF-8 cannot encode."""
    for stream, errors in ((sys.stdout, None), (sys.stderr, "backslashreplace")):
        try:
            if stream is None:
                continue
            kwargs = {}
            if stream.encoding.lower().replace("-", "") != "utf8":
                kwargs["encoding"] = "utf-8"
                if errors:
                    kwargs["errors"] = errors
            if not stream.line_buffering:
                kwargs["line_buffering"] = True
            if kwargs:
                stream.reconfigure(**kwargs)
        except Exception:
            pass


def _setup_matplotlib_env():
    os.environ["MPLBACKEND"] = "Agg"
    if "MPLCONFIGDIR" in os.environ:
        return
    home = os.path.expanduser("~")
    if os.path.isdir(home) and os.access(home, os.W_OK):
        return
    tmp = os.environ.get("TMPDIR") or "/tmp"
    os.environ["MPLCONFIGDIR"] = os.path.join(tmp, ".airlock-matplotlib")


def _use_agg():
    import matplotlib

    try:
        matplotlib.use("Agg")
    except Exception:
        pass


def _show_figures(pyplot, add_display):
    """Every open figure as a display result (through add_display; None: dropped), then closed."""
    from matplotlib import _pylab_helpers

    try:
        for manager in list(_pylab_helpers.Gcf.get_all_fig_managers()):
            figure = manager.canvas.figure
            if add_display is not None:
                add_display(lambda room: _display.figure_bundle(figure, room))
    finally:
        pyplot.close("all")


class Runner:
    def __init__(self, config, channel, rehearsal=False, session=None):
        self._cfg = config
        self._channel = channel
        # A session's state that outlives this cell (_Session), or None for a one-shot run.
        self._session = session
        # A rehearsal (warm_rehearse) leaves nothing behind: no import hook, no recursion
        # depth granted, atexit handlers and threads left alone.
        self._rehearsal = rehearsal
        self._stdout = sys.stdout
        self._stderr = sys.stderr
        self._sink = ResultSink(config.max_results, config.max_result_bytes, config.max_result_values)
        self._error_event = None
        self._exit_code = 0
        self._lines = []
        self._depth_granted = False
        self._files_before = None  # the working directory's files before the code ran

    # -- small helpers --------------------------------------------------------------------

    def _flush(self):
        for stream in (sys.stdout, self._stdout, sys.stderr, self._stderr):
            try:
                if stream is not None:
                    stream.flush()
            except Exception:
                pass

    def _warn(self, text):
        self._flush()
        try:
            self._stderr.write(text)
            self._stderr.flush()
        except Exception:
            pass

    def _register_source(self):
        # mtime None: linecache.checkcache keeps the entry, so tracebacks show the user's lines.
        text = "".join(self._lines)
        linecache.cache[self._cfg.filename] = (len(text), None, list(self._lines),
                                               self._cfg.filename)

    def _record_exception(self, exc):
        """Prints exc's traceback to stderr as Python would and keeps it as the error event."""
        if self._error_event is not None:
            return  # the first error is the one reported
        import traceback

        self._register_source()
        try:
            _strip_runner_frames(exc, self._cfg.filename)
            text = None
            if isinstance(exc, SyntaxError) and exc.__traceback__ is None:
                text = _c_format_syntax_error(exc)
            if text is None:
                text = "".join(traceback.format_exception(exc))
        except Exception:  # MemoryError and friends while formatting: say what we can
            text = f"{type(exc).__name__}: {_safe_str(exc)}\n"
        if not self._cfg.stream:
            self._warn(text)
        self._error_event = {
            "type": "error",
            "name": type(exc).__name__,
            "value": _cap_head(_safe_str(exc), _ERROR_FIELD_CAP),
            "traceback": _cap_tail(text, _ERROR_FIELD_CAP),
        }
        self._exit_code = 1

    def _record_analyzer_error(self, finding):
        text = (f"AirlockAnalyzerError: the code was not run: airlock's analyzer reports a syntax error "
                f"that Python does not ({finding}); this is airlock's mistake, please report it\n")
        self._warn(text)
        self._error_event = {
            "type": "error",
            "name": "AirlockAnalyzerError",
            "value": _cap_head(text[len("AirlockAnalyzerError: "):].rstrip("\n"), _ERROR_FIELD_CAP),
            "traceback": _cap_tail(text, _ERROR_FIELD_CAP),
        }
        self._exit_code = 1

    def _record_exit(self, exc):
        code = exc.code
        if code is None:
            self._exit_code = 0
        elif isinstance(code, int):
            self._exit_code = code & 0xFF
        else:
            self._warn(_safe_str(code) + "\n")  # what Python prints for sys.exit("message")
            self._exit_code = 1

    def _guarded(self, fn, *args):
        """Runs fn (which may run user code); returns (True, value) or records how it ended."""
        try:
            return True, fn(*args)
        except SystemExit as e:
            self._record_exit(e)
        except BaseException as e:
            self._record_exception(e)
        return False, None

    # -- setup ----------------------------------------------------------------------------

    def _preimport(self):
        import importlib

        for name in self._cfg.preimport:
            try:
                importlib.import_module(name)
            except Exception:
                # Not installed or broken: the user's own import of it reports the real error.
                pass

    def _patch_pyplot(self, pyplot):
        _use_agg()
        runner = self
        session = self._session

        def show(*args, **kwargs):
            """airlock: renders every open figure as an image/png result, then closes them."""
            # In a session the hook outlives this cell: the figures go to the cell under way.
            current = session.current if session is not None and session.current is not None else runner
            current._show_open_figures(pyplot)

        pyplot.show = show

    def _show_open_figures(self, pyplot):
        _show_figures(pyplot, self._sink.add_display)

    def _seed_numpy(self, numpy_random):
        numpy_random.seed(self._cfg.seed % (2 ** 32))

    # -- running the cell -----------------------------------------------------------------

    def _execute(self, code, namespace, loop_holder):
        if self._session is not None:
            self._depth_granted = self._session.depth_granted
        if not self._depth_granted and not self._rehearsal:
            # The runner's frames below the user's would otherwise shorten the recursion depth
            # user code gets (and change "[Previous line repeated N more times]").
            depth = 1  # eval() below enters the interpreter loop once more, which counts too
            frame = sys._getframe()
            while frame is not None:
                depth += 1
                frame = frame.f_back
            sys.setrecursionlimit(sys.getrecursionlimit() + depth)
            self._depth_granted = True
            if self._session is not None:
                self._session.depth_granted = True
        result = eval(code, namespace)
        if code.co_flags & _CO_COROUTINE:
            if not loop_holder:
                import asyncio

                loop_holder.append(asyncio.new_event_loop())
                asyncio.set_event_loop(loop_holder[0])
            result = loop_holder[0].run_until_complete(result)
        return result

    def _run_cell(self, body, last):
        if self._session is not None:
            namespace_module = self._session.main_module  # variables persist across calls
        else:
            namespace_module = types.ModuleType("__main__")
        namespace = namespace_module.__dict__
        namespace["__builtins__"] = builtins
        sys.modules["__main__"] = namespace_module  # pickle, `import __main__` see the user's
        sys.argv = [self._cfg.filename]
        loop_holder = []
        try:
            self._execute(body, namespace, loop_holder)
            value = None
            if last is not None:
                value = self._execute(last, namespace, loop_holder)
            return value
        finally:
            if loop_holder:
                self._close_loop(loop_holder[0])

    def _close_loop(self, loop):
        try:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()
        except Exception:
            pass

    def _finish_threads_and_atexit(self):
        # What interpreter shutdown does before exiting: join non-daemon threads, run atexit.
        threading = sys.modules.get("threading")
        if threading is not None and hasattr(threading, "_shutdown"):
            self._guarded(threading._shutdown)
        import atexit

        self._guarded(atexit._run_exitfuncs)

    def run(self):
        cfg = self._cfg
        if cfg.code is not None:
            data = cfg.code.encode("utf-8", "surrogatepass")
        else:
            try:
                with open(cfg.code_path, "rb") as f:
                    data = f.read()
            except OSError as e:
                raise ConfigError(f"cannot read code_path {cfg.code_path!r}: {e.strerror}") from None
        try:
            text = _decode_source(data, cfg.filename)
            self._lines = _split_lines(text)
            self._register_source()
            body, last = _compile_cell(text, cfg.filename, self._lines)
        except SyntaxError as e:
            # Parsing is the runner's act: no frame of it belongs in the user's report.
            self._record_exception(e.with_traceback(None))
            return self._finish(None)
        if cfg.syntax_check is not None:
            # The analyzer and Python disagree: code the analyzer could not read is not run.
            self._record_analyzer_error(cfg.syntax_check)
            return self._finish(None)

        if cfg.files:
            for rel, data in cfg.files:
                try:
                    _place_file(rel, data)
                except OSError as e:
                    self._record_exception(OSError(e.errno, f"airlock: cannot write input file {rel!r}: "
                                                            f"{e.strerror}"))
                    return self._finish(None)
        if cfg.max_out_files > 0:
            self._files_before = _scan_files()[0]

        if self._session is None or self._session.guard is None:
            _setup_streams()
            if cfg.capture_figures:
                _setup_matplotlib_env()
            self._preimport()
            if cfg.seed is not None:
                import random

                random.seed(cfg.seed)
            guard = ImportGuard(cfg.allowed_imports, cfg.mode == "observe", cfg.filename, self._warn)
            if cfg.capture_figures:
                guard.after_import("matplotlib.pyplot", self._patch_pyplot)
            else:
                _own_pyplot_show()
            if cfg.seed is not None:
                guard.after_import("numpy.random", self._seed_numpy)
            for name in ("PIL.Image", "PIL.ImageShow"):
                if name not in _display.hooked:
                    guard.after_import(name, _display.install_pil_hooks)
            if not hasattr(builtins, "exit"):  # no `site` (python3 -S): provide what it would
                builtins.exit = builtins.quit = _Quitter()
            if getattr(builtins, "display", None) is not _display.display:
                builtins.display = _display.display  # IPython's builtin
            if not self._rehearsal:
                guard.install()
            if self._session is not None:
                self._session.guard = guard  # installed once, for every call of the session
        elif self._session is not None:
            _setup_streams()  # an earlier cell may have changed them

        _display.target = self._sink.add_display
        restore_env = self._set_env()
        try:
            if self._session is not None:
                ok, value = self._session.interruptible(self._guarded, self._run_cell, body, last)
            else:
                ok, value = self._guarded(self._run_cell, body, last)
        finally:
            if restore_env:
                _restore_env(restore_env)
        return self._after_cell(ok, value)

    def _after_cell(self, ok, value):
        """What follows a cell that returned `value` (ok) or ended as recorded: its value shown,
        the open figures, threads and atexit handlers, then the events (_finish)."""
        cfg = self._cfg
        main_bundle = None
        if ok and value is not None:
            ok, made = self._guarded(_display.bundle_of, value, self._sink.main_room())
            if ok:
                main_bundle, cut = made
                self._sink.cut = self._sink.cut or cut
            if ok and _display.is_figure(value):
                pyplot = sys.modules.get("matplotlib.pyplot")
                if pyplot is not None:
                    self._guarded(pyplot.close, value)  # shown as the main result, not again
        pyplot = sys.modules.get("matplotlib.pyplot")
        if cfg.capture_figures and pyplot is not None:
            self._guarded(self._show_open_figures, pyplot)
        if not self._rehearsal and self._session is None:
            # A session's threads go on between calls; its atexit handlers never run (the
            # session ends with os._exit).
            self._finish_threads_and_atexit()
        return self._finish(main_bundle)

    def run_program(self):
        """Runs config.program (JavaScript, bash) as a child and reports how it ended.

        The runner is only the launcher here: it writes the input files, snapshots the working
        directory, starts the program with the streams it was given (stdin, stdout, stderr; the
        result channel is close-on-exec) and the clean environment, waits for it, then reports
        the files it wrote and its exit status in the end event. A program killed by a signal
        makes the runner die of the same signal after the events are written, so the run's
        status is the program's."""
        cfg = self._cfg
        for rel, data in cfg.files:
            try:
                _place_file(rel, data)
            except OSError as e:
                self._warn(f"airlock: cannot write input file {rel!r}: {e.strerror}\n")
                self._exit_code = 1
                return self._finish(None)
        if cfg.max_out_files > 0:
            self._files_before = _scan_files()[0]
        self._set_env()
        try:
            pid = os.posix_spawn(cfg.program[0], cfg.program, dict(os.environ))
        except OSError as e:
            raise ConfigError(f"cannot start {cfg.program[0]!r}: {e.strerror}") from None
        _, status = os.waitpid(pid, 0)
        signum = os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0
        self._exit_code = 128 + signum if signum else os.WEXITSTATUS(status)
        code = self._finish(None)
        if signum:
            import signal

            try:
                signal.signal(signum, signal.SIG_DFL)
                os.kill(os.getpid(), signum)
            except (OSError, ValueError):
                pass
        return code

    def _file_lines(self):
        """The file events (and a truncated event) for what the run wrote; see "Files"."""
        cfg = self._cfg
        if self._files_before is None or cfg.max_out_files <= 0:
            return []
        import binascii

        after, complete = _scan_files()
        before = self._files_before
        changed = sorted(rel for rel, sig in after.items() if before.get(rel) != sig)
        lines = []
        budget = cfg.max_out_bytes
        dropped = 0
        cut = not complete
        for rel in changed:
            try:
                rel.encode("utf-8")
            except UnicodeEncodeError:
                dropped += 1  # not UTF-8: it cannot be named in JSON
                continue
            if len(lines) >= cfg.max_out_files or not _valid_rel_path(rel):
                dropped += 1
                continue
            try:
                got = _read_capped(rel, budget)
            except OSError:
                continue  # gone or replaced meanwhile
            if got is None:
                continue
            size, data = got
            budget -= len(data)
            truncated = len(data) < size
            cut = cut or truncated
            lines.append(_encode_event({"type": "file", "path": rel, "size": size,
                                        "content": binascii.b2a_base64(data, newline=False).decode("ascii"),
                                        "truncated": truncated}))
        if dropped or cut:
            lines.append(_encode_event({"type": "truncated", "what": "files", "dropped": dropped}))
        return lines

    def _set_env(self):
        """Sets the config's env for the code; in a session call returns what undoes it."""
        env = self._cfg.env
        if not env:
            return None
        before = None
        if self._session is not None:
            before = {name: os.environ.get(name) for name in env}
        os.environ.update(env)
        return before

    def _finish(self, main_bundle):
        self._flush()
        if _display.target == self._sink.add_display:
            _display.target = None  # displays from threads that outlive the cell go nowhere
        lines = self._sink.lines(main_bundle)
        try:
            lines.extend(self._file_lines())
        except Exception as e:  # noqa: BLE001 - a failed walk must not lose the run's results
            self._warn(f"airlock: could not collect the run's files: {_safe_str(e)}\n")
        if self._error_event is not None:
            lines.append(_encode_event(self._error_event))
        lines.append(_encode_event(_end_event(self._exit_code, self._cfg.call)))
        self._channel.write(lines)
        return self._exit_code


def _restore_env(before):
    for name, value in before.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


class _Quitter:
    def __repr__(self):
        return "Use exit() or Ctrl-D (i.e. EOF) to exit"

    def __call__(self, code=None):
        raise SystemExit(code)


def complete_site():
    """What `site` gives a program, minus .pth files and sitecustomize: the site-packages
    directories on sys.path, help() and the copyright/credits/license builtins (exit and quit
    come from the Runner). Processing a Debian host's .pth files and sitecustomize is most of
    a python3 start-up (10+ ms of imports no cell needs), so the server starts the runner with
    -S and the zygote without site; both call this first, so warm and cold runs see the same
    sys.path and builtins."""
    if not sys.flags.no_site:
        return
    import site

    for d in site.getsitepackages():
        if d not in sys.path and os.path.isdir(d):
            sys.path.append(d)
    site.setcopyright()
    site.sethelper()


def main(argv):
    complete_site()
    _load_helpers()
    if len(argv) != 2:
        sys.stderr.write("usage: airlock_runner.py CONFIG.json\n")
        return EXIT_RUNNER_FAILURE

    try:
        with open(argv[1], "rb") as f:
            raw = json.loads(f.read())
    except (OSError, ValueError) as e:
        raw = ConfigError(f"cannot read config {argv[1]!r}: {e}")
    if isinstance(raw, dict) and raw.get("session") is True and type(raw.get("result_fd")) is int:
        # A cold session (the server had no warm run for it): fd 3 is a socket that carries
        # the calls in and the result events out; the channel takes fd 3, the calls a copy.
        import fcntl

        try:
            control = fcntl.fcntl(raw["result_fd"], fcntl.F_DUPFD_CLOEXEC, 10)
        except OSError:
            control = -1
        if control >= 0:
            return _Session(raw, control).serve()

    def load():
        if isinstance(raw, ConfigError):
            raise raw
        return raw

    return _run(load)


# ---------------------------------------------------------------------------------------------
# The warm path: the runner inside a zygote (an embedded interpreter that forks runs)


def zygote_preimport(names, helper_sources=None):
    """In the zygote, before any run exists: imports the profile's modules (trusted code), then
    loads the runner's helpers (from helper_sources, {name: source}, when given).

    Returns one "name: error" string per module that could not be imported; the user's own
    import of it reports the real error later.
    """
    import importlib

    # What every run uses, loaded once here instead of in each run: random (reseeding),
    # traceback (errors), resource (the end event's peak memory), the UTF-8 codec lookups of
    # decoding and compiling a cell.
    import atexit  # noqa: F401
    import codecs
    import encodings.utf_8  # noqa: F401
    import fcntl  # noqa: F401
    import opcode  # noqa: F401
    import random  # noqa: F401
    import resource  # noqa: F401
    import traceback  # noqa: F401

    codecs.lookup("utf-8")
    text = _decode_source(b"x = 1\nx\n", "main.py")
    _compile_cell(text, "main.py", _split_lines(text))

    failed = []
    for name in names:
        try:
            importlib.import_module(name)
        except Exception as e:  # noqa: BLE001 - reported to the server, never fatal
            failed.append(f"{name}: {type(e).__name__}: {_safe_str(e)}")
    _load_helpers(helper_sources)
    for module, warm in (("numpy", _warm_numpy), ("pandas", _warm_pandas), ("matplotlib", _warm_matplotlib)):
        if module in sys.modules:
            try:
                warm()
            except Exception as e:  # noqa: BLE001
                failed.append(f"{module} warm-up: {type(e).__name__}: {_safe_str(e)}")
    # What every run would otherwise do to the same shared objects, done once here.
    for name in ("PIL.Image", "PIL.ImageShow"):
        if name in sys.modules:
            _display.install_pil_hooks(sys.modules[name])
    builtins.display = _display.display
    _zygote_patch_pyplot()
    _zygote_map_numpy_state()
    # The streams as every run sets them up (a run then finds nothing to change in them).
    _setup_streams()
    # The lean path walked here until CPython 3.11 has quickened and specialised its bytecode
    # (a code object is quickened after 8 calls; its adaptive instructions specialise on later
    # passes): a run that walks it then finds its bytecode settled instead of rewriting it, and
    # its warm-up counters, in pages it would copy (10-20 of a run's pages, bench/runner_pages.py
    # "one zygote rehearsal"). Trusted code on a trivial cell, leaving nothing behind
    # (warm_rehearse); every run still rehearses once on its own before its request.
    for _ in range(_ZYGOTE_REHEARSALS):
        warm_rehearse()
    return failed


_ZYGOTE_REHEARSALS = 16


def _warm_numpy():
    """Walks numpy's common first calls once, in the zygote: what they load and cache lazily
    (ufunc loops, reductions, printing, the default generator) is then shared by every run
    instead of paid in each."""
    import numpy

    a = numpy.arange(12, dtype=float).reshape(3, 4)
    repr(a.sum() + a.mean(axis=0).std() + (a @ a.T).max())
    repr(a)
    str(numpy.random.default_rng(0).random(3))


def _warm_pandas():
    """The same for pandas: a DataFrame, a groupby aggregation, the CSV writer and the repr
    (each loads code paths and caches on first use: tens of milliseconds in a run)."""
    import io

    import pandas

    df = pandas.DataFrame({"k": ["a", "b", "a"], "v": [1, 2, 3], "x": [0.5, 1.5, 2.5]})
    g = df.groupby("k")["v"].agg(["sum", "count", "mean"])
    g.reset_index().to_csv(io.StringIO(), index=False)
    _display.bundle_of(df, Room(1 << 20, 1 << 16))  # its html and E2B's data
    repr(df.describe())
    repr(df.merge(g, left_on="k", right_index=True).sort_values("v").head())


def _warm_matplotlib():
    """Loads what a figure needs once, in the zygote: pyplot, the Agg backend, and the font
    list (built from the system's fonts: about 2 s, which every run would pay again in its own
    empty MPLCONFIGDIR). Draws one figure and PNG so the rest is loaded too, then drops the
    open font files (a run inherits no fd of the zygote's)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as pyplot
    from matplotlib import font_manager

    font_manager.fontManager  # noqa: B018 - builds or loads the font list
    fig = pyplot.figure()
    fig.gca().plot([0, 1], [0, 1])
    fig.gca().set_title("warm-up")
    _display.figure_bundle(fig, Room(1 << 20, 1 << 16))  # its PNG and its chart
    pyplot.close("all")
    get_font = getattr(font_manager, "_get_font", None)
    if get_font is not None and hasattr(get_font, "cache_clear"):
        get_font.cache_clear()


def warm_main(request, control=-1):
    """In a warm run's program (forked from the zygote, every kernel layer already in force):
    runs one cell. `request` is the config JSON (bytes) with the code inline ("code"), or the
    dict json.loads would make of it (the zygote makes it with the C API when it can: the json
    module's pages stay the zygote's);
    `control` the run's control socket (-1: none). Returns the exit code; the caller exits with
    it. A request with "session": true makes the run a session (module docstring): it serves
    calls on `control` until the server closes it."""
    if type(request) is dict:
        raw = request
    else:
        try:
            raw = json.loads(request)
        except ValueError as e:
            raw = e
    if isinstance(raw, dict) and raw.get("session") is True and control >= 0:
        return _Session(raw, control).serve()
    code = _lean_run(raw, control)
    if code is not None:
        return code
    if control >= 0:
        # The server does not listen any more: nothing of this run may reach it but its
        # output, its result channel and its exit status.
        os.close(control)

    def load():
        if isinstance(raw, ValueError):
            raise ConfigError(f"cannot parse the request: {raw}") from None
        return raw

    return _run(load, after_fork=True)


_MAX_CALL_BYTES = 256 << 20


def _read_exact(fd, size):
    """size bytes from fd, or None at end of file or on an error."""
    chunks = []
    while size > 0:
        try:
            data = os.read(fd, min(size, 1 << 20))
        except InterruptedError:
            continue
        except OSError:
            return None
        if not data:
            return None
        chunks.append(data)
        size -= len(data)
    return b"".join(chunks)


class _Session:
    """A warm run that keeps its interpreter and takes one call at a time (module docstring)."""

    def __init__(self, raw, control):
        import signal

        self._signal = signal
        self._control = control
        self._in_user_code = False  # the main thread is in a cell (the SIGINT handler raises)
        self.main_module = types.ModuleType("__main__")
        self.guard = None           # the import hook, installed by the first call
        self.depth_granted = False
        self.current = None         # the Runner of the call under way
        self._raw = raw

    def serve(self):
        try:
            _load_helpers()
            config = Config(self._raw)
            self._base = config  # what a lean call frame does not repeat
            os.environ.update(config.env)  # the session's own: for its whole life
            self._channel = ResultChannel(config.result_fd)
            _reseed_after_fork(config.seed)
            self._signal.signal(self._signal.SIGINT, self._on_sigint)
        except BaseException as e:  # noqa: B902 - a session that cannot start says why and ends
            sys.stderr.write(f"airlock: session setup failed: {_safe_str(e)}\n")
            sys.stderr.flush()
            return EXIT_RUNNER_FAILURE
        while True:
            payload = self._next_call()
            if payload is None:
                os._exit(0)  # the server closed the session
            self._call(payload)

    def _next_call(self):
        """The next call's payload, or None when the server is gone (or wrote nonsense)."""
        kind = _read_exact(self._control, 1)
        if kind != b"C":
            return None
        header = _read_exact(self._control, 8)
        if header is None:
            return None
        size = int.from_bytes(header, "little")
        if size > _MAX_CALL_BYTES:
            return None
        return _read_exact(self._control, size)

    def _call(self, payload):
        call = None
        try:
            raw = json.loads(payload)
            if isinstance(raw, dict) and type(raw.get("call")) is int:
                call = raw["call"]
            if isinstance(raw, dict) and raw.get("frame") == "call":
                config = self._lean_config(raw)
            else:
                config = Config(raw)
            config.result_fd = None  # the session's channel is already open
            runner = Runner(config, self._channel, session=self)
            self.current = runner
            runner.run()
        except BaseException as e:  # noqa: B902 - every call ends with an end event
            message = f"airlock: runner error in a session call: {type(e).__name__}: {_safe_str(e)}\n"
            try:
                sys.stdout.flush()
                sys.stderr.write(message)
                sys.stderr.flush()
            except Exception:
                pass
            self._channel.write([
                _encode_event({"type": "error", "name": "AirlockRunnerError", "value": _safe_str(e),
                               "traceback": message}),
                _encode_event(_end_event(EXIT_RUNNER_FAILURE, call)),
            ])
        finally:
            self.current = None

    def _lean_config(self, raw):
        """The config of a lean call frame: the first request's, with this call's code."""
        import copy

        code, call = raw.get("code"), raw.get("call")
        stream, syntax_check = raw.get("stream", False), raw.get("syntax_check")
        if type(code) is not str or type(call) is not int or type(stream) is not bool or \
                not (syntax_check is None or type(syntax_check) is str):
            raise ConfigError("a call frame needs code (str), call (int), and stream (bool) and "
                              "syntax_check (str) when given")
        config = copy.copy(self._base)
        config.code = code
        config.call = call
        config.stream = stream
        config.syntax_check = syntax_check
        config.session = False
        config.files = _input_files(raw.get("files"))
        config.env = _env(raw.get("env"))  # this call's only (the session's were set once)
        return config

    def interruptible(self, fn, *args):
        """Runs fn(*args) (the cell) where the server's SIGINT may stop it."""
        # User code may have replaced the handler in an earlier call: the contract is ours.
        try:
            self._signal.signal(self._signal.SIGINT, self._on_sigint)
        except Exception:
            pass
        self._in_user_code = True
        try:
            return fn(*args)
        finally:
            self._in_user_code = False

    def _on_sigint(self, signum, frame):
        if self._in_user_code:
            raise KeyboardInterrupt
        # Between cells, or in the runner's own code: a late interrupt is dropped.


def warm_rehearse():
    """In a warm run before its request arrives (only trusted code has run): walks the lean path
    (_lean_run) once on a trivial cell, output discarded, so that the memory a request on it
    touches is copied from the zygote now rather than on the request's time (the first pass in a
    fresh fork costs milliseconds of copy-on-write faults, the next a fraction). Only the lean
    path: walking the whole one too would copy its pages into every run, which is what the lean
    path is there to spare (a request that needs the whole path pays for its pages itself).
    Leaves no state a cell could see: no import hook, the streams, argv, __main__, linecache and
    the display target as they were, atexit handlers not run."""
    import io

    _load_helpers()
    saved_streams = sys.stdout, sys.stderr
    saved_argv = sys.argv
    saved_main = sys.modules.get("__main__")
    sys.stdout, sys.stderr = io.StringIO(), io.StringIO()
    try:
        # A literal, not json.loads: the json module's pages are the zygote's (warm_main).
        raw = {"code": "x = [1]", "filename": "<rehearsal>", "allowed_imports": None, "result_fd": None,
               "capture_figures": False, "max_out_files": 1}
        _lean_run(raw, -1, rehearsal=True)
    except BaseException:  # noqa: B902 - a failed rehearsal only costs the request time
        pass
    finally:
        sys.stdout, sys.stderr = saved_streams
        sys.argv = saved_argv
        if saved_main is not None:
            sys.modules["__main__"] = saved_main
        linecache.cache.pop("<rehearsal>", None)
        _display.target = None


# The state of numpy's legacy generator (MT19937): 624 words of 32 bits, and the position.
_MT19937_WORDS = 624
_MT_KEY_BYTES = 4 * _MT19937_WORDS
_MT_POS_FRESH = _MT19937_WORDS.to_bytes(4, sys.byteorder)  # the next draw regenerates the key
_mt_state = None  # the legacy generator's C state (key, pos) as bytes, when the zygote mapped it


def _zygote_map_numpy_state():
    """In the zygote: a writable view of numpy's legacy generator's C state (its mt19937_state,
    `uint32_t key[624]; int pos`), through the address numpy publishes for it (ctypes), so that
    a run reseeds it with one write instead of set_state(). Kept only when a state set through
    numpy reads back through the view exactly; a numpy laid out otherwise keeps set_state().
    Its last step: nothing after it in the zygote draws from the generator, so the gaussian it
    may cache (has_gauss, which a run's write does not touch) stays clear, as set_state left it."""
    global _mt_state
    numpy_random = sys.modules.get("numpy.random")
    if numpy_random is None:
        return
    try:
        import ctypes

        numpy = sys.modules["numpy"]
        bitgen = numpy_random.mtrand._rand._bit_generator
        if type(bitgen).__name__ != "MT19937":
            return
        size = _MT_KEY_BYTES + len(_MT_POS_FRESH)
        view = memoryview((ctypes.c_uint8 * size).from_address(bitgen.ctypes.state_address)).cast("B")
        key = numpy.arange(0x9E3779B9, 0x9E3779B9 + _MT19937_WORDS, dtype="uint32")
        numpy_random.set_state(("MT19937", key, 17))
        if view.nbytes != size or view.readonly or bytes(view) != key.tobytes() + (17).to_bytes(4, sys.byteorder):
            return
        _mt_state = view
    except Exception:  # noqa: BLE001 - no mapping: runs reseed through set_state()
        return


def _reseed_after_fork(seed):
    """A forked run starts with its zygote's generator states: give it fresh ones."""
    import random

    random.seed(seed)  # None: from os.urandom
    numpy_random = sys.modules.get("numpy.random")
    if numpy_random is None:
        return
    if seed is not None:
        numpy_random.seed(seed % (2 ** 32))
        return
    # Fresh words from the kernel make the whole state: as unpredictable as seed(None) (whose
    # SeedSequence draws 128 bits and stretches them), without its Python and Cython path,
    # which copies ~90 of the zygote's pages into every run (bench/runner_pages.py); written
    # straight into the generator's C state where the zygote mapped it, ~55 pages fewer than
    # set_state()'s checks and copies (_zygote_map_numpy_state).
    if _mt_state is not None:
        _mt_state[:_MT_KEY_BYTES] = os.urandom(_MT_KEY_BYTES)
        _mt_state[_MT_KEY_BYTES:] = _MT_POS_FRESH
        return
    try:
        key = sys.modules["numpy"].frombuffer(os.urandom(4 * _MT19937_WORDS), dtype="uint32")
        numpy_random.set_state(("MT19937", key, _MT19937_WORDS))
    except Exception:  # noqa: BLE001 - a numpy whose legacy state differs: its own way
        numpy_random.seed(None)


# ---------------------------------------------------------------------------------------------
# The lean path of a warm one-shot run (issue 24)
#
# CPython 3.11 writes the reference count of every object a run's Python touches, so every page
# of the zygote that the run's path touches is copied into the run (a page fault and a 4 KiB
# copy). The whole path (Config, Runner, ResultSink, the event encoder, their methods) copied
# ~480 pages into a `print(1)` run where the cell alone copies ~90 (docs/benchmarks.md). A
# one-shot request that asks for nothing but a cell under the profile's policy takes this path
# instead: the same steps in the same order (Runner.run), with no object made or touched that
# the cell does not need. What has more to report than the end event (an exception, a
# SystemExit, a value to show, a display, an open figure, a thread, an atexit handler, a file
# written) is handed to a Runner made then, which reports it as the whole path does
# (Runner._after_cell, Runner._finish). Whether the lean path takes a request is decided before
# it does anything: a request it does not take (a session, input files, a syntax_check, a
# program, a seed, observe mode with an allowlist, top-level await, code that does not compile,
# a malformed key) goes to the whole path untouched.

# The keys a request on the lean path may have (RunnerConfigToJson's, minus those that need
# the whole path).
_LEAN_KEYS = frozenset(("code", "filename", "allowed_imports", "runtime_imports_mode", "blocklist", "preimport",
                        "capture_figures", "result_fd", "max_result_bytes", "max_results", "max_result_values",
                        "max_out_files", "max_out_bytes", "stream", "env"))
_LEAN_INTS = ("max_result_bytes", "max_results", "max_result_values", "max_out_files", "max_out_bytes")
_lean_sink = None    # the run's ResultSink, made by its first display (_lean_display)
_lean_caps = None    # (max_results, max_result_bytes, max_result_values)
lean_runs = 0        # runs the lean path took, whole or handed on (tests and benches read it)


def _lean_display(make_bundle):
    """airlock_display.target in a lean run: the run's sink is made at its first display."""
    global _lean_sink
    if _lean_sink is None:
        _lean_sink = ResultSink(*_lean_caps)
    _lean_sink.add_display(make_bundle)


def _zygote_patch_pyplot():
    """In the zygote, when the profile preimports pyplot: its show() made the lean path's once
    here (a patch per run copied ~65 pages into every `general` run, bench/runner_pages.py). A run
    that captures figures finds it in place; one that does not puts matplotlib's own back
    (_own_pyplot_show), and the whole path puts its Runner's in, as before."""
    global _pyplot_own_show, _lean_show
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is None:
        return
    _pyplot_own_show = pyplot.show
    _lean_patch_pyplot(pyplot)
    _lean_show = pyplot.show


_pyplot_own_show = None  # matplotlib's pyplot.show, when the zygote replaced it
_lean_show = None        # the lean path's pyplot.show the zygote installed


def _own_pyplot_show():
    """A run that does not capture figures: pyplot.show is matplotlib's own."""
    pyplot = sys.modules.get("matplotlib.pyplot")
    if _pyplot_own_show is not None and pyplot is not None and pyplot.show is _lean_show:
        pyplot.show = _pyplot_own_show


def _lean_patch_pyplot(pyplot):
    """Runner._patch_pyplot's hook for a lean run: pyplot.show() renders the open figures as
    display results of the cell (to whatever the display target is then)."""
    _use_agg()

    def show(*args, **kwargs):
        """airlock: renders every open figure as an image/png result, then closes them."""
        _show_figures(pyplot, _display.target)

    pyplot.show = show


def _lean_request(raw):
    """(code, filename) of a request the lean path takes, or None. What it checks, Config
    would accept; what Config would refuse, it leaves to Config (None)."""
    if type(raw) is not dict or not _LEAN_KEYS.issuperset(raw) or _display is None:
        return None
    code, filename = raw.get("code"), raw.get("filename", "main.py")
    if type(code) is not str or type(filename) is not str:
        return None
    # Loops rather than all() over a generator here and below: a generator is a function and
    # a frame made per run, whose code object's page the run then copies.
    allowed = raw.get("allowed_imports")
    if allowed is not None:
        if type(allowed) is not list:
            return None
        for name in allowed:
            if type(name) is not str:
                return None
    # Observe mode warns of imports outside the allowlist: with none (any import, as `general`
    # has it) there is nothing to warn of, and the guard is enforce's.
    mode = raw.get("runtime_imports_mode", "enforce")
    if mode != "enforce" and not (mode == "observe" and allowed is None):
        return None
    preimport = raw.get("preimport", [])
    # Runner._preimport imports these; in a zygote they are in already (else: the whole path).
    if type(preimport) is not list:
        return None
    for name in preimport:
        if type(name) is not str or name not in sys.modules:
            return None
    if (type(raw.get("blocklist", [])) is not list or type(raw.get("capture_figures", True)) is not bool
            or type(raw.get("stream", False)) is not bool):
        return None
    fd = raw.get("result_fd", 3)
    if fd is not None and type(fd) is not int:
        return None
    for key in _LEAN_INTS:
        value = raw.get(key, 0)
        if type(value) is not int or value < 0:
            return None
    env = raw.get("env")
    if env is not None:
        try:
            _env(env)
        except ConfigError:
            return None
    return code, filename or "main.py"


# Cells up to this size are split by _split_cell (three compiles at most), larger ones by ast.
_SPLIT_MAX = 64 << 10


def _split_cell(text, filename, lines):
    """_compile_cell's (body, last) without ast, or None when it cannot be sure. ast.parse makes
    a Python object of every node and touches every node class: ~50 of a run's pages.

    The cell's last statement starts on its last line that begins, at column 0, with neither
    a blank nor a comment, if the text before that line compiles on its own: it then ends
    complete (no open bracket, string or continuation), so that line starts a new logical
    line at the top level, and what follows it belongs to that statement (indented, blank or
    comments). That statement is an expression when it compiles as one ("eval") and a
    statement that is not when it compiles only as a statement ("exec"); a ';' in it (several
    statements on the line, or IPython's trailing ';') and anything else leave it to ast."""
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    if len(text) > _SPLIT_MAX or "\0" in text:
        return None
    i = len(lines) - 1
    while i >= 0 and lines[i][:1] in ("", " ", "\t", "\f", "\n", "#"):
        i -= 1
    if i < 0:
        return None
    tail = "".join(lines[i:])
    if ";" in tail:
        return None
    try:
        head = compile("".join(lines[:i]), filename, "exec", flags=flags, dont_inherit=True)
    except SyntaxError:
        return None
    try:
        # Blank lines first: the expression keeps the user's line numbers.
        return head, compile("\n" * i + tail, filename, "eval", flags=flags, dont_inherit=True)
    except SyntaxError:
        pass
    try:
        compile(tail, filename, "exec", flags=flags, dont_inherit=True)
    except SyntaxError:
        return None
    return compile(text, filename, "exec", flags=flags, dont_inherit=True), None


def _lean_compile(code, filename):
    """(text, lines, body, last) as Runner.run compiles the cell, or None when it does not
    compile or needs an event loop (top-level await): the whole path reports or runs those."""
    try:
        text = _decode_source(code.encode("utf-8", "surrogatepass"), filename)
        lines = _split_lines(text)
        split = _split_cell(text, filename, lines)
        body, last = split if split is not None else _compile_cell(text, filename, lines)
    except Exception:  # noqa: BLE001 - SyntaxError and what a compiler may raise: Runner.run reports it
        return None
    if (body.co_flags | (0 if last is None else last.co_flags)) & _CO_COROUTINE:
        return None
    return text, lines, body, last


def _lean_run(raw, control, rehearsal=False):
    """Runs a one-shot request on the lean path and returns the exit code, or returns None
    having done nothing when the request is not one it takes (see above). rehearsal: a
    warm_rehearse() pass (no import hook, no recursion depth granted, no reseeding)."""
    global _lean_sink, _lean_caps, lean_runs
    request = _lean_request(raw)
    if request is None:
        return None
    code, filename = request
    compiled = _lean_compile(code, filename)
    if compiled is None:
        return None
    text, lines, body, last = compiled
    if not rehearsal:
        lean_runs += 1

    def hand_on(failure=None, value=None, finish=False):
        if rehearsal:
            return 0  # a rehearsal reports nothing (and never runs atexit handlers)
        return _lean_hand_on(raw, channel, lines, before, stdout, stderr, failure, value, finish)

    if control >= 0:
        os.close(control)  # as warm_main: nothing of the run reaches the server but its output
    channel = ResultChannel(raw.get("result_fd", 3))
    try:
        if not rehearsal:
            _reseed_after_fork(None)
        # Runner.run's steps, in its order.
        linecache.cache[filename] = (len(text), None, lines, filename)
        before = _scan_files()[0] if raw.get("max_out_files", 0) > 0 else None
        capture = raw.get("capture_figures", True)
        _setup_streams()
        if capture:
            _setup_matplotlib_env()
        guard = ImportGuard(raw.get("allowed_imports"), False, filename, None)
        if not capture:
            if not rehearsal:  # (the rehearsal shows nothing and leaves the zygote's show)
                _own_pyplot_show()
        elif _lean_show is None or sys.modules["matplotlib.pyplot"].show is not _lean_show:
            guard.after_import("matplotlib.pyplot", _lean_patch_pyplot)
        for name in ("PIL.Image", "PIL.ImageShow"):
            if name not in _display.hooked:
                guard.after_import(name, _display.install_pil_hooks)
        if not hasattr(builtins, "exit"):
            builtins.exit = builtins.quit = _Quitter()
        if getattr(builtins, "display", None) is not _display.display:
            builtins.display = _display.display
        if not rehearsal:
            guard.install()
        _lean_caps = (raw.get("max_results", 16), raw.get("max_result_bytes", 1 << 20),
                      raw.get("max_result_values", 1 << 16))
        _lean_sink = None
        _display.target = _lean_display
        env = raw.get("env")
        if env:
            os.environ.update(env)
        stdout, stderr = sys.stdout, sys.stderr
        # Runner._run_cell and _execute.
        module = types.ModuleType("__main__")
        namespace = module.__dict__
        namespace["__builtins__"] = builtins
        sys.modules["__main__"] = module
        sys.argv = [filename]
        if not rehearsal:
            # The user's code gets the depth `python3 main.py` gives it: the frames below
            # its own are granted. eval()'s entry into the interpreter loop, which counts
            # too, stands for python3's own entry into it to run main.py (the whole path
            # grants one more: its _guarded call enters the loop again; test_runner_lean).
            depth = 0
            frame = sys._getframe()
            while frame is not None:
                depth += 1
                frame = frame.f_back
            sys.setrecursionlimit(sys.getrecursionlimit() + depth)
        failure = None
        try:
            value = eval(body, namespace)
            value = None
            if last is not None:
                value = eval(last, namespace)
        except BaseException as e:  # noqa: B902 - reported as Runner._guarded does
            failure, value = e, None
        del namespace, module
        # Runner._after_cell: anything to show, a figure, a thread: the Runner reports it.
        if failure is not None or value is not None or _lean_sink is not None:
            return hand_on(failure, value)
        if capture and "matplotlib.pyplot" in sys.modules:
            helpers = sys.modules.get("matplotlib._pylab_helpers")
            if helpers is None or helpers.Gcf.get_num_fig_managers():
                return hand_on()
        threading = sys.modules.get("threading")
        if threading is not None and (threading.active_count() > 1 or getattr(threading, "_threading_atexits", None)):
            return hand_on()
        if not rehearsal and atexit._ncallbacks():
            # Runner._finish_threads_and_atexit: the handlers (the profile's modules register
            # some: matplotlib does) run here; what they show or write is looked for below.
            try:
                atexit._run_exitfuncs()
            except BaseException as e:  # noqa: B902 - reported as Runner._guarded does
                return hand_on(e, finish=True)
        # Runner._finish with nothing but the end event to write.
        for stream in (sys.stdout, stdout, sys.stderr, stderr):
            try:
                if stream is not None:
                    stream.flush()
            except Exception:
                pass
        if before is not None:
            after, complete = _scan_files()
            changed = not complete
            for rel, sig in after.items():
                if changed:
                    break
                changed = before.get(rel) != sig
            if changed:
                return hand_on(finish=True)
        if _lean_sink is not None:  # a display from another thread meanwhile
            return hand_on(finish=True)
        _display.target = None
        channel.write([_end_line(0)])
        return 0
    except BaseException as e:  # noqa: B902 - the runner must always end with an end event
        return _runner_failure(e, channel)


def _lean_hand_on(raw, channel, lines, before, stdout, stderr, failure, value, finish=False):
    """A lean run with more to report than its end event: a Runner, in the state Runner.run
    would have reached, reports it (from _after_cell, or from _finish when finish)."""
    runner = Runner(Config(raw), channel)
    runner._lines = lines
    runner._files_before = before
    runner._stdout, runner._stderr = stdout, stderr
    runner._depth_granted = True
    if _lean_sink is not None:
        runner._sink = _lean_sink
    if _display.target is _lean_display or finish:
        _display.target = runner._sink.add_display
    if failure is not None:
        if isinstance(failure, SystemExit):
            runner._record_exit(failure)
        else:
            runner._record_exception(failure)
    if finish:
        return runner._finish(None)
    return runner._after_cell(failure is None, value)


def zygote_prepare_lean():
    """In the zygote, last (after zygote_preimport), for the lean path in C++ that runs a
    one-shot request without the runner's Python (src/exec/lean_cell.cc, issue 24): the import
    guard each such run puts in place, made here once with its hooks and importlib's wrapper,
    its allowlist and file name unset (a run sets its own, then installs the hooks as
    ImportGuard.install does). None when importlib or the helpers are not loaded: runs then
    take this module's lean path."""
    importlib = sys.modules.get("importlib")
    if importlib is None or _display is None:
        return None
    guard = ImportGuard(None, False, None, None)
    guard._make_hooks()
    guard._make_import_module(importlib)
    return guard


def _lean_channel(fd):
    """The ResultChannel of a lean run in C++, on the fd that run moved already (None: none)."""
    channel = ResultChannel(None)
    channel._fd = fd
    return channel


def _end_line(exit_code):
    """_encode_event(_end_event(exit_code)) for a one-shot run, without json (the same bytes)."""
    import resource

    try:
        peak = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                   resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    except Exception:  # noqa: BLE001
        peak = 0
    return b'{"type":"end","exit_code":%d,"max_rss_kb":%d}\n' % (exit_code, peak)


def _run(load, after_fork=False):
    channel = None
    try:
        _load_helpers()
        raw = load()
        try:
            config = Config(raw)
        finally:
            fd = raw.get("result_fd", 3) if isinstance(raw, dict) else None
            channel = ResultChannel(fd if type(fd) is int else None)
        if after_fork:
            _reseed_after_fork(config.seed)
        if config.program is not None:
            return Runner(config, channel).run_program()
        return Runner(config, channel).run()
    except BaseException as e:  # noqa: B902 - the runner must always end with an end event
        return _runner_failure(e, channel)


def _runner_failure(e, channel):
    """The runner's own failure e (a bad config, a bug): said on stderr and in the error and end
    events; exit code 2."""
    import traceback

    if isinstance(e, ConfigError):
        message = f"airlock: runner config error: {e}\n"
        name = "AirlockConfigError"
    else:
        message = "airlock: internal runner error:\n" + "".join(traceback.format_exception(e))
        name = "AirlockRunnerError"
    try:
        sys.stdout.flush()
    except Exception:
        pass
    sys.stderr.write(message)
    sys.stderr.flush()
    if channel is not None:
        channel.write([
            _encode_event({"type": "error", "name": name, "value": _safe_str(e),
                           "traceback": message}),
            _encode_event(_end_event(EXIT_RUNNER_FAILURE)),
        ])
    return EXIT_RUNNER_FAILURE


if __name__ == "__main__":
    os._exit(main(sys.argv))
