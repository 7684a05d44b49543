// `pagellm plan`: KV-cache capacity of a model on a deployment (named GPU, device memory and
// tensor-parallel size, or this host's CPU engine), as a table or one JSON object. With the CPU
// device the numbers come from PlanCpuKvCache, the function the engine sizes its cache with.
#include <cstdio>
#include <filesystem>
#include <optional>

#include "backend/rank_placement.h"
#include "base/mapped_file.h"
#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/vllm_compat_flags.h"
#include "fmt/format.h"
#include "model/arch_spec.h"
#include "model/config_parser.h"
#include "model/model_weights.h"
#include "model/moe_family.h"
#include "model/pipeline_stage.h"
#include "nlohmann/json.hpp"
#include "planner/memory_planner.h"
#include "planner/plan_report.h"
#include "sched/scheduler_config.h"

namespace pagellm::cli {
namespace {

namespace fs = std::filesystem;

struct PlanFlags {
  std::string model;   // HF directory, .gguf file or config.json
  std::string config;  // config.json
  std::string gpu;     // named device; empty = CPU unless --device-memory
  std::string device_memory;
  int tensor_parallel_size = 1;
  int pipeline_parallel_size = 1;
  std::vector<int> layer_partition;  // PAGELLM_PP_LAYER_PARTITION
  double gpu_memory_utilization = 0.9;
  std::string kv_cache_dtype = "auto";
  std::string kv_cache_dtype_skip_layers;
  int64_t max_model_len = 0;
  int block_size = 16;
  std::string kv_cache_memory;
  std::optional<int64_t> num_gpu_blocks_override;
  int64_t max_num_batched_tokens = SchedulerConfig{}.max_num_batched_tokens;
  int64_t max_num_seqs = SchedulerConfig{}.max_num_seqs;
  std::string dtype = "auto";
  std::string activation_memory;
  std::string speculative_model;  // CPU plans: a draft model sharing the budget
  // Sliding-window layers keep every block (no KV cache groups, kv/kv_cache_groups.h).
  bool disable_hybrid_kv_cache_manager = false;
  bool json = false;
};

// What the planner needs to know about the model.
struct ModelFacts {
  std::string path;
  ModelConfig config;
  std::optional<int64_t> file_weights_bytes;  // weights as stored, when the files were read
  // Split across tp x pp ranks: the largest rank's share of those (RankWeightBytes, what the
  // engine counts).
  std::optional<int64_t> file_weights_bytes_per_device;
  int64_t num_parameters = 0;                   // from the files; 0 when not read
  std::optional<int64_t> active_weights_bytes;  // MoE: what one token reads, from the files
  bool dtype_in_config = true;  // config.json names torch_dtype/dtype (GGUF: always)
};

bool HasSafetensors(const fs::path& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".safetensors") return true;
  }
  return false;
}

StatusOr<ModelFacts> ReadConfigOnly(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  ModelFacts f;
  f.path = path;
  ASSIGN_OR_RETURN(f.config, ParseHfConfig(text, path));
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  f.dtype_in_config = j.is_object() && (j.contains("torch_dtype") || j.contains("dtype"));
  return f;
}

// --config FILE, or --model DIR|FILE: weight files, when present, are opened (mapped, not read)
// so the weights bytes are exactly those the engine will count.
StatusOr<ModelFacts> ReadModel(const PlanFlags& flags) {
  if (!flags.config.empty()) return ReadConfigOnly(flags.config);
  const fs::path p(flags.model);
  const bool is_dir = fs::is_directory(p);
  if (!is_dir && p.extension() == ".json") return ReadConfigOnly(flags.model);
  if (is_dir && !HasSafetensors(p)) return ReadConfigOnly((p / "config.json").string());
  // --dtype converts unquantized matrices at load, as `pagellm serve --dtype` does.
  ASSIGN_OR_RETURN(std::optional<DType> cast, ParseWeightDtype(flags.dtype));
  ASSIGN_OR_RETURN(std::unique_ptr<LoadedModel> loaded,
                   LoadModel(flags.model, LoadOptions{cast, {}}));
  ModelFacts f;
  f.path = flags.model;
  f.config = loaded->config;
  f.file_weights_bytes = loaded->weights.total_bytes;
  if (flags.tensor_parallel_size * flags.pipeline_parallel_size > 1) {
    ASSIGN_OR_RETURN(f.file_weights_bytes_per_device,
                     LargestRankWeightBytes(*loaded, flags.tensor_parallel_size,
                                            flags.pipeline_parallel_size, flags.layer_partition));
  }
  f.num_parameters = loaded->weights.num_parameters;
  f.active_weights_bytes = ActiveWeightBytes(loaded->config, loaded->weights);
  return f;
}

