// The only file of airlock that knows YAML (yaml-cpp). It turns text into the
// plain Profile of profile.h in three steps:
//   1. Parse: one file's YAML into a Parsed, every key checked for type and
//      range, every value remembered with the line it came from;
//   2. Resolve: apply a Parsed on top of its parent's resolved profile;
//   3. Check: rules across keys (timeout_default <= timeout_max, ...), with
//      the line of whichever file set the value.
#include "profile/loader.h"

#include <dirent.h>
#include <sys/stat.h>
#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "base/fs.h"
#include "profile/units.h"

#ifndef AIRLOCK_SOURCE_PROFILES_DIR
#define AIRLOCK_SOURCE_PROFILES_DIR "profiles"
#endif

namespace airlock::profile {
namespace {

// Single-value bounds. They catch slips (a memory of 256 bytes, a timeout of
// a week), not policy: policy is the operator's.
constexpr int64_t kMinMemoryBytes = 16ll << 20;  // CPython needs about 10 MiB to start
constexpr int64_t kMinDiskBytes = 1ll << 20;
constexpr double kMaxTimeoutSeconds = 86400;
constexpr int64_t kMaxPids = 4194304;  // the kernel's pid_max ceiling
// Files returned by a run travel as events on its result channel (one line
// each, base64), which is bounded (model/runner_protocol.h): these keep a
// profile inside what that channel carries.
constexpr int64_t kMaxOutFiles = 128;
constexpr int64_t kMaxOutBytes = 64ll << 20;
constexpr double kDefaultTimeoutSeconds = 10;
constexpr size_t kMaxStringBytes = 64 * 1024;
constexpr size_t kMaxNameBytes = 128;

// ---------------------------------------------------------------------------
// Small text helpers.

std::string Quote(std::string_view text) { return QuoteForMessage(text); }

std::string Join(const std::vector<std::string_view>& items, std::string_view sep = ", ") {
  std::string out;
  for (std::string_view s : items) {
    if (!out.empty()) out += sep;
    out += s;
  }
  return out;
}

bool IsIdentifier(std::string_view s) {
  if (s.empty() || s.size() > kMaxNameBytes) return false;
  auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  if (!alpha(s[0])) return false;
  for (char c : s) {
    if (!alpha(c) && !(c >= '0' && c <= '9')) return false;
  }
  return true;
}

// "scipy.io": identifiers joined by dots.
bool IsDottedName(std::string_view s) {
  if (s.empty() || s.size() > kMaxNameBytes) return false;
  size_t start = 0;
  for (;;) {
    size_t dot = s.find('.', start);
    if (!IsIdentifier(s.substr(start, dot == std::string_view::npos ? s.npos : dot - start))) {
      return false;
    }
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

// Profile names travel in URLs, requests and file names: keep them plain.
bool IsProfileName(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  auto ok = [](char c, bool first) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || (!first && (c == '-' || c == '_'));
  };
  for (size_t i = 0; i < s.size(); ++i) {
    if (!ok(s[i], i == 0)) return false;
  }
  return true;
}

std::string Stem(const std::string& filename) {
  std::string base = filename.substr(filename.rfind('/') + 1);  // npos + 1 == 0
  constexpr std::string_view kExt = ".yaml";
  if (base.size() > kExt.size() &&
      base.compare(base.size() - kExt.size(), kExt.size(), kExt) == 0) {
    return base.substr(0, base.size() - kExt.size());
  }
  return base;
}

bool HasYamlExtension(const std::string& filename) {
  return Stem(filename) + ".yaml" == filename.substr(filename.rfind('/') + 1);
}

// "file:12: " or "file: " when the line is unknown.
std::string Where(const std::string& file, int line) {
  return line > 0 ? file + ":" + std::to_string(line) + ": " : file + ": ";
}

// ---------------------------------------------------------------------------
// Step 1: one file.

struct Origin {
  std::string file;
  int line = 0;
};
// Key path ("resources.memory") -> where its value was set.
using Origins = std::map<std::string, Origin, std::less<>>;

// The keys of one `resources` block, each unset until the file sets it.
struct ResourceFields {
  std::optional<int64_t> memory, pids, disk, output;
  std::optional<double> cpu, timeout_max, timeout_default, cpu_time;
};

struct Parsed {
  std::string file;
  Origins origins;
  std::string name;
  std::optional<std::string> description;
  std::optional<std::string> extends;
  bool imports_any = false;
  std::optional<std::vector<std::string>> allowed;
  std::optional<std::vector<std::string>> additional;
  std::vector<BlocklistEntry> blocklist;
  std::vector<std::string> preimport;
  ResourceFields res;
  std::map<Language, ResourceFields> language_res;  // language_resources.<language>
  std::optional<std::vector<ScanStage>> pre, post;
  std::optional<AuditMode> mode_ast, mode_blocklist, mode_patterns, mode_runtime;
  std::optional<std::vector<Language>> languages;
  std::optional<Network> network;
  std::optional<int64_t> max_in, max_out, max_out_files;
  std::optional<double> session_idle, session_max_idle, session_ttl, session_max_ttl;
  std::optional<bool> matplotlib;
  std::optional<ApprovalPolicy> approval_policy;
  std::optional<std::vector<std::string>> approval_rules;
  std::optional<double> approval_expires;
  std::optional<bool> approval_self;
};

using KeyFn = std::function<Status(const std::string& path, const YAML::Node& value, int line)>;

class FileParser {
 public:
  explicit FileParser(std::string file) { p_.file = std::move(file); }

  StatusOr<Parsed> Parse(std::string_view text) {
    if (text.size() > kMaxProfileFileBytes) {
      return InvalidArgument(p_.file + ": the file is " + std::to_string(text.size()) +
                             " bytes, more than the " + std::to_string(kMaxProfileFileBytes) +
                             " a profile may have");
    }
    if (size_t nul = text.find('\0'); nul != text.npos) {
      return InvalidArgument(p_.file + ": a NUL byte at offset " + std::to_string(nul) +
                             "; a profile is a YAML text file");
    }
    // yaml-cpp reports bad input by throwing; nothing else here throws except
    // std::bad_alloc, which is caught too so a fuzzer's input cannot abort.
    try {
      const std::string input(text);
      RETURN_IF_ERROR(CheckOneDocument(input));
      YAML::Node root = YAML::Load(input);
      if (root.IsNull()) {
        return InvalidArgument(p_.file +
                               ": the profile is empty (expected keys such as "
                               "name, imports, resources)");
      }
      RETURN_IF_ERROR(ParseRoot(root));
    } catch (const YAML::DeepRecursion& e) {
      return InvalidArgument(Where(p_.file, e.mark.is_null() ? 0 : e.mark.line + 1) +
                             "invalid YAML: nested more than " + std::to_string(e.depth()) +
                             " levels deep");
    } catch (const YAML::Exception& e) {
      int line = e.mark.is_null() ? 0 : e.mark.line + 1;
      std::string where = Where(p_.file, line);
      return InvalidArgument(
          where + "invalid YAML: " + e.msg +
          (e.mark.is_null() ? "" : " (column " + std::to_string(e.mark.column + 1) + ")"));
    } catch (const std::exception& e) {
      return InvalidArgument(p_.file + ": cannot parse the profile: " + e.what());
    }
    return std::move(p_);
  }

 private:
  // Events of a parse, of which only the document starts matter.
  class DocumentStarts : public YAML::EventHandler {
   public:
    std::vector<YAML::Mark> marks;
    void OnDocumentStart(const YAML::Mark& mark) override { marks.push_back(mark); }
    void OnDocumentEnd() override {}
    void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
    void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
    void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  const std::string&) override {}
    void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                         YAML::EmitterStyle::value) override {}
    void OnSequenceEnd() override {}
    void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                    YAML::EmitterStyle::value) override {}
    void OnMapEnd() override {}
  };

