// Pure pieces of the OpenAI HTTP protocol as the benchmarks speak it: the server address,
// streaming request bodies, and the streamed completion chunks.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "nlohmann/json.hpp"
#include "pagellm/status.h"

namespace pagellm::bench {

struct HttpTarget {
  std::string origin;       // "http://127.0.0.1:8000"
  std::string path_prefix;  // "" or e.g. "/proxy" (without a trailing '/')
};
// "http://host:port[/prefix]" (https too); the scheme is required.
StatusOr<HttpTarget> ParseBaseUrl(const std::string& url);

struct CompletionSettings {
  std::string model;
  std::string endpoint = "/v1/completions";
  bool chat = false;  // the endpoint is a chat completions route
  bool ignore_eos = true;
  double temperature = 0;
  nlohmann::json extra_body = nlohmann::json::object();  // merged last (overrides)
};

// `prompt` is a string or an array of token ids (completions); `messages` the chat history.
// Always streams with usage in the last chunk (stream_options.include_usage).
nlohmann::json BuildCompletionPayload(const CompletionSettings& s, const nlohmann::json& prompt,
                                      int max_tokens);
nlohmann::json BuildChatPayload(const CompletionSettings& s, const nlohmann::json& messages,
                                int max_tokens);

// One streamed chunk of /v1/completions ("choices[0].text") or /v1/chat/completions
// ("choices[0].delta.content").
struct StreamChunk {
  bool done = false;        // the "[DONE]" sentinel
  bool has_choice = false;  // choices is a non-empty array
  std::string text;         // new text ("" when none)
  std::string finish_reason;
  std::optional<int> prompt_tokens;  // from "usage" when present
  std::optional<int> completion_tokens;
  std::string error;  // non-empty: the server reported an error in the stream
};

// Parses the data of one SSE event. Malformed JSON is reported in `error`.
StreamChunk ParseStreamChunk(std::string_view data, bool chat);

}  // namespace pagellm::bench
