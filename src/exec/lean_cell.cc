// Python.h first (lean_cell.h includes it): it sets feature macros the C
// library headers read.
#include "exec/lean_cell.h"
#include "exec/python_error.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace airlock::exec {
namespace {

// An owned reference.
class Ref {
 public:
  Ref() = default;
  explicit Ref(PyObject* o) : o_(o) {}
  ~Ref() { Py_XDECREF(o_); }
  Ref(Ref&& r) noexcept : o_(std::exchange(r.o_, nullptr)) {}
  Ref& operator=(Ref&& r) noexcept {
    std::swap(o_, r.o_);
    return *this;
  }
  Ref(const Ref&) = delete;
  Ref& operator=(const Ref&) = delete;
  PyObject* get() const { return o_; }
  explicit operator bool() const { return o_ != nullptr; }

 private:
  PyObject* o_ = nullptr;
};

Ref Borrowed(PyObject* o) {
  Py_XINCREF(o);
  return Ref(o);
}

// dict[key], borrowed; nullptr when absent (no error set).
PyObject* Item(PyObject* dict, const char* key) { return PyDict_GetItemString(dict, key); }

// o.name, or nullptr with Python's error set.
Ref Attr(PyObject* o, const char* name) { return Ref(PyObject_GetAttrString(o, name)); }

// sys.modules[name], borrowed; nullptr when not loaded.
PyObject* Loaded(const char* name) { return PyDict_GetItemString(PyImport_GetModuleDict(), name); }

bool IsAscii(PyObject* s, const char* text) {
  return PyUnicode_Check(s) && PyUnicode_CompareWithASCIIString(s, text) == 0;
}

// A file below the working directory as the runner's _scan_files has it.
struct FileSig {
  long long size = 0;
  long long mtime_ns = 0;
  unsigned long long ino = 0;
  bool operator==(const FileSig&) const = default;
};
using Files = std::map<std::string, FileSig>;

}  // namespace

struct LeanCell::Objects {
  Ref globals;  // the runner module's
  Ref lean_keys;  // _LEAN_KEYS
  Ref guard, guarded_import, finder, import_module, post_import;
  Ref builtins, importlib, linecache;
  Ref display;  // airlock_display
  Ref lean_display, lean_hand_on, lean_channel, runner_failure, reseed, setup_streams, setup_mpl_env,
      lean_patch_pyplot, quitter, install_pil_hooks;
  Ref random_inst, random_seed;  // random._inst, _random.Random.seed (the C function)
  unsigned char* mt_state = nullptr;  // numpy's legacy generator's (runner._mt_state), or null
  Ref environ_data;                   // os.environ._data (bytes -> bytes)
  Ref atexit_ncallbacks, atexit_run;
  Ref main_py, future;
  long long split_max = 0, files_max_scan = 0, files_max_depth = 0;
  std::set<std::string> files_skip;
};