  // YAML::Load reads the first document and ignores the rest, which would let
  // a stray `---` hide half a profile; so count them first. Not with
  // YAML::LoadAll: yaml-cpp 0.7 loops forever (allocating) on a document that
  // starts with a stray ',' (jbeder/yaml-cpp#1040, fixed upstream by #1319),
  // because the parser reports a new empty document without consuming the
  // token. The loop below is bounded, and a document that starts where the
  // previous one did is that case.
  Status CheckOneDocument(const std::string& input) const {
    std::istringstream stream(input);
    YAML::Parser parser(stream);
    DocumentStarts starts;
    for (int i = 0; i < 3 && parser.HandleNextDocument(starts); ++i) {
    }
    if (starts.marks.size() < 2) return Status::Ok();
    const YAML::Mark& second = starts.marks[1];
    if (second.pos == starts.marks[0].pos) {
      return ErrAt(second.line + 1, "",
                   "invalid YAML: unexpected character (column " +
                       std::to_string(second.column + 1) +
                       "); a ',' or other flow indicator outside [ ] or { } must be quoted");
    }
    return ErrAt(second.line + 1, "",
                 "a second YAML document starts here; a profile is one document (remove the ---)");
  }

  static int LineOf(const YAML::Node& n, int fallback) {
    YAML::Mark m = n.Mark();
    return m.is_null() || m.line < 0 ? fallback : m.line + 1;
  }

  Status Err(const YAML::Node& n, int fallback_line, std::string_view path, std::string msg) const {
    return ErrAt(LineOf(n, fallback_line), path, std::move(msg));
  }
  Status ErrAt(int line, std::string_view path, std::string msg) const {
    std::string out = Where(p_.file, line);
    if (!path.empty()) out += std::string(path) + ": ";
    return InvalidArgument(out + msg);
  }

  void Note(const std::string& path, const YAML::Node& n, int fallback_line) {
    p_.origins[path] = Origin{p_.file, LineOf(n, fallback_line)};
  }

  static std::string Describe(const YAML::Node& n) {
    switch (n.Type()) {
      case YAML::NodeType::Null:
        return "nothing";
      case YAML::NodeType::Scalar:
        return Quote(n.Scalar());
      case YAML::NodeType::Sequence:
        return "a list";
      case YAML::NodeType::Map:
        return "a mapping";
      default:
        return "an undefined value";
    }
  }

  // Walks a mapping: `fn` sees every key's full path, value and line. An
  // unknown or repeated key is an error; so is a non-mapping (null counts as
  // an empty mapping: "resources:" with nothing under it).
  Status ForEachKey(const YAML::Node& map, int line, const std::string& path,
                    const std::vector<std::string_view>& valid, const KeyFn& fn,
                    std::string_view hint = "") {
    if (map.IsNull()) return Status::Ok();
    if (!map.IsMap()) {
      return Err(map, line, path,
                 "expected a mapping (" + std::string(hint.empty() ? Join(valid) : hint) +
                     "), got " + Describe(map));
    }
    std::set<std::string, std::less<>> seen;
    for (auto it = map.begin(); it != map.end(); ++it) {
      // Copies: the iterator hands out a temporary pair.
      const YAML::Node key = it->first;
      const YAML::Node value = it->second;
      const int key_line = LineOf(key, line);
      if (!key.IsScalar()) {
        return ErrAt(key_line, path, "a key must be a plain name, got " + Describe(key));
      }
      const std::string& name = key.Scalar();
      std::string key_path = path.empty() ? name : path + "." + name;
      if (std::find(valid.begin(), valid.end(), name) == valid.end()) {
        // An unknown key can be anything; quote an odd one (bounded, printable).
        if (!IsIdentifier(name)) key_path = path.empty() ? Quote(name) : path + "." + Quote(name);
        if (name == "subprocess_memory_mb" && path == "resources") {
          return ErrAt(key_line, key_path,
                       "not used by airlock: the whole run is limited by resources.memory "
                       "(a cgroup); remove this key");
        }
        return ErrAt(key_line, key_path, "unknown key (valid keys: " + Join(valid) + ")");
      }
      if (!seen.insert(name).second) {
        return ErrAt(key_line, key_path, "the key is given twice; keep one");
      }
      RETURN_IF_ERROR(fn(key_path, value, key_line));
    }
    return Status::Ok();
  }

  StatusOr<std::string> Text(const std::string& path, const YAML::Node& v, int line,
                             std::string_view expected) const {
    if (!v.IsScalar())
      return Err(v, line, path, "expected " + std::string(expected) + ", got " + Describe(v));
    const std::string& s = v.Scalar();
    if (s.size() > kMaxStringBytes) {
      return Err(v, line, path,
                 "the value is longer than " + std::to_string(kMaxStringBytes) + " bytes");
    }
    if (!IsValidUtf8(s)) return Err(v, line, path, "the value is not valid UTF-8");
    return s;
  }

