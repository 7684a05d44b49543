#include "sample/sampler.h"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <functional>
#include <limits>

#include "pagellm/check.h"

namespace pagellm {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// NaN would poison every sum and comparison; +inf would make (x - max) NaN. Model logits are
// finite in practice, so map the two to the nearest values that keep the arithmetic defined.
inline float Sanitize(float x) {
  return std::isnan(x) ? kNegInf : std::min(x, FLT_MAX);
}

// The k-th largest value (counting duplicates), 1 <= k <= values.size(). A bounded min-heap
// for small k: one pass, and almost every element is rejected by one comparison with the heap
// top. nth_element on a copy otherwise. `buf` is reused scratch.
float KthLargest(std::span<const float> values, size_t k, std::vector<float>& buf) {
  if (k * 16 <= values.size()) {
    buf.assign(values.begin(), values.begin() + k);
    std::make_heap(buf.begin(), buf.end(), std::greater<float>());
    for (size_t i = k; i < values.size(); ++i) {
      if (values[i] > buf.front()) {
        std::pop_heap(buf.begin(), buf.end(), std::greater<float>());
        buf.back() = values[i];
        std::push_heap(buf.begin(), buf.end(), std::greater<float>());
      }
    }
    return buf.front();
  }
  buf.assign(values.begin(), values.end());
  std::nth_element(buf.begin(), buf.begin() + (k - 1), buf.end(), std::greater<float>());
  return buf[k - 1];
}

inline void CheckTokenId(int32_t id, size_t vocab, const char* what) {
  CHECK(id >= 0 && static_cast<size_t>(id) < vocab)
      << what << " id " << id << " outside vocabulary of " << vocab;
}

}  // namespace

float Sampler::EffectiveTemperature(const SamplingParams& params) {
  const float t = params.temperature;
  // vLLM's SamplingParams.__post_init__: tiny positive temperatures overflow softmax, so they
  // are raised to 0.01 rather than treated as greedy.
  if (t > 0.0f && t < kMinTemperature) return kMinTemperature;
  return t;
}

void Sampler::ProcessLogits(std::span<const float> logits, const SamplingInput& input) {
  const size_t vocab = logits.size();
  CHECK(vocab > 0) << "empty logits row";
  const SamplingParams& p = input.params;
  work_.resize(vocab);
  for (size_t i = 0; i < vocab; ++i) work_[i] = Sanitize(logits[i]);
  if (!input.allowed_tokens.empty()) ApplyAllowedTokens(input.allowed_tokens);

  // Duplicated ids add up; requests arrive as a JSON object, so they have none.
  for (const auto& [id, bias] : p.logit_bias) {
    CheckTokenId(id, vocab, "logit_bias");
    work_[id] += bias;
  }
  if (static_cast<int64_t>(input.output_ids.size()) < p.min_tokens) {
    for (int32_t id : input.eos_ids) {
      CheckTokenId(id, vocab, "eos");
      work_[id] = kNegInf;
    }
    for (int32_t id : p.stop_token_ids) {
      CheckTokenId(id, vocab, "stop_token_ids");
      work_[id] = kNegInf;
    }
  }
  ApplyPenalties(input);
}

void Sampler::ApplyAllowedTokens(std::span<const uint64_t> allowed) {
  const size_t vocab = work_.size();
  CHECK_EQ(allowed.size(), (vocab + 63) / 64) << "allowed-token mask of the wrong width";
  for (size_t w = 0; w < allowed.size(); ++w) {
    const uint64_t bits = allowed[w];
    if (bits == ~uint64_t{0}) continue;
    const size_t end = std::min(vocab, (w + 1) * 64);
    for (size_t i = w * 64; i < end; ++i)
      if (!((bits >> (i & 63)) & 1)) work_[i] = kNegInf;
  }
}