namespace {

constexpr int kMtWords = 624;                  // MT19937's key, in 32-bit words
constexpr size_t kMtKeyBytes = 4 * kMtWords;   // then its position, an int
constexpr size_t kMtStateBytes = kMtKeyBytes + 4;

// The request as _lean_request checks it.
struct Request {
  PyObject* code = nullptr;      // borrowed from the request, as below
  PyObject* filename = nullptr;
  PyObject* allowed = nullptr;   // a list of str, or nullptr: any import
  PyObject* caps[3] = {};        // max_results, max_result_bytes, max_result_values (nullptr: default)
  bool capture = true;
  bool scan = false;             // max_out_files > 0
  long result_fd = 3;            // -1: no channel
};

// The cell as _lean_compile makes it.
struct Compiled {
  Ref text, lines, body, last;
};

Ref Compile(PyObject* source, PyObject* filename, int start) {
  Py_ssize_t size = 0;
  const char* utf8 = PyUnicode_AsUTF8AndSize(source, &size);
  if (utf8 == nullptr) return Ref();
  // As compile(source, filename, mode, flags=PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True).
  PyCompilerFlags flags = _PyCompilerFlags_INIT;
  flags.cf_flags = PyCF_ALLOW_TOP_LEVEL_AWAIT | PyCF_SOURCE_IS_UTF8;
  return Ref(Py_CompileStringObject(utf8, filename, start, &flags, -1));
}

Ref Join(PyObject* lines, Py_ssize_t from, Py_ssize_t to) {
  Ref slice(PyList_GetSlice(lines, from, to));
  if (!slice) return Ref();
  Ref empty(PyUnicode_FromStringAndSize("", 0));
  return empty ? Ref(PyUnicode_Join(empty.get(), slice.get())) : Ref();
}

// _split_lines: text.split("\n") with each "\n" kept, the last piece only when not empty.
Ref SplitLines(PyObject* text) {
  Ref lines(PyList_New(0));
  Py_ssize_t n = PyUnicode_GetLength(text);
  Py_ssize_t start = 0;
  while (lines && start < n) {
    Py_ssize_t nl = PyUnicode_FindChar(text, '\n', start, n, 1);
    if (nl == -2) return Ref();
    Py_ssize_t end = nl < 0 ? n : nl + 1;
    Ref line(PyUnicode_Substring(text, start, end));
    if (!line || PyList_Append(lines.get(), line.get()) != 0) return Ref();
    start = end;
  }
  return lines;
}

// _split_cell: (body, last) without ast, false when it cannot be sure (or
// anything failed: the error is cleared, the request left to Python).
bool SplitCell(const LeanCell::Objects& o, Compiled* c, PyObject* filename) {
  PyObject* text = c->text.get();
  PyObject* lines = c->lines.get();
  Py_ssize_t n = PyUnicode_GetLength(text);
  if (n > o.split_max || PyUnicode_FindChar(text, 0, 0, n, 1) != -1) return false;
  Py_ssize_t i = PyList_GET_SIZE(lines) - 1;
  for (; i >= 0; --i) {
    PyObject* line = PyList_GET_ITEM(lines, i);
    if (PyUnicode_GetLength(line) == 0) continue;
    Py_UCS4 first = PyUnicode_ReadChar(line, 0);
    if (first != ' ' && first != '\t' && first != '\f' && first != '\n' && first != '#') break;
  }
  if (i < 0) return false;
  Ref tail = Join(lines, i, PyList_GET_SIZE(lines));
  if (!tail) return false;
  if (PyUnicode_FindChar(tail.get(), ';', 0, PyUnicode_GetLength(tail.get()), 1) != -1) return false;
  Ref head_text = Join(lines, 0, i);
  Ref head = head_text ? Compile(head_text.get(), filename, Py_file_input) : Ref();
  if (!head) return false;
  // Blank lines first: the expression keeps the user's line numbers.
  std::string blank(static_cast<size_t>(i), '\n');
  Ref pad(PyUnicode_FromStringAndSize(blank.data(), static_cast<Py_ssize_t>(blank.size())));
  Ref expr = pad ? Ref(PyUnicode_Concat(pad.get(), tail.get())) : Ref();
  if (!expr) return false;
  if (Ref last = Compile(expr.get(), filename, Py_eval_input)) {
    c->body = std::move(head);
    c->last = std::move(last);
    return true;
  }
  // Only a SyntaxError says "not an expression"; anything else ends the
  // split as an error would end _split_cell's.
  if (!PyErr_ExceptionMatches(PyExc_SyntaxError)) return false;
  PyErr_Clear();
  if (!Compile(tail.get(), filename, Py_file_input)) return false;
  c->body = Compile(text, filename, Py_file_input);
  return static_cast<bool>(c->body);
}

// _lean_request's checks, false when the request is not one this path takes.
// Stricter than Python's where that is simpler: an env with variables goes to
// the runner's own lean path. (Its `_display is None` needs no check: Prepare
// found the helpers loaded, and nothing unloads them.)
bool CheckRequest(const LeanCell::Objects& o, PyObject* raw, Request* r) {
  if (!PyDict_CheckExact(raw)) return false;
  Py_ssize_t pos = 0;
  PyObject *key, *value;
  while (PyDict_Next(raw, &pos, &key, &value)) {
    if (PySet_Contains(o.lean_keys.get(), key) != 1) return false;
  }
  r->code = Item(raw, "code");
  if (r->code == nullptr || !PyUnicode_CheckExact(r->code)) return false;
  r->filename = Item(raw, "filename");
  if (r->filename == nullptr) r->filename = o.main_py.get();
  if (!PyUnicode_CheckExact(r->filename)) return false;
  if (PyUnicode_GetLength(r->filename) == 0) r->filename = o.main_py.get();  // `filename or "main.py"`
  // compile() refuses a file name with a NUL in it (ValueError), which
  // Py_CompileStringObject does not look for: Python's path says so.
  if (PyUnicode_FindChar(r->filename, 0, 0, PyUnicode_GetLength(r->filename), 1) != -1) return false;
  PyObject* allowed = Item(raw, "allowed_imports");
  if (allowed != nullptr && allowed != Py_None) {
    if (!PyList_CheckExact(allowed)) return false;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(allowed); ++i) {
      if (!PyUnicode_CheckExact(PyList_GET_ITEM(allowed, i))) return false;
    }
    r->allowed = allowed;
  }
  if (PyObject* mode = Item(raw, "runtime_imports_mode")) {
    if (!IsAscii(mode, "enforce") && !(IsAscii(mode, "observe") && r->allowed == nullptr)) return false;
  }
  if (PyObject* preimport = Item(raw, "preimport")) {
    if (!PyList_CheckExact(preimport)) return false;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(preimport); ++i) {
      PyObject* name = PyList_GET_ITEM(preimport, i);
      if (!PyUnicode_CheckExact(name) || PyDict_Contains(PyImport_GetModuleDict(), name) != 1) return false;
    }
  }
  if (PyObject* blocklist = Item(raw, "blocklist"); blocklist != nullptr && !PyList_CheckExact(blocklist)) {
    return false;
  }
  if (PyObject* capture = Item(raw, "capture_figures")) {
    if (!PyBool_Check(capture)) return false;
    r->capture = capture == Py_True;
  }
  if (PyObject* stream = Item(raw, "stream"); stream != nullptr && !PyBool_Check(stream)) return false;
  if (PyObject* fd = Item(raw, "result_fd")) {
    if (fd == Py_None) {
      r->result_fd = -1;
    } else {
      if (!PyLong_CheckExact(fd)) return false;
      int overflow = 0;
      long long v = PyLong_AsLongLongAndOverflow(fd, &overflow);
      if (overflow != 0 || v > 0x7FFFFFFF || v < -0x7FFFFFFF) return false;  // Python's own path says why
      r->result_fd = v < 0 ? -1 : static_cast<long>(v);
    }
  }
  const char* ints[] = {"max_results", "max_result_bytes", "max_result_values", "max_out_files", "max_out_bytes"};
  for (size_t i = 0; i < std::size(ints); ++i) {
    PyObject* v = Item(raw, ints[i]);
    if (v == nullptr) continue;  // 0 for the check; the caps' defaults below
    if (!PyLong_CheckExact(v)) return false;
    int overflow = 0;
    long long n = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow < 0 || (overflow == 0 && n < 0)) return false;
    if (i < 3) r->caps[i] = v;
    if (i == 3) r->scan = overflow > 0 || n > 0;
  }
  if (PyObject* env = Item(raw, "env"); env != nullptr && env != Py_None) {
    if (!PyDict_CheckExact(env) || PyDict_GET_SIZE(env) != 0) return false;
  }
  return !PyErr_Occurred();
}

