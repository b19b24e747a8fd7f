// Parsing and printing of the quantities a profile is written in: sizes
// ("256Mi"), CPU amounts ("500m") and seconds ("2.5"). The syntax is
// Kubernetes' resource quantities, so a value can be copied between a
// profile and a pod spec unchanged.
//
//   ParseSize("256Mi")  -> 268435456      ParseSize("1G")  -> 1000000000
//   ParseSize("51200")  -> 51200          ParseSize("0.5Gi") -> 536870912
//   ParseCpu("500m")    -> 0.5            ParseCpu("2")    -> 2.0
//   ParseSeconds("30")  -> 30.0           FormatSize(268435456) -> "256Mi"
//
// Errors are InvalidArgument with a message that quotes the input and shows
// the accepted forms; callers prefix where the value came from.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace airlock::profile {

// A byte count: digits with an optional fraction and an optional suffix,
// binary Ki Mi Gi Ti (powers of 1024) or decimal k K M G T (powers of 1000).
// No suffix means bytes. The result is rounded down to whole bytes.
StatusOr<int64_t> ParseSize(std::string_view text);

// A CPU amount in cores: "500m" (millicores, whole numbers only), "1.5" or
// "2". At least 1m, at most 1024 cores.
StatusOr<double> ParseCpu(std::string_view text);

// A finite, non-negative number of seconds: "30", "2.5". No unit suffix.
StatusOr<double> ParseSeconds(std::string_view text);

// The shortest exact form: "256Mi", "1Gi", "51200". Used in messages and echoes.
std::string FormatSize(int64_t bytes);

// "0.5", "2", "30" — a number without trailing zeros, for messages.
std::string FormatNumber(double value);

// A value from a profile, quoted for an error message: 'like this', at most
// 60 bytes of it (then "..."), control characters as '?', and always valid
// UTF-8 (bytes of invalid UTF-8 as '?'), so a message can go into a log
// line or a JSON string as is.
std::string QuoteForMessage(std::string_view text);

bool IsValidUtf8(std::string_view text);

}  // namespace airlock::profile
