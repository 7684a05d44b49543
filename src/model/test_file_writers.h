// Test-only writers for small GGUF and safetensors files and Hugging Face model directories,
// used by the model-file tests to build valid inputs and then corrupt them.
#pragma once

#include <stdlib.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/half.h"

namespace pagellm::testing {

// Appends little-endian scalars and GGUF strings (u64 length + bytes) to a byte string.
class ByteWriter {
 public:
  template <typename T>
  ByteWriter& Put(T v) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    bytes_.append(b, sizeof(T));
    return *this;
  }
  ByteWriter& PutString(const std::string& s) {
    Put<uint64_t>(s.size());
    bytes_ += s;
    return *this;
  }
  ByteWriter& Raw(const std::string& s) {
    bytes_ += s;
    return *this;
  }
  void PadTo(uint64_t alignment) {
    while (bytes_.size() % alignment != 0) bytes_.push_back('\0');
  }
  const std::string& bytes() const { return bytes_; }
  std::string& mutable_bytes() { return bytes_; }

 private:
  std::string bytes_;
};

// GGUF value type ids (see GgufType) and ggml tensor type ids used by the tests.
enum : uint32_t {
  kGgufU8 = 0,
  kGgufU32 = 4,
  kGgufI32 = 5,
  kGgufF32 = 6,
  kGgufBool = 7,
  kGgufString = 8,
  kGgufArray = 9,
  kGgufU64 = 10,
};
enum : uint32_t {
  kGgmlF32 = 0,
  kGgmlF16 = 1,
  kGgmlQ4_0 = 2,
  kGgmlQ8_0 = 8,
  kGgmlQ4_K = 12,
  kGgmlQ6_K = 14,
  kGgmlIQ2_XXS = 16,  // a type the engine does not load
  kGgmlBF16 = 30,
};

// Bytes for n elements of a ggml type (n a multiple of the block size).
inline uint64_t GgmlBytes(uint32_t type, uint64_t n) {
  switch (type) {
    case kGgmlF16:
    case kGgmlBF16:
      return 2 * n;
    case kGgmlQ8_0:
      return n / 32 * 34;
    case kGgmlQ4_0:
      return n / 32 * 18;
    case kGgmlQ4_K:
      return n / 256 * 144;
    case kGgmlQ6_K:
      return n / 256 * 210;
    default:
      return 4 * n;
  }
}

// Deterministic tensor bytes: small floats in [-0.5, 0.5) for F32/F16/BF16, random bytes for
// quantized blocks (their fp16 scales come out finite or not; the loader does not care).
inline std::string PatternBytes(uint64_t nbytes, uint32_t ggml_type, uint32_t salt) {
  std::string out(nbytes, '\0');
  uint32_t state = 12345u + 7919u * salt;
  auto next = [&] {
    state = state * 1664525u + 1013904223u;
    return static_cast<float>((state >> 8) & 0xffff) / 65536.0f - 0.5f;
  };
  if (ggml_type == kGgmlF32) {
    for (uint64_t k = 0; k + 4 <= nbytes; k += 4) {
      const float f = next();
      std::memcpy(&out[k], &f, 4);
    }
  } else if (ggml_type == kGgmlF16 || ggml_type == kGgmlBF16) {
    for (uint64_t k = 0; k + 2 <= nbytes; k += 2) {
      const float f = next();
      const uint16_t h = ggml_type == kGgmlF16 ? F32ToF16(f) : F32ToBf16(f);
      std::memcpy(&out[k], &h, 2);
    }
  } else {
    for (uint64_t k = 0; k < nbytes; ++k) out[k] = static_cast<char>(next() * 200);
    if (ggml_type == kGgmlQ8_0) {
      // Each 34-byte block's fp16 scale in [0.005, 0.015): random bytes there would be fp16
      // values up to 6e4 (or inf), which overflow a forward pass that tests compare numerically.
      for (uint64_t k = 0; k + 34 <= nbytes; k += 34) {
        const uint16_t d = F32ToF16(0.01f + 0.01f * next());
        std::memcpy(&out[k], &d, 2);
      }
    }
  }
  return out;
}

// Builds a GGUF file: header, KV pairs in insertion order, tensor infos, padding, data.
class GgufBuilder {
 public:
  uint32_t version = 3;
  uint64_t alignment = 32;  // must match general.alignment when a test writes that key