ShardDims FullDims(const ModelConfig& c) {
  return ShardDims{c.q_dim(), c.kv_dim(), c.intermediate_size, c.vocab_size};
}

StatusOr<int64_t> DtypeBytes(const std::string& name) {
  if (name == "bfloat16" || name == "float16" || name == "half") return 2;
  if (name == "float32" || name == "float") return 4;
  return InvalidArgumentError(
      fmt::format("--dtype {}: expected auto, bfloat16, float16 or float32", name));
}

// Bytes per weight as the model is served on a GPU with --dtype auto: the checkpoint's dtype
// (bf16 when config.json does not name one, as most published Llama checkpoints are).
int64_t AutoDtypeBytes(const ModelFacts& m) {
  if (!m.dtype_in_config) return 2;
  return m.config.weight_dtype == DType::kF32 ? 4 : 2;
}

struct Resolved {
  MemoryPlan plan;
  std::string weights_source;
  std::string activation_source;
};

StatusOr<Resolved> PlanOnCpu(const PlanFlags& f, const ModelFacts& m, KvCacheDtype kv_dtype,
                             std::optional<int64_t> kv_cache_memory,
                             std::optional<int64_t> activation,
                             const std::optional<DraftFootprint>& draft) {
  CpuKvOptions o;
  // Split across ranks (as `serve -tp -pp` runs them): per device, without KV cache groups.
  const int tp = f.tensor_parallel_size, pp = f.pipeline_parallel_size;
  RETURN_IF_ERROR(ValidateTensorParallel(m.config, tp));
  RETURN_IF_ERROR(PartitionLayers(m.config.num_layers, pp, f.layer_partition).status());
  o.tensor_parallel_size = tp;
  o.pipeline_parallel_size = pp;
  o.layer_partition = f.layer_partition;
  o.gpu_memory_utilization = f.gpu_memory_utilization;
  o.kv_cache_memory = kv_cache_memory;
  o.num_gpu_blocks_override = f.num_gpu_blocks_override;
  o.block_size = f.block_size;
  o.max_model_len = f.max_model_len;
  o.max_num_batched_tokens = f.max_num_batched_tokens;
  o.max_num_seqs = f.max_num_seqs;
  o.kv_cache_dtype = kv_dtype;
  o.free_kv_outside_windows = !f.disable_hybrid_kv_cache_manager && tp * pp == 1;
  ASSIGN_OR_RETURN(o.kv_cache_dtype_skip_layers, ParseLayerList(f.kv_cache_dtype_skip_layers));
  if (activation) o.activation_bytes = *activation;
  Resolved r;
  int64_t weights = 0;
  if (m.file_weights_bytes) {
    weights = *m.file_weights_bytes;
    o.weights_bytes_per_device = m.file_weights_bytes_per_device;
    r.weights_source = tp * pp > 1 ? "files (each rank's matrices)" : "files";
  } else {
    const WeightsFootprint w =
        EstimateWeights(m.config, AutoDtypeBytes(m), tp, pp, f.layer_partition);
    weights = w.bytes;
    if (tp * pp > 1) o.weights_bytes_per_device = w.bytes_per_device;
    r.weights_source = "estimated from config shapes (no weight files)";
  }
  r.activation_source = activation ? "--activation-memory" : "CPU backend scratch formula";
  if (draft) {
    ASSIGN_OR_RETURN(r.plan,
                     ComputeCpuKvPlanWithDraft(m.config, weights, m.num_parameters, o, *draft));
    r.weights_source += " + speculative draft";
    r.activation_source += " + speculative draft";
  } else {
    ASSIGN_OR_RETURN(r.plan, ComputeCpuKvPlan(m.config, weights, m.num_parameters, o));
  }
  return r;
}

