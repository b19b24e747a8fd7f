// SHA-256 (FIPS 180-4) of a byte string, for the audit record's code hash and
// the constant-time token comparison. Small and dependency-free.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace airlock::service {

std::array<uint8_t, 32> Sha256(std::string_view data);
// Lower-case hex of Sha256(data).
std::string Sha256Hex(std::string_view data);

}  // namespace airlock::service
