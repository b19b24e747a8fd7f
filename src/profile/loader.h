// Loading profiles from YAML files (the fips-agents schema, extended). The
// shipped files in profiles/ document every key; in short:
//
//   name: data-science            # optional; must equal the file's stem
//   description: >                # free text
//   extends: minimal              # inherit from another profile
//   imports:
//     allowed: [math, json]       # root profile: the allowlist ("*": any)
//     additional: [numpy]         # child profile: added to the parent's
//   imports: any                  # (alternative) no allowlist
//   blocklist: [[numpy, ctypeslib]]
//   preimport: [numpy]
//   resources: {memory: 512Mi, cpu: 500m, timeout_max: 30, timeout_default: 10,
//               pids: 32, disk: 64Mi, output: 51200, cpu_time: 20}
//   scan_stages: {pre: [ast_scan, blocklist_audit], post: []}
//   audit: {mode: {ast_scan: enforce, blocklist_audit: enforce,
//                  audit_patterns: observe, runtime_imports: enforce}}
//   languages: [python, javascript, bash]   # or `language: python`; the first is the default
//   language_resources: {javascript: {memory: 1Gi}}  # a language's own limits over `resources`
//   network: none
//   files: {max_in_bytes: 10Mi, max_out_bytes: 10Mi, max_out_files: 64}
//   matplotlib: false
//
// Inheritance (`extends`): a child starts from its parent's resolved values.
// imports.additional adds to the parent's allowlist; blocklist and preimport
// are the parent's entries then the child's; in resources, files and
// audit.mode a key the child sets replaces the parent's, key by key; every
// other key the child sets (description, scan_stages.pre/post, languages,
// network, matplotlib) replaces the parent's value. Missing keys in a root
// profile take the defaults of the Profile struct (profile.h).
//
// Everything is checked: an unknown key (a typo) is an error listing the valid
// keys, and so is a value of the wrong type or out of range, an unknown scan
// stage, an unknown parent or a cycle of extends. Messages name the file, the
// line, the key path and what to write instead:
//   profiles/data-science.yaml:12: resources.memory: '12Qi' is not a size (use 256Mi, 1Gi, or
//   bytes)
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "profile/profile.h"

namespace airlock::profile {

// A profile file larger than this is rejected before it is parsed.
inline constexpr size_t kMaxProfileFileBytes = 1 << 20;
// At most this many profiles in a directory, and this many levels of extends.
inline constexpr size_t kMaxProfiles = 256;
inline constexpr size_t kMaxExtendsDepth = 16;

// Loads every `*.yaml` file of `dir` (not subdirectories, not hidden files),
// resolves extends, validates. At least one profile must be there. The
// default of the set is "minimal" when present.
StatusOr<ProfileSet> LoadProfiles(const std::string& dir);

struct ProfileSource {
  std::string filename;  // for messages, and the stem must equal `name`
  std::string text;      // the YAML
};
// LoadProfiles without the file system: the sources may extend each other.
StatusOr<ProfileSet> ParseProfiles(const std::vector<ProfileSource>& sources);

// One self-contained profile (no `extends`: there is nothing to resolve it
// against; an extends is an error saying so). For tests and the fuzzer.
StatusOr<Profile> ParseProfileYaml(std::string_view yaml, std::string filename);

// Where the server looks for profiles when none is given on the command line:
// <dir of the executable>/../share/airlock/profiles when that directory exists
// (an installed airlock), else the source tree's profiles/ (a build tree).
std::string DefaultProfilesDir();

}  // namespace airlock::profile