void Sampler::ApplyPenalties(const SamplingInput& input) {
  const SamplingParams& p = input.params;
  if (!HasPenalties(p)) return;
  const bool repetition = p.repetition_penalty != 1.0f;

  constexpr uint8_t kInPrompt = 1, kInOutput = 2;
  const size_t vocab = work_.size();
  if (seen_.size() != vocab) {
    seen_.assign(vocab, 0);
    counts_.assign(vocab, 0);
  }
  touched_.clear();
  for (int32_t id : input.output_ids) {
    CheckTokenId(id, vocab, "output");
    if (seen_[id] == 0) touched_.push_back(id);
    seen_[id] |= kInOutput;
    ++counts_[id];
  }
  // Only the repetition penalty looks at the prompt (vLLM: prompt_mask | output_mask).
  if (repetition) {
    for (int32_t id : input.prompt_ids) {
      CheckTokenId(id, vocab, "prompt");
      if (seen_[id] == 0) touched_.push_back(id);
      seen_[id] |= kInPrompt;
    }
  }
  for (int32_t id : touched_) {
    float& logit = work_[id];
    if (repetition) {
      logit = logit > 0.0f ? logit / p.repetition_penalty : logit * p.repetition_penalty;
    }
    if (seen_[id] & kInOutput) {
      logit -= p.frequency_penalty * static_cast<float>(counts_[id]);
      logit -= p.presence_penalty;
    }
    seen_[id] = 0;
    counts_[id] = 0;
  }
  touched_.clear();
}

int32_t Sampler::Argmax() const {
  // Strict > keeps the first (lowest) id among equal maxima, as torch.argmax does.
  size_t best = 0;
  for (size_t i = 1; i < work_.size(); ++i) {
    if (work_[i] > work_[best]) best = i;
  }
  return static_cast<int32_t>(best);
}

double Sampler::Filter(const SamplingParams& p) {
  const size_t vocab = work_.size();
  float max_logit = kNegInf;
  for (float v : work_) max_logit = std::max(max_logit, v);
  if (max_logit == kNegInf) {
    cand_.clear();
    block_sums_.clear();
    return 0.0;
  }

  const float temperature = EffectiveTemperature(p);
  // min_p and top_k are both "keep everything at or above a value" rules on the same order,
  // so applying them in one pass gives what applying them one after the other gives.
  float threshold = kNegInf;
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < vocab) {
    threshold = KthLargest(work_, static_cast<size_t>(p.top_k), scratch_);
  }
  cand_.resize(vocab);
  size_t kept = 0;
  const float min_weight = std::max(p.min_p, 0.0f);
  for (size_t i = 0; i < vocab; ++i) {
    const float logit = work_[i];
    // Mostly rejected when top_k is set, so this branch predicts well.
    if (logit < threshold) continue;
    // Softmax numerator relative to the best token, i.e. p_i / p_max; min_p compares exactly
    // this ratio (vLLM: p_i < min_p * p_max). -inf gives 0, which is dropped.
    const float weight = std::exp((logit - max_logit) / temperature);
    // Written unconditionally and kept by advancing the count: whether a token passes min_p
    // is data-dependent and a branch on it would mispredict constantly.
    cand_[kept] = {static_cast<int32_t>(i), weight};
    kept += (weight > 0.0f && weight >= min_weight) ? 1 : 0;
  }
  cand_.resize(kept);
  double total = SumCandidates();
  if (p.top_p < 1.0f && cand_.size() > 1) {
    ApplyTopP(p.top_p, total);
    total = SumCandidates();
  }
  return total;
}

double Sampler::SumCandidates() {
  // Per-block sums let Draw() skip whole blocks; four interleaved partial sums keep the adds
  // from waiting on each other. The order is fixed, so results are reproducible.
  block_sums_.clear();
  double total = 0.0;
  for (size_t begin = 0; begin < cand_.size(); begin += kBlock) {
    const size_t end = std::min(cand_.size(), begin + kBlock);
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    size_t i = begin;
    for (; i + 4 <= end; i += 4) {
      s0 += cand_[i].weight;
      s1 += cand_[i + 1].weight;
      s2 += cand_[i + 2].weight;
      s3 += cand_[i + 3].weight;
    }
    for (; i < end; ++i) s0 += cand_[i].weight;
    const double block = (s0 + s1) + (s2 + s3);
    block_sums_.push_back(block);
    total += block;
  }
  return total;
}