StatusOr<Resolved> PlanOnGpu(const PlanFlags& f, const ModelFacts& m, KvCacheDtype kv_dtype,
                             std::optional<int64_t> kv_cache_memory,
                             std::optional<int64_t> activation) {
  PlanInput in;
  in.model = m.config;
  in.tensor_parallel_size = f.tensor_parallel_size;
  in.pipeline_parallel_size = f.pipeline_parallel_size;
  in.layer_partition = f.layer_partition;
  RETURN_IF_ERROR(
      PartitionLayers(m.config.num_layers, in.pipeline_parallel_size, in.layer_partition).status());
  if (!f.gpu.empty()) {
    ASSIGN_OR_RETURN(DeviceSpec d, FindDevice(f.gpu));
    in.device_name = std::string(d.name);
    in.device_memory_bytes = d.memory_bytes;
  } else {
    ASSIGN_OR_RETURN(in.device_memory_bytes, ParseByteSize(f.device_memory));
    in.device_name = "custom device";
  }
  RETURN_IF_ERROR(ValidateTensorParallel(m.config, in.tensor_parallel_size));
  in.gpu_memory_utilization = f.gpu_memory_utilization;
  const bool explicit_dtype = f.dtype != "auto";
  int64_t dtype_bytes = AutoDtypeBytes(m);
  if (explicit_dtype) {
    ASSIGN_OR_RETURN(dtype_bytes, DtypeBytes(f.dtype));
  }
  Resolved r;
  const WeightsFootprint shaped = EstimateWeights(m.config, dtype_bytes, in.tensor_parallel_size,
                                                  in.pipeline_parallel_size, in.layer_partition);
  if (explicit_dtype || !m.file_weights_bytes) {
    in.weights = shaped;
    r.weights_source =
        fmt::format("estimated from config shapes at {} bytes per parameter", dtype_bytes);
  } else if (*m.file_weights_bytes == shaped.bytes) {
    // Uniform 16/32-bit checkpoint: the shape count is exact, and so is its per-rank split.
    in.weights = shaped;
    r.weights_source = "files (split by shapes)";
  } else {
    in.weights = WeightsFromTotal(*m.file_weights_bytes, m.num_parameters,
                                  in.tensor_parallel_size * in.pipeline_parallel_size);
    r.weights_source = "files (split evenly)";
  }
  if (activation) {
    in.activation_bytes = *activation;
    r.activation_source = "--activation-memory";
  } else {
    in.activation_bytes = EstimateGpuActivationBytes(
        m.config, f.max_num_batched_tokens, f.max_num_seqs, in.tensor_parallel_size, dtype_bytes);
    r.activation_source = "GPU estimate";
  }
  ASSIGN_OR_RETURN(in.kv_format,
                   ResolveKvElementFormat(kv_dtype, 8 * static_cast<int>(dtype_bytes)));
  in.block_size = f.block_size;
  in.max_model_len = f.max_model_len > 0 ? f.max_model_len : m.config.max_position_embeddings;
  in.kv_cache_memory_bytes = kv_cache_memory;
  in.num_gpu_blocks_override = f.num_gpu_blocks_override;
  // vLLM's hybrid KV cache manager: local layers hold only their window's blocks (not planned
  // across pipeline stages).
  const KvCacheGroups groups = CpuKvCacheGroups(
      m.config, in.kv_format, !f.disable_hybrid_kv_cache_manager && in.pipeline_parallel_size == 1);
  if (!groups.is_single_full()) {
    in.kv_group_windows = groups.windows();
    in.kv_layers_per_group = groups.layers_per_group;
  }
  ASSIGN_OR_RETURN(r.plan, ComputeMemoryPlan(in));
  return r;
}

