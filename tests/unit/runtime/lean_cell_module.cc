// _airlock_lean: the zygote's lean path in C++ (src/exec/lean_cell.h) as a
// Python extension module, so that test_runner_lean.py can run it in forks of
// an interpreter loaded as the zygote loads the runner, beside the runner's
// own paths, and compare what each gives. Test-only: the zygote links
// lean_cell.cc itself.
//
//   _airlock_lean.prepare(runner_globals, guard)  (raises RuntimeError: why not)
//   _airlock_lean.run(request, control) -> exit code, or None: not taken
#include "exec/lean_cell.h"

#include <memory>
#include <string>

namespace {

// Never destroyed: its references would be dropped after the interpreter is
// finalized (a static's destructor runs then).
airlock::exec::LeanCell* g_lean = nullptr;

PyObject* Prepare(PyObject*, PyObject* args) {
  PyObject *globals, *guard;
  if (!PyArg_ParseTuple(args, "OO", &globals, &guard)) return nullptr;
  std::string why;
  delete g_lean;
  g_lean = airlock::exec::LeanCell::Prepare(globals, guard, &why).release();
  if (g_lean == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, why.c_str());
    return nullptr;
  }
  Py_RETURN_NONE;
}

PyObject* Run(PyObject*, PyObject* args) {
  PyObject* request;
  int control;
  if (!PyArg_ParseTuple(args, "Oi", &request, &control)) return nullptr;
  if (g_lean == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "prepare() first");
    return nullptr;
  }
  // The zygote calls Run from C with no Python frame below the cell, as
  // python3 runs main.py: here the caller's frames and this call count
  // towards the recursion limit too, and are granted, so that a cell gets the
  // depth it gets in the zygote.
  int depth = 1;
  PyFrameObject* frame = PyEval_GetFrame();
  Py_XINCREF(frame);
  while (frame != nullptr) {
    ++depth;
    PyFrameObject* back = PyFrame_GetBack(frame);
    Py_DECREF(frame);
    frame = back;
  }
  Py_SetRecursionLimit(Py_GetRecursionLimit() + depth);
  int code = g_lean->Run(request, control);
  if (code < 0) Py_RETURN_NONE;
  return PyLong_FromLong(code);
}

PyMethodDef kMethods[] = {
    {"prepare", Prepare, METH_VARARGS, "LeanCell::Prepare(runner_globals, guard)"},
    {"run", Run, METH_VARARGS, "LeanCell::Run(request, control): exit code, or None when not taken"},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "_airlock_lean", nullptr, -1, kMethods,
                       nullptr, nullptr, nullptr, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__airlock_lean() { return PyModule_Create(&kModule); }
