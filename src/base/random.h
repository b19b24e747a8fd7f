// Random identifiers from the kernel's CSPRNG (getrandom, blocking only until
// the pool is first initialised at boot).
//
//   std::string id = base::RandomHex(16);   // 128 bits as 32 lowercase hex digits
#pragma once

#include <cstddef>
#include <string>

namespace airlock::base {

// `bytes` random bytes (at most 64) as 2*bytes lowercase hex digits.
std::string RandomHex(size_t bytes);

}  // namespace airlock::base