  void AddU32(const std::string& key, uint32_t v) { Kv(key, kGgufU32).Put(v); }
  void AddI32(const std::string& key, int32_t v) { Kv(key, kGgufI32).Put(v); }
  void AddF32(const std::string& key, float v) { Kv(key, kGgufF32).Put(v); }
  void AddBool(const std::string& key, bool v) { Kv(key, kGgufBool).Put<uint8_t>(v); }
  void AddString(const std::string& key, const std::string& v) {
    Kv(key, kGgufString).PutString(v);
  }
  void AddStringArray(const std::string& key, const std::vector<std::string>& v) {
    ByteWriter& w = Kv(key, kGgufArray).Put<uint32_t>(kGgufString).Put<uint64_t>(v.size());
    for (const std::string& s : v) w.PutString(s);
  }
  void AddF32Array(const std::string& key, const std::vector<float>& v) {
    ByteWriter& w = Kv(key, kGgufArray).Put<uint32_t>(kGgufF32).Put<uint64_t>(v.size());
    for (float f : v) w.Put(f);
  }
  // A pre-encoded value (type id + payload) for corrupt cases.
  void AddRaw(const std::string& key, uint32_t type, const std::string& payload) {
    Kv(key, type).Raw(payload);
  }

  // `ne` is innermost-first as GGUF stores it. Empty `data` means a deterministic pattern of
  // the right size; `offset` overrides the computed (aligned) data offset.
  void AddTensor(const std::string& name, std::vector<uint64_t> ne, uint32_t type,
                 std::string data = {}, std::optional<uint64_t> offset = std::nullopt) {
    if (data.empty()) {
      uint64_t numel = 1;
      for (uint64_t d : ne) numel *= d;
      if (numel < (1u << 24)) {
        data = PatternBytes(GgmlBytes(type, numel), type, static_cast<uint32_t>(tensors_.size()));
      }
    }
    tensors_.push_back({name, std::move(ne), type, std::move(data), offset});
  }

  std::string Build() const {
    ByteWriter w;
    w.Raw("GGUF").Put(version).Put<uint64_t>(tensors_.size()).Put<uint64_t>(kvs_.size());
    for (const ByteWriter& kv : kvs_) w.Raw(kv.bytes());
    uint64_t next = 0;
    std::vector<uint64_t> offsets;
    for (const Tensor& t : tensors_) {
      w.PutString(t.name).Put<uint32_t>(static_cast<uint32_t>(t.ne.size()));
      for (uint64_t d : t.ne) w.Put(d);
      const uint64_t off = t.offset.value_or(next);
      w.Put(t.type).Put(off);
      offsets.push_back(off);
      next = (off + t.data.size() + alignment - 1) / alignment * alignment;
    }
    w.PadTo(alignment);
    std::string& out = w.mutable_bytes();
    const uint64_t data_start = out.size();
    for (size_t k = 0; k < tensors_.size(); ++k) {
      const uint64_t at = data_start + offsets[k];
      if (offsets[k] > (1u << 28)) continue;  // hostile offsets are not materialised
      if (out.size() < at + tensors_[k].data.size()) out.resize(at + tensors_[k].data.size());
      out.replace(at, tensors_[k].data.size(), tensors_[k].data);
    }
    return out;
  }

 private:
  struct Tensor {
    std::string name;
    std::vector<uint64_t> ne;
    uint32_t type;
    std::string data;
    std::optional<uint64_t> offset;
  };
  ByteWriter& Kv(const std::string& key, uint32_t type) {
    kvs_.emplace_back();
    return kvs_.back().PutString(key).Put(type);
  }
  std::vector<ByteWriter> kvs_;
  std::vector<Tensor> tensors_;
};

// Builds a safetensors file: u64 header length, JSON header padded with spaces to 8 bytes,
// then each tensor's bytes in insertion order.
class SafetensorsBuilder {
 public:
  void Add(const std::string& name, const std::string& dtype, std::vector<int64_t> shape,
           std::string data = {}) {
    if (data.empty()) {
      int64_t numel = 1;
      for (int64_t d : shape) numel *= d;
      const uint32_t t = dtype == "F16" ? kGgmlF16 : dtype == "BF16" ? kGgmlBF16 : kGgmlF32;
      data = PatternBytes(GgmlBytes(t, numel), t, static_cast<uint32_t>(entries_.size()) + 100);
    }
    entries_.push_back({name, dtype, std::move(shape), std::move(data)});
  }

  std::string Build() const {
    nlohmann::json header = nlohmann::json::object();
    header["__metadata__"] = {{"format", "pt"}};
    std::string data;
    for (const Entry& e : entries_) {
      header[e.name] = {{"dtype", e.dtype},
                        {"shape", e.shape},
                        {"data_offsets", {data.size(), data.size() + e.data.size()}}};
      data += e.data;
    }
    return Assemble(header.dump(), data);
  }

  // Length prefix + header (padded to a multiple of 8 with spaces) + data.
  static std::string Assemble(std::string header, const std::string& data) {
    while (header.size() % 8 != 0) header.push_back(' ');
    ByteWriter w;
    w.Put<uint64_t>(header.size()).Raw(header).Raw(data);
    return w.bytes();
  }

