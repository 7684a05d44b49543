// How one engine step runs through a pipeline of stages: its batch is cut into micro-batches
// (contiguous runs of whole sequences), which every stage runs in order, so that stage s works
// on micro-batch k while stage s + 1 works on micro-batch k - 1. The last stage's outputs of
// the micro-batches, put back together, are the step's outputs (ForwardOutput), which travel to
// rank 0 as one message.
//
// The kernels are batch-invariant (a sequence's results do not depend on what else is in its
// batch), so the outputs equal the unsplit batch's bit for bit. Splitting inside a sequence's
// chunk would need logits of its last token only from the last piece, so a single long prompt
// is not split: a step of one sequence runs stage after stage (docs/PARALLELISM.md,
// "Micro-batches").
#pragma once

#include <cstdint>
#include <vector>

#include "base/forward_batch.h"
#include "pagellm/status.h"

namespace pagellm {

// Sequences [seq_begin, seq_end) of a batch, whose tokens are [token_begin, token_end).
struct MicroBatch {
  int seq_begin = 0, seq_end = 0;
  int64_t token_begin = 0, token_end = 0;
};

// Below this many tokens per micro-batch a step is not split further: a CPU matmul of a few
// rows is bound by reading the weights, and every micro-batch reads them again.
inline constexpr int kDefaultMinMicroBatchTokens = 16;

// How a world of ranks is split into pipeline stages (BackendOptions::pipeline).
struct PipelineOptions {
  int pipeline_parallel_size = 1;    // stages; the world has tp x this many ranks
  std::vector<int> layer_partition;  // layers per stage; empty: vLLM's rule (PartitionLayers)
  int min_micro_batch_tokens = kDefaultMinMicroBatchTokens;
};

// The micro-batches of `batch` on `num_stages` stages: as many as the stages, but no more than
// the batch has sequences or than leave min_tokens tokens to each (at least one), with about
// the same number of tokens each (each cut at the first sequence that reaches its share).
std::vector<MicroBatch> PlanMicroBatches(const ForwardBatch& batch, int num_stages, int min_tokens);

// The micro-batch `m` of `batch` as a batch of its own (block tables shared with `batch`).
ForwardBatch MicroBatchOf(const ForwardBatch& batch, const MicroBatch& m);

// Appends the outputs of the next micro-batch to `whole` (rows and hidden rows renumbered after
// those already there); `whole` starts empty.
void AppendOutput(const ForwardOutput& part, ForwardOutput* whole);

// A step's outputs as one message from the last stage to rank 0, and back. DataLoss for a
// truncated or inconsistent message.
std::vector<uint8_t> EncodeOutput(const ForwardOutput& out);
Status DecodeOutput(const std::vector<uint8_t>& bytes, ForwardOutput* out);

}  // namespace pagellm
