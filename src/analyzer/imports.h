// Parsing of `import ...` and `from ... import ...` statements over tokens, shared by the
// syntax check (malformed imports) and the rules (allowlist, aliases, blocklist).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analyzer/tokenizer.h"

namespace airlock::analyzer {

struct ImportEntry {
  // `import a.b.c as x`: path "a.b.c", alias "x". `from m import n as x`: path "n".
  std::string path;
  std::string alias;                 // empty without "as"
  std::vector<uint32_t> part_tokens; // the NAME token of each dotted component
};

struct ImportStatement {
  bool is_from = false;
  int level = 0;               // leading dots of a relative `from . import x`
  std::string module;          // the `from` module, dotted; empty for `from . import x`
  uint32_t keyword_token = 0;  // the `import` or `from` token
  uint32_t module_token = 0;   // first NAME of `module` (the keyword token if none)
  std::vector<ImportEntry> entries;
  bool star = false;           // from m import *
  bool valid = true;           // false: invalid syntax at error_token
  uint32_t error_token = 0;
  uint32_t next = 0;           // first token after the statement (its NEWLINE or ';')
};

// If tokens[i] starts an import statement (`import`, or `from` at the start of a
// statement), parses it up to `last` and returns true; entries parsed before a syntax
// error are kept. Returns false for every other token (`yield from`, `raise .. from`).
// [first, last) is the segment holding i.
bool ParseImport(const TokenizedSource& ts, uint32_t i, uint32_t first, uint32_t last,
                 ImportStatement* out);

}  // namespace airlock::analyzer
