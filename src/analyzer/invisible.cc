// The "invisible-character" rule: text (code of any language) that reads
// differently from how it runs. Bidirectional controls reorder what an editor,
// a terminal or the approval console shows ("Trojan Source", CVE-2021-42574:
// `if access_level != "user": # Check if admin` can run the other branch), and
// zero-width and other format characters hide text. Python accepts them in
// comments and strings, so the analyzer reports them; a person deciding on the
// code (approvals) sees them escaped and marked.
#include <string>

#include "analyzer/rules.h"
#include "analyzer/unicode.h"

namespace airlock::analyzer {

namespace {

constexpr int kNamedPerLine = 4;  // characters named in one line's message

std::string Describe(char32_t cp) {
  static constexpr char kDigits[] = "0123456789ABCDEF";
  std::string hex;
  for (char32_t v = cp; v > 0 || hex.size() < 4; v >>= 4) hex.insert(hex.begin(), kDigits[v & 0xF]);
  return "U+" + hex + " " + InvisibleCharacterName(cp);
}

struct LineScan {
  uint32_t line = 0, col = 0;  // the first invisible character's position
  int count = 0;
  bool bidi = false;
  std::string named;  // the first kNamedPerLine distinct ones
  int n_named = 0;
  char32_t seen[kNamedPerLine] = {};
};

void Report(const LineScan& s, FindingSink& sink) {
  if (s.count == 0) return;
  std::string message = std::string(s.count == 1 ? "an invisible character" : "invisible characters") + " (" +
                        s.named + (s.n_named == kNamedPerLine && s.count > s.n_named ? ", ..." : "") + "): ";
  message += s.bidi ? "a bidirectional control reorders how the line is shown, so it reads differently from how "
                      "it runs; write the text without it (an escape such as \\u202e in a string, if it is data)"
                    : "the line holds text nobody sees; write it as an escape (such as \\u200b) if it is data";
  sink.Add("invisible-character", std::move(message), s.line, s.col, s.bidi ? Severity::kWarning : Severity::kInfo);
}

}  // namespace

void FindInvisibleCharacters(std::string_view text, FindingSink& sink) {
  LineScan scan;
  uint32_t line = 1, col = 1;
  for (size_t i = 0; i < text.size() && !sink.full();) {
    const char c = text[i];
    if (c == '\n' || c == '\r') {
      Report(scan, sink);
      scan = LineScan();
      i += (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ? 2 : 1;
      ++line;
      col = 1;
      continue;
    }
    if (static_cast<unsigned char>(c) < 0x80) {
      ++i;
      ++col;
      continue;
    }
    const char32_t cp = DecodeUtf8(text, i);
    if (InvisibleCharacterName(cp) != nullptr) {
      if (scan.count++ == 0) scan.line = line, scan.col = col;
      scan.bidi = scan.bidi || IsBidiControl(cp);
      bool named = false;
      for (int k = 0; k < scan.n_named; ++k) named = named || scan.seen[k] == cp;
      if (!named && scan.n_named < kNamedPerLine) {
        scan.named += (scan.n_named ? ", " : "") + Describe(cp);
        scan.seen[scan.n_named++] = cp;
      }
    }
    ++col;
  }
  Report(scan, sink);
}

std::vector<Finding> InvisibleCharacterFindings(std::string_view text, size_t max_findings) {
  FindingSink sink(max_findings);
  FindInvisibleCharacters(text, sink);
  return sink.Take();
}

}  // namespace airlock::analyzer