int32_t Sampler::Draw(double total, SamplerState& state) const {
  // Inverse CDF over cand_ (ascending ids): find the block where the cumulative mass passes
  // x, then the token inside it. Rounding can leave x just past the last running sum of a
  // block (or past the total); the block's last token takes that ~1e-16 of probability.
  const double x = state.NextUniform() * total;
  double acc = 0.0;
  for (size_t b = 0; b < block_sums_.size(); ++b) {
    const size_t begin = b * kBlock;
    const size_t end = std::min(cand_.size(), begin + kBlock);
    if (x < acc + block_sums_[b] || b + 1 == block_sums_.size()) {
      for (size_t i = begin; i < end; ++i) {
        acc += cand_[i].weight;
        if (x < acc) return cand_[i].id;
      }
      return cand_[end - 1].id;
    }
    acc += block_sums_[b];
  }
  CHECK(false) << "Draw() without candidates";
  return -1;
}

size_t Sampler::WeightBucket(float weight) {
  return std::min<size_t>(std::bit_cast<uint32_t>(weight) >> 20, kNumBuckets - 1);
}

bool Sampler::Before(const Candidate& a, const Candidate& b) {
  return a.weight > b.weight || (a.weight == b.weight && a.id < b.id);
}

bool Sampler::BeforeNoBranch(const Candidate& a, const Candidate& b) {
  // Same order as Before(); bitwise operators evaluate every term so no branch is needed.
  return (a.weight > b.weight) | ((a.weight == b.weight) & (a.id < b.id));
}

void Sampler::ApplyTopP(float top_p, double total) {
  // vLLM keeps a token iff the mass of the tokens ranked above it is < top_p (equivalently its
  // ascending cumulative sum exceeds 1 - top_p), so the token that crosses top_p is kept.
  // Sorting the vocabulary for that is the slow part of top_p; instead:
  //  1. Histogram the mass by weight bucket. For positive floats the bit pattern increases with
  //     the value, so its top bits (exponent + 3 mantissa bits: buckets 2^(1/8) apart) are a
  //     monotone bucket index.
  //  2. Walk buckets from the top to the one where the mass reaches the target: buckets above
  //     are kept whole, buckets below dropped whole.
  //  3. Inside that bucket (usually a few hundred tokens, but all of them for a flat
  //     distribution), a quickselect on mass finds the boundary token: partition around a
  //     pivot; if the mass above it reaches the target the boundary is above, otherwise
  //     everything above and the pivot are kept and the search continues below. Small ranges
  //     are sorted and walked.
  const double target = static_cast<double>(top_p) * total;
  bucket_mass_.assign(kNumBuckets, 0.0);
  for (const Candidate& c : cand_) bucket_mass_[WeightBucket(c.weight)] += c.weight;
  double head = 0.0;  // mass of the candidates known to rank above the search range
  size_t boundary = kNumBuckets;
  while (boundary > 0) {
    --boundary;
    if (head + bucket_mass_[boundary] >= target) break;
    head += bucket_mass_[boundary];
  }
  sorted_.clear();
  for (const Candidate& c : cand_) {
    if (WeightBucket(c.weight) == boundary) sorted_.push_back(c);
  }
  if (sorted_.empty()) return;  // rounding left the target unreached: keep everything
  scratch_cand_.resize(sorted_.size());
  size_t lo = 0, hi = sorted_.size();
  Candidate last = sorted_.back();  // lowest-ranked kept candidate (overwritten below)
  bool done = false;
  while (hi - lo > kSortBelow) {
    const Candidate& a = sorted_[lo];
    const Candidate& b = sorted_[lo + (hi - lo) / 2];
    const Candidate& c = sorted_[hi - 1];
    // Median of three: deterministic, and robust to already-ordered input.
    const Candidate pivot = Before(a, b) ? (Before(b, c) ? b : (Before(a, c) ? c : a))
                                         : (Before(a, c) ? a : (Before(b, c) ? c : b));
    // Split [lo, hi) into those ranked above the pivot (front) and the rest (back) through
    // scratch_cand_, branch-free: on real logits whether a token ranks above the pivot is
    // close to a coin flip, and std::partition's branches would mispredict half the time.
    // (Index arithmetic rather than ?: so the compiler cannot turn it back into a branch.)
    size_t front = lo, back = hi;
    for (size_t i = lo; i < hi; ++i) {
      const Candidate x = sorted_[i];
      const size_t above = BeforeNoBranch(x, pivot) ? 1 : 0;
      back -= 1 - above;
      scratch_cand_[above * front + (1 - above) * back] = x;
      front += above;
    }
    std::copy(scratch_cand_.begin() + lo, scratch_cand_.begin() + hi, sorted_.begin() + lo);
    double mass = 0.0;
    for (size_t i = lo; i < front; ++i) mass += sorted_[i].weight;
    // The pivot ranks first in the back part; put it at its boundary.
    const size_t m = front;
    for (size_t i = m; i < hi; ++i) {
      if (sorted_[i].id == pivot.id) {
        std::swap(sorted_[m], sorted_[i]);
        break;
      }
    }
    if (head + mass >= target) {
      hi = m;  // the boundary is above the pivot; [lo, m) is not empty since mass > 0
      continue;
    }
    head += mass + pivot.weight;
    last = pivot;
    if (head >= target) {
      done = true;
      break;
    }
    lo = m + 1;
  }
  if (!done) {
    std::sort(sorted_.begin() + lo, sorted_.begin() + hi, Before);
    for (size_t j = lo; j < hi && head < target; ++j) {
      head += sorted_[j].weight;
      last = sorted_[j];
    }
  }
  // Keep cand_ in id order: drop exactly the candidates ranked below the last kept one
  // (compacted branch-free, for the same reason as above).
  size_t kept = 0;
  for (const Candidate& x : cand_) {
    cand_[kept] = x;
    kept += BeforeNoBranch(last, x) ? 0 : 1;
  }
  cand_.resize(kept);
}

