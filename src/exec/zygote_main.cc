// Python.h first: it sets feature macros the C library headers read.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "exec/zygote_main.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "base/sanitizer.h"
#if AIRLOCK_ASAN
#include <sanitizer/lsan_interface.h>
#endif
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "base/unique_fd.h"
#include "exec/lean_cell.h"
#include "exec/python_error.h"
#include "exec/zygote_protocol.h"
#include "isolation/landlock.h"
#include "isolation/warm_run.h"

namespace airlock::exec {
namespace {

// Loads the runner as a module under the file name the cold path shows (its
// frames, and its helpers', are recognised by it and kept out of user
// tracebacks), imports the profile's modules and then the runner's helpers
// (zygote_preimport: in that order, for the pages a run writes), and freezes
// what exists so that the garbage collector of a run does not write to (and so
// copy) every object it inherited.
constexpr const char* kBootstrap = R"(
import gc, sys, types
_runner = types.ModuleType("airlock_runner")
_runner.__file__ = "/sandbox/airlock_runner.py"
exec(compile(_source, "/sandbox/airlock_runner.py", "exec"), _runner.__dict__)
_runner.complete_site()
_failed = _runner.zygote_preimport(_preimport, dict(_helpers))
_lean_guard = _runner.zygote_prepare_lean()
_runner_globals = _runner.__dict__
del _helpers
_warm_main = _runner.warm_main
_rehearse = _runner.warm_rehearse
del _source
gc.collect()
gc.freeze()
)";

struct Args {
  std::vector<std::string> preimport;
  std::vector<std::string> ro_binds;
  isolation::Limits limits;
  bool share_network = false;  // runs stay in our network namespace (warm_run.h)
};

bool ParseArgs(int argc, char** argv, Args* out, std::string* error) {
  for (int i = 2; i < argc; ++i) {
    std::string key = argv[i];
    if (i + 1 >= argc) {
      *error = key + " needs a value";
      return false;
    }
    std::string value = argv[++i];
    char* end = nullptr;
    if (key == "--preimport") {
      for (size_t pos = 0; pos < value.size();) {
        size_t comma = value.find(',', pos);
        if (comma == std::string::npos) comma = value.size();
        if (comma > pos) out->preimport.push_back(value.substr(pos, comma - pos));
        pos = comma + 1;
      }
      continue;
    }
    if (key == "--ro-bind") {
      out->ro_binds.push_back(value);
      continue;
    }
    double number = std::strtod(value.c_str(), &end);
    if (end == value.c_str() || *end != '\0' || number < 0) {
      *error = key + ": '" + value + "' is not a number";
      return false;
    }
    auto n = static_cast<int64_t>(number);
    if (key == "--memory") out->limits.memory_bytes = n;
    else if (key == "--pids") out->limits.pids = n;
    else if (key == "--cpus") out->limits.cpus = number;
    else if (key == "--disk") out->limits.disk_bytes = n;
    else if (key == "--open-files") out->limits.open_files = n;
    else if (key == "--cpu-time-ms") out->limits.cpu_time_ms = n;
    else if (key == "--share-network") out->share_network = n != 0;
    else {
      *error = "unknown option " + key;
      return false;
    }
  }
  return true;
}

// One message on the pool socket: the type byte, text, and fds (SCM_RIGHTS).
bool Send(char type, const std::string& text, const int* fds = nullptr, size_t nfds = 0) {
  std::string body(1, type);
  body += text.substr(0, 60000);
  struct iovec iov = {body.data(), body.size()};
  union {
    char buf[CMSG_SPACE(sizeof(int) * zygote::kSpawnedFds)];
    struct cmsghdr align;
  } u{};
  struct msghdr msg {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (nfds > 0) {
    msg.msg_control = u.buf;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
    struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
    std::memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
  }
  return ::sendmsg(zygote::kControlFd, &msg, MSG_NOSIGNAL) == static_cast<ssize_t>(body.size());
}

void SendText(char type, const std::string& text) { Send(type, text); }

int CountThreads() {
  DIR* d = ::opendir("/proc/self/task");
  if (d == nullptr) return -1;
  int n = 0;
  while (struct dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  ::closedir(d);
  return n;
}

bool ReadFull(int fd, char* buf, size_t size) {
  while (size > 0) {
    ssize_t n = ::read(fd, buf, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    buf += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// The request as a Python dict, made from its JSON with the C API rather than
// by the json module in the run: that module's code and its decoder's objects
// are ~70 pages of the zygote a run would otherwise copy (CPython 3.11 writes
// the reference count of everything it touches; docs/benchmarks.md). nullptr
// when the JSON holds anything json.loads could read differently (a float,
// which may be an integer too large for 64 bits; a string that is not strict
// UTF-8, such as an escaped lone surrogate; nesting past kMaxDepth) or is not
// JSON at all: the runner then parses the bytes itself, as it always did.
// ordered_json: keys in their order, a repeated key's last value in its first
// place, as a Python dict built by json.loads has them.
constexpr int kMaxRequestDepth = 16;

PyObject* UnicodeOf(const std::string& s) {
  PyObject* u = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "strict");
  if (u == nullptr) PyErr_Clear();
  return u;
}

PyObject* PythonOf(const nlohmann::ordered_json& j, int depth) {
  using Type = nlohmann::ordered_json::value_t;
  switch (j.type()) {
    case Type::null:
      return Py_NewRef(Py_None);
    case Type::boolean:
      return PyBool_FromLong(j.get<bool>());
    case Type::number_integer:
      return PyLong_FromLongLong(j.get<int64_t>());
    case Type::number_unsigned:
      return PyLong_FromUnsignedLongLong(j.get<uint64_t>());
    case Type::string:
      return UnicodeOf(j.get_ref<const std::string&>());
    case Type::array: {
      if (depth >= kMaxRequestDepth) return nullptr;
      PyObject* list = PyList_New(static_cast<Py_ssize_t>(j.size()));
      if (list == nullptr) return nullptr;
      Py_ssize_t i = 0;
      for (const auto& item : j) {
        PyObject* v = PythonOf(item, depth + 1);
        if (v == nullptr) {
          Py_DECREF(list);
          return nullptr;
        }
        PyList_SET_ITEM(list, i++, v);  // steals v
      }
      return list;
    }
    case Type::object: {
      if (depth >= kMaxRequestDepth) return nullptr;
      PyObject* dict = PyDict_New();
      if (dict == nullptr) return nullptr;
      for (const auto& [key, item] : j.items()) {
        PyObject* k = UnicodeOf(key);
        PyObject* v = k ? PythonOf(item, depth + 1) : nullptr;
        if (v == nullptr || PyDict_SetItem(dict, k, v) != 0) {
          Py_XDECREF(k);
          Py_XDECREF(v);
          Py_DECREF(dict);
          PyErr_Clear();
          return nullptr;
        }
        Py_DECREF(k);
        Py_DECREF(v);
      }
      return dict;
    }
    default:  // a float, or what a parser of JSON text never makes
      return nullptr;
  }
}

PyObject* RequestDict(const std::string& request) {
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(request, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return nullptr;  // also what did not parse (discarded)
  PyObject* dict = PythonOf(j, 0);
  if (dict == nullptr) PyErr_Clear();  // the bytes fallback starts with no error set
  return dict;
}

// CPython's small-object allocator (obmalloc: one 16 KiB pool per size class
// of 16..512 bytes in 16-byte steps, its header in the first 48 bytes) serves
// each size from the pools it has already started, on their free blocks,
// before it starts a new one. In a fork, those free blocks lie on the
// zygote's pages, among its objects: each pool a run allocates from is a page
// copied (its header and the block), however few blocks it takes. Taking
// every free block of every started pool here, once, and keeping them (a few
// hundred KB, shared by every run), makes a run's first allocation of each
// size start a pool of its own, where its next ones follow. Measured with
// bench/runner_pages.py and bench/cpu_per_run.py (docs/benchmarks.md).
void FillAllocatorPools() {
  constexpr uintptr_t kPoolBytes = 16 << 10;
  constexpr uintptr_t kPoolHeaderBytes = 48;
  // Bounds what is kept where the pools are not as above (another allocator,
  // another CPython): at most 8 MiB in all, and ~300 KB when they are.
  constexpr size_t kMaxBytesPerSize = 256 << 10;
  for (size_t size = 16; size <= 512; size += 16) {
    for (size_t taken = 0; taken < kMaxBytesPerSize; taken += size) {
      void* block = PyObject_Malloc(size);  // kept for the zygote's life, on purpose
      if (block == nullptr) break;
      if ((reinterpret_cast<uintptr_t>(block) & (kPoolBytes - 1)) == kPoolHeaderBytes) break;  // a new pool
    }
  }
}

// Our command line's memory (argv strings are contiguous).
char* g_argv_begin = nullptr;
char* g_argv_end = nullptr;

// The run's program, every layer in force: read the request, run the cell, exit.
// lean: the lean path in C++ (lean_cell.h), or null (the runner's own).
[[noreturn]] void RunProgram(PyObject* warm_main, PyObject* rehearse, LeanCell* lean, int control) {
  // What `ps` and /proc/PID/cmdline show in the run: a python3, not our options.
  if (g_argv_begin != nullptr) {
    std::memset(g_argv_begin, 0, static_cast<size_t>(g_argv_end - g_argv_begin));
    std::strncpy(g_argv_begin, "python3", static_cast<size_t>(g_argv_end - g_argv_begin) - 1);
  }
  // Touch what a request will touch while no one waits (copy-on-write faults
  // of a fresh fork: ~5 ms once), then say we are ready. The rehearsal walks
  // the runner's Python lean path: with the C++ one, which touches a fraction
  // of those pages, it would only copy pages no request touches.
  if (lean == nullptr) {
    if (PyObject* r = PyObject_CallNoArgs(rehearse)) {
      Py_DECREF(r);
    } else {
      PyErr_Clear();
    }
  }
  isolation::WarmRunReady(control);
  unsigned char header[8];
  if (!ReadFull(control, reinterpret_cast<char*>(header), sizeof header)) ::_exit(0);  // discarded unused
  uint64_t size = 0;
  for (int i = 7; i >= 0; --i) size = (size << 8) | header[i];
  if (size > zygote::kMaxRequestBytes) ::_exit(2);
  std::string request(size, '\0');
  if (!ReadFull(control, request.data(), size)) ::_exit(2);
  // The runner closes the control socket before any user code runs, unless
  // the request makes this run a session, which takes its calls (and
  // interrupts) there (airlock_runner.py, "Sessions").
  PyObject* arg = RequestDict(request);
  if (arg == nullptr) arg = PyBytes_FromStringAndSize(request.data(), static_cast<Py_ssize_t>(size));
  std::string().swap(request);
  if (int code = lean != nullptr && arg != nullptr ? lean->Run(arg, control) : -1; code >= 0) {
    ::syscall(SYS_close_range, 0, ~0U, 0);  // as below
    ::_exit(code);
  }
  PyObject* result = arg ? PyObject_CallFunction(warm_main, "Oi", arg, control) : nullptr;
  Py_XDECREF(arg);
  int code = 2;
  if (result != nullptr && PyLong_Check(result)) {
    code = static_cast<int>(PyLong_AsLong(result)) & 0xFF;
  } else if (PyErr_Occurred()) {
    PyErr_Print();
  }
  // Close stdout, stderr and the result channel before the exit tears the
  // address space down (milliseconds for a fork of a numpy-sized
  // interpreter): the server answers from the end event once every stream is
  // at end of file (runner_protocol.h, ParseProgramEnd).
  ::syscall(SYS_close_range, 0, ~0U, 0);
  ::_exit(code);
}

class Zygote {
 public:
  Zygote(PyObject* warm_main, PyObject* rehearse, std::unique_ptr<LeanCell> lean,
         std::unique_ptr<isolation::WarmRunFactory> factory)
      : warm_main_(warm_main), rehearse_(rehearse), lean_(std::move(lean)), factory_(std::move(factory)) {}

  // One run: pipes, control socket, clone; the fds go to the server.
  // host_id: the run's own host id (-1: ours).
  Status Spawn(int64_t host_id) {
    int threads = CountThreads();
    if (threads != 1) {
      return Internal("the zygote has " + std::to_string(threads) +
                      " threads; forking it would copy a process whose other threads hold locks "
                      "(a preimported module started a thread: set its thread count to 1)");
    }
    int p[4][2];
    int made = 0;
    // p[0], the status channel, is a socket: also the run's control channel
    // (isolation/init_control.h), should the run become a session's sandbox.
    for (; made < 4; ++made) {
      int rc = made == 0 ? ::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, p[made]) : ::pipe2(p[made], O_CLOEXEC);
      if (rc != 0) break;
    }
    int ctl[2] = {-1, -1};
    bool ok = made == 4 && ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ctl) == 0;
    std::vector<UniqueFd> owned;
    for (int i = 0; i < made; ++i) {
      owned.emplace_back(p[i][0]);
      owned.emplace_back(p[i][1]);
    }
    if (!ok) {
      if (ctl[0] >= 0) ::close(ctl[0]);
      return ErrnoError("pipe2/socketpair for a warm run");
    }
    UniqueFd server_end(ctl[0]), run_end(ctl[1]);
    // p[0] status, p[1] stdout, p[2] stderr, p[3] result channel.
    isolation::WarmRunFactory::Fds fds;
    fds.control = run_end.get();
    fds.status_w = p[0][1];
    fds.stdout_w = p[1][1];
    fds.stderr_w = p[2][1];
    fds.events_w = p[3][1];
    PyOS_BeforeFork();
    StatusOr<pid_t> pid = factory_->Clone(fds, &Zygote::ProgramMain, this, host_id);
    PyOS_AfterFork_Parent();
    if (!pid.ok()) return pid.status();
    UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, *pid, 0)));
    if (!pidfd) {
      ::kill(*pid, SIGKILL);
      return ErrnoError("pidfd_open of a warm run");
    }
    int send_fds[zygote::kSpawnedFds] = {pidfd.get(), p[1][0], p[2][0], p[0][0], p[3][0], server_end.get()};
    if (!Send(zygote::kSpawned, host_id >= 0 ? std::to_string(host_id) : "", send_fds, zygote::kSpawnedFds)) {
      ::kill(*pid, SIGKILL);
      return ErrnoError("sendmsg (a warm run's fds to the server)");
    }
    return Status::Ok();  // our copies close here; the run and the server hold theirs
  }

  // In the run's program (WarmRunFactory::ProgramMain).
  [[noreturn]] static void ProgramMain(void* self, int control) {
    auto* z = static_cast<Zygote*>(self);
    PyOS_AfterFork_Child();
    RunProgram(z->warm_main_, z->rehearse_, z->lean_.get(), control);
  }

  int Loop() {
    sigset_t chld;
    ::sigemptyset(&chld);
    ::sigaddset(&chld, SIGCHLD);
    ::sigprocmask(SIG_BLOCK, &chld, nullptr);
    UniqueFd sigfd(::signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK));
    for (;;) {
      Reap();
      struct pollfd fds[2] = {{zygote::kControlFd, POLLIN, 0}, {sigfd.get(), POLLIN, 0}};
      int r = ::poll(fds, sigfd ? 2 : 1, sigfd ? -1 : 200);
      if (r < 0 && errno != EINTR) return 1;
      if (r > 0 && sigfd && (fds[1].revents & POLLIN)) {
        struct signalfd_siginfo si;
        while (::read(sigfd.get(), &si, sizeof si) > 0) {
        }
      }
      if (r > 0 && (fds[0].revents & (POLLIN | POLLHUP | POLLERR))) {
        char buf[64];
        ssize_t n = ::recv(zygote::kControlFd, buf, sizeof buf, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return 0;  // the server is gone: so are we (and, with us, every run)
        if (buf[0] == zygote::kSpawn) {
          int64_t host_id = -1;
          if (n > 1) {
            std::string text(buf + 1, static_cast<size_t>(n - 1));
            char* end = nullptr;
            long long v = std::strtoll(text.c_str(), &end, 10);
            if (end == text.c_str() || *end != '\0' || v < 0 || v > 0xFFFFFFFELL) {
              SendText(zygote::kFailed, "a spawn request with a malformed host id");
              continue;
            }
            host_id = v;
          }
          if (Status s = Spawn(host_id); !s.ok()) SendText(zygote::kFailed, s.ToString());
        }
      }
    }
  }

 private:
  void Reap() {
    int st;
    while (::waitpid(-1, &st, WNOHANG | __WALL) > 0) {
    }
  }

  PyObject* warm_main_;
  PyObject* rehearse_;
  std::unique_ptr<LeanCell> lean_;
  std::unique_ptr<isolation::WarmRunFactory> factory_;
};

}  // namespace

