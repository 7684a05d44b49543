#include "planner/plan_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "planner/byte_size.h"

namespace pagellm {

nlohmann::json PlanToJson(const MemoryPlan& p) {
  const PlanInput& in = p.input;
  nlohmann::json j = {
      {"device", in.device_name},
      {"device_memory_bytes", in.device_memory_bytes},
      {"tensor_parallel_size", in.tensor_parallel_size},
      {"pipeline_parallel_size", in.pipeline_parallel_size},
      {"num_devices", in.tensor_parallel_size * in.pipeline_parallel_size},
      {"gpu_memory_utilization", in.gpu_memory_utilization},
      {"usable_memory_bytes", p.usable_memory_bytes},
      {"num_parameters", in.weights.num_parameters},
      {"weights_bytes", p.weights_bytes},
      {"weights_bytes_per_device", p.weights_bytes_per_device},
      {"activation_bytes", p.activation_bytes},
      {"kv_cache_budget_bytes", p.kv_cache_budget_bytes},
      {"kv_cache_budget_source",
       p.budget_from_kv_cache_memory ? "kv_cache_memory" : "gpu_memory_utilization"},
      {"kv_cache_dtype", KvCacheDtypeName(in.kv_format.dtype)},
      {"kv_bits_per_element", in.kv_format.bits_per_element},
      {"kv_scale_bytes_per_head_per_token", in.kv_format.scale_bytes_per_head_per_token},
      {"num_layers", in.model.num_layers},
      {"num_kv_heads", in.model.num_kv_heads},
      {"kv_heads_per_device", p.kv_heads_per_device},
      {"kv_layers_per_device", p.kv_layers_per_device},
      {"head_dim", in.model.head_dim},
      {"kv_bytes_per_token", p.kv_bytes_per_token},
      {"kv_bytes_per_token_per_device", p.kv_bytes_per_token_per_device},
      {"block_size", in.block_size},
      {"kv_bytes_per_block", p.kv_bytes_per_block},
      {"max_model_len", in.max_model_len},
      {"blocks_per_request", p.blocks_per_request},
      {"kv_group_windows", in.kv_group_windows},
      {"kv_layers_per_group", in.kv_layers_per_group},
      {"kv_bytes_per_request", p.kv_bytes_per_request},
      {"kv_bytes_per_request_per_device", p.kv_bytes_per_request_per_device},
      {"num_blocks", p.num_blocks},
      {"num_blocks_source", p.num_blocks_from_override ? "num_gpu_blocks_override" : "budget"},
      {"num_blocks_allocated", p.num_blocks_allocated},
      {"kv_cache_bytes_allocated", p.kv_cache_bytes_allocated},
      {"num_tokens", p.num_tokens},
      {"max_concurrency", p.max_concurrency},
      {"total_bytes_per_device", p.total_bytes_per_device},
      {"fits", p.fits},
      {"max_model_len_that_fits", p.max_model_len_that_fits},
      {"warnings", p.warnings},
  };
  return j;
}

std::string PlanTable(const MemoryPlan& p) {
  const PlanInput& in = p.input;
  auto bytes = [](int64_t b) { return fmt::format("{} ({})", b, FormatBytes(b)); };
  std::vector<std::pair<std::string, std::string>> rows = {
      {"device",
       in.pipeline_parallel_size > 1
           ? fmt::format("{} x {} ({} pipeline stages of {})",
                         in.tensor_parallel_size * in.pipeline_parallel_size, in.device_name,
                         in.pipeline_parallel_size, in.tensor_parallel_size)
           : fmt::format("{} x {}", in.tensor_parallel_size, in.device_name)},
      {"device memory", bytes(in.device_memory_bytes) + " per device"},
      {"gpu memory utilization", fmt::format("{}", in.gpu_memory_utilization)},
      {"usable memory", bytes(p.usable_memory_bytes) + " per device"},
      {"weights", bytes(p.weights_bytes) + " in all"},
      {"weights per device", bytes(p.weights_bytes_per_device)},
      {"activation peak", bytes(p.activation_bytes) + " per device"},
      {"KV cache budget", bytes(p.kv_cache_budget_bytes) +
                              (p.budget_from_kv_cache_memory ? " (--kv-cache-memory)" : "") +
                              " per device"},
      {"KV cache dtype", fmt::format("{} ({} bits{})", KvCacheDtypeName(in.kv_format.dtype),
                                     in.kv_format.bits_per_element,
                                     in.kv_format.scale_bytes_per_head_per_token > 0
                                         ? fmt::format(" + {} B scale/zero per head per token",
                                                       in.kv_format.scale_bytes_per_head_per_token)
                                         : "")},
      {"KV heads per device",
       fmt::format("{} of {}", p.kv_heads_per_device, in.model.num_kv_heads)},
      {"KV layers per device",
       fmt::format("{} of {}", p.kv_layers_per_device, in.model.num_layers)},
      {"KV bytes per token",
       fmt::format("{} ({} per device)", p.kv_bytes_per_token, p.kv_bytes_per_token_per_device)},
      {"block size", fmt::format("{} tokens", in.block_size)},
      {"KV cache groups",
       in.kv_group_windows.empty()
           ? std::string("1 (every layer keeps every block)")
           : fmt::format(
                 "{} of {} layers: {} full attention, {} sliding window {} (blocks "
                 "outside the window are freed)",
                 in.kv_group_windows.size(), in.kv_layers_per_group,
                 std::count(in.kv_group_windows.begin(), in.kv_group_windows.end(), 0),
                 std::count_if(in.kv_group_windows.begin(), in.kv_group_windows.end(),
                               [](int32_t w) { return w > 0; }),
                 *std::max_element(in.kv_group_windows.begin(), in.kv_group_windows.end()))},
      {"KV bytes per block", bytes(p.kv_bytes_per_block) + " per device"},
      {"max model len",
       fmt::format("{} tokens = {} blocks", in.max_model_len, p.blocks_per_request)},
      {"KV bytes per request",
       bytes(p.kv_bytes_per_request) +
           fmt::format(", {} per device", FormatBytes(p.kv_bytes_per_request_per_device))},
      {"KV blocks", fmt::format("{}{}", p.num_blocks,
                                p.num_blocks_from_override ? " (--num-gpu-blocks-override)" : "")},
      {"KV blocks allocated",
       fmt::format("{} = {} usable + null block 0, {} per device", p.num_blocks_allocated,
                   p.num_blocks, FormatBytes(p.kv_cache_bytes_allocated))},
      {"KV cache tokens", fmt::format("{}", p.num_tokens)},
      {"max concurrency",
       fmt::format("{:.2f}x at {} tokens per request", p.max_concurrency, in.max_model_len)},
      {"total per device", bytes(p.total_bytes_per_device)},
      {"fits max model len",
       p.fits ? std::string("yes")
              : fmt::format("no (largest that fits: {})", p.max_model_len_that_fits)},
  };
  size_t width = 0;
  for (const auto& [label, value] : rows) width = std::max(width, label.size());
  std::string out;
  for (const auto& [label, value] : rows) {
    out += fmt::format("{:<{}}  {}\n", label, width, value);
  }
  for (const std::string& w : p.warnings) out += "warning: " + w + "\n";
  return out;
}

}  // namespace pagellm