int32_t Sampler::GreedyToken(std::span<const float> logits, const SamplingInput& input) {
  const SamplingParams& p = input.params;
  const bool min_tokens_active = static_cast<int64_t>(input.output_ids.size()) < p.min_tokens &&
                                 (!input.eos_ids.empty() || !p.stop_token_ids.empty());
  if (!p.logit_bias.empty() || min_tokens_active || HasPenalties(p) ||
      !input.allowed_tokens.empty()) {
    ProcessLogits(logits, input);
    return Argmax();
  }
  // Argmax() over Sanitize(logits) without the copy: strict > keeps the lowest id on ties.
  CHECK(!logits.empty()) << "empty logits row";
  size_t best = 0;
  float best_value = Sanitize(logits[0]);
  for (size_t i = 1; i < logits.size(); ++i) {
    const float v = Sanitize(logits[i]);
    if (v > best_value) {
      best_value = v;
      best = i;
    }
  }
  return static_cast<int32_t>(best);
}

SampleResult Sampler::Sample(std::span<const float> logits, const SamplingInput& input,
                             SamplerState& state) {
  const SamplingParams& p = input.params;
  SampleResult result;
  if (IsGreedy(p)) {
    result.token = GreedyToken(logits, input);
  } else {
    ProcessLogits(logits, input);
    const double total = Filter(p);
    // Nothing finite (the all -inf row): argmax, i.e. token 0.
    result.token = total > 0.0 ? Draw(total, state) : Argmax();
  }
  if (p.logprobs.has_value()) FillLogprobs(logits, *p.logprobs, result);
  return result;
}

void Sampler::ComputeProbs(std::span<const float> logits, const SamplingInput& input,
                           std::span<float> probs) {
  CHECK_EQ(probs.size(), logits.size());
  ProcessLogits(logits, input);
  std::fill(probs.begin(), probs.end(), 0.0f);
  const double total = IsGreedy(input.params) ? 0.0 : Filter(input.params);
  if (total <= 0.0) {
    probs[Argmax()] = 1.0f;
    return;
  }
  for (const Candidate& c : cand_) probs[c.id] = static_cast<float>(c.weight / total);
}

