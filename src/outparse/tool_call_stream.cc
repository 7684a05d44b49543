#include "outparse/tool_call_stream.h"

namespace pagellm {

ToolStreamDelta ToolCallStream::Add(std::string_view text) {
  text_ += text;
  return Diff(parser_.Parse(text_, false));
}

ToolStreamDelta ToolCallStream::Finish() {
  return Diff(parser_.Parse(text_, true));
}

ToolStreamDelta ToolCallStream::Diff(const ToolParse& parse) {
  ToolStreamDelta d;
  // Every format writes its content before its calls.
  if (parse.content.size() > content_sent_) {
    d.content = parse.content.substr(content_sent_);
    content_sent_ = parse.content.size();
  }
  for (size_t i = 0; i < parse.calls.size(); ++i) {
    const ParsedToolCall& c = parse.calls[i];
    if (i == sent_.size()) {
      if (c.name.empty()) break;
      sent_.push_back({parser_.NewCallId(), 0});
      d.calls.push_back({static_cast<int>(i), sent_.back().id, c.name, ""});
    }
    SentCall& s = sent_[i];
    if (c.arguments.size() > s.arguments) {
      d.calls.push_back({static_cast<int>(i), "", "", c.arguments.substr(s.arguments)});
      s.arguments = c.arguments.size();
    }
  }
  return d;
}

}  // namespace pagellm
