#include "service/language_runtime.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

namespace airlock::service {
namespace {

constexpr const char* kNode = "/usr/bin/node";
constexpr const char* kBash = "/usr/bin/bash";
constexpr const char* kRscript = "/usr/bin/Rscript";
constexpr const char* kJava = "/usr/bin/java";
constexpr const char* kJshell = "/usr/bin/jshell";

// Whether `node <flag> -e ""` exits 0 (node refuses flags it does not know
// with exit code 9). Output goes to /dev/null.
bool NodeTakes(const char* flag) {
  posix_spawn_file_actions_t actions;
  if (posix_spawn_file_actions_init(&actions) != 0) return false;
  for (int fd = 0; fd <= 2; ++fd) posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", O_RDWR, 0);
  const char* argv[] = {kNode, flag, "-e", "", nullptr};
  const char* envp[] = {"PATH=/usr/bin:/bin", "HOME=/tmp", nullptr};
  pid_t pid = -1;
  int rc = posix_spawn(&pid, kNode, &actions, nullptr, const_cast<char* const*>(argv), const_cast<char* const*>(envp));
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return false;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace

std::string HostLanguages::Missing(profile::Language language) const {
  switch (language) {
    case profile::Language::kJavaScript:
      return javascript ? "" : "javascript needs " + std::string(kNode) +
                                   " on the server's host, and it is not there (apt-get install nodejs)";
    case profile::Language::kBash:
      return bash ? "" : "bash needs " + std::string(kBash) + " on the server's host, and it is not there";
    case profile::Language::kTypeScript:
      return typescript ? "" : "typescript needs " + std::string(kNode) + " and Debian's TypeScript compiler (" +
                                   kTypeScriptModule + ") on the server's host, and they are not there " +
                                   "(apt-get install nodejs node-typescript)";
    case profile::Language::kR:
      return r ? "" : "r needs " + std::string(kRscript) + " on the server's host, and it is not there " +
                          "(apt-get install r-base-core)";
    case profile::Language::kJava:
      return java ? "" : "java needs " + std::string(kJava) + " and " + kJshell + " (the jdk.jshell module) on the "
                             "server's host, and they are not there (apt-get install default-jdk-headless)";
    case profile::Language::kPython:
      break;
  }
  return "";
}

HostLanguages ProbeHostLanguages(const std::vector<profile::Language>& wanted) {
  auto wants = [&](profile::Language l) { return std::find(wanted.begin(), wanted.end(), l) != wanted.end(); };
  HostLanguages h;
  const bool node = (wants(profile::Language::kJavaScript) || wants(profile::Language::kTypeScript)) &&
                    ::access(kNode, X_OK) == 0;
  if (node) {
    h.javascript = wants(profile::Language::kJavaScript);
    if (NodeTakes("--disable-wasm-trap-handler")) h.node_flags.push_back("--disable-wasm-trap-handler");
  }
  h.typescript = node && wants(profile::Language::kTypeScript) &&
                 ::access((std::string(kTypeScriptModule) + "/package.json").c_str(), R_OK) == 0;
  h.bash = wants(profile::Language::kBash) && ::access(kBash, X_OK) == 0;
  h.r = wants(profile::Language::kR) && ::access(kRscript, X_OK) == 0;
  h.java = wants(profile::Language::kJava) && ::access(kJava, X_OK) == 0 && ::access(kJshell, X_OK) == 0;
  return h;
}

LanguageRuntime RuntimeOf(profile::Language language, const HostLanguages& host) {
  switch (language) {
    case profile::Language::kJavaScript: {
      LanguageRuntime rt{"/sandbox/main.js", "main.js", {kNode}};
      rt.program.insert(rt.program.end(), host.node_flags.begin(), host.node_flags.end());
      rt.program.push_back(rt.code_path);
      return rt;
    }
    case profile::Language::kBash:
      return {"/sandbox/main.sh", "main.sh", {kBash, "/sandbox/main.sh"}};
    case profile::Language::kPython:
    case profile::Language::kTypeScript:  // contexts only (service/kernels.h)
    case profile::Language::kR:
    case profile::Language::kJava:
      break;
  }
  return {"/sandbox/main.py", "main.py", {}};
}

}  // namespace airlock::service