  // A list of scalars, each checked by `check`. Null counts as empty.
  Status List(const std::string& path, const YAML::Node& v, int line, std::string_view what,
              std::string_view item_what, std::string_view example,
              const std::function<Status(const std::string& item_path, const std::string& text,
                                         const YAML::Node& item, int item_line)>& fn) const {
    if (v.IsNull()) return Status::Ok();
    if (!v.IsSequence()) {
      return Err(v, line, path,
                 "expected a list of " + std::string(what) + ", got " + Describe(v) + " (write " +
                     std::string(example) + ")");
    }
    size_t i = 0;
    for (auto it = v.begin(); it != v.end(); ++it, ++i) {
      const YAML::Node item = *it;
      std::string item_path = path + "[" + std::to_string(i) + "]";
      int item_line = LineOf(item, line);
      ASSIGN_OR_RETURN(std::string text, Text(item_path, item, item_line, item_what));
      RETURN_IF_ERROR(fn(item_path, text, item, item_line));
    }
    return Status::Ok();
  }

  Status ModuleList(const std::string& path, const YAML::Node& v, int line,
                    std::vector<std::string>* out) const {
    return List(path, v, line, "module names", "a module name",
                "[numpy, pandas] or one '- numpy' line per module",
                [&](const std::string& item_path, const std::string& text, const YAML::Node& item,
                    int item_line) -> Status {
                  if (!IsDottedName(text)) {
                    return Err(item, item_line, item_path,
                               Quote(text) + " is not a module name (e.g. numpy or scipy.io)");
                  }
                  out->push_back(text);
                  return Status::Ok();
                });
  }

  // `languages: [python, javascript, bash]`, or `language: python` (one).
  Status ParseLanguages(const std::string& key, const YAML::Node& v, int line) {
    if (p_.languages) {
      return Err(v, line, key, "`language` and `languages` are one setting: write only `languages: [...]`");
    }
    std::vector<Language> out;
    auto add = [&](const std::string& path, const std::string& text, const YAML::Node& item, int item_line) -> Status {
      std::optional<Language> l = LanguageFromName(text);
      if (!l) return Err(item, item_line, path, Quote(text) + " is not supported (supported: python, javascript, typescript, r, java, bash)");
      if (std::find(out.begin(), out.end(), *l) == out.end()) out.push_back(*l);
      return Status::Ok();
    };
    if (v.IsScalar()) {
      ASSIGN_OR_RETURN(std::string text, Text(key, v, line, "a language name"));
      RETURN_IF_ERROR(add(key, text, v, line));
    } else {
      RETURN_IF_ERROR(List(key, v, line, "language names", "a language name", "[python, javascript, bash]", add));
    }
    if (out.empty()) return Err(v, line, key, "at least one language is needed (e.g. [python])");
    p_.languages = std::move(out);
    return Status::Ok();
  }

  Status ParseRoot(const YAML::Node& root) {
    if (!root.IsMap()) {
      return Err(root, 1, "",
                 "a profile is a mapping of keys (name: ..., imports: ...), got " + Describe(root));
    }
    std::optional<int> name_line;
    RETURN_IF_ERROR(ForEachKey(
        root, 1, "",
        {"name", "description", "extends", "imports", "blocklist", "preimport", "resources",
         "scan_stages", "audit", "language", "languages", "language_resources", "network", "files", "sessions", "matplotlib", "approval"},
        [&](const std::string& key, const YAML::Node& v, int line) -> Status {
          Note(key, v, line);
          if (key == "name") {
            ASSIGN_OR_RETURN(p_.name, Text(key, v, line, "a profile name"));
            name_line = LineOf(v, line);
            if (!IsProfileName(p_.name)) {
              return Err(v, line, key,
                         Quote(p_.name) +
                             " is not a profile name (lowercase letters, "
                             "digits, '-' and '_', at most 64)");
            }
          } else if (key == "description") {
            if (v.IsNull()) {
              p_.description = "";
            } else {
              ASSIGN_OR_RETURN(p_.description, Text(key, v, line, "text"));
            }
          } else if (key == "extends") {
            ASSIGN_OR_RETURN(std::string parent, Text(key, v, line, "the name of another profile"));
            if (!IsProfileName(parent)) {
              return Err(v, line, key, Quote(parent) + " is not a profile name");
            }
            p_.extends = parent;
          } else if (key == "imports") {
            return ParseImports(key, v, line);
          } else if (key == "blocklist") {
            return ParseBlocklist(key, v, line);
          } else if (key == "preimport") {
            return ModuleList(key, v, line, &p_.preimport);
          } else if (key == "resources") {
            return ParseResources(key, v, line, &p_.res);
          } else if (key == "language_resources") {
            return ParseLanguageResources(key, v, line);
          } else if (key == "scan_stages") {
            return ParseScanStages(key, v, line);
          } else if (key == "audit") {
            return ForEachKey(v, line, key, {"mode"},
                              [&](const std::string& k, const YAML::Node& mv, int l) {
                                Note(k, mv, l);
                                return ParseAuditModes(k, mv, l);
                              });
          } else if (key == "language" || key == "languages") {
            return ParseLanguages(key, v, line);
          } else if (key == "network") {
            std::string net = v.IsScalar() ? v.Scalar() : Describe(v);
            if (!v.IsScalar() || net != "none") {
              return Err(v, line, key,
                         "only 'none' is supported, got " + Quote(net) +
                             " (a run gets a loopback interface and nothing else)");
            }
            p_.network = Network::kNone;
          } else if (key == "files") {
            return ParseFiles(key, v, line);
          } else if (key == "sessions") {
            return ParseSessions(key, v, line);
          } else if (key == "matplotlib") {
            ASSIGN_OR_RETURN(p_.matplotlib, Bool(key, v, line));
          } else if (key == "approval") {
            return ParseApproval(key, v, line);
          }
          return Status::Ok();
        }));
    const std::string stem = Stem(p_.file);
    if (name_line) {
      if (HasYamlExtension(p_.file) && p_.name != stem) {
        return ErrAt(*name_line, "name",
                     Quote(p_.name) + " differs from the file name " + Quote(stem + ".yaml") +
                         "; a profile is named after its file: rename one of them");
      }
    } else {
      if (!IsProfileName(stem)) {
        return ErrAt(
            0, "name",
            "missing, and the file name " + Quote(stem) +
                " is not a profile name (lowercase letters, digits, '-' and '_'); add name:");
      }
      p_.name = stem;
    }
    return Status::Ok();
  }

