#include "api/audit_log.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <thread>

#include "base/log.h"
#include "base/unique_fd.h"

namespace airlock::api {

struct AuditLog::State {
  int fd = -1;
  UniqueFd owned;
  std::mutex mu;
  std::condition_variable cv, done_cv;
  std::deque<std::string> queue;
  bool stop = false, done = false;
  uint64_t dropped = 0;

  void Loop() {
    std::unique_lock<std::mutex> l(mu);
    for (;;) {
      cv.wait(l, [&] { return stop || !queue.empty(); });
      if (queue.empty() && stop) {
        done = true;
        done_cv.notify_all();
        return;
      }
      std::deque<std::string> batch;
      batch.swap(queue);
      l.unlock();
      std::string data;
      for (auto& s : batch) data += s;
      std::string_view rest = data;
      while (!rest.empty()) {
        ssize_t n = ::write(fd, rest.data(), rest.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
          log::Error("audit log: write failed: " + ErrnoError("write").ToString());
          break;
        }
        rest.remove_prefix(static_cast<size_t>(n));
      }
      l.lock();
    }
  }
};

StatusOr<std::unique_ptr<AuditLog>> AuditLog::Open(const std::string& target) {
  std::unique_ptr<AuditLog> a(new AuditLog());
  if (target.empty()) return a;
  auto st = std::make_shared<State>();
  if (target == "-") {
    st->fd = STDOUT_FILENO;
  } else {
    int fd = ::open(target.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return ErrnoError("--audit-log: cannot open " + target + " for appending");
    st->owned.reset(fd);
    st->fd = fd;
  }
  std::thread([st] { st->Loop(); }).detach();
  a->state_ = std::move(st);
  return a;
}

AuditLog::~AuditLog() {
  if (!state_) return;
  std::unique_lock<std::mutex> l(state_->mu);
  state_->stop = true;
  state_->cv.notify_all();
  // A reader that stopped reading our stdout must not keep the process from
  // exiting: wait a bounded time for the backlog, then leave the thread behind
  // (it owns its share of the state).
  if (!state_->done_cv.wait_for(l, std::chrono::seconds(3), [&] { return state_->done; })) {
    log::Warn("audit log: records not written at exit (the sink is blocked)");
  }
}

void AuditLog::Write(const model::AuditRecord& record) {
  if (!state_) return;
  std::string line = model::AuditRecordToJson(record);
  line += '\n';
  {
    std::lock_guard<std::mutex> l(state_->mu);
    if (state_->queue.size() >= kMaxBacklog) {
      ++state_->dropped;
      return;
    }
    state_->queue.push_back(std::move(line));
  }
  state_->cv.notify_one();
}

uint64_t AuditLog::dropped() const {
  if (!state_) return 0;
  std::lock_guard<std::mutex> l(state_->mu);
  return state_->dropped;
}

std::string NowRfc3339() {
  struct timespec ts;
  ::clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  ::gmtime_r(&ts.tv_sec, &tm);
  char buf[64];
  snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
           tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
  return buf;
}

}  // namespace airlock::api
