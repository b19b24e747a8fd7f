#include "base/crash_report.h"

#include <execinfo.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "base/sanitizer.h"

namespace airlock::base {
namespace {

constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};

// Async-signal-safe writes only: the heap may be what broke.
void Say(const char* text) {
  ssize_t ignored = ::write(STDERR_FILENO, text, ::strlen(text));
  (void)ignored;
}

void SayNumber(long value) {
  char buf[24];
  char* p = buf + sizeof buf;
  *--p = '\0';
  bool negative = value < 0;
  unsigned long v = negative ? 0UL - static_cast<unsigned long>(value) : static_cast<unsigned long>(value);
  do {
    *--p = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  if (negative) *--p = '-';
  Say(p);
}

void OnFatalSignal(int signo, siginfo_t* info, void*) {
  Say("airlock: fatal signal ");
  SayNumber(signo);
  Say(" (");
  const char* name = sigabbrev_np(signo);
  Say(name ? name : "?");
  Say(") in thread ");
  SayNumber(::gettid());
  if (info != nullptr && signo != SIGABRT) {
    Say(", fault address 0x");
    char hex[17];
    auto addr = reinterpret_cast<unsigned long>(info->si_addr);
    for (int i = 15; i >= 0; --i, addr >>= 4) hex[i] = "0123456789abcdef"[addr & 0xf];
    hex[16] = '\0';
    Say(hex);
  }
  Say("; backtrace follows (addr2line -e <binary> turns offsets into lines)\n");
  void* frames[64];
  int n = ::backtrace(frames, 64);
  ::backtrace_symbols_fd(frames, n, STDERR_FILENO);
  // SA_RESETHAND put the default action back: returning re-runs the fault
  // (or, for a sent signal, it is raised again) and the process dies of it.
  if (info == nullptr || info->si_code <= 0) ::raise(signo);
}

}  // namespace

void InstallCrashReport() {
  if (AIRLOCK_ASAN) return;  // the sanitizer reports these itself
  // backtrace() loads libgcc's unwinder on first use (a malloc): done now,
  // not in the handler.
  void* warm[1];
  ::backtrace(warm, 1);
  // A stack overflow leaves no stack to run the handler on: main's thread
  // gets an alternate one (other threads' overflows die without the line).
  static char alt_stack[64 * 1024];
  stack_t ss{};
  ss.ss_sp = alt_stack;
  ss.ss_size = sizeof alt_stack;
  ::sigaltstack(&ss, nullptr);
  struct sigaction sa {};
  sa.sa_sigaction = OnFatalSignal;
  sa.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_ONSTACK;
  ::sigemptyset(&sa.sa_mask);
  for (int sig : kFatalSignals) ::sigaction(sig, &sa, nullptr);
}

}  // namespace airlock::base
