// One streamed OpenAI completion (or chat completion) request, timed the way `vllm bench serve`
// times it, and a TextTokenizer backed by a server's /tokenize and /detokenize routes.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "bench/datasets.h"
#include "bench/http_client.h"
#include "bench/protocol.h"
#include "bench/serve_metrics.h"
#include "nlohmann/json.hpp"

namespace pagellm::bench {

using BenchClock = std::chrono::steady_clock;

// Sends `payload` and reads the event stream. `sent_prompt_len` is used when the server reports
// no usage; `bench_start` anchors RequestResult::start. A request succeeds when the stream ends
// normally after at least one chunk carrying text.
RequestResult SendStreamingRequest(HttpClient& client, const CompletionSettings& s,
                                   const nlohmann::json& payload, int sent_prompt_len,
                                   BenchClock::time_point bench_start);

// Tokenizes through the server: POST /tokenize and /detokenize in vLLM's shape ({"model",
// "prompt", "add_special_tokens": false} -> {"tokens"}; {"model", "tokens"} -> {"prompt"}),
// falling back to llama.cpp's ({"content", "add_special": false}; -> {"content"}).
class ServerTextTokenizer : public TextTokenizer {
 public:
  ServerTextTokenizer(HttpClient* client, std::string model)
      : client_(client), model_(std::move(model)) {}
  StatusOr<std::vector<int32_t>> Encode(const std::string& text) override;
  StatusOr<std::string> Decode(const std::vector<int32_t>& ids) override;

 private:
  HttpClient* client_;
  std::string model_;
  int shape_ = -1;  // -1 unknown, 0 vLLM, 1 llama.cpp
};

}  // namespace pagellm::bench