// _lean_compile: false when the cell does not decode or compile here, or
// needs an event loop (the runner's own path reports or runs those).
bool CompileCell(const LeanCell::Objects& o, const Request& r, Compiled* c) {
  // _decode_source: the code's UTF-8, a BOM dropped, newlines normalised. A
  // lone surrogate does not encode: Python's path reports it.
  if (PyUnicode_AsUTF8AndSize(r.code, nullptr) == nullptr) return false;
  Py_ssize_t n = PyUnicode_GetLength(r.code);
  Ref text = n > 0 && PyUnicode_ReadChar(r.code, 0) == 0xFEFF ? Ref(PyUnicode_Substring(r.code, 1, n))
                                                               : Borrowed(r.code);
  if (text && PyUnicode_FindChar(text.get(), '\r', 0, PyUnicode_GetLength(text.get()), 1) >= 0) {
    Ref crlf(PyUnicode_FromString("\r\n")), cr(PyUnicode_FromString("\r")), nl(PyUnicode_FromString("\n"));
    if (!crlf || !cr || !nl) return false;
    Ref once(PyUnicode_Replace(text.get(), crlf.get(), nl.get(), -1));
    text = once ? Ref(PyUnicode_Replace(once.get(), cr.get(), nl.get(), -1)) : Ref();
  }
  if (!text) return false;
  c->text = std::move(text);
  c->lines = SplitLines(c->text.get());
  if (!c->lines || !SplitCell(o, c, r.filename)) return false;
  auto flags = [](const Ref& code) { return code ? reinterpret_cast<PyCodeObject*>(code.get())->co_flags : 0; };
  return ((flags(c->body) | flags(c->last)) & CO_COROUTINE) == 0;
}

// ResultChannel.__init__: the fd moved out of user code's way (to 900, 255,
// 64 or 10 and up), -1 when there is none.
int MoveChannel(long fd) {
  if (fd < 0) return -1;
  struct stat st;
  if (::fstat(static_cast<int>(fd), &st) != 0) return -1;
  if (fd <= 2) return static_cast<int>(fd);
  for (int lowest : {900, 255, 64, 10}) {
    int moved = ::fcntl(static_cast<int>(fd), F_DUPFD_CLOEXEC, lowest);
    if (moved >= 0) {
      ::close(static_cast<int>(fd));
      return moved;
    }
  }
  return static_cast<int>(fd);
}

// _scan_files: the regular files below the working directory, false when the
// walk was cut short (bounded as there: entries, depth; lstat only; other
// file systems not entered). The same walk in the same order, so that a cut
// keeps the same files.
bool ScanFiles(const LeanCell::Objects& o, Files* files) {
  struct stat root;
  if (::lstat(".", &root) != 0) return false;
  struct Dir {
    std::string prefix, path;
    long long depth;
  };
  std::vector<Dir> stack{{"", ".", 0}};
  bool complete = true;
  long long scanned = 0;
  while (!stack.empty()) {
    Dir d = std::move(stack.back());
    stack.pop_back();
    DIR* dir = ::opendir(d.path.c_str());
    if (dir == nullptr) continue;
    while (struct dirent* e = ::readdir(dir)) {
      if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
      if (++scanned > o.files_max_scan) {
        ::closedir(dir);
        return false;
      }
      std::string rel = d.prefix + e->d_name;
      std::string path = d.path + "/" + e->d_name;
      struct stat st;
      if (::lstat(path.c_str(), &st) != 0) continue;
      if (S_ISREG(st.st_mode)) {
        (*files)[rel] = {static_cast<long long>(st.st_size),
                         static_cast<long long>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec,
                         static_cast<unsigned long long>(st.st_ino)};
      } else if (S_ISDIR(st.st_mode) && st.st_dev == root.st_dev && !o.files_skip.contains(rel)) {
        if (d.depth < o.files_max_depth) {
          stack.push_back({rel + "/", path, d.depth + 1});
        } else {
          complete = false;
        }
      }
    }
    ::closedir(dir);
  }
  return complete;
}

