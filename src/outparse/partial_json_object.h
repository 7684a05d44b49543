// A JSON object that may be cut anywhere, read field by field (the call objects of the JSON
// tool-call formats: {"name": ..., "arguments": {...}}): the fields whose values are whole,
// and the value being written when the text ends.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pagellm {

struct PartialJsonField {
  std::string key;
  std::string_view raw;  // the value's JSON text (as far as written when !complete)
  bool complete = false;
};

struct PartialJsonObject {
  std::vector<PartialJsonField> fields;
  bool closed = false;  // the closing brace was read
  bool error = false;   // not an object
  size_t end = 0;       // when closed: offset just past the brace
  const PartialJsonField* Find(std::string_view key) const;
  // A field's whole string value, if the field is whole and a string.
  std::optional<std::string> StringField(std::string_view key) const;
};

// `text` starts with the object (leading whitespace allowed).
PartialJsonObject ReadPartialJsonObject(std::string_view text);

}  // namespace pagellm
