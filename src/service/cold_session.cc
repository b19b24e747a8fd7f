// Service::StartColdSession: a session's run on the cold path (service.h).
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "model/runner_protocol.h"
#include "service/service.h"

namespace airlock::service {

StatusOr<exec::SessionHandOff> Service::StartColdSession(const Plan& plan) const {
  if (plan.language != profile::Language::kPython || plan.spec.argv.empty()) {
    return InvalidArgument("a session is a live Python interpreter; this plan is not a cold Python run's");
  }
  isolation::Spec spec = plan.spec;
  // The first request of a session (airlock_runner.py, "Sessions"): the
  // profile's policy, no code; the calls come on fd 3 after it.
  model::RunnerConfig first = plan.warm_config;
  first.code = "";
  first.code_path.clear();
  first.session = true;
  first.files.clear();
  first.preimport.clear();  // imported when the session's code asks (a zygote's job otherwise)
  const std::string& config_path = spec.argv.back();
  bool replaced = false;
  for (isolation::FileEntry& f : spec.files) {
    if (f.path == config_path) {
      f.content = model::RunnerConfigToJson(first);
      replaced = true;
    }
  }
  if (!replaced) return Internal("a cold run's plan has no runner config at " + config_path);

  std::lock_guard<std::mutex> lock(launch_mu_);  // see Start()
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    return ErrnoError("socketpair (a session's channel)");
  }
  UniqueFd ours(sv[0]), theirs(sv[1]);
  if (::fcntl(ours.get(), F_SETFL, O_NONBLOCK) != 0) return ErrnoError("fcntl(O_NONBLOCK) on a session's channel");
  UniqueFd control(::fcntl(ours.get(), F_DUPFD_CLOEXEC, 3));
  if (!control) return ErrnoError("dup (a session's control socket)");
  spec.extra_fd = theirs.get();
  ASSIGN_OR_RETURN(isolation::Launched run, isolation::Launch(*options_.host, spec));
  theirs.reset();  // the run holds its own copy: ours must go, or the session's end would go unseen
  exec::SessionHandOff h;
  h.run = std::move(run);
  h.events_read = std::move(ours);
  h.control = std::move(control);
  return h;
}

}  // namespace airlock::service
