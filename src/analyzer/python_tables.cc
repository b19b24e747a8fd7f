#include "analyzer/python_tables.h"

#include <unordered_map>
#include <unordered_set>

namespace airlock::analyzer {
namespace {

const std::unordered_map<std::string_view, uint32_t>& NameTable() {
  static const auto* table = [] {
    auto* t = new std::unordered_map<std::string_view, uint32_t>();
    auto add = [t](std::initializer_list<std::string_view> names, uint32_t bit) {
      for (auto n : names) (*t)[n] |= bit;
    };
    add({"eval", "exec", "compile", "__import__", "open", "getattr", "setattr", "delattr",
         "breakpoint", "input", "globals", "locals", "vars", "get_type_hints"},
        kBlockedBuiltin);
    add({"open", "exec", "eval", "compile", "system", "popen", "get_data", "_evaluate", "FileIO",
         "ForwardRef", "get_field", "vformat", "get_type_hints"},
        kBlockedAttr);
    add({"__subclasses__", "__globals__", "__builtins__", "__traceback__", "__import__",
         "__class__", "__bases__", "__mro__", "__dict__", "__code__", "__closure__", "__name__",
         "__getattribute__", "__getattr__", "__self__", "__loader__", "__spec__", "__cached__",
         "__func__", "__wrapped__",
         // airlock additions: the same kind of traversal or attribute primitive
         "__base__", "__reduce__", "__reduce_ex__", "__setattr__", "__delattr__"},
        kBlockedDunder);
    add({"__name__", "__class__"}, kReadableDunder);
    add({"f_globals", "f_locals", "f_builtins", "f_code", "gi_frame", "gi_code", "cr_frame",
         "cr_code", "ag_frame", "ag_code", "tb_frame",
         // airlock addition: walks to the caller's frame
         "f_back"},
        kFrameAttr);
    add({"_os", "_sys", "_subprocess", "_socket", "_signal", "_ctypes", "_multiprocessing",
         "_pickle", "_marshal", "_shutil", "_mmap", "_pty", "os", "sys", "subprocess", "socket",
         "signal", "ctypes", "multiprocessing", "pickle", "marshal", "shutil", "mmap", "pty",
         "builtins", "bltns", "codecs", "io", "pathlib", "tempfile", "types", "contextlib",
         "warnings", "_evaluate"},
        kModuleAlias);
    add({"attrgetter", "methodcaller", "itemgetter"}, kGetter);
    add({"subprocess", "socket", "importlib", "signal"}, kBlockedModule);
    return t;
  }();
  return *table;
}

const std::unordered_map<std::string_view, QualifiedClass>& QualifiedTable() {
  static const auto* table = [] {
    auto* t = new std::unordered_map<std::string_view, QualifiedClass>();
    for (auto n : {"os.system", "os.popen", "os.kill", "os.killpg", "os.getppid", "os.getpid",
                   "os.getpgid", "os.setpgid", "os.setsid", "os.abort", "os.fork", "os.forkpty",
                   "os.execl", "os.execle", "os.execlp", "os.execlpe", "os.execv", "os.execve",
                   "os.execvp", "os.execvpe", "os.spawnl", "os.spawnle", "os.spawnlp",
                   "os.spawnlpe", "os.spawnv", "os.spawnve", "os.spawnvp", "os.spawnvpe",
                   "os.posix_spawn", "os.posix_spawnp", "os._exit"}) {
      (*t)[n] = QualifiedClass::kOsCall;
    }
    for (auto n : {"pickle.loads", "pickle.load", "pickle.Unpickler", "yaml.unsafe_load",
                   "yaml.load", "marshal.loads", "marshal.load", "shelve.open",
                   // airlock additions: the C pickle module and dill
                   "_pickle.loads", "_pickle.load", "_pickle.Unpickler", "dill.loads",
                   "dill.load"}) {
      (*t)[n] = QualifiedClass::kDeserialization;
    }
    (*t)["hashlib.md5"] = QualifiedClass::kWeakCrypto;
    (*t)["hashlib.sha1"] = QualifiedClass::kWeakCrypto;
    for (auto n : {"re.compile", "scipy.io", "pandas.api.types"}) (*t)[n] = QualifiedClass::kSafe;
    return t;
  }();
  return *table;
}

}  // namespace

uint32_t ClassifyName(std::string_view name) {
  if (name.empty()) return 0;
  const auto& t = NameTable();
  auto it = t.find(name);
  return it == t.end() ? 0 : it->second;
}

QualifiedClass ClassifyQualified(std::string_view qualified) {
  const auto& t = QualifiedTable();
  auto it = t.find(qualified);
  return it == t.end() ? QualifiedClass::kNone : it->second;
}

std::vector<std::string_view> QualifiedAttrsOf(std::string_view module) {
  std::vector<std::string_view> out;
  for (const auto& [name, cls] : QualifiedTable()) {
    if (cls != QualifiedClass::kSafe && name.size() > module.size() + 1 &&
        name.substr(0, module.size()) == module && name[module.size()] == '.') {
      out.push_back(name.substr(module.size() + 1));
    }
  }
  return out;
}

bool IsTrackedModule(std::string_view top) {
  static const std::unordered_set<std::string_view> kTracked = {
      "os",   "subprocess", "socket", "importlib", "signal", "pickle", "_pickle", "marshal",
      "yaml", "shelve",     "dill",   "hashlib",   "re",     "scipy",  "pandas"};
  return kTracked.count(top) != 0;
}

bool IsDunderShape(std::string_view s) {
  return s.size() > 4 && s.substr(0, 2) == "__" && s.substr(s.size() - 2) == "__";
}

}  // namespace airlock::analyzer