// The files as the runner's dict: {relpath: (size, mtime_ns, ino)}.
Ref FilesDict(const Files& files) {
  Ref dict(PyDict_New());
  for (const auto& [rel, sig] : files) {
    if (!dict) break;
    Ref key(PyUnicode_DecodeFSDefaultAndSize(rel.data(), static_cast<Py_ssize_t>(rel.size())));
    Ref value(Py_BuildValue("(LLK)", sig.size, sig.mtime_ns, sig.ino));
    if (!key || !value || PyDict_SetItem(dict.get(), key.get(), value.get()) != 0) dict = Ref();
  }
  return dict;
}

// _end_line(0): the end event, as json would write it.
std::string EndLine(int exit_code) {
  struct rusage self {}, children {};
  long peak = 0;
  if (::getrusage(RUSAGE_SELF, &self) == 0 && ::getrusage(RUSAGE_CHILDREN, &children) == 0) {
    peak = std::max(self.ru_maxrss, children.ru_maxrss);
  }
  char line[128];
  int n = std::snprintf(line, sizeof line, "{\"type\":\"end\",\"exit_code\":%d,\"max_rss_kb\":%ld}\n", exit_code, peak);
  return std::string(line, static_cast<size_t>(n));
}

// ResultChannel.write: the reader gone is nothing to report.
void WriteAll(int fd, const std::string& data) {
  if (fd < 0) return;
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

// One run on the lean path, from the moment it is taken.
class Act {
 public:
  Act(const LeanCell::Objects& o, PyObject* raw, const Request& r, Compiled c)
      : o_(o), raw_(raw), r_(r), c_(std::move(c)) {}

  int Run(int control);

 private:
  bool Reseed();
  bool SetUpMatplotlibEnv();
  bool SetUpStreams();
  bool InstallGuard();
  bool AfterImport(const char* module, PyObject* callback);
  bool SetGlobal(const char* name, PyObject* value) {
    return PyDict_SetItemString(o_.globals.get(), name, value) == 0;
  }
  PyObject* Global(const char* name) { return Item(o_.globals.get(), name); }
  int HandOn(PyObject* failure, PyObject* value, bool finish);
  Ref Channel();
  int Fail();
  bool Step(bool ok) { return ok && !PyErr_Occurred(); }

  const LeanCell::Objects& o_;
  PyObject* raw_;
  const Request& r_;
  Compiled c_;
  int channel_ = -1;
  bool scanned_ = false;
  bool post_import_loaded_ = false;  // a module AfterImport waits for is loaded already
  Files before_;
  Ref stdout_, stderr_;
};

// _reseed_after_fork(None): random's generator from the kernel, numpy's
// legacy one written from the kernel where the zygote mapped it; anything
// else through the runner's own function.
bool Act::Reseed() {
  PyObject* numpy_random = Loaded("numpy.random");
  if (!o_.random_seed || (numpy_random != nullptr && o_.mt_state == nullptr)) {
    return Ref(PyObject_CallOneArg(o_.reseed.get(), Py_None)) ? true : false;
  }
  // random.seed(None) is Random.seed: the C seed from os.urandom, then gauss_next = None.
  if (!Ref(PyObject_CallFunctionObjArgs(o_.random_seed.get(), o_.random_inst.get(), Py_None, nullptr))) return false;
  if (PyObject_SetAttrString(o_.random_inst.get(), "gauss_next", Py_None) != 0) return false;
  if (numpy_random == nullptr) return true;
  size_t got = 0;
  while (got < kMtKeyBytes) {
    ssize_t n = ::getrandom(o_.mt_state + got, kMtKeyBytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      PyErr_SetFromErrno(PyExc_OSError);
      return false;
    }
    got += static_cast<size_t>(n);
  }
  int32_t pos = kMtWords;  // the next draw regenerates the key (_MT_POS_FRESH)
  std::memcpy(o_.mt_state + kMtKeyBytes, &pos, sizeof pos);
  return true;
}

// _setup_matplotlib_env: MPLBACKEND=Agg as os.environ's __setitem__ sets it
// (putenv, then its mapping); the rest, when HOME is not a writable
// directory, by the runner's function.
bool Act::SetUpMatplotlibEnv() {
  Ref key(PyBytes_FromString("MPLBACKEND")), agg(PyBytes_FromString("Agg"));
  if (!key || !agg || ::setenv("MPLBACKEND", "Agg", 1) != 0 ||
      PyDict_SetItem(o_.environ_data.get(), key.get(), agg.get()) != 0) {
    return false;
  }
  // Keys of os.environ._data are bytes: a str lookup never finds them.
  Ref config(PyBytes_FromString("MPLCONFIGDIR")), home_key(PyBytes_FromString("HOME"));
  if (!config || !home_key) return false;
  if (PyDict_GetItem(o_.environ_data.get(), config.get()) != nullptr) return true;
  PyObject* home = PyDict_GetItem(o_.environ_data.get(), home_key.get());
  if (home != nullptr && PyBytes_Check(home) && PyBytes_GET_SIZE(home) > 0 &&
      std::strlen(PyBytes_AS_STRING(home)) == static_cast<size_t>(PyBytes_GET_SIZE(home))) {
    struct stat st;
    if (::stat(PyBytes_AS_STRING(home), &st) == 0 && S_ISDIR(st.st_mode) &&
        ::access(PyBytes_AS_STRING(home), W_OK) == 0) {
      return true;
    }
  }
  return static_cast<bool>(Ref(PyObject_CallNoArgs(o_.setup_mpl_env.get())));
}

// _setup_streams, which the zygote ran: its function again only when a
// stream is not as it left them (UTF-8, line-buffered).
bool Act::SetUpStreams() {
  for (const char* name : {"stdout", "stderr"}) {
    PyObject* stream = PySys_GetObject(name);
    if (stream == nullptr || stream == Py_None) continue;
    bool as_set = false;
    if (Ref encoding = Attr(stream, "encoding"); encoding && PyUnicode_Check(encoding.get())) {
      std::string e;
      if (const char* s = PyUnicode_AsUTF8(encoding.get())) {
        for (const char* p = s; *p; ++p) {
          if (*p != '-') e += static_cast<char>(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
        }
      }
      Ref buffering = Attr(stream, "line_buffering");
      as_set = e == "utf8" && buffering && PyObject_IsTrue(buffering.get()) == 1;
    }
    PyErr_Clear();
    if (!as_set) return static_cast<bool>(Ref(PyObject_CallNoArgs(o_.setup_streams.get())));
  }
  return true;
}

// ImportGuard.after_import. The guard's list holds only what this run
// registers (it is empty in the zygote: Prepare), so whether install must run
// a callback at once is known here.
bool Act::AfterImport(const char* module, PyObject* callback) {
  Ref item(Py_BuildValue("[sO]", module, callback));
  post_import_loaded_ = post_import_loaded_ || Loaded(module) != nullptr;
  return item && PyList_Append(o_.post_import.get(), item.get()) == 0;
}

// The guard as ImportGuard(allowed, False, filename, None).install() leaves
// it, with the zygote's hooks (zygote_prepare_lean).
bool Act::InstallGuard() {
  Ref allowed = Borrowed(Py_None);
  if (r_.allowed != nullptr) {
    allowed = Ref(PyFrozenSet_New(r_.allowed));
    if (!allowed || PySet_Add(allowed.get(), o_.future.get()) != 0) return false;
  }
  if (PyObject_SetAttrString(o_.guard.get(), "_allowed", allowed.get()) != 0 ||
      PyObject_SetAttrString(o_.guard.get(), "_user_filename", r_.filename) != 0 ||
      PyObject_SetAttrString(o_.builtins.get(), "__import__", o_.guarded_import.get()) != 0) {
    return false;
  }
  if (r_.allowed != nullptr) {
    // after_import("importlib", _wrap_importlib): importlib is loaded (Prepare).
    if (PyObject_SetAttrString(o_.importlib.get(), "import_module", o_.import_module.get()) != 0 ||
        PyObject_SetAttrString(o_.importlib.get(), "__import__", o_.guarded_import.get()) != 0) {
      return false;
    }
    PyObject* meta_path = PySys_GetObject("meta_path");
    if (meta_path == nullptr || !PyList_Check(meta_path) || PyList_Insert(meta_path, 0, o_.finder.get()) != 0) {
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "sys.meta_path is not a list");
      return false;
    }
  }
  // run_post_import(), when a module waited for is loaded already.
  if (post_import_loaded_) return static_cast<bool>(Ref(PyObject_CallMethod(o_.guard.get(), "run_post_import", nullptr)));
  return true;
}

// The error set, as the exception `except BaseException as e` would bind.
Ref FetchException() {
  if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "the lean path failed without a Python error");
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  if (value != nullptr && tb != nullptr) PyException_SetTraceback(value, tb);
  Py_XDECREF(type);
  Py_XDECREF(tb);
  return Ref(value);
}

