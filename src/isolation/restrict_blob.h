// Internal to isolation/: restrict.h's plan as bytes, for a sandbox's init
// (init_control.h, kCtlSandbox), which reads them with ParseRestrictPlan.
// Both ends are the same binary on the same machine: native byte order.
#pragma once

#include <string>

#include "isolation/restrict.h"

namespace airlock::isolation::internal {

std::string SerializeRestrictPlan(const RestrictPlan& plan);

}  // namespace airlock::isolation::internal
