// Options of `pagellm bench serve` and the prompts it sends, built before the clock starts.
//
// Prompt forms (kept the same for every server so that runs compare):
//  - random and prefix-sharing send token-id prompts ("prompt": [ids], accepted by vLLM,
//    llama.cpp's server and ours): the lengths are exact and the shared prefixes are
//    identical token for token, which text re-tokenized by the server would not guarantee;
//  - tinystories and multi-turn send text, cut to the requested token counts with the local
//    tokenizer (--tokenizer-model, or --model when it is a local path) or, failing that, the
//    server's /tokenize and /detokenize.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/datasets.h"
#include "bench/http_client.h"
#include "nlohmann/json.hpp"
#include "pagellm/status.h"

namespace pagellm::cli {

struct ServeOptions {
  std::string base_url = "http://127.0.0.1:8000";
  std::string endpoint = "/v1/completions";
  std::string model;            // served model name; default: the first of GET /v1/models
  std::string tokenizer_model;  // local HF directory or .gguf for token counting
  std::string api_key;          // default: $OPENAI_API_KEY
  int num_prompts = 1000;
  std::string request_rate = "inf";  // requests/s (Poisson); "inf" sends all at once
  double burstiness = 1.0;
  int max_concurrency = 0;  // 0 = unlimited
  std::string dataset = "random";
  std::string dataset_path;  // TinyStories text
  int input_len = 1024;
  int output_len = 128;
  double range_ratio = 0;
  double output_range_ratio = -1;  // < 0: --range-ratio
  int num_prefixes = 1;
  int prefix_len = 256;
  int suffix_len = 64;
  int num_conversations = 8;
  int turns = 4;
  int turn_len = 64;
  int vocab_size = 0;  // random ids in [0, V) when no tokenizer is available
  std::vector<std::string> goodput;
  uint64_t seed = 0;
  std::string json_file;
  std::string extra_body;
  double temperature = 0;
  bool ignore_eos = true;
  std::string percentile_metrics = "ttft,tpot,itl,e2el";
  std::string metric_percentiles = "99";
  double timeout_s = 6 * 3600;  // longest wait for one read of a response
  bool skip_test_request = false;
};

struct SingleRequest {
  nlohmann::json prompt;  // token-id array or text
  int prompt_len = 0;     // tokens as built (the server's usage count replaces it)
  int output_len = 0;
  int group = -1;  // prefix-sharing group
};

struct ServeWorkload {
  std::vector<SingleRequest> requests;             // every dataset but multi-turn
  std::vector<bench::Conversation> conversations;  // multi-turn
  nlohmann::json probe_prompt;  // a short prompt of the same form, for the readiness check
  bool text_prompts = false;
  std::string tokenizer;    // where token counts came from: a path, "server" or "none"
  std::string corpus_path;  // TinyStories file used ("" if none)
};

// Builds the prompts for o.dataset. `client` reaches the server for /tokenize when needed.
StatusOr<ServeWorkload> BuildServeWorkload(const ServeOptions& o, bench::HttpClient& client);

}  // namespace pagellm::cli