 private:
  struct Entry {
    std::string name;
    std::string dtype;
    std::vector<int64_t> shape;
    std::string data;
  };
  std::vector<Entry> entries_;
};

// A fresh directory under the system temp dir, removed with its contents on destruction.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "pagellm_model_XXXXXX").string();
    if (mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string Write(const std::string& name, const std::string& bytes) const {
    const std::string p = path_ + "/" + name;
    std::ofstream(p, std::ios::binary)
        .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return p;
  }

 private:
  std::string path_;
};

// Shape of the synthetic models: small, but with GQA (4 heads, 2 KV heads) and dimensions
// that are multiples of 32 so matrices can be quantized.
struct TinyModelSpec {
  int hidden = 32;
  int intermediate = 64;
  int layers = 2;
  int heads = 4;
  int kv_heads = 2;
  int head_dim = 8;
  int vocab = 64;
  int context = 128;
  bool tied = true;
  bool attention_bias = false;  // writes q/k/v biases (Qwen2)
  uint32_t matrix_type = kGgmlF32;
  uint32_t norm_type = kGgmlF32;
  // Mixture of experts when experts > 0: every layer sparse, experts_used of `experts` SwiGLU
  // experts of width expert_intermediate per token (stacked tensors, matrix_type). With
  // shared_intermediate > 0 a Qwen2-MoE file ("qwen2moe": a gated shared expert of that width;
  // set attention_bias too), else with qk_norm a Qwen3-MoE one ("qwen3moe": per-head q/k
  // norms), else Mixtral's ("llama" with experts).
  int experts = 0;
  int experts_used = 2;
  int expert_intermediate = 0;
  int shared_intermediate = 0;
  bool qk_norm = false;
};

// A complete GGUF model ("llama", or "qwen2" when spec.attention_bias; the MoE families with
// spec.experts).
inline GgufBuilder TinyGguf(const TinyModelSpec& s) {
  GgufBuilder b;
  const std::string arch = s.experts > 0      ? (s.shared_intermediate > 0 ? "qwen2moe"
                                                 : s.qk_norm               ? "qwen3moe"
                                                                           : "llama")
                           : s.attention_bias ? "qwen2"
                                              : "llama";
  b.AddString("general.architecture", arch);
  b.AddU32(arch + ".embedding_length", s.hidden);
  b.AddU32(arch + ".feed_forward_length", s.intermediate);
  b.AddU32(arch + ".block_count", s.layers);
  b.AddU32(arch + ".attention.head_count", s.heads);
  b.AddU32(arch + ".attention.head_count_kv", s.kv_heads);
  if (s.head_dim * s.heads != s.hidden) b.AddU32(arch + ".attention.key_length", s.head_dim);
  b.AddU32(arch + ".context_length", s.context);
  b.AddF32(arch + ".attention.layer_norm_rms_epsilon", 1e-5f);
  b.AddF32(arch + ".rope.freq_base", 10000.0f);
  if (s.experts > 0) {
    b.AddU32(arch + ".expert_count", s.experts);
    b.AddU32(arch + ".expert_used_count", s.experts_used);
    b.AddU32(arch + ".expert_feed_forward_length", s.expert_intermediate);
    if (s.shared_intermediate > 0)
      b.AddU32(arch + ".expert_shared_feed_forward_length", s.shared_intermediate);
  }
  std::vector<std::string> tokens;
  for (int i = 0; i < s.vocab; ++i) tokens.push_back("t" + std::to_string(i));
  b.AddStringArray("tokenizer.ggml.tokens", tokens);
  b.AddU32("tokenizer.ggml.bos_token_id", 1);
  b.AddU32("tokenizer.ggml.eos_token_id", 2);
  const uint64_t h = s.hidden, q = s.heads * s.head_dim, kv = s.kv_heads * s.head_dim,
                 ff = s.intermediate;
  b.AddTensor("token_embd.weight", {h, static_cast<uint64_t>(s.vocab)}, s.matrix_type);
  for (int i = 0; i < s.layers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    b.AddTensor(p + "attn_norm.weight", {h}, s.norm_type);
    b.AddTensor(p + "attn_q.weight", {h, q}, s.matrix_type);
    b.AddTensor(p + "attn_k.weight", {h, kv}, s.matrix_type);
    b.AddTensor(p + "attn_v.weight", {h, kv}, s.matrix_type);
    if (s.attention_bias) {
      b.AddTensor(p + "attn_q.bias", {q}, s.norm_type);
      b.AddTensor(p + "attn_k.bias", {kv}, s.norm_type);
      b.AddTensor(p + "attn_v.bias", {kv}, s.norm_type);
    }
    if (s.qk_norm) {
      b.AddTensor(p + "attn_q_norm.weight", {static_cast<uint64_t>(s.head_dim)}, s.norm_type);
      b.AddTensor(p + "attn_k_norm.weight", {static_cast<uint64_t>(s.head_dim)}, s.norm_type);
    }
    b.AddTensor(p + "attn_output.weight", {q, h}, s.matrix_type);
    b.AddTensor(p + "ffn_norm.weight", {h}, s.norm_type);
    if (s.experts > 0) {
      const uint64_t e = s.experts, ei = s.expert_intermediate, si = s.shared_intermediate;
      b.AddTensor(p + "ffn_gate_inp.weight", {h, e}, kGgmlF32);
      b.AddTensor(p + "ffn_gate_exps.weight", {h, ei, e}, s.matrix_type);
      b.AddTensor(p + "ffn_up_exps.weight", {h, ei, e}, s.matrix_type);
      b.AddTensor(p + "ffn_down_exps.weight", {ei, h, e}, s.matrix_type);
      if (si > 0) {
        b.AddTensor(p + "ffn_gate_shexp.weight", {h, si}, s.matrix_type);
        b.AddTensor(p + "ffn_up_shexp.weight", {h, si}, s.matrix_type);
        b.AddTensor(p + "ffn_down_shexp.weight", {si, h}, s.matrix_type);
        b.AddTensor(p + "ffn_gate_inp_shexp.weight", {h}, s.norm_type);
      }
      continue;
    }
    b.AddTensor(p + "ffn_gate.weight", {h, ff}, s.matrix_type);
    b.AddTensor(p + "ffn_up.weight", {h, ff}, s.matrix_type);
    b.AddTensor(p + "ffn_down.weight", {ff, h}, s.matrix_type);
  }
  b.AddTensor("output_norm.weight", {h}, s.norm_type);
  if (!s.tied) b.AddTensor("output.weight", {h, static_cast<uint64_t>(s.vocab)}, s.matrix_type);
  return b;
}