// The run's ResultChannel, on the fd MoveChannel left (_lean_channel).
Ref Act::Channel() {
  return channel_ >= 0 ? Ref(PyObject_CallFunction(o_.lean_channel.get(), "i", channel_))
                       : Ref(PyObject_CallOneArg(o_.lean_channel.get(), Py_None));
}

// _lean_run's last word: the runner's own failure, said as _runner_failure says it.
int Act::Fail() {
  Ref v = FetchException();
  Ref channel = v ? Channel() : Ref();
  Ref code = channel ? Ref(PyObject_CallFunctionObjArgs(o_.runner_failure.get(), v.get(), channel.get(), nullptr))
                     : Ref();
  if (!code || !PyLong_Check(code.get())) {
    PyErr_Clear();
    return 2;
  }
  return static_cast<int>(PyLong_AsLong(code.get())) & 0xFF;
}

// _lean_hand_on: a Runner reports what the run has more to report.
int Act::HandOn(PyObject* failure, PyObject* value, bool finish) {
  Ref channel = Channel();
  Ref before = scanned_ ? FilesDict(before_) : Borrowed(Py_None);
  if (!channel || !before) return Fail();
  Ref code(PyObject_CallFunctionObjArgs(o_.lean_hand_on.get(), raw_, channel.get(), c_.lines.get(), before.get(),
                                        stdout_ ? stdout_.get() : Py_None, stderr_ ? stderr_.get() : Py_None,
                                        failure ? failure : Py_None, value ? value : Py_None,
                                        finish ? Py_True : Py_False, nullptr));
  if (!code) return Fail();
  return PyLong_Check(code.get()) ? static_cast<int>(PyLong_AsLong(code.get())) & 0xFF : 2;
}

