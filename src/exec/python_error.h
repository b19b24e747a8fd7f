#ifndef AIRLOCK_EXEC_PYTHON_ERROR_H_
#define AIRLOCK_EXEC_PYTHON_ERROR_H_

// The embedded interpreter's pending error as text. Needs the GIL and
// Python.h included first.

#include <string>

namespace airlock::exec {

// str() of the pending Python exception ("unknown Python error" when it has
// none or its str() fails); the error is cleared.
std::string PyErrorText();

}  // namespace airlock::exec

#endif  // AIRLOCK_EXEC_PYTHON_ERROR_H_
