// The names the guardrails know, after fips-agents/code-sandbox sandbox/guardrails.py
// (the "peer"), with the additions marked. One hash lookup classifies a name.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace airlock::analyzer {

enum NameClass : uint32_t {
  // Builtins blocked as calls and as bare names (aliasing `f = open` is caught too).
  kBlockedBuiltin = 1u << 0,
  // Attribute names blocked on any object (`x.open`, `codecs.open`, `pandas.eval`).
  kBlockedAttr = 1u << 1,
  // Dunders blocked as attributes, bare names, subscript keys, literals, format fields.
  kBlockedDunder = 1u << 2,
  // Blocked dunders that may be read (`__name__`, `__class__`); only writes are blocked.
  kReadableDunder = 1u << 3,
  // Frame, generator, coroutine and traceback attributes.
  kFrameAttr = 1u << 4,
  // Attribute names that are references to dangerous modules (`random._os`, `enum.bltns`).
  kModuleAlias = 1u << 5,
  // operator.attrgetter / methodcaller / itemgetter.
  kGetter = 1u << 6,
  // Modules whose every attribute is blocked.
  kBlockedModule = 1u << 7,
};

// The NameClass bits of a name (0 for most names).
uint32_t ClassifyName(std::string_view name);

// Qualified names "module.attr" with a meaning of their own.
enum class QualifiedClass { kNone, kOsCall, kDeserialization, kWeakCrypto, kSafe };
// kOsCall: os.system, os.kill, os.fork, the exec*/spawn* families, ...
// kDeserialization: pickle.loads, marshal.load, yaml.load, shelve.open, ...
// kWeakCrypto: hashlib.md5, hashlib.sha1 (a warning).
// kSafe: exempt from the generic attribute rules: re.compile, scipy.io, pandas.api.types.
QualifiedClass ClassifyQualified(std::string_view qualified);

// The attribute names `module.x` listed by ClassifyQualified (for `from module import *`).
std::vector<std::string_view> QualifiedAttrsOf(std::string_view module);

// Top-level modules that appear in ClassifyQualified or kBlockedModule: only chains that
// resolve into one of these (or into a profile blocklist module) need qualified checks.
bool IsTrackedModule(std::string_view top);

// True for "__x__" (two leading and trailing underscores around at least one character).
bool IsDunderShape(std::string_view s);

}  // namespace airlock::analyzer
