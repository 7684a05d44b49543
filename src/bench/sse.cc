#include "bench/sse.h"

namespace pagellm::bench {

void SseParser::Feed(std::string_view bytes, const Callback& on_event) {
  size_t i = 0;
  if (skip_lf_ && !bytes.empty()) {
    if (bytes[0] == '\n') i = 1;
    skip_lf_ = false;
  }
  while (i < bytes.size()) {
    const size_t end = bytes.find_first_of("\r\n", i);
    if (end == std::string_view::npos) {
      line_.append(bytes.substr(i));
      return;
    }
    line_.append(bytes.substr(i, end - i));
    ProcessLine(line_, on_event);
    line_.clear();
    i = end + 1;
    if (bytes[end] == '\r') {
      if (i < bytes.size()) {
        if (bytes[i] == '\n') ++i;
      } else {
        skip_lf_ = true;
      }
    }
  }
}

void SseParser::Finish(const Callback& on_event) {
  if (!line_.empty()) {
    ProcessLine(line_, on_event);
    line_.clear();
  }
  Dispatch(on_event);
}

void SseParser::ProcessLine(std::string_view line, const Callback& on_event) {
  if (line.empty()) {
    Dispatch(on_event);
    return;
  }
  if (line[0] == ':') return;  // comment (keep-alive pings)
  const size_t colon = line.find(':');
  std::string_view field = line.substr(0, colon);
  std::string_view value;
  if (colon != std::string_view::npos) {
    value = line.substr(colon + 1);
    if (!value.empty() && value[0] == ' ') value.remove_prefix(1);
  }
  if (field == "data") {
    if (has_data_) pending_.data.push_back('\n');
    pending_.data.append(value);
    has_data_ = true;
  } else if (field == "event") {
    pending_.event = std::string(value);
  } else if (field == "error") {
    pending_.event = "error";
    pending_.data = std::string(value);
    has_data_ = true;
  }
}

void SseParser::Dispatch(const Callback& on_event) {
  if (has_data_) on_event(pending_);
  pending_ = SseEvent();
  has_data_ = false;
}

}  // namespace pagellm::bench
