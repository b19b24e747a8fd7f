#include "api/auth.h"

#include <sys/stat.h>

#include <cctype>

#include "base/fs.h"
#include "base/log.h"
#include "service/sha256.h"

namespace airlock::api {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool IEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  }
  return true;
}

}  // namespace

Status Authenticator::Add(std::string_view entry, const std::string& origin, size_t index) {
  std::string name, token;
  bool run = true, approve = false;
  // A trailing `:run`, `:approve` or `:run+approve` names the roles (a token
  // is never one of these words, so an older entry is read as before).
  if (size_t last = entry.rfind(':'); last != std::string_view::npos && entry.find(':') != last) {
    std::string_view roles = Trim(entry.substr(last + 1));
    if (roles == "run" || roles == "approve" || roles == "run+approve" || roles == "approve+run") {
      run = roles != "approve";
      approve = roles != "run";
      entry = entry.substr(0, last);
    }
  }
  size_t colon = entry.find(':');
  if (colon != std::string_view::npos) {
    name = std::string(Trim(entry.substr(0, colon)));
    token = std::string(Trim(entry.substr(colon + 1)));
    if (name.empty()) return InvalidArgument(origin + ": entry " + std::to_string(index) + " has an empty name before ':'");
  } else {
    token = std::string(Trim(entry));
    name = "token-" + std::to_string(tokens_.size() + 1);
  }
  for (char c : token) {
    if (std::isspace(static_cast<unsigned char>(c)) || std::iscntrl(static_cast<unsigned char>(c))) {
      return InvalidArgument(origin + ": token '" + name + "' contains white space or control characters");
    }
  }
  if (token.size() < kMinTokenLength) {
    return InvalidArgument(origin + ": token '" + name + "' is " + std::to_string(token.size()) +
                           " characters long; use at least " + std::to_string(kMinTokenLength) +
                           " random characters (e.g. `openssl rand -hex 32`)");
  }
  for (const Token& t : tokens_) {
    if (t.name == name) return InvalidArgument(origin + ": token name '" + name + "' is used twice");
  }
  tokens_.push_back({name, service::Sha256(token), run, approve});
  return Status::Ok();
}

StatusOr<Authenticator> Authenticator::Parse(std::string_view text, const std::string& origin) {
  Authenticator a;
  size_t index = 0;
  while (!text.empty()) {
    size_t end = text.find_first_of(",\n");
    std::string_view entry = Trim(text.substr(0, end));
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    ++index;
    if (entry.empty() || entry.front() == '#') continue;
    RETURN_IF_ERROR(a.Add(entry, origin, index));
  }
  return a;
}

StatusOr<Authenticator> Authenticator::Load(const std::string& tokens_file, const char* env_value) {
  Authenticator all;
  if (!tokens_file.empty()) {
    auto text = ReadFile(tokens_file, 1 << 20);
    if (!text.ok()) return InvalidArgument("--tokens-file: cannot read " + tokens_file + ": " + text.status().ToString());
    struct stat st;
    if (::stat(tokens_file.c_str(), &st) == 0 && (st.st_mode & S_IROTH)) {
      log::Warn("--tokens-file " + tokens_file + " is readable by every user; chmod 600 it");
    }
    ASSIGN_OR_RETURN(Authenticator a, Parse(*text, tokens_file));
    if (a.tokens_.empty()) return InvalidArgument("--tokens-file " + tokens_file + " holds no token");
    all = std::move(a);
  }
  if (env_value != nullptr && *env_value != '\0') {
    ASSIGN_OR_RETURN(Authenticator a, Parse(env_value, "AIRLOCK_TOKENS"));
    for (Token& t : a.tokens_) {
      for (const Token& u : all.tokens_) {
        if (u.name == t.name) t.name = "env:" + t.name;
      }
      all.tokens_.push_back(std::move(t));
    }
  }
  return all;
}

std::optional<std::string> Authenticator::Check(std::string_view authorization, std::string_view api_key) const {
  auto id = Identify(authorization, api_key);
  if (!id) return std::nullopt;
  return id->name;
}

std::optional<Identity> Authenticator::Identify(std::string_view authorization, std::string_view api_key) const {
  std::string_view presented;
  authorization = Trim(authorization);
  if (authorization.size() > 7 && IEquals(authorization.substr(0, 7), "Bearer ")) {
    presented = Trim(authorization.substr(7));
  } else if (!api_key.empty()) {
    presented = Trim(api_key);
  }
  if (presented.empty() || presented.size() > 4096) return std::nullopt;
  const std::array<uint8_t, 32> digest = service::Sha256(presented);
  int found = -1;
  for (size_t i = 0; i < tokens_.size(); ++i) {
    uint8_t diff = 0;
    for (size_t k = 0; k < digest.size(); ++k) diff |= static_cast<uint8_t>(digest[k] ^ tokens_[i].digest[k]);
    // Branch-free selection: every token is compared, whatever matched before.
    int match = static_cast<int>(diff == 0);
    found = match * static_cast<int>(i) + (1 - match) * found;
  }
  if (found < 0) return std::nullopt;
  const Token& t = tokens_[static_cast<size_t>(found)];
  return Identity{t.name, t.run, t.approve};
}

}  // namespace airlock::api
