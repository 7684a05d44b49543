#include "planner/memory_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "kv/kv_cache_groups.h"
#include "model/pipeline_stage.h"
#include "planner/byte_size.h"

namespace pagellm {
namespace {

Status ValidateInput(const PlanInput& in) {
  RETURN_IF_ERROR(in.model.Validate());
  RETURN_IF_ERROR(ValidateTensorParallel(in.model, in.tensor_parallel_size));
  RETURN_IF_ERROR(
      PartitionLayers(in.model.num_layers, in.pipeline_parallel_size, in.layer_partition).status());
  if (in.pipeline_parallel_size > 1 && !in.kv_group_windows.empty()) {
    return InvalidArgumentError(
        "--pipeline-parallel-size: KV cache groups (sliding-window layers freeing blocks) are not "
        "split across stages; give --disable-hybrid-kv-cache-manager");
  }
  if (!(in.gpu_memory_utilization > 0.0 && in.gpu_memory_utilization <= 1.0)) {
    return InvalidArgumentError(
        fmt::format("--gpu-memory-utilization {} must be in (0, 1]", in.gpu_memory_utilization));
  }
  if (in.block_size < 1 || in.block_size > 256) {
    return InvalidArgumentError(fmt::format("--block-size {} must be in [1, 256]", in.block_size));
  }
  if (in.max_model_len < 1) {
    return InvalidArgumentError(fmt::format("--max-model-len {} must be >= 1", in.max_model_len));
  }
  if (in.kv_cache_memory_bytes && *in.kv_cache_memory_bytes <= 0) {
    return InvalidArgumentError(
        fmt::format("--kv-cache-memory {} must be > 0", *in.kv_cache_memory_bytes));
  }
  if (in.num_gpu_blocks_override && *in.num_gpu_blocks_override <= 0) {
    return InvalidArgumentError(
        fmt::format("--num-gpu-blocks-override {} must be >= 1", *in.num_gpu_blocks_override));
  }
  // Device memory only matters when neither override replaces the budget.
  if (in.device_memory_bytes <= 0 && !in.kv_cache_memory_bytes && !in.num_gpu_blocks_override) {
    return InvalidArgumentError(
        "device memory is unknown: give the device memory or "
        "--kv-cache-memory");
  }
  if (in.device_memory_bytes < 0 || in.activation_bytes < 0 || in.weights.bytes < 0 ||
      in.weights.bytes_per_device < 0) {
    return InvalidArgumentError("memory sizes must be >= 0");
  }
  if (in.kv_format.bits_per_element <= 0) {
    return InvalidArgumentError("KV cache element format is not resolved");
  }
  return Status::Ok();
}

}  // namespace

int64_t LargestFittingLength(int64_t upper, const std::function<bool(int64_t)>& fits) {
  // Invariant: the answer lies in [lo, hi], and lo is 0 or a length known to fit.
  int64_t lo = 0, hi = upper;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (fits(mid)) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

namespace {

// KV bytes per token of one device of stage `l`: its layers (those of them listed in the skip
// layers in the skip dtype) of `heads` KV heads.
int64_t StageKvBytesPerToken(const KvElementFormat& format, const StageLayout& l, int heads,
                             int head_dim) {
  KvElementFormat stage = format;
  stage.skip_layers.clear();
  for (int layer : format.skip_layers)
    if (layer >= l.layer_begin && layer < l.layer_end) stage.skip_layers.push_back(layer);
  return KvBytesPerToken(stage, l.num_layers(), heads, head_dim);
}

// Lowers p->kv_cache_budget_bytes to the free-memory bound of PlanInput (see there) and says
// so in p->kv_budget_capped_by.
void ApplyFreeMemoryBound(const PlanInput& in, MemoryPlan* p) {
  if (in.free_memory_bytes) {
    const int64_t cap = *in.free_memory_bytes - p->weights_bytes_per_device - p->activation_bytes -
                        in.free_memory_headroom_bytes;
    if (cap < p->kv_cache_budget_bytes) {
      p->kv_cache_budget_bytes = std::max<int64_t>(cap, 0);
      p->kv_budget_capped_by = fmt::format(
          "memory free at start-up: {} free - weights {} - activations {} - headroom {} left "
          "for other processes",
          FormatBytes(*in.free_memory_bytes), FormatBytes(p->weights_bytes_per_device),
          FormatBytes(p->activation_bytes), FormatBytes(in.free_memory_headroom_bytes));
    }
  }
}

}  // namespace

StatusOr<MemoryPlan> ComputeMemoryPlan(const PlanInput& in) {
  RETURN_IF_ERROR(ValidateInput(in));
  MemoryPlan p;
  p.input = in;
  const ModelConfig& c = in.model;
  const int tp = in.tensor_parallel_size;

  // vLLM computes total x utilization in floating point and floors the block count; flooring
  // the byte budget first gives the same blocks for any realistic size.
  p.usable_memory_bytes = static_cast<int64_t>(
      std::floor(static_cast<long double>(in.device_memory_bytes) * in.gpu_memory_utilization));
  p.weights_bytes = in.weights.bytes;
  p.weights_bytes_per_device = in.weights.bytes_per_device;
  p.activation_bytes = in.activation_bytes;
  if (in.kv_cache_memory_bytes) {
    p.kv_cache_budget_bytes = *in.kv_cache_memory_bytes;
    p.budget_from_kv_cache_memory = true;
  } else {
    p.kv_cache_budget_bytes =
        p.usable_memory_bytes - p.weights_bytes_per_device - p.activation_bytes;
  }

  p.kv_heads_per_device = KvHeadsPerDevice(c, tp);
  p.kv_bytes_per_token = KvBytesPerToken(in.kv_format, c.num_layers, c.num_kv_heads, c.head_dim);
  // Every stage's devices hold the same number of blocks: the stage with the most KV per token
  // sets the block size in bytes.
  const std::vector<int> stages =
      PartitionLayers(c.num_layers, in.pipeline_parallel_size, in.layer_partition).value();
  for (int s = 0; s < in.pipeline_parallel_size; ++s) {
    const StageLayout l = StageOf(stages, s);
    const int64_t bytes = StageKvBytesPerToken(in.kv_format, l, p.kv_heads_per_device, c.head_dim);
    if (bytes > p.kv_bytes_per_token_per_device) {
      p.kv_bytes_per_token_per_device = bytes;
      p.kv_layers_per_device = l.num_layers();
    }
  }
  const bool grouped = !in.kv_group_windows.empty();
  auto blocks_for = [&in, grouped](int64_t len) {
    return grouped ? BlocksPerRequest(in.kv_group_windows, in.block_size, len)
                   : (len + in.block_size - 1) / in.block_size;
  };
  if (grouped) {
    // A pool block holds the K/V of one group's layers (kv/kv_cache_groups.h).
    p.kv_bytes_per_block =
        KvBytesPerToken(in.kv_format, in.kv_layers_per_group, p.kv_heads_per_device, c.head_dim) *
        in.block_size;
    p.blocks_per_request = blocks_for(in.max_model_len);
    p.kv_bytes_per_request =
        p.blocks_per_request *
        KvBytesPerToken(in.kv_format, in.kv_layers_per_group, c.num_kv_heads, c.head_dim) *
        in.block_size;
  } else {
    p.kv_bytes_per_block = p.kv_bytes_per_token_per_device * in.block_size;
    p.blocks_per_request = blocks_for(in.max_model_len);
    p.kv_bytes_per_request = p.blocks_per_request * in.block_size * p.kv_bytes_per_token;
  }
  p.kv_bytes_per_request_per_device = p.blocks_per_request * p.kv_bytes_per_block;
  if (!in.kv_cache_memory_bytes) ApplyFreeMemoryBound(in, &p);

  const int64_t budget_blocks =
      p.kv_cache_budget_bytes > 0 ? p.kv_cache_budget_bytes / p.kv_bytes_per_block : 0;
  if (in.num_gpu_blocks_override) {
    p.num_blocks = *in.num_gpu_blocks_override;
    p.num_blocks_from_override = true;
    if (p.num_blocks > budget_blocks) {
      p.warnings.push_back(fmt::format(
          "--num-gpu-blocks-override {} exceeds the {} blocks the KV budget ({}) holds",
          p.num_blocks, budget_blocks, FormatBytes(std::max<int64_t>(p.kv_cache_budget_bytes, 0))));
    }
  } else {
    p.num_blocks = budget_blocks;
  }
  if (p.num_blocks > kMaxPlannedBlocks) {
    p.warnings.push_back(fmt::format("{} blocks exceed the engine's block-id range; capped at {}",
                                     p.num_blocks, kMaxPlannedBlocks));
    p.num_blocks = kMaxPlannedBlocks;
  }
  p.num_blocks_allocated = p.num_blocks + 1;
  p.kv_cache_bytes_allocated = p.num_blocks_allocated * p.kv_bytes_per_block;
  p.num_tokens = p.num_blocks * in.block_size /
                 (grouped ? static_cast<int64_t>(in.kv_group_windows.size()) : 1);
  p.max_concurrency = static_cast<double>(p.num_blocks) / static_cast<double>(p.blocks_per_request);
  p.total_bytes_per_device =
      p.weights_bytes_per_device + p.activation_bytes + p.kv_cache_bytes_allocated;

  const int64_t blocks = p.num_blocks;
  auto fits = [blocks, &blocks_for](int64_t len) { return blocks_for(len) <= blocks; };
  p.fits = fits(in.max_model_len);
  p.max_model_len_that_fits = LargestFittingLength(in.max_model_len, fits);

  if (in.device_memory_bytes > 0 && p.total_bytes_per_device > in.device_memory_bytes) {
    p.warnings.push_back(fmt::format(
        "weights + activations + KV cache ({}) exceed the device memory ({}) per device",
        FormatBytes(p.total_bytes_per_device), FormatBytes(in.device_memory_bytes)));
  }
  if (in.max_model_len > c.max_position_embeddings) {
    p.warnings.push_back(
        fmt::format("--max-model-len {} is longer than the model's max_position_embeddings {}",
                    in.max_model_len, c.max_position_embeddings));
  }
  return p;
}

Status CheckPlanFits(const MemoryPlan& p) {
  if (p.fits) return Status::Ok();
  const PlanInput& in = p.input;
  if (!p.budget_from_kv_cache_memory && !p.num_blocks_from_override &&
      p.kv_cache_budget_bytes <= 0 && !p.kv_budget_capped_by.empty()) {
    return ResourceExhaustedError(fmt::format(
        "no memory is left for the KV cache on {}: its budget is bounded by {}. Free memory, "
        "or give --kv-cache-memory to set the budget yourself.",
        in.device_name, p.kv_budget_capped_by));
  }
  if (!p.budget_from_kv_cache_memory && !p.num_blocks_from_override &&
      p.kv_cache_budget_bytes <= 0) {
    return ResourceExhaustedError(fmt::format(
        "no memory is left for the KV cache on {}: weights ({} per device) + activation peak "
        "({}) need {} but --gpu-memory-utilization {} of {} allows {}. Increase "
        "--gpu-memory-utilization or --tensor-parallel-size, or give --kv-cache-memory.",
        in.device_name, FormatBytes(p.weights_bytes_per_device), FormatBytes(p.activation_bytes),
        FormatBytes(p.weights_bytes_per_device + p.activation_bytes), in.gpu_memory_utilization,
        FormatBytes(in.device_memory_bytes), FormatBytes(p.usable_memory_bytes)));
  }
  const int64_t available_bytes = p.num_blocks * p.kv_bytes_per_block;
  std::string source;
  if (p.num_blocks_from_override) {
    source = fmt::format("--num-gpu-blocks-override {}", p.num_blocks);
  } else if (p.budget_from_kv_cache_memory) {
    source = fmt::format("--kv-cache-memory {}", FormatBytes(p.kv_cache_budget_bytes));
  } else if (!p.kv_budget_capped_by.empty()) {
    source = fmt::format("a budget bounded by {}", p.kv_budget_capped_by);
  } else {
    source = fmt::format("{} x {} - weights {} - activations {}", in.gpu_memory_utilization,
                         FormatBytes(in.device_memory_bytes),
                         FormatBytes(p.weights_bytes_per_device), FormatBytes(p.activation_bytes));
  }
  return ResourceExhaustedError(fmt::format(
      "to serve one request of the max model length ({} tokens), {} bytes ({}) of KV cache are "
      "needed per device ({} blocks of {} tokens x {} bytes), which is more than the KV cache "
      "memory available: {} blocks = {} bytes ({}) from {}. Based on the available memory, the "
      "largest max model length that fits is {}. Increase --gpu-memory-utilization (or "
      "--kv-cache-memory, --tensor-parallel-size) or decrease --max-model-len.",
      in.max_model_len, p.kv_bytes_per_request_per_device,
      FormatBytes(p.kv_bytes_per_request_per_device), p.blocks_per_request, in.block_size,
      p.kv_bytes_per_block, p.num_blocks, available_bytes, FormatBytes(available_bytes), source,
      p.max_model_len_that_fits));
}

StatusOr<MemoryPlan> PlanMemory(const PlanInput& input) {
  ASSIGN_OR_RETURN(MemoryPlan plan, ComputeMemoryPlan(input));
  RETURN_IF_ERROR(CheckPlanFits(plan));
  return plan;
}

std::vector<std::string> PlanSummaryLines(const MemoryPlan& p) {
  const PlanInput& in = p.input;
  std::vector<std::string> lines;
  lines.push_back(fmt::format("weights: {} bytes ({}) per device, {} in all",
                              p.weights_bytes_per_device, FormatBytes(p.weights_bytes_per_device),
                              FormatBytes(p.weights_bytes)));
  lines.push_back(fmt::format("activation peak: {} bytes ({}) per device", p.activation_bytes,
                              FormatBytes(p.activation_bytes)));
  lines.push_back(fmt::format(
      "KV cache: {} ({} bits), {} bytes per token ({} per device), {} "
      "bytes per block of {} tokens",
      KvCacheDtypeName(in.kv_format.dtype), in.kv_format.bits_per_element, p.kv_bytes_per_token,
      p.kv_bytes_per_token_per_device, p.kv_bytes_per_block, in.block_size));
  lines.push_back(fmt::format(
      "KV blocks: {} usable{} + 1 null = {} allocated ({} per device), holding {} tokens",
      p.num_blocks, p.num_blocks_from_override ? " (--num-gpu-blocks-override)" : "",
      p.num_blocks_allocated, FormatBytes(p.kv_cache_bytes_allocated), p.num_tokens));
  lines.push_back(fmt::format("maximum concurrency for {} tokens per request: {:.2f}x",
                              in.max_model_len, p.max_concurrency));
  if (!p.kv_budget_capped_by.empty()) {
    lines.push_back(fmt::format("KV budget {} ({} bytes), bounded by {}",
                                FormatBytes(p.kv_cache_budget_bytes), p.kv_cache_budget_bytes,
                                p.kv_budget_capped_by));
  }
  for (const std::string& w : p.warnings) lines.push_back("warning: " + w);
  return lines;
}

}  // namespace pagellm
