// How a tokenized document is cut into causal passes for perplexity, and how those passes are
// packed into ragged forward batches.
#pragma once

#include <cstdint>
#include <vector>

namespace pagellm {

// One causal pass over tokens [begin, end) of document `doc`, at positions 0..end-begin-1 (a
// fresh context), scoring the targets [first_target, end). Target t is predicted by the logits
// of token t - 1, i.e. row t - 1 - begin of the window's all-position logits.
struct ScoringWindow {
  int32_t doc = 0;
  int32_t begin = 0;
  int32_t end = 0;
  int32_t first_target = 0;

  int32_t length() const { return end - begin; }
  int32_t num_targets() const { return end - first_target; }
};

// Hugging Face's sliding-window perplexity: window k covers [k*stride, min(k*stride +
// max_length, n)) and scores only the tokens no earlier window scored; the last window is the
// first that reaches n. Token 0 (BOS) and, with stride == max_length, the first token of every
// window have no context and are not scored. A document that fits in max_length is one window
// scoring tokens 1..n-1. Windows that would score nothing (n < 2) are left out.
// Requires max_length >= 2 and 1 <= stride <= max_length.
std::vector<ScoringWindow> PlanScoringWindows(int32_t doc, int32_t num_tokens, int32_t max_length,
                                              int32_t stride);

// A contiguous run [first, first + count) of windows that run as one forward batch.
struct ScoringBatch {
  int32_t first = 0;
  int32_t count = 0;
  int64_t num_tokens = 0;
};

// Packs `windows`, in order, into batches of at most `max_tokens` tokens. A window longer than
// max_tokens gets a batch of its own (the evaluator runs it in chunks of max_tokens).
std::vector<ScoringBatch> PackScoringBatches(const std::vector<ScoringWindow>& windows,
                                             int64_t max_tokens);

}  // namespace pagellm
