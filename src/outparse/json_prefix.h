// Canonical JSON of a possibly unfinished JSON text, for streaming tool-call arguments: the
// text a model has written so far is re-serialized the way Python's json.dumps(value,
// ensure_ascii=False) writes it (", " and ": " separators, Python's float repr, \uXXXX only
// for control characters), emitting only what no continuation can change: a string's
// characters as they arrive, a number or literal once it is followed by a delimiter. So the
// prefix of a cut text is always a prefix of the whole text's serialization, and clients that
// concatenate streamed argument fragments get exactly the non-streamed arguments.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "nlohmann/json.hpp"

namespace pagellm {

struct JsonPrefix {
  std::string text;       // canonical serialization of what is certain so far
  bool complete = false;  // the value ended; `text` is its whole serialization
  bool error = false;     // `raw` is not the start of a JSON value
  size_t end = 0;         // when complete: offset in `raw` just past the value
};

// `raw` starts with a JSON value (leading whitespace allowed) and may be cut anywhere or go on
// past the value (the rest is not read).
JsonPrefix CanonicalJsonPrefix(std::string_view raw);

// Python's json.dumps(value, ensure_ascii=False) of a parsed value (insertion order kept).
std::string CanonicalJson(const nlohmann::ordered_json& value);

}  // namespace pagellm
