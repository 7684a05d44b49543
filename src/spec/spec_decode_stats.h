// Speculative-decoding acceptance counters, as vLLM V1's SpecDecodingStats
// (vllm/v1/spec_decode/metrics.py): one observation per request-step that verified at least one
// drafted token. They back the Prometheus counters vllm:spec_decode_num_drafts,
// vllm:spec_decode_num_draft_tokens, vllm:spec_decode_num_accepted_tokens and
// vllm:spec_decode_num_accepted_tokens_per_pos{position}, and the periodic log line.
//
// Definitions (vLLM's): acceptance rate = accepted / draft tokens; mean acceptance length =
// 1 + accepted / drafts (tokens emitted per verification step, the bonus/recovered token
// included); per-position acceptance rate = accepted_per_pos[i] / drafts. Drafts are accepted
// as a prefix, so accepting n tokens counts positions 0..n-1.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pagellm {

struct SpecDecodeStats {
  int64_t num_drafts = 0;           // verification steps with >= 1 drafted token
  int64_t num_draft_tokens = 0;     // drafted tokens verified
  int64_t num_accepted_tokens = 0;  // drafted tokens accepted
  // [position] accepted drafts at that position (grows to the longest draft seen).
  std::vector<int64_t> accepted_per_pos;

  // One request-step: `num_draft_tokens` drafts verified, the first `num_accepted` accepted
  // (0 <= num_accepted <= num_draft_tokens, CHECKed). Steps without drafts are not counted,
  // as in vLLM.
  void ObserveDraft(int num_draft_tokens, int num_accepted);

  // Adds another accumulator (e.g. a step's stats into the engine totals).
  void Merge(const SpecDecodeStats& other);
  // The counts accumulated since `earlier`, a previous copy of this accumulator (for interval
  // log lines over cumulative totals).
  SpecDecodeStats Since(const SpecDecodeStats& earlier) const;
  void Reset() { *this = SpecDecodeStats(); }

  // accepted / draft tokens in [0, 1]; 0 before any draft.
  double AcceptanceRate() const;
  // 1 + accepted / drafts; 1 before any draft (no speculation: one token per step).
  double MeanAcceptanceLength() const;
  // accepted_per_pos[i] / drafts for every position; empty before any draft.
  std::vector<double> PerPositionAcceptanceRate() const;

  // vLLM-style log line for an interval of `interval_s` seconds, e.g.
  // "SpecDecoding metrics: Mean acceptance length: 2.50, Accepted throughput: 30.00 tokens/s,
  //  Drafted throughput: 40.00 tokens/s, Accepted: 300 tokens, Drafted: 400 tokens,
  //  Per-position acceptance rate: 0.900, 0.600, Avg Draft acceptance rate: 75.0%".
  std::string LogLine(double interval_s) const;
};

}  // namespace pagellm
