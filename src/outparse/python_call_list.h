// A Python list of function calls with keyword arguments, [f(a=1, b="x"), mod.g()], read from
// text that may be cut anywhere; the argument values are Python literals turned into JSON
// (str, int, float, True / False / None, lists and tuples as arrays, dicts with string keys).
#pragma once

#include <string_view>
#include <vector>

#include "outparse/tool_call_parser.h"

namespace pagellm {

struct PythonCallList {
  std::vector<ParsedToolCall> calls;  // the calls whose closing parenthesis was read
  bool closed = false;                // the list's closing bracket was read
  bool error = false;                 // not such a list
  size_t end = 0;                     // when closed: offset just past the bracket
};

// `text` starts with the list (leading whitespace allowed).
PythonCallList ReadPythonCallList(std::string_view text);

}  // namespace pagellm
