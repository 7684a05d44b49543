// One row per supported architecture: everything about a model family that the config parser,
// the weight loader, the planner and the backends need, so that adding an architecture (Qwen3,
// a MoE) is one new ArchSpec (plus any new ForwardOps it needs), not edits in each of them.
//
// To add one: an Architecture value (model/model_config.h), its hooks (as model/llama_family.h
// does for Llama, Mistral and Qwen2) and its row in kArchSpecs (model/arch_spec.cc).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/forward_batch.h"
#include "kernels/weight_matrix.h"
#include "model/forward_ops.h"
#include "model/gguf_file.h"
#include "model/json_fields.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "pagellm/status.h"

namespace pagellm {

// Tensor names of a sparse layer's experts, after `layer_prefix + N + "."`. Per-expert files
// (HF) name expert E's matrices `expert_prefix + E + "." + gate/up/down`; stacked files (GGUF)
// hold all experts in one 3-D tensor [num_experts][rows][cols] named gate/up/down.
struct MoeTensorNames {
  const char* router;
  bool stacked;
  const char* expert_prefix;  // per-expert files only
  const char* gate;
  const char* up;
  const char* down;
  // Qwen2-MoE's shared expert and its gate ([1, hidden] or [hidden]).
  const char* shared_gate;
  const char* shared_up;
  const char* shared_down;
  const char* shared_expert_gate;
};

// Tensor names of one file format (HF safetensors or GGUF). Layer tensors are named
// `layer_prefix + N + "." + suffix`.
struct ArchTensorNames {
  const char* embed;
  const char* layer_prefix;
  const char* attn_norm;
  const char* wq;
  const char* wk;
  const char* wv;
  const char* wo;
  const char* bq;
  const char* bk;
  const char* bv;
  const char* ffn_norm;
  const char* w_gate;
  const char* w_up;
  const char* w_down;
  const char* final_norm;
  const char* lm_head;
  // Per-head q/k RMSNorm weights ([head_dim]); read only when ModelConfig::qk_norm.
  const char* q_norm;
  const char* k_norm;
  // Sparse layers' experts; null for dense families.
  const MoeTensorNames* moe;
  // Gemma's norms after attention and after the FFN ([hidden]); null for the others.
  const char* post_attn_norm;
  const char* post_ffn_norm;
  // Added to every RMSNorm weight as bound: Gemma computes x̂ · (1 + w) and HF files store w,
  // while llama.cpp's converter stores 1 + w in GGUF files (then 0).
  float norm_weight_offset;
};

// The model loader's view of a checkpoint's tensors (model/model_loader.cc): each call checks
// presence, dtype and exact shape, and names the file and the tensor in errors.
class TensorBinder {
 public:
  virtual ~TensorBinder() = default;
  // A [rows][cols] matrix kept in its stored dtype.
  virtual StatusOr<WeightMatrix> Matrix(const std::string& name, int64_t rows, int64_t cols) = 0;
  // `count` matrices [rows][cols] stored back to back in one [count][rows][cols] tensor (a
  // GGUF file's experts), each kept in its stored dtype.
  virtual StatusOr<std::vector<WeightMatrix>> StackedMatrices(const std::string& name,
                                                              int64_t count, int64_t rows,
                                                              int64_t cols) = 0;
  // A [n] vector (norm weights, biases) converted to float32.
  virtual StatusOr<std::vector<float>> Vector(const std::string& name, int64_t n) = 0;
  // As Vector, for a tensor stored as [n] or [1][n] (a one-output projection).
  virtual StatusOr<std::vector<float>> RowVector(const std::string& name, int64_t n) = 0;
  virtual bool Has(const std::string& name) const = 0;
  // Marks a tensor as used without binding it (an lm_head tied to the embedding anyway).
  virtual void Ignore(const std::string& name) = 0;
};

// The matrix dimensions one device holds under a tensor-parallel split (the full model: tp 1).
struct ShardDims {
  int64_t q_dim = 0;
  int64_t kv_dim = 0;
  int64_t intermediate = 0;
  int64_t vocab = 0;
  // Each expert's and the shared expert's intermediate width (MoeConfig); -1: the config's
  // (unsplit).
  int64_t expert_intermediate = -1;
  int64_t shared_expert_intermediate = -1;
};

struct ArchSpec {
  Architecture arch;
  // Hugging Face config.json `architectures[0]`, and what the error message lists for it.
  const char* hf_name;
  const char* hf_description;
  // GGUF `general.architecture` (also the prefix of its metadata keys); null when GGUF files of
  // this family carry another family's name (Mistral GGUFs say "llama").
  const char* gguf_name;

