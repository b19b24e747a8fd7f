// Bearer-token authentication. Tokens come from a file (--tokens-file) and/or
// the AIRLOCK_TOKENS environment variable; each entry is `name:token` (the name
// goes into audit records) or a bare token (named token-1, token-2, ...):
//
//   # /etc/airlock/tokens
//   ci-runner:0d9c1f6e2b8a4f7c9e3d5b1a7c6e8f20
//   agent:4f1e9a7b3c5d2e8f6a0b9c7d1e3f5a2b
//
//   AIRLOCK_TOKENS="agent:4f1e9a7b...,ci:0d9c1f6e..."
//
// An entry may end with the token's roles, `name:token:ROLES`, ROLES being
// `run`, `approve` or `run+approve` (docs/api.md, Approvals). Without them a
// token may run code and not approve.
//
//   alice:9c1f...e8f2:approve
//
// A client sends `Authorization: Bearer <token>` or `X-API-Key: <token>`.
// Comparison is constant-time: each presented token is hashed (SHA-256) and
// compared with every configured token's hash, without an early exit, so the
// time taken tells nothing about how much of a token matched.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace airlock::api {

// Tokens shorter than this are refused at startup: they can be guessed.
inline constexpr size_t kMinTokenLength = 16;

// What a token may do.
struct Identity {
  std::string name;
  bool run = true;
  bool approve = false;
};

class Authenticator {
 public:
  Authenticator() = default;
  // Reads `tokens_file` (when not empty) and `env_value` (when not null).
  static StatusOr<Authenticator> Load(const std::string& tokens_file, const char* env_value);
  // Parses entries separated by newlines or commas; `origin` names them in errors.
  static StatusOr<Authenticator> Parse(std::string_view text, const std::string& origin);

  bool enabled() const { return !tokens_.empty(); }
  size_t size() const { return tokens_.size(); }

  // The name of the token the request carries, or nullopt when it carries
  // none or a wrong one. `authorization` is the Authorization header value,
  // `api_key` the X-API-Key header value (either may be empty).
  std::optional<std::string> Check(std::string_view authorization, std::string_view api_key) const;
  // The same, with the token's roles.
  std::optional<Identity> Identify(std::string_view authorization, std::string_view api_key) const;

 private:
  struct Token {
    std::string name;
    std::array<uint8_t, 32> digest;
    bool run = true;
    bool approve = false;
  };
  Status Add(std::string_view entry, const std::string& origin, size_t index);
  std::vector<Token> tokens_;
};

}  // namespace airlock::api
