#include "model/config_parser.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include "model/arch_spec.h"
#include "model/json_fields.h"

namespace pagellm {
namespace {

using Json = nlohmann::json;

StatusOr<Json> ParseJsonObject(const std::string& text, const std::string& source) {
  Json root = Json::parse(text, /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return InvalidArgumentError(source + ": not valid JSON");
  if (!root.is_object()) return InvalidArgumentError(source + ": not a JSON object");
  return root;
}

Status ParseHfRopeScaling(const Json& root, const std::string& source, ModelConfig* c) {
  auto it = root.find("rope_scaling");
  if (it == root.end() || it->is_null()) return Status::Ok();
  if (!it->is_object()) {
    return InvalidArgumentError(source + ": 'rope_scaling' must be an object or null");
  }
  JsonFields rs(*it, source);
  ASSIGN_OR_RETURN(std::optional<std::string> type, rs.String("rope_type"));
  if (!type) {
    ASSIGN_OR_RETURN(type, rs.String("type"));
  }
  if (!type || *type == "default") return Status::Ok();
  if (*type == "linear") {
    c->rope_scaling.type = RopeScalingType::kLinear;
    ASSIGN_OR_RETURN(c->rope_scaling.factor, rs.RequiredFloat("factor"));
    return Status::Ok();
  }
  if (*type == "llama3") {
    RopeScaling& s = c->rope_scaling;
    s.type = RopeScalingType::kLlama3;
    ASSIGN_OR_RETURN(s.factor, rs.RequiredFloat("factor"));
    ASSIGN_OR_RETURN(s.low_freq_factor, rs.RequiredFloat("low_freq_factor"));
    ASSIGN_OR_RETURN(s.high_freq_factor, rs.RequiredFloat("high_freq_factor"));
    ASSIGN_OR_RETURN(s.original_max_position_embeddings,
                     rs.RequiredInt("original_max_position_embeddings"));
    return Status::Ok();
  }
  return UnimplementedError(
      fmt::format("{}: unsupported rope_scaling type '{}' (supported: default, linear, llama3)",
                  source, *type));
}

DType TorchDTypeToDType(const std::string& s) {
  if (s == "float16") return DType::kF16;
  if (s == "bfloat16") return DType::kBF16;
  return DType::kF32;
}

}  // namespace

StatusOr<ModelConfig> ParseHfConfig(const std::string& config_json_text,
                                    const std::string& source_name) {
  const std::string& src = source_name;
  ASSIGN_OR_RETURN(Json root, ParseJsonObject(config_json_text, src));
  JsonFields f(root, src);
  ModelConfig c;

  auto arch_it = root.find("architectures");
  if (arch_it == root.end() || !arch_it->is_array() || arch_it->empty() ||
      !(*arch_it)[0].is_string()) {
    return InvalidArgumentError(
        fmt::format("{}: missing 'architectures' (a list of names); supported: {}", src,
                    SupportedArchitecturesList()));
  }
  c.hf_architecture = (*arch_it)[0].get<std::string>();
  const ArchSpec* spec = FindArchByHfName(c.hf_architecture);
  if (spec == nullptr) {
    return InvalidArgumentError(fmt::format("{}: unsupported architecture '{}'; supported: {}", src,
                                            c.hf_architecture, SupportedArchitecturesList()));
  }
  c.arch = spec->arch;

  ASSIGN_OR_RETURN(c.hidden_size, f.RequiredInt("hidden_size"));
  ASSIGN_OR_RETURN(c.intermediate_size, f.RequiredInt("intermediate_size"));
  ASSIGN_OR_RETURN(c.num_layers, f.RequiredInt("num_hidden_layers"));
  ASSIGN_OR_RETURN(c.num_heads, f.RequiredInt("num_attention_heads"));
  ASSIGN_OR_RETURN(c.num_kv_heads, f.IntOr("num_key_value_heads", c.num_heads));
  ASSIGN_OR_RETURN(c.vocab_size, f.RequiredInt("vocab_size"));
  if (c.num_heads <= 0) {
    return InvalidArgumentError(fmt::format("{}: 'num_attention_heads' must be positive", src));
  }
  ASSIGN_OR_RETURN(std::optional<int64_t> head_dim, f.Int("head_dim"));
  if (head_dim) {
    c.head_dim = static_cast<int>(*head_dim);
  } else {
    if (c.hidden_size % c.num_heads != 0) {
      return InvalidArgumentError(fmt::format(
          "{}: no 'head_dim' and hidden_size {} is not a multiple of num_attention_heads {}", src,
          c.hidden_size, c.num_heads));
    }
    c.head_dim = c.hidden_size / c.num_heads;
  }
  ASSIGN_OR_RETURN(c.max_position_embeddings,
                   f.IntOr("max_position_embeddings", spec->hf_default_max_positions));
  ASSIGN_OR_RETURN(c.rms_norm_eps, f.FloatOr("rms_norm_eps", 1e-6f));
  ASSIGN_OR_RETURN(c.rope_theta, f.FloatOr("rope_theta", 10000.0f));
  RETURN_IF_ERROR(ParseHfRopeScaling(root, src, &c));
  ASSIGN_OR_RETURN(c.tie_word_embeddings, f.BoolOr("tie_word_embeddings", false));
  c.rope_interleaved = false;  // HF checkpoints store q/k for rotate_half

  // Gemma configs name the activation hidden_activation (Gemma 2 writes both keys).
  ASSIGN_OR_RETURN(std::optional<std::string> act, f.String("hidden_activation"));
  if (!act) {
    ASSIGN_OR_RETURN(act, f.String("hidden_act"));
  }
  const char* want = spec->activation == FfnActivation::kSilu ? "silu" : "gelu_pytorch_tanh";
  if (act && *act != want) {
    return UnimplementedError(fmt::format("{}: unsupported hidden_act '{}' ({} uses {})", src, *act,
                                          c.hf_architecture, want));
  }
  c.activation = spec->activation;
  ASSIGN_OR_RETURN(bool mlp_bias, f.BoolOr("mlp_bias", false));
  if (mlp_bias) return UnimplementedError(src + ": 'mlp_bias' true is not supported");

  c.attention_bias = spec->qkv_bias;
  c.qk_norm = spec->qk_norm;
  RETURN_IF_ERROR(spec->parse_hf_fields(f, src, &c));

  ASSIGN_OR_RETURN(std::optional<std::vector<int32_t>> bos, f.IdList("bos_token_id"));
  if (bos) {
    if (bos->size() != 1) return f.WrongType("bos_token_id", "a single token id");
    c.bos_token_id = (*bos)[0];
  }
  ASSIGN_OR_RETURN(std::optional<std::vector<int32_t>> eos, f.IdList("eos_token_id"));
  if (eos) c.eos_token_ids = std::move(*eos);

  ASSIGN_OR_RETURN(std::optional<std::string> dtype, f.String("torch_dtype"));
  if (!dtype) {
    ASSIGN_OR_RETURN(dtype, f.String("dtype"));  // newer transformers name
  }
  if (dtype) c.weight_dtype = TorchDTypeToDType(*dtype);

  Status valid = c.Validate();
  if (!valid.ok()) return valid.WithContext(src);
  return c;
}

Status ParseGenerationConfig(const std::string& json_text, const std::string& source_name,
                             ModelConfig* config, LoadedModel::GenerationDefaults* defaults) {
  const std::string& src = source_name;
  ASSIGN_OR_RETURN(Json root, ParseJsonObject(json_text, src));
  JsonFields f(root, src);
  auto range = [&](const char* key, float v, float lo, float hi) -> Status {
    if (!(v >= lo && v <= hi)) {
      return InvalidArgumentError(
          fmt::format("{}: '{}' = {} not in [{}, {}]", src, key, v, lo, hi));
    }
    return Status::Ok();
  };
  ASSIGN_OR_RETURN(defaults->temperature, f.FloatOr("temperature", -1));
  if (defaults->temperature != -1)
    RETURN_IF_ERROR(range("temperature", defaults->temperature, 0, 100));
  ASSIGN_OR_RETURN(defaults->top_p, f.FloatOr("top_p", -1));
  if (defaults->top_p != -1) RETURN_IF_ERROR(range("top_p", defaults->top_p, 0, 1));
  ASSIGN_OR_RETURN(defaults->min_p, f.FloatOr("min_p", -1));
  if (defaults->min_p != -1) RETURN_IF_ERROR(range("min_p", defaults->min_p, 0, 1));
  ASSIGN_OR_RETURN(defaults->repetition_penalty, f.FloatOr("repetition_penalty", -1));
  if (defaults->repetition_penalty != -1) {
    RETURN_IF_ERROR(range("repetition_penalty", defaults->repetition_penalty, 1e-3f, 100));
  }
  ASSIGN_OR_RETURN(defaults->top_k, f.IntOr("top_k", -1));
  if (defaults->top_k < -1) {
    return InvalidArgumentError(fmt::format("{}: 'top_k' = {} is negative", src, defaults->top_k));
  }
  if (defaults->top_k == 0) defaults->top_k = -1;  // transformers: 0 disables top-k

  ASSIGN_OR_RETURN(std::optional<std::vector<int32_t>> bos, f.IdList("bos_token_id"));
  if (bos) {
    if (bos->size() != 1) return f.WrongType("bos_token_id", "a single token id");
    config->bos_token_id = (*bos)[0];
  }
  ASSIGN_OR_RETURN(std::optional<std::vector<int32_t>> eos, f.IdList("eos_token_id"));
  if (eos && !eos->empty()) config->eos_token_ids = std::move(*eos);
  Status valid = config->Validate();
  if (!valid.ok()) return valid.WithContext(src);
  return Status::Ok();
}

namespace {

// Reads `key` as an int when present; NotFound leaves `*out` unchanged.
Status OptionalGgufInt(const GgufFile& g, const std::string& key, int* out) {
  StatusOr<int64_t> v = g.GetInt(key);
  if (!v.ok()) return v.status().code() == StatusCode::kNotFound ? Status::Ok() : v.status();
  if (*v < std::numeric_limits<int32_t>::min() || *v > std::numeric_limits<int32_t>::max()) {
    return OutOfRangeError(
        fmt::format("{}: metadata key '{}' = {} is out of range", g.name(), key, *v));
  }
  *out = static_cast<int>(*v);
  return Status::Ok();
}

Status RequiredGgufInt(const GgufFile& g, const std::string& key, int* out) {
  if (g.Find(key) == nullptr)
    return NotFoundError(g.name() + ": missing metadata key '" + key + "'");
  return OptionalGgufInt(g, key, out);
}

Status OptionalGgufFloat(const GgufFile& g, const std::string& key, float* out) {
  StatusOr<double> v = g.GetFloat(key);
  if (!v.ok()) return v.status().code() == StatusCode::kNotFound ? Status::Ok() : v.status();
  *out = static_cast<float>(*v);
  return Status::Ok();
}

// llama.cpp stores Llama 3 RoPE scaling as `rope_freqs.weight`: one divisor per rotary pair,
// [head_dim / 2] float32, applied as inv_freq[i] / rope_freqs[i]. GGUF keeps no low/high/
// original-context parameters, so the divisors are used exactly as stored (whatever rule made
// them); the largest one is reported as the llama3 factor.
Status ParseGgufRopeFreqs(const GgufFile& g, ModelConfig* c) {
  const TensorView* t = g.FindTensor("rope_freqs.weight");
  if (t == nullptr) return Status::Ok();
  const int pairs = c->head_dim / 2;
  if (t->dtype != DType::kF32 || t->shape.size() != 1 || t->shape[0] != pairs) {
    return UnimplementedError(fmt::format(
        "{}: tensor 'rope_freqs.weight' must be F32 [{}] (llama3 RoPE factors)", g.name(), pairs));
  }
  std::vector<float> r(pairs);
  std::memcpy(r.data(), t->data, pairs * sizeof(float));
  for (int i = 0; i < pairs; ++i) {
    if (!std::isfinite(r[i]) || !(r[i] > 0.0f)) {
      return DataLossError(fmt::format(
          "{}: tensor 'rope_freqs.weight' pair {} has divisor {} (must be finite and > 0)",
          g.name(), i, r[i]));
    }
  }
  const float factor = *std::max_element(r.begin(), r.end());
  if (std::all_of(r.begin(), r.end(), [](float v) { return v == 1.0f; })) return Status::Ok();
  c->rope_scaling.type = RopeScalingType::kLlama3;
  c->rope_scaling.factor = factor;
  c->rope_freq_divisors = std::move(r);
  return Status::Ok();
}

}  // namespace

StatusOr<ModelConfig> ParseGgufConfig(const GgufFile& g) {
  ASSIGN_OR_RETURN(std::string arch, g.GetString("general.architecture"));
  ModelConfig c;
  int expert_count = 0;
  RETURN_IF_ERROR(OptionalGgufInt(g, arch + ".expert_count", &expert_count));
  const ArchSpec* spec = FindArchByGgufName(arch, expert_count > 0);
  if (spec == nullptr) {
    return InvalidArgumentError(fmt::format(
        "{}: unsupported GGUF architecture '{}' (key 'general.architecture'); supported: {}",
        g.name(), arch, SupportedGgufArchitecturesList()));
  }
  c.arch = spec->arch;
  c.hf_architecture = spec->hf_name;
  c.rope_interleaved = spec->gguf_rope_interleaved;
  c.attention_bias = spec->qkv_bias;
  c.qk_norm = spec->qk_norm;
  c.activation = spec->activation;
  const std::string p = arch + ".";
  RETURN_IF_ERROR(RequiredGgufInt(g, p + "embedding_length", &c.hidden_size));
  RETURN_IF_ERROR(RequiredGgufInt(g, p + "feed_forward_length", &c.intermediate_size));
  RETURN_IF_ERROR(RequiredGgufInt(g, p + "block_count", &c.num_layers));
  RETURN_IF_ERROR(RequiredGgufInt(g, p + "attention.head_count", &c.num_heads));
  if (c.num_heads <= 0) {
    return InvalidArgumentError(
        fmt::format("{}: '{}attention.head_count' must be positive", g.name(), p));
  }
  c.num_kv_heads = c.num_heads;
  RETURN_IF_ERROR(OptionalGgufInt(g, p + "attention.head_count_kv", &c.num_kv_heads));
  c.head_dim = c.hidden_size / c.num_heads;
  RETURN_IF_ERROR(OptionalGgufInt(g, p + "attention.key_length", &c.head_dim));
  int value_length = c.head_dim;
  RETURN_IF_ERROR(OptionalGgufInt(g, p + "attention.value_length", &value_length));
  if (value_length != c.head_dim) {
    return UnimplementedError(fmt::format("{}: attention.value_length {} != key_length {}",
                                          g.name(), value_length, c.head_dim));
  }
  RETURN_IF_ERROR(RequiredGgufInt(g, p + "context_length", &c.max_position_embeddings));
  // Mistral-style sliding window (written by our generator and some converters).
  RETURN_IF_ERROR(OptionalGgufInt(g, p + "attention.sliding_window", &c.sliding_window));
  if (c.sliding_window < 0)
    return DataLossError(fmt::format("{}: {}attention.sliding_window is negative", g.name(), p));
  if (spec->moe) {
    // Every layer is sparse in llama.cpp's MoE graphs; the k weights renormalise unless the
    // file says otherwise (Qwen2-MoE's never do).
    MoeConfig& m = c.moe;
    m.num_experts = expert_count;
    RETURN_IF_ERROR(RequiredGgufInt(g, p + "expert_used_count", &m.num_experts_per_tok));
    m.expert_intermediate = c.intermediate_size;
    RETURN_IF_ERROR(OptionalGgufInt(g, p + "expert_feed_forward_length", &m.expert_intermediate));
    if (spec->shared_expert) {
      m.shared_expert_intermediate = c.intermediate_size;
      RETURN_IF_ERROR(OptionalGgufInt(g, p + "expert_shared_feed_forward_length",
                                      &m.shared_expert_intermediate));
    }
    m.norm_topk_prob = spec->gguf_moe_norm_topk;
    if (g.Find(p + "expert_weights_norm") != nullptr) {
      ASSIGN_OR_RETURN(m.norm_topk_prob, g.GetBool(p + "expert_weights_norm"));
    }
  }
  c.rms_norm_eps = 1e-5f;
  RETURN_IF_ERROR(OptionalGgufFloat(g, p + "attention.layer_norm_rms_epsilon", &c.rms_norm_eps));
  c.rope_theta = 10000.0f;
  RETURN_IF_ERROR(OptionalGgufFloat(g, p + "rope.freq_base", &c.rope_theta));

  std::string scaling = "none";
  if (g.Find(p + "rope.scaling.type") != nullptr) {
    ASSIGN_OR_RETURN(scaling, g.GetString(p + "rope.scaling.type"));
  }
  float factor = 0.0f;
  RETURN_IF_ERROR(OptionalGgufFloat(g, p + "rope.scaling.factor", &factor));
  float scale_linear = 0.0f;  // older files
  RETURN_IF_ERROR(OptionalGgufFloat(g, p + "rope.scale_linear", &scale_linear));
  if (scaling == "linear") {
    c.rope_scaling.type = RopeScalingType::kLinear;
    c.rope_scaling.factor = factor;
  } else if (scaling == "none") {
    if (scale_linear != 0.0f && scale_linear != 1.0f) {
      c.rope_scaling.type = RopeScalingType::kLinear;
      c.rope_scaling.factor = scale_linear;
    }
  } else {
    return UnimplementedError(
        fmt::format("{}: unsupported rope scaling type '{}' (key '{}rope.scaling.type')", g.name(),
                    scaling, p));
  }
  if (c.head_dim >= 2 && c.head_dim <= 256 && c.rope_scaling.type == RopeScalingType::kNone) {
    RETURN_IF_ERROR(ParseGgufRopeFreqs(g, &c));
  }

  // Vocabulary size: the explicit key, else the embedding rows (the logits width), else the
  // token list (vocab-only files). The tokenizer may have fewer tokens than the embedding
  // (padding rows) but never more: its ids index the embedding.
  const GgufValue* tokens = g.Find("tokenizer.ggml.tokens");
  const TensorView* embd = g.FindTensor("token_embd.weight");
  int64_t n_tokens = -1;
  if (tokens != nullptr && tokens->type == GgufType::kArray &&
      tokens->array_type == GgufType::kString) {
    n_tokens = static_cast<int64_t>(tokens->strings.size());
  }
  if (g.Find(p + "vocab_size") != nullptr) {
    RETURN_IF_ERROR(OptionalGgufInt(g, p + "vocab_size", &c.vocab_size));
  } else if (embd != nullptr && embd->shape.size() == 2 &&
             embd->shape[0] <= std::numeric_limits<int32_t>::max()) {
    c.vocab_size = static_cast<int>(embd->shape[0]);
  } else if (n_tokens >= 0 && n_tokens <= std::numeric_limits<int32_t>::max()) {
    c.vocab_size = static_cast<int>(n_tokens);
  } else {
    return NotFoundError(fmt::format(
        "{}: cannot determine the vocabulary size (no '{}vocab_size', 'token_embd.weight' or "
        "'tokenizer.ggml.tokens')",
        g.name(), p));
  }
  if (n_tokens > c.vocab_size) {
    return InvalidArgumentError(
        fmt::format("{}: 'tokenizer.ggml.tokens' has {} tokens but the model vocabulary is {}",
                    g.name(), n_tokens, c.vocab_size));
  }

  if (spec->parse_gguf_fields != nullptr) RETURN_IF_ERROR(spec->parse_gguf_fields(g, p, &c));

  c.tie_word_embeddings = g.FindTensor("output.weight") == nullptr;
  if (const TensorView* q = g.FindTensor("blk.0.attn_q.weight")) c.weight_dtype = q->dtype;
  RETURN_IF_ERROR(OptionalGgufInt(g, "tokenizer.ggml.bos_token_id", &c.bos_token_id));
  int eos = -1, eot = -1;
  RETURN_IF_ERROR(OptionalGgufInt(g, "tokenizer.ggml.eos_token_id", &eos));
  RETURN_IF_ERROR(OptionalGgufInt(g, "tokenizer.ggml.eot_token_id", &eot));
  if (eos >= 0) c.eos_token_ids.push_back(eos);
  if (eot >= 0 && eot != eos) c.eos_token_ids.push_back(eot);

  Status valid = c.Validate();
  if (!valid.ok()) return valid.WithContext(g.name());
  return c;
}

}  // namespace pagellm