// config.json of the synthetic HF model (LlamaForCausalLM, or Qwen2ForCausalLM with biases).
inline nlohmann::json TinyHfConfig(const TinyModelSpec& s) {
  return {{"architectures", {s.attention_bias ? "Qwen2ForCausalLM" : "LlamaForCausalLM"}},
          {"hidden_size", s.hidden},
          {"intermediate_size", s.intermediate},
          {"num_hidden_layers", s.layers},
          {"num_attention_heads", s.heads},
          {"num_key_value_heads", s.kv_heads},
          {"head_dim", s.head_dim},
          {"vocab_size", s.vocab},
          {"max_position_embeddings", s.context},
          {"rms_norm_eps", 1e-5},
          {"rope_theta", 10000.0},
          {"tie_word_embeddings", s.tied},
          {"bos_token_id", 1},
          {"eos_token_id", 2},
          {"torch_dtype", "float32"}};
}

// The HF tensors of the synthetic model, name -> (shape); all F32 unless `dtype` says otherwise.
inline std::vector<std::pair<std::string, std::vector<int64_t>>> TinyHfTensors(
    const TinyModelSpec& s) {
  const int64_t h = s.hidden, q = s.heads * s.head_dim, kv = s.kv_heads * s.head_dim,
                ff = s.intermediate, v = s.vocab;
  std::vector<std::pair<std::string, std::vector<int64_t>>> t;
  t.push_back({"model.embed_tokens.weight", {v, h}});
  for (int i = 0; i < s.layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    t.push_back({p + "input_layernorm.weight", {h}});
    t.push_back({p + "self_attn.q_proj.weight", {q, h}});
    t.push_back({p + "self_attn.k_proj.weight", {kv, h}});
    t.push_back({p + "self_attn.v_proj.weight", {kv, h}});
    if (s.attention_bias) {
      t.push_back({p + "self_attn.q_proj.bias", {q}});
      t.push_back({p + "self_attn.k_proj.bias", {kv}});
      t.push_back({p + "self_attn.v_proj.bias", {kv}});
    }
    t.push_back({p + "self_attn.o_proj.weight", {h, q}});
    t.push_back({p + "post_attention_layernorm.weight", {h}});
    t.push_back({p + "mlp.gate_proj.weight", {ff, h}});
    t.push_back({p + "mlp.up_proj.weight", {ff, h}});
    t.push_back({p + "mlp.down_proj.weight", {h, ff}});
  }
  t.push_back({"model.norm.weight", {h}});
  if (!s.tied) t.push_back({"lm_head.weight", {v, h}});
  return t;
}

}  // namespace pagellm::testing