int Act::Run(int control) {
  {
    PyObject* runs = Global("lean_runs");
    Ref one(PyLong_FromLong(1));
    Ref more = runs != nullptr && one ? Ref(PyNumber_Add(runs, one.get())) : std::move(one);
    if (!more || !SetGlobal("lean_runs", more.get())) return Fail();
  }
  if (control >= 0) ::close(control);  // as warm_main: nothing of the run reaches the server but its output
  channel_ = MoveChannel(r_.result_fd);
  // _lean_run's steps, in its order.
  if (!Step(Reseed())) return Fail();
  {
    Ref cache = Attr(o_.linecache.get(), "cache");
    Ref entry(Py_BuildValue("(nOOO)", PyUnicode_GetLength(c_.text.get()), Py_None, c_.lines.get(), r_.filename));
    if (!cache || !entry || PyObject_SetItem(cache.get(), r_.filename, entry.get()) != 0) return Fail();
  }
  if (r_.scan) {
    ScanFiles(o_, &before_);
    scanned_ = true;
  }
  if (!Step(SetUpStreams())) return Fail();
  if (r_.capture && !Step(SetUpMatplotlibEnv())) return Fail();
  PyObject* lean_show = Global("_lean_show");
  PyObject* pyplot = Loaded("matplotlib.pyplot");
  if (!r_.capture) {
    // _own_pyplot_show: matplotlib's own show() back where the zygote put the lean one.
    PyObject* own = Global("_pyplot_own_show");
    if (own != nullptr && own != Py_None && pyplot != nullptr) {
      Ref show = Attr(pyplot, "show");
      if (!show) return Fail();
      if (show.get() == lean_show && PyObject_SetAttrString(pyplot, "show", own) != 0) return Fail();
    }
  } else {
    bool patched = false;
    if (lean_show != nullptr && lean_show != Py_None) {
      if (pyplot == nullptr) {
        PyErr_SetString(PyExc_KeyError, "matplotlib.pyplot");
        return Fail();
      }
      Ref show = Attr(pyplot, "show");
      if (!show) return Fail();
      patched = show.get() == lean_show;
    }
    if (!patched && !AfterImport("matplotlib.pyplot", o_.lean_patch_pyplot.get())) return Fail();
  }
  {
    Ref hooked = Attr(o_.display.get(), "hooked");
    if (!hooked) return Fail();
    for (const char* name : {"PIL.Image", "PIL.ImageShow"}) {
      Ref n(PyUnicode_FromString(name));
      int in = n ? PySequence_Contains(hooked.get(), n.get()) : -1;
      if (in < 0 || (in == 0 && !AfterImport(name, o_.install_pil_hooks.get()))) return Fail();
    }
  }
  PyObject* builtins_dict = PyModule_GetDict(o_.builtins.get());
  if (Item(builtins_dict, "exit") == nullptr) {
    Ref quitter(PyObject_CallNoArgs(o_.quitter.get()));
    if (!quitter || PyDict_SetItemString(builtins_dict, "exit", quitter.get()) != 0 ||
        PyDict_SetItemString(builtins_dict, "quit", quitter.get()) != 0) {
      return Fail();
    }
  }
  {
    Ref display = Attr(o_.display.get(), "display");
    if (!display) return Fail();
    if (Item(builtins_dict, "display") != display.get() &&
        PyDict_SetItemString(builtins_dict, "display", display.get()) != 0) {
      return Fail();
    }
  }
  if (!Step(InstallGuard())) return Fail();
  {
    Ref caps(Py_BuildValue("(OOO)", r_.caps[0] ? r_.caps[0] : Ref(PyLong_FromLong(16)).get(),
                           r_.caps[1] ? r_.caps[1] : Ref(PyLong_FromLong(1 << 20)).get(),
                           r_.caps[2] ? r_.caps[2] : Ref(PyLong_FromLong(1 << 16)).get()));
    if (!caps || !SetGlobal("_lean_caps", caps.get()) || !SetGlobal("_lean_sink", Py_None) ||
        PyObject_SetAttrString(o_.display.get(), "target", o_.lean_display.get()) != 0) {
      return Fail();
    }
  }
  stdout_ = Borrowed(PySys_GetObject("stdout"));
  stderr_ = Borrowed(PySys_GetObject("stderr"));
  // Runner._run_cell and _execute.
  Ref failure, value;
  {
    Ref module(PyModule_New("__main__"));
    PyObject* ns = module ? PyModule_GetDict(module.get()) : nullptr;
    Ref argv(Py_BuildValue("[O]", r_.filename));
    if (ns == nullptr || !argv || PyDict_SetItemString(ns, "__builtins__", o_.builtins.get()) != 0 ||
        PyDict_SetItemString(PyImport_GetModuleDict(), "__main__", module.get()) != 0 ||
        PySys_SetObject("argv", argv.get()) != 0) {
      return Fail();
    }
    // No depth to grant (the whole path's _guarded call and the runner's
    // Python lean path grant theirs): the cell's frame is the first, as
    // main.py's is under python3.
    Ref result(PyEval_EvalCode(c_.body.get(), ns, ns));
    if (result && c_.last) result = Ref(PyEval_EvalCode(c_.last.get(), ns, ns));
    if (!result) {
      failure = FetchException();
    } else if (c_.last && result.get() != Py_None) {
      value = std::move(result);
    }
  }
  // Runner._after_cell: anything to show, a figure, a thread: the Runner reports it.
  PyObject* sink = Global("_lean_sink");
  if (failure || value || (sink != nullptr && sink != Py_None)) return HandOn(failure.get(), value.get(), false);
  if (r_.capture && Loaded("matplotlib.pyplot") != nullptr) {
    PyObject* helpers = Loaded("matplotlib._pylab_helpers");
    if (helpers == nullptr) return HandOn(nullptr, nullptr, false);
    Ref gcf = Attr(helpers, "Gcf");
    Ref n = gcf ? Ref(PyObject_CallMethod(gcf.get(), "get_num_fig_managers", nullptr)) : Ref();
    int open = n ? PyObject_IsTrue(n.get()) : -1;
    if (open < 0) return Fail();
    if (open) return HandOn(nullptr, nullptr, false);
  }
  if (PyObject* threading = Loaded("threading")) {
    // threading.active_count() > 1, without its Python: len(_active) + len(_limbo).
    Ref active = Attr(threading, "_active"), limbo = Attr(threading, "_limbo");
    Py_ssize_t count = active && limbo ? PyObject_Length(active.get()) + PyObject_Length(limbo.get()) : -1;
    if (count < 0) return Fail();
    Ref atexits(PyObject_GetAttrString(threading, "_threading_atexits"));
    if (!atexits) PyErr_Clear();
    int pending = atexits ? PyObject_IsTrue(atexits.get()) : 0;
    if (pending < 0) return Fail();
    if (count > 1 || pending) return HandOn(nullptr, nullptr, false);
  }
  {
    Ref n(PyObject_CallNoArgs(o_.atexit_ncallbacks.get()));
    int some = n ? PyObject_IsTrue(n.get()) : -1;
    if (some < 0) return Fail();
    if (some) {
      // Runner._finish_threads_and_atexit: the handlers (the profile's
      // modules register some: matplotlib does) run here.
      if (!Ref(PyObject_CallNoArgs(o_.atexit_run.get()))) return HandOn(FetchException().get(), nullptr, true);
    }
  }
  // Runner._finish with nothing but the end event to write.
  for (PyObject* stream : {PySys_GetObject("stdout"), stdout_.get(), PySys_GetObject("stderr"), stderr_.get()}) {
    if (stream != nullptr && stream != Py_None) {
      Ref flushed(PyObject_CallMethod(stream, "flush", nullptr));
      PyErr_Clear();
    }
  }
  if (scanned_) {
    Files after;
    bool changed = !ScanFiles(o_, &after);
    for (const auto& [rel, sig] : after) {
      if (changed) break;
      auto it = before_.find(rel);
      changed = it == before_.end() || !(it->second == sig);
    }
    if (changed) return HandOn(nullptr, nullptr, true);
  }
  sink = Global("_lean_sink");
  if (sink != nullptr && sink != Py_None) return HandOn(nullptr, nullptr, true);  // a display from another thread
  if (PyObject_SetAttrString(o_.display.get(), "target", Py_None) != 0) return Fail();
  WriteAll(channel_, EndLine(0));
  return 0;
}

}  // namespace