SampleResult Sampler::ScoreToken(std::span<const float> logits, int32_t token, int num_logprobs) {
  CHECK(token >= 0 && static_cast<size_t>(token) < logits.size());
  SampleResult r;
  r.token = token;
  FillLogprobs(logits, num_logprobs, r);
  return r;
}

void Sampler::FillLogprobs(std::span<const float> logits, int num_logprobs, SampleResult& result) {
  const size_t vocab = logits.size();
  float max_logit = kNegInf;
  for (float v : logits) max_logit = std::max(max_logit, Sanitize(v));
  // log_softmax(x)_i = x_i - (max + log sum exp(x - max)); an all -inf row reports -inf.
  double log_norm = 0.0;
  if (max_logit != kNegInf) {
    double s0 = 0.0, s1 = 0.0;  // two chains so the adds overlap
    size_t i = 0;
    for (; i + 2 <= vocab; i += 2) {
      s0 += std::exp(Sanitize(logits[i]) - max_logit);
      s1 += std::exp(Sanitize(logits[i + 1]) - max_logit);
    }
    if (i < vocab) s0 += std::exp(Sanitize(logits[i]) - max_logit);
    log_norm = max_logit + std::log(s0 + s1);
  }
  auto logprob_of = [&](float logit) {
    return static_cast<float>(static_cast<double>(logit) - log_norm);
  };

  const float chosen = Sanitize(logits[result.token]);
  result.logprob = logprob_of(chosen);

  // One pass for the rank and the top n. Candidate::weight holds the raw logit here, so
  // Before() ranks by logit, lower id first among equals. For small n a bounded heap whose
  // front is the worst of the best n seen so far; almost every token is rejected by one
  // comparison with it.
  const size_t n = num_logprobs < 0 ? vocab : std::min(static_cast<size_t>(num_logprobs), vocab);
  const bool use_heap = n * 16 <= vocab;
  int32_t rank = 0;
  sorted_.clear();
  for (size_t i = 0; i < vocab; ++i) {
    const Candidate c{static_cast<int32_t>(i), Sanitize(logits[i])};
    rank += c.weight >= chosen ? 1 : 0;
    if (n == 0) continue;
    if (!use_heap) {
      sorted_.push_back(c);
    } else if (sorted_.size() < n) {
      sorted_.push_back(c);
      std::push_heap(sorted_.begin(), sorted_.end(), Before);
    } else if (Before(c, sorted_.front())) {
      std::pop_heap(sorted_.begin(), sorted_.end(), Before);
      sorted_.back() = c;
      std::push_heap(sorted_.begin(), sorted_.end(), Before);
    }
  }
  result.rank = rank;
  if (use_heap) {
    std::sort_heap(sorted_.begin(), sorted_.end(), Before);
  } else {
    std::partial_sort(sorted_.begin(), sorted_.begin() + n, sorted_.end(), Before);
    sorted_.resize(n);
  }
  result.top_logprobs.clear();
  result.top_logprobs.reserve(n);
  for (const Candidate& c : sorted_) result.top_logprobs.push_back({c.id, logprob_of(c.weight)});
}

int32_t SampleFromProbs(std::span<const float> probs, SamplerState& state) {
  double total = 0.0;
  int32_t last_positive = -1;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] > 0.0f) {
      total += probs[i];
      last_positive = static_cast<int32_t>(i);
    }
  }
  if (last_positive < 0) return -1;
  const double x = state.NextUniform() * total;
  double acc = 0.0;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] > 0.0f) {
      acc += probs[i];
      if (x < acc) return static_cast<int32_t>(i);
    }
  }
  return last_positive;
}

SampleResult SampleToken(std::span<const float> logits, const SamplingParams& params,
                         std::span<const int32_t> prompt_ids, std::span<const int32_t> output_ids,
                         SamplerState& state, std::span<const int32_t> eos_ids) {
  Sampler sampler;
  return sampler.Sample(logits, SamplingInput{params, prompt_ids, output_ids, eos_ids}, state);
}

}  // namespace pagellm