int RunPlan(const PlanFlags& f) {
  if (f.model.empty() == f.config.empty()) return Fail("give exactly one of --model or --config");
  StatusOr<KvCacheDtype> kv_dtype = ParseKvCacheDtype(f.kv_cache_dtype);
  if (!kv_dtype.ok()) return Fail(kv_dtype.status().message());
  std::optional<int64_t> kv_cache_memory, activation;
  if (!f.kv_cache_memory.empty()) {
    StatusOr<int64_t> b = ParseByteSize(f.kv_cache_memory);
    if (!b.ok()) return Fail("--kv-cache-memory: " + b.status().message());
    kv_cache_memory = *b;
  }
  if (!f.activation_memory.empty()) {
    StatusOr<int64_t> b = ParseByteSize(f.activation_memory);
    if (!b.ok()) return Fail("--activation-memory: " + b.status().message());
    activation = *b;
  }
  PlanFlags flags = f;
  if (f.pipeline_parallel_size > 1) {
    StatusOr<std::vector<int>> partition = LayerPartitionFromEnvironment();
    if (!partition.ok()) return Fail(partition.status().message());
    flags.layer_partition = *partition;
  }
  StatusOr<ModelFacts> model = ReadModel(flags);
  if (!model.ok()) return Fail(model.status().message());

  bool on_cpu = f.device_memory.empty() && f.gpu.empty();
  if (!f.gpu.empty()) {
    StatusOr<DeviceSpec> d = FindDevice(f.gpu);
    if (!d.ok()) return Fail(d.status().message());
    on_cpu = d->is_host;
  }
  // Speculative decoding with a draft model: its weights, activations and KV cache (same block
  // count as the target's) come from the same budget, as the engine sizes it (SizeKvCache).
  std::optional<DraftFootprint> draft;
  if (!f.speculative_model.empty()) {
    if (!on_cpu) return Fail("--speculative-model is planned for the CPU engine only");
    StatusOr<std::unique_ptr<LoadedModel>> d = LoadModel(f.speculative_model);
    if (!d.ok()) return Fail("--speculative-model: " + d.status().message());
    draft = CpuDraftFootprint((*d)->config, (*d)->weights.total_bytes, f.max_num_batched_tokens,
                              f.max_num_seqs);
  }
  StatusOr<Resolved> r =
      on_cpu ? PlanOnCpu(flags, *model, *kv_dtype, kv_cache_memory, activation, draft)
             : PlanOnGpu(flags, *model, *kv_dtype, kv_cache_memory, activation);
  if (!r.ok()) return Fail(r.status().message());
  const MemoryPlan& plan = r->plan;
  const Status fits = CheckPlanFits(plan);

  if (f.json) {
    nlohmann::json j = {
        {"model", model->path},
        {"architecture", model->config.hf_architecture},
        {"weights_source", r->weights_source},
        {"activation_source", r->activation_source},
        {"max_num_batched_tokens", f.max_num_batched_tokens},
        {"max_num_seqs", f.max_num_seqs},
    };
    j.update(PlanToJson(plan));
    if (model->config.moe.num_experts > 0) {
      j["moe"] = {{"num_experts", model->config.moe.num_experts},
                  {"num_experts_per_tok", model->config.moe.num_experts_per_tok},
                  {"num_parameters", GetArchSpec(model->config.arch)
                                         .count_parameters(model->config, FullDims(model->config))},
                  {"active_parameters", CountActiveParameters(model->config)}};
      if (model->active_weights_bytes) {
        j["moe"]["weights_bytes"] = *model->file_weights_bytes;
        j["moe"]["active_weights_bytes_per_token"] = *model->active_weights_bytes;
      }
    }
    if (draft) {
      j["speculative_draft"] = {
          {"model", f.speculative_model},
          {"weights_bytes", draft->weights_bytes},
          {"activation_bytes", draft->activation_bytes},
          {"kv_bytes_per_token", draft->kv_bytes_per_token},
          {"kv_cache_bytes_allocated",
           plan.num_blocks_allocated * plan.input.block_size * draft->kv_bytes_per_token}};
    }
    if (!fits.ok()) j["error"] = fits.message();
    fmt::print("{}\n", j.dump(2));
  } else {
    fmt::print("model: {} ({})\n", model->path, model->config.hf_architecture);
    fmt::print("weights source: {}\n", r->weights_source);
    fmt::print("activation source: {} (max_num_batched_tokens {}, max_num_seqs {})\n\n",
               r->activation_source, f.max_num_batched_tokens, f.max_num_seqs);
    if (model->config.moe.num_experts > 0) {
      const ModelConfig& c = model->config;
      fmt::print(
          "mixture of experts: {} of {} experts per token; parameters {:.1f} M, active "
          "{:.1f} M per token",
          c.moe.num_experts_per_tok, c.moe.num_experts,
          GetArchSpec(c.arch).count_parameters(c, FullDims(c)) / 1e6,
          CountActiveParameters(c) / 1e6);
      if (model->active_weights_bytes) {
        fmt::print("; weights read per decoded token {:.1f} of {:.1f} MiB",
                   *model->active_weights_bytes / 1048576.0,
                   *model->file_weights_bytes / 1048576.0);
      }
      fmt::print("\n\n");
    }
    if (draft) {
      fmt::print(
          "speculative draft: {} (weights {:.1f} MiB, activations {:.1f} MiB, KV {} bytes/token: "
          "{:.1f} MiB for the same {} blocks). The weights and activation rows below include "
          "the draft; the KV rows and the total are the target's cache (the KV budget was "
          "split between the two caches)\n\n",
          f.speculative_model, draft->weights_bytes / 1048576.0,
          draft->activation_bytes / 1048576.0, draft->kv_bytes_per_token,
          static_cast<double>(plan.num_blocks_allocated * plan.input.block_size *
                              draft->kv_bytes_per_token) /
              1048576.0,
          plan.num_blocks_allocated);
    }
    fmt::print("{}", PlanTable(plan));
  }
  // The report goes first: the refusal below explains it.
  std::fflush(stdout);
  if (!fits.ok()) return Fail(fits.message());
  return 0;
}

}  // namespace