  StatusOr<bool> Bool(const std::string& path, const YAML::Node& v, int line) const {
    ASSIGN_OR_RETURN(std::string s, Text(path, v, line, "true or false"));
    if (s == "true" || s == "True" || s == "TRUE") return true;
    if (s == "false" || s == "False" || s == "FALSE") return false;
    return Err(v, line, path, "expected true or false, got " + Quote(s));
  }

  Status ParseImports(const std::string& key, const YAML::Node& v, int line) {
    if (v.IsScalar()) {
      if (v.Scalar() == "any") {
        p_.imports_any = true;
        return Status::Ok();
      }
      return Err(v, line, key,
                 "expected 'any' or a mapping (allowed: [...] in a root profile, additional: "
                 "[...] in one that extends another), got " +
                     Describe(v));
    }
    RETURN_IF_ERROR(ForEachKey(v, line, key, {"allowed", "additional"},
                               [&](const std::string& k, const YAML::Node& list, int l) -> Status {
                                 Note(k, list, l);
                                 if (k == "imports.allowed") {
                                   if (list.IsScalar() && list.Scalar() == "*") {
                                     p_.imports_any = true;
                                     return Status::Ok();
                                   }
                                   p_.allowed.emplace();
                                   return ModuleList(k, list, l, &*p_.allowed);
                                 }
                                 p_.additional.emplace();
                                 return ModuleList(k, list, l, &*p_.additional);
                               }));
    if ((p_.allowed || p_.imports_any) && p_.additional) {
      return ErrAt(p_.origins["imports.additional"].line, "imports.additional",
                   "give either imports.allowed (the whole list) or imports.additional (added to "
                   "the parent's), not both");
    }
    return Status::Ok();
  }

  Status ParseBlocklist(const std::string& key, const YAML::Node& v, int line) {
    if (v.IsNull()) return Status::Ok();
    constexpr std::string_view kForm = "[module, attribute], e.g. [pandas, read_pickle]";
    if (!v.IsSequence()) {
      return Err(v, line, key, "expected a list of " + std::string(kForm) + ", got " + Describe(v));
    }
    size_t i = 0;
    for (auto it = v.begin(); it != v.end(); ++it, ++i) {
      const YAML::Node entry = *it;
      std::string path = key + "[" + std::to_string(i) + "]";
      int l = LineOf(entry, line);
      if (!entry.IsSequence() || entry.size() != 2 || !entry[0].IsScalar() ||
          !entry[1].IsScalar()) {
        return ErrAt(l, path, "expected " + std::string(kForm) + ", got " + Describe(entry));
      }
      BlocklistEntry e{entry[0].Scalar(), entry[1].Scalar()};
      if (!IsDottedName(e.module)) {
        return ErrAt(l, path, Quote(e.module) + " is not a module name (e.g. numpy or scipy.io)");
      }
      if (!IsIdentifier(e.attr)) {
        return ErrAt(l, path, Quote(e.attr) + " is not an attribute name (e.g. read_pickle)");
      }
      p_.blocklist.push_back(std::move(e));
    }
    return Status::Ok();
  }

  StatusOr<int64_t> Size(const std::string& path, const YAML::Node& v, int line,
                         int64_t min) const {
    ASSIGN_OR_RETURN(std::string s, Text(path, v, line, "a size (256Mi, 1Gi, or bytes)"));
    StatusOr<int64_t> bytes = ParseSize(s);
    if (!bytes.ok()) return Err(v, line, path, bytes.status().message());
    if (*bytes < min) {
      return Err(v, line, path, Quote(s) + " is below the minimum " + FormatSize(min));
    }
    return *bytes;
  }

  StatusOr<double> Seconds(const std::string& path, const YAML::Node& v, int line,
                           double max) const {
    ASSIGN_OR_RETURN(std::string s, Text(path, v, line, "a number of seconds"));
    StatusOr<double> secs = ParseSeconds(s);
    if (!secs.ok()) return Err(v, line, path, secs.status().message());
    if (!(*secs > 0 && *secs <= max)) {
      return Err(
          v, line, path,
          Quote(s) + " is out of range (more than 0, at most " + FormatNumber(max) + " seconds)");
    }
    return *secs;
  }

