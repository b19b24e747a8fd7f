// A last word from a process that is about to die of a bug.
//
//   base::InstallCrashReport();   // once, early, in main's thread
//
// A fatal signal that means a bug (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT)
// then writes one line naming it, and a backtrace, to stderr before the
// default action runs (a core dump where the host keeps them). Without it a
// server that dies under a test or in production leaves only "connection
// reset". A no-op in sanitizer builds: the sanitizers report these themselves,
// better.
#pragma once

namespace airlock::base {

void InstallCrashReport();

}  // namespace airlock::base
