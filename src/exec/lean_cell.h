#ifndef AIRLOCK_EXEC_LEAN_CELL_H_
#define AIRLOCK_EXEC_LEAN_CELL_H_

// The lean path of a warm one-shot run, in C++ (issue 24).
//
// A warm run is a fork of the zygote's interpreter. CPython 3.11 writes the
// reference count of every object its bytecode touches, so each page of the
// zygote the runner's own Python touches is copied into the run: the runner's
// Python lean path (_lean_run in runtime/python/airlock_runner.py) copied
// ~140 pages more than the cell itself in `minimal` (docs/benchmarks.md).
// This is the same path through the C API: the same checks, the same steps in
// the same order, the same objects left where the cell and the runner look
// for them, but no runner bytecode run, no runner frame, no runner constant
// touched. What has more to report than the end event (an exception, a value,
// a display, a figure, a thread, an atexit handler, a file written) is handed
// to the runner's _lean_hand_on exactly as its Python lean path hands it; a
// request this path does not take is left, untouched, to warm_main.
//
// Use (src/exec/zygote_main.cc): in the zygote, once the runner is loaded and
// airlock_runner.zygote_prepare_lean() made the import guard, Prepare(); in
// each run, Run() on the request dict, and warm_main when it returns -1.
// Needs the GIL (the zygote's only thread holds it) and Python.h included
// first.

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <memory>
#include <string>

namespace airlock::exec {

class LeanCell {
 public:
  // In the zygote: keeps what every run needs from the runner's module
  // globals and the guard zygote_prepare_lean() returned. nullptr, with
  // *why said and Python's error cleared, when something is missing or not
  // as this path expects it: runs then take the runner's own lean path.
  static std::unique_ptr<LeanCell> Prepare(PyObject* runner_globals, PyObject* guard, std::string* why);

  // In a run: runs `request` (the dict the zygote made of the request JSON)
  // and returns the run's exit code (0..255), the end event written to the
  // result channel. -1, having done nothing (no error set, `control` still
  // open), when the request is not one this path takes. `control`: the run's
  // control socket, closed before the cell runs (-1: none).
  int Run(PyObject* request, int control);

  ~LeanCell();
  LeanCell(const LeanCell&) = delete;
  LeanCell& operator=(const LeanCell&) = delete;

  struct Objects;  // the zygote's objects a run uses (lean_cell.cc)

 private:
  explicit LeanCell(std::unique_ptr<Objects> o);
  std::unique_ptr<Objects> o_;
};

}  // namespace airlock::exec

#endif  // AIRLOCK_EXEC_LEAN_CELL_H_
