// The in-sandbox runner (runtime/python/airlock_runner.py), embedded in the
// binary at build time so that an installed airlock needs no file beside it.
#pragma once

#include <string_view>

namespace airlock::service {

std::string_view EmbeddedRunner();

}  // namespace airlock::service
