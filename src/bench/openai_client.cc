#include "bench/openai_client.h"

#include "bench/protocol.h"
#include "bench/sse.h"
#include "fmt/format.h"

namespace pagellm::bench {

namespace {

std::string Shorten(std::string s) {
  constexpr size_t kMax = 500;
  if (s.size() > kMax) s = s.substr(0, kMax) + "...";
  return s;
}

}  // namespace

RequestResult SendStreamingRequest(HttpClient& client, const CompletionSettings& s,
                                   const nlohmann::json& payload, int sent_prompt_len,
                                   BenchClock::time_point bench_start) {
  RequestResult r;
  r.prompt_len = sent_prompt_len;
  const std::string body = payload.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  SseParser parser;
  bool got_text = false;
  bool done = false;
  int text_chunks = 0;
  std::optional<int> usage_prompt, usage_completion;
  BenchClock::time_point now;   // arrival of the network read being parsed
  BenchClock::time_point prev;  // arrival of the previous text chunk
  const BenchClock::time_point st = BenchClock::now();
  r.start = std::chrono::duration<double>(st - bench_start).count();
  auto on_event = [&](const SseEvent& ev) {
    if (!r.error.empty() || done) return;
    if (ev.event == "error") {
      r.error = "stream error: " + Shorten(ev.data);
      return;
    }
    StreamChunk c = ParseStreamChunk(ev.data, s.chat);
    if (!c.error.empty()) {
      r.error = Shorten(c.error);
      return;
    }
    if (c.done) {
      done = true;
      return;
    }
    if (c.prompt_tokens) usage_prompt = c.prompt_tokens;
    if (c.completion_tokens) usage_completion = c.completion_tokens;
    if (c.text.empty()) return;
    if (!got_text) {
      r.ttft = std::chrono::duration<double>(now - st).count();
      got_text = true;
    } else {
      r.itl.push_back(std::chrono::duration<double>(now - prev).count());
    }
    prev = now;
    ++text_chunks;
    r.generated_text += c.text;
  };
  auto res = client.PostStream(s.endpoint, body, [&](std::string_view bytes) {
    // Every event of one network read gets that read's arrival time.
    now = BenchClock::now();
    parser.Feed(bytes, on_event);
    return r.error.empty();
  });
  if (!res.ok()) {
    r.error = res.status().message();
    return r;
  }
  if (res->status / 100 != 2) {
    r.error = fmt::format("HTTP {}: {}", res->status, Shorten(res->body));
    return r;
  }
  parser.Finish(on_event);
  if (!r.error.empty()) return r;
  if (!got_text) {
    r.error = "the stream carried no text (no chunk to time TTFT from)";
    return r;
  }
  r.latency = std::chrono::duration<double>(prev - st).count();
  r.output_len = usage_completion.value_or(text_chunks);
  if (usage_prompt) r.prompt_len = *usage_prompt;
  r.success = true;
  return r;
}

namespace {

StatusOr<nlohmann::json> PostForJson(HttpClient& client, const std::string& path,
                                     const nlohmann::json& body) {
  ASSIGN_OR_RETURN(HttpResponse res, client.PostJson(path, body.dump()));
  if (res.status != 200)
    return UnavailableError(fmt::format("{}: HTTP {}: {}", path, res.status, Shorten(res.body)));
  nlohmann::json j = nlohmann::json::parse(res.body, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return DataLossError(fmt::format("{}: response is not a JSON object", path));
  return j;
}

}  // namespace

StatusOr<std::vector<int32_t>> ServerTextTokenizer::Encode(const std::string& text) {
  const nlohmann::json shapes[2] = {
      {{"model", model_}, {"prompt", text}, {"add_special_tokens", false}},
      {{"content", text}, {"add_special", false}},
  };
  Status last_error = Status::Ok();
  for (int shape = 0; shape < 2; ++shape) {
    if (shape_ >= 0 && shape != shape_) continue;
    auto j = PostForJson(*client_, "/tokenize", shapes[shape]);
    if (!j.ok()) {
      last_error = j.status();
      continue;
    }
    auto it = j->find("tokens");
    if (it == j->end() || !it->is_array()) {
      last_error = DataLossError("/tokenize: no 'tokens' array in the response");
      continue;
    }
    std::vector<int32_t> ids;
    for (const nlohmann::json& t : *it) {
      // llama.cpp answers [{"id": ..., "piece": ...}] when asked for pieces.
      if (t.is_number_integer())
        ids.push_back(t.get<int32_t>());
      else if (t.is_object() && t.contains("id"))
        ids.push_back(t["id"].get<int32_t>());
    }
    // A server that ignored the field it did not know tokenized "": try the other shape.
    if (ids.empty() && !text.empty() && shape_ < 0) {
      last_error = DataLossError("/tokenize returned no tokens");
      continue;
    }
    shape_ = shape;
    return ids;
  }
  return last_error.WithContext("tokenizing through the server");
}

StatusOr<std::string> ServerTextTokenizer::Decode(const std::vector<int32_t>& ids) {
  ASSIGN_OR_RETURN(nlohmann::json j,
                   PostForJson(*client_, "/detokenize", {{"model", model_}, {"tokens", ids}}));
  for (const char* key : {"prompt", "content"}) {
    auto it = j.find(key);
    if (it != j.end() && it->is_string()) return it->get<std::string>();
  }
  return DataLossError("/detokenize: no 'prompt' or 'content' string in the response");
}

}  // namespace pagellm::bench