CommandFn RegisterPlan(CLI::App& app) {
  auto f = std::make_shared<PlanFlags>();
  auto* model = app.add_option("--model", f->model,
                               "HF model directory (config.json, weights optional), .gguf file "
                               "or config.json");
  auto* config = app.add_option("--config", f->config, "HF config.json (no weights needed)");
  model->excludes(config);
  auto* gpu = app.add_option("--gpu", f->gpu,
                             "Named device: A100-40GB, A100-80GB, H100-80GB, H200, L4, L40S, "
                             "A10G, RTX4090, CPU (default: CPU = this host's engine)");
  auto* mem = app.add_option("--device-memory", f->device_memory,
                             "Memory per device, bytes or with a unit (80GiB, 81050MiB)");
  gpu->excludes(mem);
  app.add_option("--tensor-parallel-size", f->tensor_parallel_size,
                 "Devices the model is split across (alias -tp), per pipeline stage")
      ->capture_default_str();
  app.add_option("--pipeline-parallel-size", f->pipeline_parallel_size,
                 "Pipeline stages the layers are split into (alias -pp; layers per stage as vLLM "
                 "splits them, or PAGELLM_PP_LAYER_PARTITION); every device holds its stage's "
                 "weights and KV. On the CPU each of the tp x pp ranks gets 1/(tp x pp) of this "
                 "host")
      ->capture_default_str();
  app.add_option("--gpu-memory-utilization", f->gpu_memory_utilization,
                 "Fraction of device memory for weights, activations and KV cache")
      ->capture_default_str();
  app.add_option("--kv-cache-dtype", f->kv_cache_dtype,
                 "auto, float32, bfloat16, float16, fp8, fp8_e4m3, fp8_e5m2, int8, int4 (auto: "
                 "the model dtype; the CPU engine stores float16 for quantised GGUF weights)")
      ->capture_default_str();
  app.add_option("--kv-cache-dtype-skip-layers", f->kv_cache_dtype_skip_layers,
                 "CPU plans: comma-separated layers whose KV cache keeps the model dtype");
  app.add_option("--max-model-len", f->max_model_len,
                 "Tokens of one request (default: the model's max_position_embeddings)");
  app.add_option("--block-size", f->block_size, "Tokens per KV block (1..256)")
      ->capture_default_str();
  app.add_option("--kv-cache-memory", f->kv_cache_memory,
                 "KV cache bytes per device (e.g. 20GiB); overrides --gpu-memory-utilization");
  app.add_option("--num-gpu-blocks-override", f->num_gpu_blocks_override,
                 "Exact number of usable KV blocks");
  app.add_option("--max-num-batched-tokens", f->max_num_batched_tokens,
                 "Token budget of one step (sizes the activation peak)")
      ->capture_default_str();
  app.add_option("--max-num-seqs", f->max_num_seqs, "Most requests running at once")
      ->capture_default_str();
  app.add_option("--dtype", f->dtype,
                 "Weight dtype: auto (the checkpoint's), bfloat16, float16 (half), float32 "
                 "(float); on the CPU, unquantized weight matrices converted to it at load as "
                 "`serve --dtype` does; on a GPU plan, the weight and activation dtype")
      ->capture_default_str();
  app.add_option("--activation-memory", f->activation_memory,
                 "Measured activation peak per device, replacing the estimate");
  app.add_option("--speculative-model", f->speculative_model,
                 "CPU plans: a speculative draft model; its weights, activations and KV cache "
                 "(same block count as the target's) share the budget");
  app.add_flag("--disable-hybrid-kv-cache-manager", f->disable_hybrid_kv_cache_manager,
               "Plan sliding-window layers (Gemma 2/3, Mistral) as keeping every KV block");
  app.add_flag("--json", f->json, "Print one JSON object");
  return [f]() { return RunPlan(*f); };
}

}  // namespace pagellm::cli