  StatusOr<int64_t> Count(const std::string& path, const YAML::Node& v, int line, int64_t min,
                          int64_t max) const {
    ASSIGN_OR_RETURN(std::string s, Text(path, v, line, "a whole number"));
    int64_t n = 0;
    bool digits = !s.empty() && s.size() <= 18 &&
                  std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits) return Err(v, line, path, Quote(s) + " is not a whole number");
    for (char c : s) n = n * 10 + (c - '0');
    if (n < min || n > max) {
      return Err(v, line, path,
                 Quote(s) + " is out of range (" + std::to_string(min) + " to " +
                     std::to_string(max) + ")");
    }
    return n;
  }

  // `resources`, or one language's block of `language_resources` (same keys).
  Status ParseResources(const std::string& key, const YAML::Node& v, int line, ResourceFields* out) {
    return ForEachKey(
        v, line, key,
        {"memory", "cpu", "timeout_max", "timeout_default", "pids", "disk", "output", "cpu_time"},
        [&](const std::string& k, const YAML::Node& val, int l) -> Status {
          Note(k, val, l);
          const std::string field = k.substr(key.size() + 1);
          if (field == "memory") {
            ASSIGN_OR_RETURN(out->memory, Size(k, val, l, kMinMemoryBytes));
          } else if (field == "cpu") {
            ASSIGN_OR_RETURN(std::string s, Text(k, val, l, "a CPU amount (500m, 1.5, 2)"));
            StatusOr<double> cores = ParseCpu(s);
            if (!cores.ok()) return Err(val, l, k, cores.status().message());
            out->cpu = *cores;
          } else if (field == "timeout_max") {
            ASSIGN_OR_RETURN(out->timeout_max, Seconds(k, val, l, kMaxTimeoutSeconds));
          } else if (field == "timeout_default") {
            ASSIGN_OR_RETURN(out->timeout_default, Seconds(k, val, l, kMaxTimeoutSeconds));
          } else if (field == "cpu_time") {
            ASSIGN_OR_RETURN(out->cpu_time, Seconds(k, val, l, kMaxTimeoutSeconds * 1024));
          } else if (field == "pids") {
            ASSIGN_OR_RETURN(out->pids, Count(k, val, l, 1, kMaxPids));
          } else if (field == "disk") {
            ASSIGN_OR_RETURN(out->disk, Size(k, val, l, kMinDiskBytes));
          } else if (field == "output") {
            ASSIGN_OR_RETURN(out->output, Size(k, val, l, 1));
          }
          return Status::Ok();
        });
  }

  // language_resources: {javascript: {memory: 1Gi, ...}, bash: {...}}.
  Status ParseLanguageResources(const std::string& key, const YAML::Node& v, int line) {
    return ForEachKey(v, line, key, {"python", "javascript", "bash"},
                      [&](const std::string& k, const YAML::Node& val, int l) -> Status {
                        Note(k, val, l);
                        Language language = *LanguageFromName(k.substr(key.size() + 1));
                        return ParseResources(k, val, l, &p_.language_res[language]);
                      });
  }

  Status ParseStages(const std::string& path, const YAML::Node& v, int line, bool post,
                     std::vector<ScanStage>* out) const {
    return List(path, v, line, "stage names", "a stage name", "[ast_scan, blocklist_audit]",
                [&](const std::string& item_path, const std::string& text, const YAML::Node& item,
                    int item_line) -> Status {
                  std::optional<ScanStage> stage = ScanStageFromName(text);
                  if (post) {
                    return Err(item, item_line, item_path,
                               "unknown stage " + Quote(text) +
                                   " (no post-execution stage exists yet; write post: [])");
                  }
                  if (!stage) {
                    return Err(item, item_line, item_path,
                               "unknown stage " + Quote(text) +
                                   " (stages: ast_scan, blocklist_audit, audit_patterns)");
                  }
                  if (std::find(out->begin(), out->end(), *stage) != out->end()) {
                    return Err(item, item_line, item_path, Quote(text) + " is listed twice");
                  }
                  out->push_back(*stage);
                  return Status::Ok();
                });
  }

  Status ParseScanStages(const std::string& key, const YAML::Node& v, int line) {
    return ForEachKey(v, line, key, {"pre", "post"},
                      [&](const std::string& k, const YAML::Node& list, int l) -> Status {
                        Note(k, list, l);
                        bool post = k == "scan_stages.post";
                        auto& dest = post ? p_.post : p_.pre;
                        dest.emplace();
                        return ParseStages(k, list, l, post, &*dest);
                      });
  }

  Status ParseAuditModes(const std::string& key, const YAML::Node& v, int line) {
    return ForEachKey(
        v, line, key, {"ast_scan", "blocklist_audit", "audit_patterns", "runtime_imports"},
        [&](const std::string& k, const YAML::Node& val, int l) -> Status {
          Note(k, val, l);
          const bool runtime = k == "audit.mode.runtime_imports";
          const std::string_view choices =
              runtime ? "enforce or observe" : "enforce, observe or off";
          ASSIGN_OR_RETURN(std::string s, Text(k, val, l, choices));
          AuditMode mode;
          if (s == "enforce") {
            mode = AuditMode::kEnforce;
          } else if (s == "observe") {
            mode = AuditMode::kObserve;
          } else if (s == "off" && !runtime) {
            mode = AuditMode::kOff;
          } else {
            return Err(val, l, k, Quote(s) + " is not a mode (use " + std::string(choices) + ")");
          }
          if (k == "audit.mode.ast_scan") p_.mode_ast = mode;
          if (k == "audit.mode.blocklist_audit") p_.mode_blocklist = mode;
          if (k == "audit.mode.audit_patterns") p_.mode_patterns = mode;
          if (runtime) p_.mode_runtime = mode;
          return Status::Ok();
        });
  }

  Status ParseSessions(const std::string& key, const YAML::Node& v, int line) {
    return ForEachKey(v, line, key, {"idle_timeout", "max_idle_timeout", "ttl", "max_ttl"},
                      [&](const std::string& k, const YAML::Node& val, int l) -> Status {
                        Note(k, val, l);
                        ASSIGN_OR_RETURN(double secs, Seconds(k, val, l, 366.0 * 86400));
                        if (k == "sessions.idle_timeout") p_.session_idle = secs;
                        if (k == "sessions.max_idle_timeout") p_.session_max_idle = secs;
                        if (k == "sessions.ttl") p_.session_ttl = secs;
                        if (k == "sessions.max_ttl") p_.session_max_ttl = secs;
                        return Status::Ok();
                      });
  }

  Status ParseApproval(const std::string& key, const YAML::Node& v, int line) {
    return ForEachKey(
        v, line, key, {"policy", "rules", "expires", "self_approve"},
        [&](const std::string& k, const YAML::Node& val, int l) -> Status {
          Note(k, val, l);
          if (k == "approval.policy") {
            ASSIGN_OR_RETURN(std::string s, Text(k, val, l, "never, always or on_findings"));
            if (s == "never") {
              p_.approval_policy = ApprovalPolicy::kNever;
            } else if (s == "always") {
              p_.approval_policy = ApprovalPolicy::kAlways;
            } else if (s == "on_findings") {
              p_.approval_policy = ApprovalPolicy::kOnFindings;
            } else {
              return Err(val, l, k, Quote(s) + " is not a policy (use never, always or on_findings)");
            }
          } else if (k == "approval.rules") {
            std::vector<std::string> rules;
            RETURN_IF_ERROR(List(k, val, l, "analyzer rule ids", "a rule id", "[import-not-allowed, dunder]",
                                 [&](const std::string& item_path, const std::string& text, const YAML::Node& item,
                                     int item_line) -> Status {
                                   bool ok = !text.empty() && text.size() <= 64;
                                   for (char c : text) ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_');
                                   if (!ok) return Err(item, item_line, item_path, Quote(text) + " is not a rule id (like import-not-allowed)");
                                   rules.push_back(text);
                                   return Status::Ok();
                                 }));
            std::sort(rules.begin(), rules.end());
            rules.erase(std::unique(rules.begin(), rules.end()), rules.end());
            p_.approval_rules = std::move(rules);
          } else if (k == "approval.expires") {
            ASSIGN_OR_RETURN(p_.approval_expires, Seconds(k, val, l, 7.0 * 86400));
          } else {
            ASSIGN_OR_RETURN(p_.approval_self, Bool(k, val, l));
          }
          return Status::Ok();
        });
  }

  Status ParseFiles(const std::string& key, const YAML::Node& v, int line) {
    return ForEachKey(v, line, key, {"max_in_bytes", "max_out_bytes", "max_out_files"},
                      [&](const std::string& k, const YAML::Node& val, int l) -> Status {
                        Note(k, val, l);
                        if (k == "files.max_in_bytes") {
                          ASSIGN_OR_RETURN(p_.max_in, Size(k, val, l, 0));
                        } else if (k == "files.max_out_bytes") {
                          ASSIGN_OR_RETURN(p_.max_out, Size(k, val, l, 0));
                          if (*p_.max_out > kMaxOutBytes) {
                            return Err(val, l, k, FormatSize(*p_.max_out) + " is more than " + FormatSize(kMaxOutBytes) +
                                                      " (files are returned inside the JSON response)");
                          }
                        } else {
                          ASSIGN_OR_RETURN(p_.max_out_files, Count(k, val, l, 0, kMaxOutFiles));
                        }
                        return Status::Ok();
                      });
  }

  Parsed p_;
};

