#include "sample/rejection_sampler.h"

#include <cstddef>

#include "pagellm/check.h"
#include "sample/sampler.h"

namespace pagellm {
namespace {

// Row `i` (vocab floats) of a [rows][vocab] row-major matrix.
std::span<const float> Row(std::span<const float> matrix, size_t i, size_t vocab) {
  return matrix.subspan(i * vocab, vocab);
}

// A draw from `probs` (need not be normalized); when it has no positive mass (an all-zero or
// all-NaN row, which ComputeProbs never produces) the argmax fallback keeps the result a valid
// id, as the Sampler returns token 0 for all -inf logits. Consumes one uniform either way so the
// random stream does not depend on the fallback.
int32_t DrawOrArgmax(std::span<const float> probs, SamplerState& state) {
  const int32_t id = SampleFromProbs(probs, state);
  if (id >= 0) return id;
  state.NextUniform();
  return ArgmaxProb(probs);
}

// The recovered token at a rejected position: one inverse-CDF draw from max(p_t - p_d, 0), in
// ascending id order, with one uniform. `draft` empty means a point mass at `draft_id` (n-gram):
// the residual is p_t with draft_id removed. Falls back to p_t when the residual has no mass.
int32_t DrawResidual(std::span<const float> target, std::span<const float> draft, int32_t draft_id,
                     SamplerState& state) {
  const size_t vocab = target.size();
  // Residual weight of token j, in double so small differences of close rows are kept. NaN on
  // either side makes `r > 0` false: such tokens get no mass.
  auto residual = [&](size_t j) -> double {
    if (draft.empty()) return j == static_cast<size_t>(draft_id) ? 0.0 : target[j];
    return static_cast<double>(target[j]) - static_cast<double>(draft[j]);
  };
  double total = 0.0;
  size_t last_positive = vocab;
  for (size_t j = 0; j < vocab; ++j) {
    const double r = residual(j);
    if (r > 0.0) {
      total += r;
      last_positive = j;
    }
  }
  if (last_positive == vocab) return DrawOrArgmax(target, state);
  const double x = state.NextUniform() * total;
  double acc = 0.0;
  for (size_t j = 0; j < vocab; ++j) {
    const double r = residual(j);
    if (r > 0.0) {
      acc += r;
      if (x < acc) return static_cast<int32_t>(j);
    }
  }
  // Rounding left x at or above the final partial sum: the last token with mass.
  return static_cast<int32_t>(last_positive);
}

}  // namespace

int32_t ArgmaxProb(std::span<const float> probs) {
  int32_t best = 0;
  float best_value = 0.0f;
  bool found = false;
  for (size_t i = 0; i < probs.size(); ++i) {
    // Strict > keeps the lowest id among equals; NaN never compares greater.
    if (!found ? (probs[i] == probs[i]) : (probs[i] > best_value)) {
      best = static_cast<int32_t>(i);
      best_value = probs[i];
      found = true;
    }
  }
  return best;
}

RejectionResult VerifyGreedy(std::span<const int32_t> draft_ids,
                             std::span<const int32_t> target_tokens) {
  CHECK_EQ(target_tokens.size(), draft_ids.size() + 1);
  RejectionResult result;
  result.tokens.reserve(target_tokens.size());
  for (size_t i = 0; i < draft_ids.size(); ++i) {
    result.tokens.push_back(target_tokens[i]);
    if (target_tokens[i] != draft_ids[i]) return result;  // the mismatch emits the target token
    ++result.num_accepted;
  }
  result.tokens.push_back(target_tokens.back());
  return result;
}

RejectionResult RejectionSample(std::span<const int32_t> draft_ids,
                                std::span<const float> draft_probs,
                                std::span<const float> target_probs, int32_t vocab_size,
                                bool greedy, SamplerState& state) {
  CHECK_GT(vocab_size, 0);
  const size_t k = draft_ids.size();
  const size_t vocab = static_cast<size_t>(vocab_size);
  CHECK_EQ(target_probs.size(), (k + 1) * vocab);
  for (int32_t id : draft_ids) CHECK(id >= 0 && id < vocab_size) << "draft id " << id;

  RejectionResult result;
  result.tokens.reserve(k + 1);

  if (greedy) {
    std::vector<int32_t> targets(k + 1);
    for (size_t i = 0; i <= k; ++i) targets[i] = ArgmaxProb(Row(target_probs, i, vocab));
    return VerifyGreedy(draft_ids, targets);
  }

  const bool has_draft_probs = !draft_probs.empty();
  if (has_draft_probs) CHECK_EQ(draft_probs.size(), k * vocab);
  for (size_t i = 0; i < k; ++i) {
    const int32_t x = draft_ids[i];
    const std::span<const float> target = Row(target_probs, i, vocab);
    const std::span<const float> draft =
        has_draft_probs ? Row(draft_probs, i, vocab) : std::span<const float>();
    const double p_t = target[x];
    const double p_d = has_draft_probs ? static_cast<double>(draft[x]) : 1.0;
    const double u = state.NextUniform();  // drawn unconditionally: one per examined position
    // u < p_t / p_d without the division; `p_t > 0` for p_d == 0 (see header). NaN fails both.
    const bool accept = p_d > 0.0 ? u * p_d < p_t : p_t > 0.0;
    if (!accept) {
      result.tokens.push_back(DrawResidual(target, draft, x, state));
      return result;
    }
    result.tokens.push_back(x);
    ++result.num_accepted;
  }
  result.tokens.push_back(DrawOrArgmax(Row(target_probs, k, vocab), state));
  return result;
}

}  // namespace pagellm
