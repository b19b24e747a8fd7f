#pragma once

#include <chrono>

namespace airlock {

using Clock = std::chrono::steady_clock;
using Millis = std::chrono::milliseconds;

inline double MillisSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

}  // namespace airlock
