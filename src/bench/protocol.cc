#include "bench/protocol.h"

#include "fmt/format.h"

namespace pagellm::bench {

StatusOr<HttpTarget> ParseBaseUrl(const std::string& url) {
  const size_t scheme_end = url.find("://");
  if (scheme_end == std::string::npos)
    return InvalidArgumentError(fmt::format("base URL '{}' needs a scheme (http://)", url));
  const std::string scheme = url.substr(0, scheme_end);
  if (scheme != "http" && scheme != "https")
    return InvalidArgumentError(fmt::format("base URL '{}': scheme must be http or https", url));
  const size_t host_start = scheme_end + 3;
  const size_t path_start = url.find('/', host_start);
  HttpTarget t;
  t.origin = url.substr(0, path_start);
  if (t.origin.size() == host_start)
    return InvalidArgumentError(fmt::format("base URL '{}' has no host", url));
  if (path_start != std::string::npos) t.path_prefix = url.substr(path_start);
  while (!t.path_prefix.empty() && t.path_prefix.back() == '/') t.path_prefix.pop_back();
  return t;
}

namespace {

nlohmann::json CommonPayload(const CompletionSettings& s, int max_tokens) {
  nlohmann::json j = {
      {"model", s.model},
      {"max_tokens", max_tokens},
      {"temperature", s.temperature},
      {"stream", true},
      {"stream_options", {{"include_usage", true}}},
  };
  if (s.ignore_eos) j["ignore_eos"] = true;
  return j;
}

void MergeExtra(nlohmann::json& j, const nlohmann::json& extra) {
  if (extra.is_object())
    for (auto it = extra.begin(); it != extra.end(); ++it) j[it.key()] = it.value();
}

}  // namespace

nlohmann::json BuildCompletionPayload(const CompletionSettings& s, const nlohmann::json& prompt,
                                      int max_tokens) {
  nlohmann::json j = CommonPayload(s, max_tokens);
  j["prompt"] = prompt;
  MergeExtra(j, s.extra_body);
  return j;
}

nlohmann::json BuildChatPayload(const CompletionSettings& s, const nlohmann::json& messages,
                                int max_tokens) {
  nlohmann::json j = CommonPayload(s, max_tokens);
  j["messages"] = messages;
  MergeExtra(j, s.extra_body);
  return j;
}

namespace {

std::string ErrorMessage(const nlohmann::json& e) {
  if (e.is_string()) return e.get<std::string>();
  if (e.is_object() && e.contains("message") && e["message"].is_string())
    return e["message"].get<std::string>();
  return e.dump();
}

}  // namespace

StreamChunk ParseStreamChunk(std::string_view data, bool chat) {
  StreamChunk c;
  if (data == "[DONE]") {
    c.done = true;
    return c;
  }
  nlohmann::json j = nlohmann::json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    c.error = "malformed stream chunk: " + std::string(data.substr(0, 200));
    return c;
  }
  if (j.contains("error") && !j["error"].is_null()) {
    c.error = ErrorMessage(j["error"]);
    return c;
  }
  if (auto it = j.find("choices"); it != j.end() && it->is_array() && !it->empty()) {
    const nlohmann::json& choice = (*it)[0];
    c.has_choice = true;
    const nlohmann::json* text = nullptr;
    if (chat) {
      if (auto d = choice.find("delta"); d != choice.end() && d->is_object()) {
        if (auto t = d->find("content"); t != d->end()) text = &*t;
      }
    } else if (auto t = choice.find("text"); t != choice.end()) {
      text = &*t;
    }
    if (text != nullptr && text->is_string()) c.text = text->get<std::string>();
    if (auto f = choice.find("finish_reason"); f != choice.end() && f->is_string())
      c.finish_reason = f->get<std::string>();
  }
  if (auto u = j.find("usage"); u != j.end() && u->is_object()) {
    if (auto p = u->find("prompt_tokens"); p != u->end() && p->is_number_integer())
      c.prompt_tokens = p->get<int>();
    if (auto p = u->find("completion_tokens"); p != u->end() && p->is_number_integer())
      c.completion_tokens = p->get<int>();
  }
  return c;
}

}  // namespace pagellm::bench
