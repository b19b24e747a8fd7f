// ScopeExit: runs a callable when the scope ends, unless dismissed.
//   auto cleanup = ScopeExit([&] { rmdir(dir); });
//   ...; cleanup.Dismiss();
#pragma once

#include <utility>

namespace airlock {

template <typename F>
class ScopeExit {
 public:
  explicit ScopeExit(F f) : f_(std::move(f)) {}
  ScopeExit(const ScopeExit&) = delete;
  ScopeExit& operator=(const ScopeExit&) = delete;
  ~ScopeExit() {
    if (active_) f_();
  }
  void Dismiss() { active_ = false; }

 private:
  F f_;
  bool active_ = true;
};

}  // namespace airlock
