// MustWork(): whether a test that needs a host feature must fail, not skip,
// when the host lacks it. Set by AIRLOCK_MUST_WORK=1 (CI); any other value,
// or none, lets such a test skip. tests/e2e/airlock_server.py reads it the same way.
#pragma once

#include <cstdlib>
#include <cstring>

namespace airlock::test {

inline bool MustWork() {
  const char* v = std::getenv("AIRLOCK_MUST_WORK");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

}  // namespace airlock::test
