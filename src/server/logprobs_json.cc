#include "server/logprobs_json.h"

#include <cmath>

#include "server/http_util.h"

namespace pagellm {
namespace {

double Clamp(float v) {
  return std::isfinite(v) ? v : -9999.0;
}

std::string TokenString(const ServingContext& ctx, int32_t id, bool as_ids) {
  return as_ids ? "token_id:" + std::to_string(id) : ctx.TokenText(id);
}

nlohmann::ordered_json Bytes(const std::string& s) {
  nlohmann::ordered_json b = nlohmann::ordered_json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

}  // namespace

nlohmann::ordered_json CompletionLogprobsJson(const ServingContext& ctx,
                                              const PromptLogprobs& prompt,
                                              const std::vector<TokenLogprobEntry>& entries,
                                              bool tokens_as_ids, size_t initial_offset) {
  using OJson = nlohmann::ordered_json;
  OJson tokens = OJson::array(), token_logprobs = OJson::array(), top_logprobs = OJson::array(),
        text_offset = OJson::array();
  size_t offset = initial_offset;
  auto add = [&](int32_t id, const TokenLogprobEntry* e) {
    const std::string token = TokenString(ctx, id, tokens_as_ids);
    tokens.push_back(token);
    text_offset.push_back(offset);
    offset += Utf8Length(token);
    if (e == nullptr) {  // the first prompt token: nothing to predict it from
      token_logprobs.push_back(nullptr);
      top_logprobs.push_back(nullptr);
      return;
    }
    token_logprobs.push_back(Clamp(e->logprob));
    // vLLM's dict holds the token itself as well as the top alternatives.
    OJson top = OJson::object();
    top[token] = Clamp(e->logprob);
    for (const auto& [alt, lp] : e->top) top[TokenString(ctx, alt, tokens_as_ids)] = Clamp(lp);
    top_logprobs.push_back(std::move(top));
  };
  for (size_t i = 0; i < prompt.ids.size(); ++i) {
    const bool scored = i < prompt.entries.size() && prompt.entries[i].has_value();
    add(prompt.ids[i], scored ? &*prompt.entries[i] : nullptr);
  }
  for (const TokenLogprobEntry& e : entries) add(e.token_id, &e);
  return {{"text_offset", std::move(text_offset)},
          {"token_logprobs", std::move(token_logprobs)},
          {"tokens", std::move(tokens)},
          {"top_logprobs", std::move(top_logprobs)}};
}

nlohmann::ordered_json PromptLogprobsJson(
    const ServingContext& ctx, std::span<const std::optional<TokenLogprobEntry>> entries) {
  using OJson = nlohmann::ordered_json;
  OJson out = OJson::array();
  for (const auto& e : entries) {
    if (!e) {
      out.push_back(nullptr);
      continue;
    }
    OJson position = OJson::object();
    auto add = [&](int32_t id, float lp, OJson rank) {
      const std::string key = std::to_string(id);
      if (position.contains(key)) return;
      position[key] = {
          {"logprob", Clamp(lp)}, {"rank", rank}, {"decoded_token", ctx.TokenText(id)}};
    };
    OJson own_rank = nullptr;
    for (size_t k = 0; k < e->top.size(); ++k)
      if (e->top[k].first == e->token_id) own_rank = static_cast<int>(k) + 1;
    add(e->token_id, e->logprob, own_rank);
    for (size_t k = 0; k < e->top.size(); ++k)
      add(e->top[k].first, e->top[k].second, static_cast<int>(k) + 1);
    out.push_back(std::move(position));
  }
  return out;
}

nlohmann::ordered_json ChatLogprobsContent(const ServingContext& ctx,
                                           const std::vector<TokenLogprobEntry>& entries,
                                           int num_top, bool tokens_as_ids) {
  nlohmann::ordered_json content = nlohmann::ordered_json::array();
  for (const TokenLogprobEntry& e : entries) {
    const std::string token = TokenString(ctx, e.token_id, tokens_as_ids);
    nlohmann::ordered_json top = nlohmann::ordered_json::array();
    for (size_t k = 0; k < e.top.size() && static_cast<int>(k) < num_top; ++k) {
      const std::string t = TokenString(ctx, e.top[k].first, tokens_as_ids);
      top.push_back({{"token", t}, {"logprob", Clamp(e.top[k].second)}, {"bytes", Bytes(t)}});
    }
    content.push_back({{"token", token},
                       {"logprob", Clamp(e.logprob)},
                       {"bytes", Bytes(token)},
                       {"top_logprobs", std::move(top)}});
  }
  return content;
}

}  // namespace pagellm