// ---------------------------------------------------------------------------
// Steps 2 and 3: inheritance and the rules across keys.

struct Resolved {
  Profile profile;
  Origins origins;  // the child's keys over the parent's
  // language_resources keys of the whole chain (a child's over its parent's),
  // applied on top of the resolved `resources` at the end.
  std::map<Language, ResourceFields> language_fields;
};

template <typename T>
void Over(std::optional<T>* dest, const std::optional<T>& v) {
  if (v) *dest = v;
}

void Over(ResourceFields* dest, const ResourceFields& v) {
  Over(&dest->memory, v.memory);
  Over(&dest->pids, v.pids);
  Over(&dest->disk, v.disk);
  Over(&dest->output, v.output);
  Over(&dest->cpu, v.cpu);
  Over(&dest->timeout_max, v.timeout_max);
  Over(&dest->timeout_default, v.timeout_default);
  Over(&dest->cpu_time, v.cpu_time);
}

// An error about a resolved value, at the file and line that set it; when
// that is a parent's file, the message says which profile inherited it.
Status ErrKey(const Resolved& r, std::string_view key, std::string msg) {
  auto it = r.origins.find(key);
  std::string where =
      it == r.origins.end() ? Where(r.profile.source, 0) : Where(it->second.file, it->second.line);
  std::string suffix;
  if (it != r.origins.end() && it->second.file != r.profile.source) {
    suffix = " (in profile '" + r.profile.name + "', which inherits it)";
  }
  return InvalidArgument(where + std::string(key) + ": " + msg + suffix);
}

void SortUnique(std::vector<std::string>* v) {
  std::sort(v->begin(), v->end());
  v->erase(std::unique(v->begin(), v->end()), v->end());
}

template <typename T>
void Set(T* dest, const std::optional<T>& v) {
  if (v) *dest = *v;
}

// Approval rules that hold code for a person when the profile refuses that
// code anyway at run time do nothing but make the person approve failures:
// the runtime import hook (audit.mode.runtime_imports: enforce) refuses every
// import the analyzer's "import-not-allowed" finds (the same allowlist).
// Empty: nothing wrong.
std::string ApprovalHoldsRefusedCode(const Profile& p) {
  if (p.any_import || p.audit.runtime_imports != AuditMode::kEnforce || !p.approval.Holds("import-not-allowed")) {
    return "";
  }
  return "'import-not-allowed' holds code for a person's approval, but this profile's runtime import hook "
         "(audit.mode.runtime_imports: enforce) refuses those same imports when the code runs, so approved code "
         "would fail at its first such import; remove the rule, add the modules to the profile's imports, or "
         "set audit.mode.runtime_imports: observe (the approval is then the check)";
}

// Issue 23.3: a profile's import allowlist and blocklist bind Python code
// only (the analyzer and the runner's import hook). A language that runs any
// program (bash runs `python3 -c 'import ctypes, subprocess'`; node can spawn
// it) next to them makes the profile say something it does not enforce: its
// description, its /profile view and an operator reading its YAML would all
// promise an allowlist that one `language` field walks around. Refused, saying
// where the contradiction comes from and what to write instead.
Status CheckImportsBindEveryLanguage(const Resolved& r, const Parsed& c) {
  const Profile& p = r.profile;
  std::vector<std::string_view> unbound;
  for (Language l : p.languages) {
    if (l != Language::kPython) unbound.push_back(LanguageName(l));
  }
  const bool allowlist = !p.any_import;
  if (unbound.empty() || (!allowlist && p.blocklist.empty())) return Status::Ok();
  std::string what;
  if (allowlist) {
    what = p.allowed_imports.empty() ? "an import allowlist that allows no module (no `imports: any`)"
                                     : "an import allowlist (" + std::to_string(p.allowed_imports.size()) +
                                           (p.allowed_imports.size() == 1 ? " module)" : " modules)");
  }
  if (!p.blocklist.empty()) {
    what += std::string(what.empty() ? "" : " and ") + "a blocklist (" + std::to_string(p.blocklist.size()) +
            (p.blocklist.size() == 1 ? " entry)" : " entries)");
  }
  // Point at what this profile wrote: its languages, else its imports or
  // blocklist (the other side came from a parent).
  std::string key = "languages";
  if (!c.languages) {
    if (!c.blocklist.empty()) key = "blocklist";
    if (c.allowed) key = "imports.allowed";
    if (c.additional) key = "imports.additional";
  }
  const std::string langs = Join(unbound);
  return ErrKey(r, key,
                "the profile allows " + langs + " and has " + what + ", which bind Python code only: " + langs +
                    " can run any program (bash runs `python3 -c 'import ctypes, subprocess'`), so the profile "
                    "would promise what it does not enforce. Either keep this profile Python-only (`languages: "
                    "[python]`) and serve " + langs + " from a profile with `imports: any` and no blocklist (as "
                    "`general` does, extending it if you like), or give this profile `imports: any` and no "
                    "blocklist, so that the kernel layers are all it claims");
}

