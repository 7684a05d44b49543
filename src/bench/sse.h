// Server-sent events, the framing of OpenAI streaming responses. Pure: the HTTP client feeds
// raw bytes in as they arrive.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace pagellm::bench {

struct SseEvent {
  std::string event;  // the "event:" field ("" when absent)
  std::string data;   // "data:" lines joined by '\n'
};

// Incremental SSE parser (WHATWG rules): lines end in "\n", "\r\n" or "\r" (a CR/LF pair may be
// split across two Feed calls); a blank line dispatches the event; "data:" / "event:" values lose
// one leading space; lines starting with ':' are comments; "id:" and "retry:" are ignored.
// Beyond the standard, a line "error: {...}" (llama.cpp's server uses this field for errors
// raised mid-stream) is reported as an event named "error" with that value as its data.
class SseParser {
 public:
  using Callback = std::function<void(const SseEvent&)>;
  void Feed(std::string_view bytes, const Callback& on_event);
  // End of stream: dispatches an event left without its terminating blank line.
  void Finish(const Callback& on_event);

 private:
  void ProcessLine(std::string_view line, const Callback& on_event);
  void Dispatch(const Callback& on_event);

  std::string line_;
  bool skip_lf_ = false;  // the previous chunk ended in '\r'
  SseEvent pending_;
  bool has_data_ = false;
};

}  // namespace pagellm::bench
