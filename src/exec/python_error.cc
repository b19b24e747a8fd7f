// Python.h first: it sets feature macros the C library headers read.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "exec/python_error.h"

namespace airlock::exec {

std::string PyErrorText() {
  PyObject *type = nullptr, *value = nullptr, *tb = nullptr;
  PyErr_Fetch(&type, &value, &tb);
  std::string text = "unknown Python error";
  if (value != nullptr) {
    if (PyObject* s = PyObject_Str(value)) {
      if (const char* c = PyUnicode_AsUTF8(s)) text = c;
      Py_DECREF(s);
    }
    PyErr_Clear();  // what str() itself may have raised
  }
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
  return text;
}

}  // namespace airlock::exec
