// Standard base64 (RFC 4648 §4, with '=' padding) for file contents carried in
// JSON: request files, the runner's config and its file events.
#pragma once

#include <string>
#include <string_view>

namespace airlock::model {

std::string Base64Encode(std::string_view bytes);
// Strict: the standard alphabet, length a multiple of 4 once CR/LF are skipped
// (line-wrapped input, as `base64` writes it, is accepted), '=' only at the end.
// False on anything else; *out is then unspecified.
bool Base64Decode(std::string_view text, std::string* out);
// The decoded size of text that Base64Decode accepts (no decoding, no allocation).
size_t Base64DecodedSize(std::string_view text);

}  // namespace airlock::model
