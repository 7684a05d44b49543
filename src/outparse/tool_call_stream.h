// Streams a tool-call parser's result as vLLM sends it in chat.completion.chunk deltas: content
// as it becomes certain, then per call (by index) a first delta with its id, type and name,
// then fragments of its arguments. The parser re-reads the whole text at every step (the
// outputs are short; each step is linear in them) and only what is new is sent.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "outparse/tool_call_parser.h"

namespace pagellm {

struct ToolCallDelta {
  int index = 0;
  std::string id;    // set on a call's first delta only
  std::string name;  // set on a call's first delta only
  std::string arguments;
};

struct ToolStreamDelta {
  std::string content;
  std::vector<ToolCallDelta> calls;
  bool empty() const { return content.empty() && calls.empty(); }
};

class ToolCallStream {
 public:
  explicit ToolCallStream(const ToolCallParser& parser) : parser_(parser) {}
  // New output text.
  ToolStreamDelta Add(std::string_view text);
  // The output is complete: what was held back.
  ToolStreamDelta Finish();
  // Whether a tool call was sent.
  bool tools_called() const { return !sent_.empty(); }

 private:
  ToolStreamDelta Diff(const ToolParse& parse);

  struct SentCall {
    std::string id;
    size_t arguments = 0;  // bytes of the arguments sent
  };
  const ToolCallParser& parser_;
  std::string text_;
  size_t content_sent_ = 0;
  std::vector<SentCall> sent_;
};

}  // namespace pagellm
