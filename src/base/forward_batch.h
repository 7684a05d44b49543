// The batch one forward step runs: a ragged batch in which each sequence contributes a
// contiguous run of tokens (a prefill chunk or decode tokens) at its own positions, reading and
// writing its KV through its block table. Plain data shared by the scheduler's caller, the
// backends and the attention kernels (kernels/paged_attention.h), so it sits below all of them.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace pagellm {

struct SequenceChunk {
  int32_t num_tokens = 0;  // tokens of this sequence in the step (>= 1)
  int32_t start_pos = 0;   // position of the first of them (= tokens already in the KV cache)
  // Block ids covering positions [0, start_pos + num_tokens); owned by the caller.
  std::span<const int32_t> block_table;
  // Logits for every token of the chunk (prompt logprobs, perplexity, spec-decode verification)
  // instead of only the last one.
  bool all_logits = false;
  // Also return the final-normed hidden state of every token of the chunk (embeddings: the
  // pooling runner pools them); off for generation, which then pays nothing.
  bool hidden_states = false;
  // With several KV cache groups (kv/kv_cache_groups.h): every group's table (group 0's is
  // block_table); the layers of group g read and write through group_block_tables[g], whose
  // null entries (block 0) lie before the window of every token of the chunk. Empty: one group.
  std::span<const std::vector<int32_t>> group_block_tables = {};
};

struct ForwardBatch {
  std::vector<int32_t> token_ids;   // [total tokens], sequences back to back
  std::vector<SequenceChunk> seqs;  // in the same order as their tokens
};

struct ForwardOutput {
  // [num_rows][vocab]; rows in sequence order: all rows of a chunk with all_logits, else one.
  std::vector<float> logits;
  std::vector<int32_t> row_offset;  // per sequence: index of its first row
  int32_t vocab_size = 0;
  const float* row(int32_t r) const { return logits.data() + int64_t{r} * vocab_size; }
  // With SequenceChunk::hidden_states: [rows][hidden_size], the chunks that asked, in sequence
  // order, one row per token; hidden_offset[i] is sequence i's first row (-1: did not ask).
  std::vector<float> hidden;
  std::vector<int32_t> hidden_offset;
  int32_t hidden_size = 0;
  // Tensor parallelism, on rank 0 (backend/tensor_parallel_backend.h): wall time this step
  // spent inside the group's collectives — the step message's broadcast, the all-reduces, the
  // logits gather — of which in the all-reduces, and how many all-reduces it ran. Zero on one
  // rank.
  double comm_seconds = 0;
  double all_reduce_seconds = 0;
  int32_t num_all_reduces = 0;
};

}  // namespace pagellm
