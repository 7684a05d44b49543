// Decimal integers within bounds as grammar alternatives (JSON Schema integer minimum /
// maximum): the digit-by-digit range construction used for numeric ranges in regex
// generators (e.g. [25, 312] = 2[5-9] | [3-9][0-9] | [12][0-9][0-9] | 30[0-9] | 31[0-2]).
// Numbers are written without leading zeros and without "-0", as JSON requires. Bounds beyond
// +-10^18 are pulled in to +-10^18 (the grammar then matches a valid subset).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "grammar/grammar.h"
#include "pagellm/status.h"

namespace pagellm {

// A symbol matching the integers x with lo <= x <= hi (an absent bound is unbounded).
// InvalidArgument when the range is empty.
StatusOr<GrammarSymbol> IntegerRange(Grammar& g, std::optional<int64_t> lo,
                                     std::optional<int64_t> hi, std::string_view name);

}  // namespace pagellm