LeanCell::LeanCell(std::unique_ptr<Objects> o) : o_(std::move(o)) {}
LeanCell::~LeanCell() = default;

std::unique_ptr<LeanCell> LeanCell::Prepare(PyObject* g, PyObject* guard, std::string* why) {
  auto o = std::make_unique<Objects>();
  auto fail = [why](std::string what) -> std::unique_ptr<LeanCell> {
    if (PyErr_Occurred()) what += ": " + PyErrorText();
    *why = what;
    return nullptr;
  };
  if (g == nullptr || !PyDict_Check(g)) return fail("no runner globals");
  if (guard == nullptr || guard == Py_None) return fail("the runner prepared no import guard");
  o->globals = Borrowed(g);
  o->guard = Borrowed(guard);
  struct Named {
    Ref* where;
    const char* name;
  };
  for (auto [where, name] : {Named{&o->lean_keys, "_LEAN_KEYS"}, Named{&o->display, "_display"},
                             Named{&o->lean_display, "_lean_display"}, Named{&o->lean_hand_on, "_lean_hand_on"},
                             Named{&o->lean_channel, "_lean_channel"}, Named{&o->runner_failure, "_runner_failure"},
                             Named{&o->reseed, "_reseed_after_fork"}, Named{&o->setup_streams, "_setup_streams"},
                             Named{&o->setup_mpl_env, "_setup_matplotlib_env"},
                             Named{&o->lean_patch_pyplot, "_lean_patch_pyplot"}, Named{&o->quitter, "_Quitter"}}) {
    PyObject* v = Item(g, name);
    if (v == nullptr || v == Py_None) return fail(std::string("the runner has no ") + name);
    *where = Borrowed(v);
  }
  for (auto [where, name] : {Named{&o->guarded_import, "_guarded_import"}, Named{&o->finder, "_finder"},
                             Named{&o->import_module, "_import_module"}, Named{&o->post_import, "_post_import"}}) {
    *where = Attr(guard, name);
    if (!*where || where->get() == Py_None) return fail(std::string("the import guard has no ") + name);
  }
  if (!PyList_CheckExact(o->post_import.get()) || PyList_GET_SIZE(o->post_import.get()) != 0) {
    return fail("the import guard's _post_import is not an empty list");
  }
  o->install_pil_hooks = Attr(o->display.get(), "install_pil_hooks");
  if (!o->install_pil_hooks) return fail("airlock_display has no install_pil_hooks");
  const char* modules[] = {"builtins", "importlib", "linecache", "atexit", "os"};
  Ref* slots[] = {&o->builtins, &o->importlib, &o->linecache, nullptr, nullptr};
  for (size_t i = 0; i < std::size(modules); ++i) {
    PyObject* m = Loaded(modules[i]);
    if (m == nullptr) return fail(std::string("the zygote has not loaded ") + modules[i]);
    if (slots[i] != nullptr) *slots[i] = Borrowed(m);
    if (std::strcmp(modules[i], "atexit") == 0) {
      o->atexit_ncallbacks = Attr(m, "_ncallbacks");
      o->atexit_run = Attr(m, "_run_exitfuncs");
      if (!o->atexit_ncallbacks || !o->atexit_run) return fail("atexit has no _ncallbacks/_run_exitfuncs");
    }
    if (std::strcmp(modules[i], "os") == 0) {
      Ref environ = Attr(m, "environ");
      o->environ_data = environ ? Attr(environ.get(), "_data") : Ref();
      if (!o->environ_data || !PyDict_CheckExact(o->environ_data.get())) return fail("os.environ has no _data dict");
    }
  }
  // random.seed(None) as its C function and gauss_next (Act::Reseed); when
  // random is not as expected, runs reseed through the runner's function.
  if (PyObject* random = Loaded("random"); random != nullptr && Loaded("_random") != nullptr) {
    Ref inst = Attr(random, "_inst");
    Ref base = Attr(Loaded("_random"), "Random");
    Ref seed = base ? Attr(base.get(), "seed") : Ref();
    Ref bound_seed = Attr(random, "seed");
    Ref python_seed = inst ? Attr(reinterpret_cast<PyObject*>(Py_TYPE(inst.get())), "seed") : Ref();
    Ref random_class = Attr(random, "Random");
    Ref class_seed = random_class ? Attr(random_class.get(), "seed") : Ref();
    // Only when random.seed is the stock Random.seed of random._inst.
    if (inst && seed && bound_seed && PyMethod_Check(bound_seed.get()) &&
        PyMethod_GET_SELF(bound_seed.get()) == inst.get() && python_seed && class_seed &&
        python_seed.get() == class_seed.get() && PyObject_TypeCheck(inst.get(), reinterpret_cast<PyTypeObject*>(base.get()))) {
      o->random_inst = std::move(inst);
      o->random_seed = std::move(seed);
    }
    PyErr_Clear();
  }
  if (PyObject* view = Item(g, "_mt_state"); view != nullptr && view != Py_None) {
    Py_buffer buf;
    if (PyObject_GetBuffer(view, &buf, PyBUF_WRITABLE | PyBUF_SIMPLE) == 0) {
      // The memory is numpy's generator's own (ctypes from_address): it stays
      // where it is for the interpreter's life.
      if (static_cast<size_t>(buf.len) == kMtStateBytes) o->mt_state = static_cast<unsigned char*>(buf.buf);
      PyBuffer_Release(&buf);
    }
    PyErr_Clear();
  }
  struct Number {
    long long* where;
    const char* name;
  };
  for (auto [where, name] : {Number{&o->split_max, "_SPLIT_MAX"}, Number{&o->files_max_scan, "_FILES_MAX_SCAN"},
                             Number{&o->files_max_depth, "_FILES_MAX_DEPTH"}}) {
    PyObject* v = Item(g, name);
    if (v == nullptr || !PyLong_Check(v)) return fail(std::string("the runner has no ") + name);
    *where = PyLong_AsLongLong(v);
  }
  PyObject* skip = Item(g, "_FILES_SKIP");
  Ref it = skip ? Ref(PyObject_GetIter(skip)) : Ref();
  if (!it) return fail("the runner has no _FILES_SKIP");
  while (Ref name{PyIter_Next(it.get())}) {
    Py_ssize_t size = 0;
    const char* s = PyUnicode_Check(name.get()) ? PyUnicode_AsUTF8AndSize(name.get(), &size) : nullptr;
    if (s == nullptr) return fail("_FILES_SKIP holds a name that is not UTF-8 text");
    o->files_skip.emplace(s, static_cast<size_t>(size));
  }
  o->main_py = Ref(PyUnicode_InternFromString("main.py"));
  o->future = Ref(PyUnicode_InternFromString("__future__"));
  if (PyErr_Occurred() || !o->main_py || !o->future) return fail("preparing the lean path");
  return std::unique_ptr<LeanCell>(new LeanCell(std::move(o)));
}

int LeanCell::Run(PyObject* request, int control) {
  Request r;
  if (!CheckRequest(*o_, request, &r)) {
    PyErr_Clear();
    return -1;
  }
  Compiled c;
  if (!CompileCell(*o_, r, &c)) {
    PyErr_Clear();
    return -1;
  }
  return Act(*o_, request, r, std::move(c)).Run(control);
}

}  // namespace airlock::exec