int ZygoteMain(int argc, char** argv, std::string_view runner_source, std::span<const PythonModule> helpers) {
#if AIRLOCK_ASAN
  // Test builds: the embedded interpreter keeps its memory until exit by design.
  __lsan_disable();
#endif
  if (argc > 0) {
    g_argv_begin = argv[0];
    g_argv_end = argv[argc - 1] + std::strlen(argv[argc - 1]) + 1;
  }
  Args args;
  std::string error;
  if (!ParseArgs(argc, argv, &args, &error)) {
    SendText(zygote::kFailed, "zygote arguments: " + error);
    return 2;
  }

  // UTF-8 mode and the environment's LC_CTYPE (C.UTF-8), as `python3 -X utf8`
  // gets them: the isolated pre-configuration keeps the C locale, which makes
  // the file system encoding, open()'s default and subprocess's text mode
  // ASCII in every run (a cold run's python3 reads the locale itself).
  PyPreConfig pre;
  PyPreConfig_InitIsolatedConfig(&pre);
  pre.utf8_mode = 1;
  pre.configure_locale = 1;
  if (PyStatus pst = Py_PreInitialize(&pre); PyStatus_Exception(pst)) {
    SendText(zygote::kFailed,
             std::string("embedded Python did not pre-initialize: ") + (pst.err_msg ? pst.err_msg : "?"));
    return 1;
  }
  PyConfig config;
  PyConfig_InitIsolatedConfig(&config);  // like python3 -I: no PYTHON* variables, no user site
  config.write_bytecode = 0;             // -B
  config.site_import = 0;                // -S: the runner's complete_site() instead, as on the cold path
  config.install_signal_handlers = 1;
  PyConfig_SetString(&config, &config.program_name, L"/usr/bin/python3");
  PyConfig_SetString(&config, &config.executable, L"/usr/bin/python3");
  PyStatus st = Py_InitializeFromConfig(&config);
  PyConfig_Clear(&config);
  if (PyStatus_Exception(st)) {
    SendText(zygote::kFailed, std::string("embedded Python did not start: ") + (st.err_msg ? st.err_msg : "?"));
    return 1;
  }

  PyObject* globals = PyDict_New();
  PyDict_SetItemString(globals, "__builtins__", PyEval_GetBuiltins());
  PyObject* source = PyBytes_FromStringAndSize(runner_source.data(), static_cast<Py_ssize_t>(runner_source.size()));
  PyObject* preimport = PyList_New(0);
  for (const std::string& m : args.preimport) {
    PyObject* name = PyUnicode_FromString(m.c_str());
    PyList_Append(preimport, name);
    Py_DECREF(name);
  }
  PyObject* helper_list = PyList_New(0);
  for (const PythonModule& m : helpers) {
    PyObject* pair = Py_BuildValue("(s#y#)", m.name.data(), static_cast<Py_ssize_t>(m.name.size()),
                                   m.source.data(), static_cast<Py_ssize_t>(m.source.size()));
    PyList_Append(helper_list, pair);
    Py_DECREF(pair);
  }
  PyDict_SetItemString(globals, "_source", source);
  PyDict_SetItemString(globals, "_preimport", preimport);
  PyDict_SetItemString(globals, "_helpers", helper_list);
  Py_DECREF(source);
  Py_DECREF(preimport);
  Py_DECREF(helper_list);
  PyObject* done = PyRun_String(kBootstrap, Py_file_input, globals, globals);
  if (done == nullptr) {
    SendText(zygote::kFailed, "loading the runner in the zygote failed: " + PyErrorText());
    return 1;
  }
  Py_DECREF(done);
  PyObject* warm_main = PyDict_GetItemString(globals, "_warm_main");  // borrowed; globals lives on
  PyObject* rehearse = PyDict_GetItemString(globals, "_rehearse");
  if (warm_main == nullptr || rehearse == nullptr) {
    SendText(zygote::kFailed, "the runner has no warm_main/warm_rehearse");
    return 1;
  }
  std::string failed;
  if (PyObject* list = PyDict_GetItemString(globals, "_failed"); list && PyList_Check(list)) {
    for (Py_ssize_t i = 0; i < PyList_Size(list); ++i) {
      if (const char* c = PyUnicode_AsUTF8(PyList_GetItem(list, i))) failed += std::string(c) + "\n";
    }
  }
  std::string lean_off;
  std::unique_ptr<LeanCell> lean =
      LeanCell::Prepare(PyDict_GetItemString(globals, "_runner_globals"), PyDict_GetItemString(globals, "_lean_guard"), &lean_off);
  if (lean == nullptr) {
    // Not a failure: runs take the runner's own lean path, as before it.
    std::fprintf(stderr, "airlock zygote: one-shot runs take the runner's Python lean path: %s\n", lean_off.c_str());
  }
  // Flushed now: whatever Python buffered must not be written again by every run.
  PyRun_SimpleString("import sys\nsys.stdout.flush()\nsys.stderr.flush()\n");
  FillAllocatorPools();

  isolation::Spec spec;
  spec.limits = args.limits;
  spec.ro_binds = args.ro_binds;
  auto factory = isolation::WarmRunFactory::Create(spec, isolation::LandlockAbi(), args.share_network);
  if (!factory.ok()) {
    SendText(zygote::kFailed, "planning warm runs: " + factory.status().ToString());
    return 1;
  }
  // Our own pidfd: the server learns of our death before our runs' (they die
  // when our parent, the namespace's init, follows us).
  UniqueFd self(static_cast<int>(::syscall(SYS_pidfd_open, ::getpid(), 0)));
  int self_fd = self.get();
  if (!self || !Send(zygote::kUp, failed, &self_fd, 1)) {
    SendText(zygote::kFailed, "pidfd_open/sendmsg of the zygote's own pidfd failed");
    return 1;
  }
  self.reset();
  Zygote zygote(warm_main, rehearse, std::move(lean), std::move(*factory));
  return zygote.Loop();
}

}  // namespace airlock::exec