StatusOr<Resolved> Resolve(const Resolved* parent, const Parsed& c) {
  Resolved r;
  if (parent != nullptr) r = *parent;
  for (const auto& [key, origin] : c.origins) r.origins[key] = origin;
  Profile& p = r.profile;
  p.name = c.name;
  p.source = c.file;
  p.extends = c.extends.value_or("");
  Set(&p.description, c.description);

  if (c.imports_any) {
    p.any_import = true;
    p.allowed_imports.clear();
  } else if (parent == nullptr) {
    if (c.additional) {
      return ErrKey(r, "imports.additional",
                    "only a profile that extends another adds imports; a root profile lists "
                    "them all in imports.allowed");
    }
    p.allowed_imports = c.allowed.value_or(std::vector<std::string>{});
  } else {
    if (c.allowed) {
      return ErrKey(r, "imports.allowed",
                    "a profile that extends another adds imports with imports.additional (the "
                    "parent's list is kept); imports.allowed is for a root profile");
    }
    if (c.additional) {
      if (p.any_import) {
        return ErrKey(r, "imports.additional",
                      "the parent '" + parent->profile.name +
                          "' allows any import already; remove imports.additional");
      }
      p.allowed_imports.insert(p.allowed_imports.end(), c.additional->begin(), c.additional->end());
    }
  }
  SortUnique(&p.allowed_imports);

  p.blocklist.insert(p.blocklist.end(), c.blocklist.begin(), c.blocklist.end());
  for (const std::string& m : c.preimport) {
    if (std::find(p.preimport.begin(), p.preimport.end(), m) == p.preimport.end()) {
      p.preimport.push_back(m);
    }
  }

  Resources& res = p.resources;
  auto apply = [](Resources* to, const ResourceFields& f) {
    Set(&to->memory_bytes, f.memory);
    Set(&to->cpu_cores, f.cpu);
    Set(&to->timeout_max_s, f.timeout_max);
    Set(&to->timeout_default_s, f.timeout_default);
    if (f.cpu_time) to->cpu_time_s = f.cpu_time;
    Set(&to->pids, f.pids);
    Set(&to->disk_bytes, f.disk);
    Set(&to->output_bytes, f.output);
  };
  apply(&res, c.res);
  // Unset anywhere in the chain: 10 s like the peer, but never above the ceiling.
  if (r.origins.find("resources.timeout_default") == r.origins.end()) {
    res.timeout_default_s = std::min(kDefaultTimeoutSeconds, res.timeout_max_s);
  }
  // Per language: the profile's resources with that language's keys over them.
  for (const auto& [language, fields] : c.language_res) Over(&r.language_fields[language], fields);
  p.language_resources.clear();
  for (const auto& [language, fields] : r.language_fields) {
    Resources lr = res;
    apply(&lr, fields);
    const std::string at = "language_resources." + std::string(LanguageName(language));
    if (!fields.timeout_default && lr.timeout_default_s > lr.timeout_max_s) lr.timeout_default_s = lr.timeout_max_s;
    if (lr.timeout_default_s > lr.timeout_max_s) {
      return ErrKey(r, at + ".timeout_default",
                    FormatNumber(lr.timeout_default_s) + " is above the timeout_max " +
                        FormatNumber(lr.timeout_max_s) + " this language gets; the default must be allowed");
    }
    p.language_resources.emplace_back(language, lr);
  }

  Set(&p.scan_stages.pre, c.pre);
  Set(&p.scan_stages.post, c.post);
  Set(&p.audit.ast_scan, c.mode_ast);
  Set(&p.audit.blocklist_audit, c.mode_blocklist);
  Set(&p.audit.audit_patterns, c.mode_patterns);
  Set(&p.audit.runtime_imports, c.mode_runtime);
  Set(&p.languages, c.languages);
  Set(&p.network, c.network);
  Set(&p.files.max_in_bytes, c.max_in);
  Set(&p.files.max_out_bytes, c.max_out);
  Set(&p.files.max_out_files, c.max_out_files);
  Set(&p.sessions.idle_timeout_s, c.session_idle);
  Set(&p.sessions.max_idle_timeout_s, c.session_max_idle);
  Set(&p.sessions.ttl_s, c.session_ttl);
  Set(&p.sessions.max_ttl_s, c.session_max_ttl);
  Set(&p.matplotlib, c.matplotlib);
  Set(&p.approval.policy, c.approval_policy);
  Set(&p.approval.rules, c.approval_rules);
  Set(&p.approval.expires_s, c.approval_expires);
  Set(&p.approval.self_approve, c.approval_self);

  // Rules across keys.
  if (res.timeout_default_s > res.timeout_max_s) {
    return ErrKey(r, "resources.timeout_default",
                  FormatNumber(res.timeout_default_s) + " is above resources.timeout_max (" +
                      FormatNumber(res.timeout_max_s) + "); the default must be allowed");
  }
  if (p.files.max_in_bytes > res.disk_bytes) {
    return ErrKey(r, "files.max_in_bytes",
                  FormatSize(p.files.max_in_bytes) + " is more than resources.disk (" +
                      FormatSize(res.disk_bytes) +
                      "): the files would not fit the working directory");
  }
  for (const std::string& m : p.preimport) {
    if (!p.AllowsImport(m)) {
      return ErrKey(r, "preimport",
                    Quote(m) + " is not an allowed import of this profile; add it to imports");
    }
  }
  if (std::string why = ApprovalHoldsRefusedCode(p); !why.empty()) return ErrKey(r, "approval.rules", why);
  if (p.matplotlib && !p.AllowsImport("matplotlib")) {
    return ErrKey(
        r, "matplotlib",
        "true, but matplotlib is not an allowed import of this profile; add it to imports");
  }
  RETURN_IF_ERROR(CheckImportsBindEveryLanguage(r, c));
  return r;
}

StatusOr<Parsed> ParseOne(const ProfileSource& src) {
  return FileParser(src.filename).Parse(src.text);
}

}  // namespace

