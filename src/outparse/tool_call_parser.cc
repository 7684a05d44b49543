#include "outparse/tool_call_parser.h"

#include <random>

#include "fmt/format.h"
#include "fmt/ranges.h"
#include "outparse/hermes_tool_parser.h"
#include "outparse/llama3_json_tool_parser.h"
#include "outparse/mistral_tool_parser.h"
#include "outparse/pythonic_tool_parser.h"

namespace pagellm {

std::string ToolCallParser::NewCallId() const {
  return RandomToolCallId();
}

const std::vector<std::string>& ToolCallParserNames() {
  static const std::vector<std::string> names = {"hermes", "llama3_json", "mistral", "pythonic"};
  return names;
}

StatusOr<std::unique_ptr<ToolCallParser>> CreateToolCallParser(std::string_view name) {
  if (name == "hermes") return std::unique_ptr<ToolCallParser>(new HermesToolParser());
  if (name == "llama3_json") return std::unique_ptr<ToolCallParser>(new Llama3JsonToolParser());
  if (name == "mistral") return std::unique_ptr<ToolCallParser>(new MistralToolParser());
  if (name == "pythonic") return std::unique_ptr<ToolCallParser>(new PythonicToolParser());
  return InvalidArgumentError(fmt::format("invalid tool call parser: {} (chose from {{ {} }})",
                                          name, fmt::join(ToolCallParserNames(), ",")));
}

std::string RandomToolCallId() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("chatcmpl-tool-{:016x}{:016x}", rng(), rng());
}

size_t MarkerPrefixAtEnd(std::string_view text, std::string_view marker) {
  for (size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n)
    if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
  return 0;
}

}  // namespace pagellm
