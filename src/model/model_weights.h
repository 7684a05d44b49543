// The weights of a loaded model, as views into mapped files (matrices stay in their stored
// dtype) plus small owned float32 copies of norms and biases.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/mapped_file.h"
#include "kernels/weight_matrix.h"
#include "kernels/weight_store.h"
#include "model/model_config.h"
#include "model/quantization_config.h"
#include "pagellm/status.h"

namespace pagellm {

class GgufFile;
class SafetensorsFile;

// A sparse layer's mixture-of-experts FFN (ModelConfig::moe); every matrix empty in a dense
// layer.
struct MoeWeights {
  WeightMatrix router;                       // [num_experts, hidden]
  std::vector<WeightMatrix> gate, up, down;  // per expert: [inter, hidden] x2, [hidden, inter]
  // Qwen2-MoE's shared expert ([shared_inter, hidden] x2, [hidden, shared_inter]) and its gate
  // ([hidden]); empty without one.
  WeightMatrix shared_gate, shared_up, shared_down;
  std::vector<float> shared_expert_gate;
};

struct LayerWeights {
  std::vector<float> attn_norm;       // [hidden]
  WeightMatrix wq;                    // [q_dim, hidden]
  WeightMatrix wk;                    // [kv_dim, hidden]
  WeightMatrix wv;                    // [kv_dim, hidden]
  WeightMatrix wo;                    // [hidden, q_dim]
  std::vector<float> bq, bk, bv;      // [q_dim], [kv_dim], [kv_dim]; empty without attention_bias
  std::vector<float> q_norm, k_norm;  // [head_dim] each; empty without qk_norm
  std::vector<float> ffn_norm;        // [hidden]
  WeightMatrix w_gate;                // [intermediate, hidden]
  WeightMatrix w_up;                  // [intermediate, hidden]
  WeightMatrix w_down;                // [hidden, intermediate]
  MoeWeights moe;                     // sparse layers: the experts instead of w_gate/w_up/w_down
  // Gemma: norms of the attention output and of the FFN output before their residual adds
  // ([hidden] each, as applied: 1 + w); empty for the other families.
  std::vector<float> post_attn_norm, post_ffn_norm;
  // fp8 KV cache scales of this layer from the checkpoint (vLLM's self_attn.k_scale/v_scale,
  // older k_proj/v_proj.output_scale, legacy kv_scale): a stored e4m3 value times the scale is
  // the real K (V), defined on raw post-RoPE K. 0 = the checkpoint carries none (then
  // --calculate-kv-scales or 1.0 applies; engine/kv_calibration.h).
  float kv_k_scale = 0.0f;
  float kv_v_scale = 0.0f;
};

struct ModelWeights {
  WeightMatrix embed;  // [vocab, hidden]
  std::vector<LayerWeights> layers;
  std::vector<float> final_norm;  // [hidden]
  WeightMatrix lm_head;           // [vocab, hidden]; same bytes as embed when tied
  // The decoder layers held: [layer_begin, layer_begin + layers.size()) of config.num_layers
  // (all of them but in a pipeline stage, model/pipeline_stage.h, which holds the embedding only
  // when layer_begin is 0 and the final norm and lm_head only when it ends with the last layer).
  int layer_begin = 0;
  // Bytes of all weights as the kernels read them: as stored, or as converted (--dtype) or
  // repacked (AWQ / GPTQ) at load.
  int64_t total_bytes = 0;
  // Bytes of the integer checkpoint tensors (qweight, qzeros, scales, g_idx) in the files; the
  // repacked matrices made from them are in total_bytes. 0 without an integer checkpoint.
  int64_t quantized_file_bytes = 0;
  int64_t num_parameters = 0;
};

// How LoadModel reads a model's weights.
struct LoadOptions {
  // vLLM's --dtype for unquantized weights: every F32/F16/BF16 weight matrix is converted to
  // this type at load (into memory the model owns; the file is left as it is) and the kernels
  // of that type run it. nullopt keeps each matrix as stored. Quantized matrices, norms and
  // biases (always read as float32) are unaffected.
  std::optional<DType> float_matrix_dtype;
  // vLLM's --quantization: "" (or none) takes the checkpoint's quantization_config as it is;
  // awq / awq_marlin / gptq / gptq_marlin must match it; gguf only with a .gguf file.
  std::string quantization;
};

// A model opened from disk: config, weights, and the files that back them.
struct LoadedModel {
  std::string path;
  std::string format;  // "safetensors" or "gguf"
  // The options it was loaded with (tensor-parallel workers load the same files with them).
  LoadOptions load_options;
  ModelConfig config;
  ModelWeights weights;
  // Generation defaults from generation_config.json (vLLM applies them as request defaults).
  struct GenerationDefaults {
    float temperature = -1, top_p = -1, min_p = -1, repetition_penalty = -1;
    int top_k = -1;  // -1 = not set
  } generation_defaults;
  // Owners of the mapped memory the WeightMatrix views point into.
  std::vector<std::unique_ptr<SafetensorsFile>> safetensors;
  std::unique_ptr<GgufFile> gguf;
  // Owner of the matrices that a multi-tensor weight format's bind hook repacked at load.
  WeightStore repacked;
  // The checkpoint's integer quantization (AWQ / GPTQ), if any; its matrices are repacked.
  HfQuantConfig quantization;

  ~LoadedModel();
};

// Opens a Hugging Face directory (config.json + model.safetensors or sharded index) or a
// .gguf file. Checks architecture, every tensor's presence, dtype and shape; errors name the
// file and the tensor or key.
StatusOr<std::unique_ptr<LoadedModel>> LoadModel(const std::string& path,
                                                 const LoadOptions& options = {});

// Builds a model from an already parsed GGUF file (LoadModel's .gguf path after opening; also
// lets tests and fuzzers load from memory). The returned model owns `gguf`.
StatusOr<std::unique_ptr<LoadedModel>> LoadGgufModel(std::unique_ptr<GgufFile> gguf,
                                                     const LoadOptions& options = {});

}  // namespace pagellm