StatusOr<ProfileSet> ParseProfiles(const std::vector<ProfileSource>& sources) {
  if (sources.empty()) return InvalidArgument("no profiles to load");
  if (sources.size() > kMaxProfiles) {
    return InvalidArgument(std::to_string(sources.size()) + " profiles; at most " +
                           std::to_string(kMaxProfiles) + " are supported");
  }
  std::vector<Parsed> parsed;
  std::map<std::string, size_t, std::less<>> by_name;
  for (const ProfileSource& src : sources) {
    ASSIGN_OR_RETURN(Parsed p, ParseOne(src));
    auto [it, inserted] = by_name.emplace(p.name, parsed.size());
    if (!inserted) {
      return InvalidArgument(Where(p.file, p.origins["name"].line) + "name: " + Quote(p.name) +
                             " is already the name of " + parsed[it->second].file);
    }
    parsed.push_back(std::move(p));
  }

  std::vector<std::optional<Resolved>> resolved(parsed.size());
  std::vector<bool> visiting(parsed.size(), false);
  std::vector<size_t> depth(parsed.size(), 0);  // levels of extends above a profile
  // Depth-first along extends; `chain` is the path from the first profile
  // asked for, for the cycle message.
  std::function<Status(size_t, std::vector<size_t>&)> resolve =
      [&](size_t i, std::vector<size_t>& chain) -> Status {
    if (resolved[i]) return Status::Ok();
    const Parsed& c = parsed[i];
    const int line = c.origins.count("extends") ? c.origins.at("extends").line : 0;
    if (visiting[i]) {
      std::string cycle;
      auto start = std::find(chain.begin(), chain.end(), i);
      for (auto it = start; it != chain.end(); ++it) cycle += parsed[*it].name + " -> ";
      cycle += c.name;
      const Parsed& last = parsed[chain.back()];
      return InvalidArgument(Where(last.file, last.origins.at("extends").line) +
                             "extends: a cycle (" + cycle +
                             "); a profile cannot inherit from itself");
    }
    const Resolved* parent = nullptr;
    if (c.extends) {
      auto it = by_name.find(*c.extends);
      if (it == by_name.end()) {
        std::vector<std::string_view> names;
        for (const auto& [n, idx] : by_name) names.push_back(n);
        return InvalidArgument(Where(c.file, line) + "extends: no profile named " +
                               Quote(*c.extends) + " (profiles: " + Join(names) + ")");
      }
      visiting[i] = true;
      chain.push_back(i);
      Status st = resolve(it->second, chain);
      chain.pop_back();
      visiting[i] = false;
      RETURN_IF_ERROR(st);
      parent = &*resolved[it->second];
      depth[i] = depth[it->second] + 1;
      if (depth[i] > kMaxExtendsDepth) {
        return InvalidArgument(Where(c.file, line) + "extends: more than " +
                               std::to_string(kMaxExtendsDepth) + " levels of extends");
      }
    }
    ASSIGN_OR_RETURN(Resolved r, Resolve(parent, c));
    resolved[i] = std::move(r);
    return Status::Ok();
  };

  std::vector<Profile> profiles;
  for (size_t i = 0; i < parsed.size(); ++i) {
    std::vector<size_t> chain;
    RETURN_IF_ERROR(resolve(i, chain));
    profiles.push_back(resolved[i]->profile);
  }
  return ProfileSet(std::move(profiles));
}

StatusOr<Profile> ParseProfileYaml(std::string_view yaml, std::string filename) {
  FileParser parser(filename);
  ASSIGN_OR_RETURN(Parsed p, parser.Parse(yaml));
  if (p.extends) {
    return InvalidArgument(Where(p.file, p.origins["extends"].line) +
                           "extends: " + Quote(*p.extends) +
                           " cannot be resolved in a single profile; load the whole directory "
                           "(LoadProfiles) to use extends");
  }
  ASSIGN_OR_RETURN(Resolved r, Resolve(nullptr, p));
  return std::move(r.profile);
}

StatusOr<ProfileSet> LoadProfiles(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    return Status(
        ErrorCode::kInvalidArgument,
        "cannot read the profiles directory '" + dir + "' (give the right one on the command line)",
        errno);
  }
  std::vector<std::string> names;
  errno = 0;
  while (struct dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n.empty() || n[0] == '.') continue;  // hidden files, editor droppings, ConfigMap's ..data
    if (n.size() <= 5 || n.compare(n.size() - 5, 5, ".yaml") != 0) continue;
    names.push_back(std::move(n));
  }
  int read_errno = errno;
  ::closedir(d);
  if (read_errno != 0) return ErrnoError("readdir(" + dir + ")", read_errno);
  std::sort(names.begin(), names.end());
  if (names.empty()) {
    return InvalidArgument("no profiles (*.yaml files) in '" + dir + "'");
  }
  if (names.size() > kMaxProfiles) {
    return InvalidArgument("'" + dir + "' holds " + std::to_string(names.size()) +
                           " profiles; at most " + std::to_string(kMaxProfiles) + " are supported");
  }
  const std::string prefix = (!dir.empty() && dir.back() == '/') ? dir : dir + "/";
  std::vector<ProfileSource> sources;
  for (const std::string& n : names) {
    ProfileSource src;
    src.filename = prefix + n;
    struct stat st;
    // stat, not lstat: a Kubernetes ConfigMap mounts each file as a symlink.
    if (::stat(src.filename.c_str(), &st) != 0) return ErrnoError("stat(" + src.filename + ")");
    if (!S_ISREG(st.st_mode)) continue;
    if (static_cast<uint64_t>(st.st_size) > kMaxProfileFileBytes) {
      return InvalidArgument(src.filename + ": the file is " + std::to_string(st.st_size) +
                             " bytes, more than the " + std::to_string(kMaxProfileFileBytes) +
                             " a profile may have");
    }
    // The limit again while reading: the file may grow between stat and read.
    ASSIGN_OR_RETURN(src.text, ReadFile(src.filename, kMaxProfileFileBytes));
    sources.push_back(std::move(src));
  }
  if (sources.empty()) return InvalidArgument("no profiles (*.yaml files) in '" + dir + "'");
  return ParseProfiles(sources);
}

std::string DefaultProfilesDir() {
  std::error_code ec;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    std::filesystem::path installed = exe.parent_path() / ".." / "share" / "airlock" / "profiles";
    if (std::filesystem::is_directory(installed, ec)) {
      std::filesystem::path canonical = std::filesystem::canonical(installed, ec);
      return ec ? installed.string() : canonical.string();
    }
  }
  return AIRLOCK_SOURCE_PROFILES_DIR;
}

}  // namespace airlock::profile