  // config.json: max_position_embeddings when absent (the transformers config class default).
  int hf_default_max_positions;
  // q/k/v projections always carry biases.
  bool qkv_bias;
  // q and k are RMS-normalised per head before RoPE (ModelConfig::qk_norm).
  bool qk_norm;
  // A mixture-of-experts family (ModelConfig::moe): GGUF files of its gguf_name with
  // `{arch}.expert_count` > 0 are this family (Mixtral GGUFs say "llama"); with
  // gguf_moe_norm_topk the k routing weights renormalise when the file does not say
  // (`{arch}.expert_weights_norm`), and with shared_expert a Qwen2-MoE shared expert is bound.
  bool moe;
  bool gguf_moe_norm_topk;
  bool shared_expert;
  // GGUF q/k rows are permuted for adjacent-pair RoPE (llama.cpp's llama converter).
  bool gguf_rope_interleaved;
  // The FFN activation; config.json's hidden_activation / hidden_act must name it.
  FfnActivation activation;
  // Reads the architecture's own config.json fields (after the common ones) into `config`;
  // Unimplemented for settings the graph cannot run.
  Status (*parse_hf_fields)(const JsonFields& fields, const std::string& source,
                            ModelConfig* config);
  // Reads the architecture's own GGUF metadata (after the common keys; `prefix` is
  // "{general.architecture}."); null when it has none.
  Status (*parse_gguf_fields)(const GgufFile& gguf, const std::string& prefix, ModelConfig* config);

  const ArchTensorNames* hf_tensors;
  const ArchTensorNames* gguf_tensors;
  // Binds every tensor the config calls for into `weights`. May set config->tie_word_embeddings
  // (no output projection in the file) and config->weight_dtype (the bulk matrices' dtype).
  Status (*bind_weights)(const ArchTensorNames& names, TensorBinder& binder, ModelConfig* config,
                         ModelWeights* weights);

  // Parameters one device holds (the whole model for the full dims), for the planner.
  int64_t (*count_parameters)(const ModelConfig& config, const ShardDims& dims);
  // Floats of activation scratch `forward` asks ForwardOps for in a step of `num_tokens` tokens
  // and `num_logit_rows` logits rows.
  int64_t (*activation_floats)(const ModelConfig& config, int64_t num_tokens,
                               int64_t num_logit_rows);
  // The model graph: runs a validated batch on a backend's ops.
  void (*forward)(const LoadedModel& model, const ForwardBatch& batch, ForwardOps& ops,
                  ForwardOutput* out);
};

const ArchSpec& GetArchSpec(Architecture arch);
// Null when no supported architecture has that name.
const ArchSpec* FindArchByHfName(std::string_view hf_name);
// `has_experts`: the file declares experts (`{arch}.expert_count` > 0); a dense and a
// mixture-of-experts family may share one GGUF name.
const ArchSpec* FindArchByGgufName(std::string_view gguf_name, bool has_experts = false);
// "LlamaForCausalLM (Llama 1/2/3, SmolLM), MistralForCausalLM, ..." / "llama, qwen2".
std::string SupportedArchitecturesList();
std::string SupportedGgufArchitecturesList();

}  // namespace pagellm
