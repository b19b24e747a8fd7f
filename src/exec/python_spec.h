// The Spec for running a Python program with Debian's interpreter.
#pragma once

#include <string>

#include "isolation/spec.h"

namespace airlock::exec {

// The program is placed read-only at /sandbox/main.py; cwd and HOME are /tmp.
isolation::Spec PythonSpec(const std::string& code, const isolation::Limits& limits, bool unbuffered);

}  // namespace airlock::exec
