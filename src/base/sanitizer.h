// AIRLOCK_ASAN: 1 in a build under AddressSanitizer (GCC or clang), else 0.
// For the few places that must act differently there (the sanitizers' own
// stack and signal handling, their shadow memory).
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define AIRLOCK_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define AIRLOCK_ASAN 1
#endif
#endif
#ifndef AIRLOCK_ASAN
#define AIRLOCK_ASAN 0
#endif
