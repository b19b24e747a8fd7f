#include "session/session_files.h"

#include "isolation/sandbox_files.h"

namespace airlock::session {
namespace {

// The session's working directory, after the path rule and the owner check.
std::optional<UniqueFd> OpenRoot(SessionManager& manager, const std::string& id, const std::string& owner,
                                 std::string_view path, model::ApiError* error) {
  if (Status s = isolation::CheckSandboxPath(path); !s.ok()) {
    *error = SessionFileError(s, path);
    return std::nullopt;
  }
  return OpenSessionRoot(manager, id, owner, error);
}

}  // namespace

std::optional<UniqueFd> OpenSessionRoot(SessionManager& manager, const std::string& id, const std::string& owner,
                                        model::ApiError* error) {
  std::shared_ptr<LiveSession> live = manager.Live(id, owner, error);
  if (!live) return std::nullopt;
  auto root = isolation::OpenRunDir(live->init_pid(), live->pidfd(), isolation::kWorkspaceDir);
  if (!root.ok()) {
    *error = {model::ErrorKind::kGone, "the session's working directory is gone: " + root.status().ToString(), ""};
    return std::nullopt;
  }
  return std::move(*root);
}

std::optional<UniqueFd> OpenSessionDir(SessionManager& manager, const std::string& id, const std::string& owner,
                                       std::string_view dir, model::ApiError* error) {
  if (dir == isolation::kWorkspaceDir) return OpenSessionRoot(manager, id, owner, error);
  std::shared_ptr<LiveSession> live = manager.Live(id, owner, error);
  if (!live) return std::nullopt;
  auto root = isolation::OpenRunDir(live->init_pid(), live->pidfd(), dir);
  if (!root.ok()) {
    *error = {model::ErrorKind::kGone, "the sandbox's " + std::string(dir) + " is gone: " + root.status().ToString(), ""};
    return std::nullopt;
  }
  return std::move(*root);
}

model::ApiError SessionFileError(const Status& s, std::string_view path) {
  model::ErrorKind kind = model::ErrorKind::kInternal;
  switch (s.code()) {
    case ErrorCode::kNotFound: kind = model::ErrorKind::kNotFound; break;
    case ErrorCode::kInvalidArgument: kind = model::ErrorKind::kBadRequest; break;
    case ErrorCode::kFailedPrecondition: kind = model::ErrorKind::kConflict; break;
    case ErrorCode::kResourceExhausted: kind = model::ErrorKind::kPayloadTooLarge; break;
    case ErrorCode::kUnavailable: kind = model::ErrorKind::kUnavailable; break;
    default: break;
  }
  if (path.empty()) return {kind, s.ToString(), ""};
  return {kind, std::string(path.substr(0, 256)) + ": " + s.ToString(), ""};
}


bool WriteSessionFile(SessionManager& manager, const std::string& id, const std::string& owner,
                      std::string_view path, std::string_view data, int64_t max_bytes, model::ApiError* error) {
  if (static_cast<int64_t>(data.size()) > max_bytes) {
    *error = {model::ErrorKind::kPayloadTooLarge,
              "the file is over this server's cap of " + std::to_string(max_bytes) + " bytes", ""};
    return false;
  }
  std::optional<UniqueFd> root = OpenRoot(manager, id, owner, path, error);
  if (!root) return false;
  if (Status s = isolation::WriteSandboxFile(root->get(), path, data, /*make_parents=*/true); !s.ok()) {
    *error = SessionFileError(s, path);
    return false;
  }
  return true;
}

std::optional<std::string> ReadSessionFile(SessionManager& manager, const std::string& id, const std::string& owner,
                                           std::string_view path, int64_t max_bytes, model::ApiError* error) {
  std::optional<UniqueFd> root = OpenRoot(manager, id, owner, path, error);
  if (!root) return std::nullopt;
  int64_t total = 0;
  auto data = isolation::ReadSandboxFile(root->get(), path, max_bytes, 0, -1, &total);
  if (!data.ok()) {
    *error = SessionFileError(data.status(), path);
    return std::nullopt;
  }
  return std::move(*data);
}

}  // namespace airlock::session
