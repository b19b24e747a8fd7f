#include "exec/python_spec.h"

namespace airlock::exec {

isolation::Spec PythonSpec(const std::string& code, const isolation::Limits& limits, bool unbuffered) {
  isolation::Spec spec;
  // -I: ignore PYTHON* variables and the user site; -B: no .pyc (the root is
  // read-only); -X utf8: UTF-8 text whatever the locale.
  spec.argv = {"/usr/bin/python3", "-I", "-B", "-X", "utf8"};
  if (unbuffered) spec.argv.push_back("-u");  // stream output as it is printed
  spec.argv.push_back("/sandbox/main.py");
  // A short fixed list: nothing of the caller's environment reaches the run.
  spec.env = {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/user", "TMPDIR=/tmp", "LANG=C.UTF-8",
              "LC_ALL=C.UTF-8", "PYTHONUTF8=1", "USER=sandbox", "MPLBACKEND=Agg", "MPLCONFIGDIR=/tmp/.matplotlib"};
  spec.files.push_back({"/sandbox/main.py", code, 0444});
  spec.limits = limits;
  return spec;
}

}  // namespace airlock::exec
