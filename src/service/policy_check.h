// The analyzer's verdict on one request's code under a profile: which
// findings refuse it, which are only reported, and, for a refusal, which of
// the server's profiles would have run it (so an agent that is refused learns
// where its code runs: "import of 'numpy' is not allowed ... in profile
// 'minimal'; allowed in: data-science, general, visualization").
//
//   PolicyFindings f = CheckPolicy(analyzer, profile, code);
//   if (auto syntax = TakeSyntaxError(&f)) ... run it to have Python's own SyntaxError
//   if (!f.rejecting.empty()) NameAllowingProfiles(analyzers, profiles, profile.name, code, &f.rejecting);
//
// The analyzer is policy and early feedback, never the boundary (the kernel
// layers are).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analyzer/analyzer.h"
#include "model/execute.h"
#include "profile/profile.h"

namespace airlock::service {

using AnalyzerMap = std::map<std::string, analyzer::Analyzer, std::less<>>;  // by profile name

struct PolicyFindings {
  std::vector<model::Violation> rejecting;  // errors of enforced stages: the code is refused (or held)
  std::vector<model::Violation> warnings;   // everything else the profile's stages report
};

// The findings of `analyzer` (the profile's) on `code`, sorted by the
// profile's scan stages and their modes.
PolicyFindings CheckPolicy(const analyzer::Analyzer& analyzer, const profile::Profile& p, std::string_view code);

// Invisible characters (Unicode Cf, bidirectional controls) in code the
// analyzer does not read (another language): what a person is shown is not
// what runs, so they are reported all the same, as warnings.
std::vector<model::Violation> InvisibleCharacterWarnings(std::string_view code);

// When a rejecting finding is a syntax error (rules syntax, encoding,
// nesting): removes it and returns it, and moves the other rejecting findings
// to the warnings. Code that does not compile is never run, so the server
// lets Python compile it (model::RunnerConfig::syntax_check) and answers with
// Python's own SyntaxError, the same error object whatever the profile.
std::optional<model::Violation> TakeSyntaxError(PolicyFindings* findings);

// Sets `allowed_in` of each violation (the findings that refused the code
// under profile `refused_by`): the other Python profiles of `profiles` under
// which that finding would not refuse it, named at the end of its message
// and compat form too.
void NameAllowingProfiles(const AnalyzerMap& analyzers, const profile::ProfileSet& profiles,
                          const std::string& refused_by, std::string_view code,
                          std::vector<model::Violation>* rejecting);

}  // namespace airlock::service
