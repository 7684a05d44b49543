// LoadModel: opens a Hugging Face directory or a GGUF file and binds every weight the forward
// pass needs, checking presence, dtype and exact shape. Matrices stay in the mapping; only
// norms and biases are converted to owned float32.
#include <fmt/format.h>
#include <sys/stat.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>

#include "kernels/weight_format.h"
#include "model/arch_spec.h"
#include "model/config_parser.h"
#include "model/gguf_file.h"
#include "model/model_weights.h"
#include "model/safetensors_file.h"

namespace pagellm {

LoadedModel::~LoadedModel() = default;

namespace {

std::string ShapeString(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

// F32, F16, BF16: one element per block, converted exactly (norms, biases, scalars).
bool IsPlainFloat(const WeightFormat& f) {
  return f.block_elems == 1 && f.dequantize != nullptr;
}

// The tensors of a model across its files, and the checks and conversions that turn them into
// ModelWeights. Records which tensors were used so leftovers can be reported.
class WeightBinder : public TensorBinder {
 public:
  // `file` must outlive the binder (it names the file in errors).
  void set_source(const std::string* file) { source_ = file; }  // named for missing tensors
  void set_store(WeightStore* store) { store_ = store; }        // owns what format binds repack
  // LoadOptions::float_matrix_dtype: plain-float matrices are converted to it (into store_).
  void set_float_matrix_dtype(std::optional<DType> t) { cast_to_ = t; }
  // An integer checkpoint: modules with a `.qweight` bind through its format (parts repacked).
  void set_quantization(const HfQuantConfig* q) {
    quant_ = q;
    if (q->enabled) quant_format_ = q->Format();
  }
  void Add(const TensorView* t, const std::string* file) { tensors_[t->name] = {t, file}; }
  bool Has(const std::string& name) const override { return tensors_.count(name) != 0; }

  // The parts of a multi-tensor format's matrix (`module` + "." + part; a missing g_idx is
  // allowed), repacked by its bind into store_. Parts are 2-D, g_idx 1-D ([1][n] here).
  StatusOr<WeightMatrix> QuantMatrix(const std::string& module, int64_t rows, int64_t cols) {
    const WeightFormat& f = quant_format_;
    WeightTensor parts[kMaxWeightParts];
    int n = 0;
    const std::string* file = source_;
    for (int i = 0; i < f.num_parts; ++i) {
      const std::string name = module + "." + std::string(f.parts[i]);
      auto it = tensors_.find(name);
      if (it == tensors_.end()) {
        if (f.parts[i] == "g_idx") break;
        return NotFoundError(
            fmt::format("{}: missing tensor '{}' ({} checkpoint)", *file, name, f.name));
      }
      const TensorView& t = *it->second.tensor;
      if (i == 0) file = it->second.file;
      const size_t dims = f.parts[i] == "g_idx" ? 1 : 2;
      if (t.shape.size() != dims) {
        return InvalidArgumentError(
            fmt::format("{}: tensor '{}': expected {} dimensions, got shape {}", *it->second.file,
                        name, dims, ShapeString(t.shape)));
      }
      parts[n++] = dims == 2 ? WeightTensor{t.data, t.dtype, t.shape[0], t.shape[1]}
                             : WeightTensor{t.data, t.dtype, 1, t.shape[0]};
      if (used_.insert(name).second) quantized_file_bytes_ += static_cast<int64_t>(t.nbytes);
    }
    num_parameters_ += rows * cols;
    StatusOr<WeightMatrix> m = f.bind(f, {parts, static_cast<size_t>(n)}, rows, cols, store_);
    if (!m.ok()) {
      return Status(m.status().code(),
                    fmt::format("{}: tensor '{}.{{{}}}' ({} [{}, {}]): {}", *file, module,
                                fmt::join(f.parts.begin(), f.parts.begin() + f.num_parts, ","),
                                f.name, rows, cols, m.status().message()));
    }
    total_bytes_ += m->nbytes();  // what the kernels read: the repacked layout
    return m;
  }

  StatusOr<WeightMatrix> Matrix(const std::string& name, int64_t rows, int64_t cols) override {
    if (quant_ != nullptr && quant_->enabled && name.ends_with(".weight")) {
      const std::string module = name.substr(0, name.size() - 7);
      if (!quant_->Skips(module) && Has(module + ".qweight")) {
        return QuantMatrix(module, rows, cols);
      }
    }
    ASSIGN_OR_RETURN(const Entry* e, Use(name, {rows, cols}));
    return BindMatrix(*e, name, e->tensor->data, rows, cols);
  }

  StatusOr<std::vector<WeightMatrix>> StackedMatrices(const std::string& name, int64_t count,
                                                      int64_t rows, int64_t cols) override {
    ASSIGN_OR_RETURN(const Entry* e, Use(name, {count, rows, cols}));
    const int64_t slice_bytes = rows * DTypeRowBytes(e->tensor->dtype, cols);
    std::vector<WeightMatrix> out(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) {
      ASSIGN_OR_RETURN(out[i], BindMatrix(*e, name, e->tensor->data + i * slice_bytes, rows, cols));
    }
    return out;
  }

  StatusOr<std::vector<float>> Vector(const std::string& name, int64_t n) override {
    ASSIGN_OR_RETURN(const Entry* e, Use(name, {n}));
    return FloatVector(*e, name, n);
  }

  StatusOr<std::vector<float>> RowVector(const std::string& name, int64_t n) override {
    auto it = tensors_.find(name);
    if (it != tensors_.end() && it->second.tensor->shape == std::vector<int64_t>{1, n}) {
      ASSIGN_OR_RETURN(const Entry* e, Use(name, {1, n}));
      return FloatVector(*e, name, n);
    }
    return Vector(name, n);
  }

  // A positive finite scalar (shape [] or [1], F32/F16/BF16), or 0 when `name` is absent.
  StatusOr<float> OptionalPositiveScalar(const std::string& name) {
    auto it = tensors_.find(name);
    if (it == tensors_.end()) return 0.0f;
    const Entry& e = it->second;
    const TensorView& t = *e.tensor;
    if (!(t.shape.empty() || t.shape == std::vector<int64_t>{1})) {
      return InvalidArgumentError(
          fmt::format("{}: tensor '{}': expected a scalar (shape [] or "
                      "[1]), got shape {}",
                      *e.file, name, ShapeString(t.shape)));
    }
    float v;
    const WeightFormat& f = GetWeightFormat(t.dtype);
    if (!IsPlainFloat(f)) {
      return InvalidArgumentError(
          fmt::format("{}: tensor '{}': dtype {} is not supported for a KV cache scale (F32, "
                      "F16, BF16)",
                      *e.file, name, f.name));
    }
    f.dequantize(t.data, &v, 1);
    if (!(std::isfinite(v) && v > 0.0f)) {
      return InvalidArgumentError(
          fmt::format("{}: tensor '{}': a KV cache scale must be finite and positive, got {}",
                      *e.file, name, v));
    }
    used_.insert(name);  // not a parameter: total_bytes / num_parameters leave it out
    return v;
  }

  void Ignore(const std::string& name) override { used_.insert(name); }

  // A bias we did not bind would be silently dropped from the forward pass; refuse instead.
  Status CheckNoUnusedBiases(const std::string& arch) const {
    for (const auto& [name, e] : tensors_) {
      if (used_.count(name) == 0 && name.size() > 5 && name.ends_with(".bias")) {
        return UnimplementedError(
            fmt::format("{}: tensor '{}' is not used by {} (only q/k/v biases are supported)",
                        *e.file, name, arch));
      }
    }
    return Status::Ok();
  }

  int64_t total_bytes() const { return total_bytes_; }
  int64_t quantized_file_bytes() const { return quantized_file_bytes_; }
  int64_t num_parameters() const { return num_parameters_; }

 private:
  struct Entry {
    const TensorView* tensor;
    const std::string* file;
  };

  // The format's load-time hook over one [rows][cols] matrix at `data` inside e's tensor: in
  // place for single-tensor formats (kernels read elements in place, so it checks their
  // alignment); a multi-tensor format, or a --dtype conversion, writes into store_.
  StatusOr<WeightMatrix> BindMatrix(const Entry& entry, const std::string& name,
                                    const uint8_t* data, int64_t rows, int64_t cols) {
    const Entry* e = &entry;
    const TensorView& t = *e->tensor;
    const WeightFormat& f = GetWeightFormat(t.dtype);
    if (f.matmul == MatMulFamily::kNone) {
      return UnimplementedError(
          fmt::format("{}: tensor '{}': dtype {} is not supported for weight matrices", *e->file,
                      name, f.name));
    }
    WeightTensor part{data, t.dtype, rows, cols};
    const WeightFormat* bind_as = &f;
    if (cast_to_ && IsPlainFloat(f) && t.dtype != *cast_to_) {
      // Row by row through float32: F16 and BF16 values are exact in float32, and the
      // conversion to the narrower type rounds to nearest even (the format's quantize).
      const WeightFormat& to = GetWeightFormat(*cast_to_);
      const int64_t row_bytes = cols * to.block_bytes;
      uint8_t* out = store_->Allocate(rows * row_bytes);
      std::vector<float> row(static_cast<size_t>(cols));
      for (int64_t r = 0; r < rows; ++r) {
        f.dequantize(data + r * cols * f.block_bytes, row.data(), cols);
        to.quantize(row.data(), out + r * row_bytes, cols);
      }
      total_bytes_ += rows * row_bytes - rows * cols * f.block_bytes;
      part = WeightTensor{out, *cast_to_, rows, cols};
      bind_as = &to;
    }
    StatusOr<WeightMatrix> m = bind_as->bind(*bind_as, {&part, 1}, rows, cols, store_);
    if (!m.ok()) {
      return Status(m.status().code(),
                    fmt::format("{}: tensor '{}': {}", *e->file, name, m.status().message()));
    }
    return m;
  }

  // e's n elements converted to float32 (plain-float dtypes only).
  StatusOr<std::vector<float>> FloatVector(const Entry& e, const std::string& name, int64_t n) {
    const TensorView& t = *e.tensor;
    std::vector<float> out(static_cast<size_t>(n));
    const WeightFormat& f = GetWeightFormat(t.dtype);
    if (!IsPlainFloat(f)) {
      return UnimplementedError(
          fmt::format("{}: tensor '{}': dtype {} is not supported for norms and biases (F32, "
                      "F16, BF16)",
                      *e.file, name, f.name));
    }
    f.dequantize(t.data, out.data(), n);
    return out;
  }

  StatusOr<const Entry*> Use(const std::string& name, const std::vector<int64_t>& shape) {
    auto it = tensors_.find(name);
    if (it == tensors_.end()) {
      return NotFoundError(fmt::format("{}: missing tensor '{}'", *source_, name));
    }
    const Entry& e = it->second;
    if (e.tensor->shape != shape) {
      return InvalidArgumentError(fmt::format("{}: tensor '{}': expected shape {}, got {}", *e.file,
                                              name, ShapeString(shape),
                                              ShapeString(e.tensor->shape)));
    }
    if (used_.insert(name).second) {
      total_bytes_ += static_cast<int64_t>(e.tensor->nbytes);
      num_parameters_ += e.tensor->numel();
    }
    return &e;
  }

  const std::string* source_ = nullptr;
  WeightStore* store_ = nullptr;
  std::optional<DType> cast_to_;
  const HfQuantConfig* quant_ = nullptr;
  WeightFormat quant_format_;
  std::unordered_map<std::string, Entry> tensors_;
  std::set<std::string> used_;
  int64_t total_bytes_ = 0;
  int64_t quantized_file_bytes_ = 0;
  int64_t num_parameters_ = 0;
};

// Binds the architecture's tensors (model/arch_spec.h), then refuses leftover biases and
// records the totals.
Status BindWeights(const ArchTensorNames& names, WeightBinder& b, ModelConfig* config,
                   ModelWeights* w) {
  RETURN_IF_ERROR(GetArchSpec(config->arch).bind_weights(names, b, config, w));
  RETURN_IF_ERROR(b.CheckNoUnusedBiases(config->hf_architecture));
  w->total_bytes = b.total_bytes();
  w->quantized_file_bytes = b.quantized_file_bytes();
  w->num_parameters = b.num_parameters();
  return Status::Ok();
}

// fp8 KV cache scales of a Hugging Face checkpoint, per layer, in vLLM's names. Per layer and
// per K/V the first present name wins: self_attn.{k,v}_scale (current), then
// self_attn.{k,v}_proj.output_scale (older compressed-tensors), then self_attn.kv_scale (legacy:
// one scale for both). Every present name is validated (a malformed one is an error even when a
// preferred name shadows it).
Status BindKvScales(WeightBinder& b, const ModelConfig& c, ModelWeights* w) {
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string p = fmt::format("model.layers.{}.self_attn.", i);
    ASSIGN_OR_RETURN(const float k, b.OptionalPositiveScalar(p + "k_scale"));
    ASSIGN_OR_RETURN(const float v, b.OptionalPositiveScalar(p + "v_scale"));
    ASSIGN_OR_RETURN(const float k_out, b.OptionalPositiveScalar(p + "k_proj.output_scale"));
    ASSIGN_OR_RETURN(const float v_out, b.OptionalPositiveScalar(p + "v_proj.output_scale"));
    ASSIGN_OR_RETURN(const float kv, b.OptionalPositiveScalar(p + "kv_scale"));
    LayerWeights& l = w->layers[i];
    l.kv_k_scale = k > 0 ? k : k_out > 0 ? k_out : kv;
    l.kv_v_scale = v > 0 ? v : v_out > 0 ? v_out : kv;
  }
  return Status::Ok();
}

// A shard name from an index must be a plain file name inside the model directory.
bool IsPlainFileName(const std::string& s) {
  return !s.empty() && s != "." && s != ".." && s.find('/') == std::string::npos &&
         s.find('\0') == std::string::npos;
}

// Opens model.safetensors, or the shards listed by model.safetensors.index.json (each once),
// and registers their tensors with the binder.
Status OpenSafetensors(const std::string& dir, LoadedModel* m, WeightBinder* b,
                       std::string* weights_source) {
  const std::string single = dir + "/model.safetensors";
  if (FileExists(single)) {
    ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> f, SafetensorsFile::Open(single));
    m->safetensors.push_back(std::move(f));
    for (const TensorView& t : m->safetensors.back()->tensors()) {
      b->Add(&t, &m->safetensors.back()->name());
    }
    *weights_source = single;
    return Status::Ok();
  }
  const std::string index_path = dir + "/model.safetensors.index.json";
  if (!FileExists(index_path)) {
    return NotFoundError(fmt::format(
        "{}: no model.safetensors or model.safetensors.index.json in the model directory", dir));
  }
  *weights_source = index_path;
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(index_path));
  nlohmann::json root = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) {
    return InvalidArgumentError(index_path + ": not a valid JSON object");
  }
  auto wm = root.find("weight_map");
  if (wm == root.end() || !wm->is_object()) {
    return InvalidArgumentError(index_path + ": missing object 'weight_map'");
  }
  std::map<std::string, SafetensorsFile*> shards;
  for (const auto& [tensor, shard_json] : wm->items()) {
    if (!shard_json.is_string() || !IsPlainFileName(shard_json.get<std::string>())) {
      return InvalidArgumentError(
          fmt::format("{}: weight_map entry '{}' must be a file name in the model directory",
                      index_path, tensor));
    }
    const std::string shard = shard_json.get<std::string>();
    auto it = shards.find(shard);
    if (it == shards.end()) {
      ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> f,
                       SafetensorsFile::Open(dir + "/" + shard));
      m->safetensors.push_back(std::move(f));
      it = shards.emplace(shard, m->safetensors.back().get()).first;
    }
    const TensorView* t = it->second->FindTensor(tensor);
    if (t == nullptr) {
      return NotFoundError(
          fmt::format("{}: tensor '{}' is mapped to shard '{}' but not found there", index_path,
                      tensor, shard));
    }
    b->Add(t, &it->second->name());
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<LoadedModel>> LoadHfDirectory(const std::string& dir,
                                                       const LoadOptions& options) {
  auto m = std::make_unique<LoadedModel>();
  m->path = dir;
  m->format = "safetensors";
  m->load_options = options;
  const std::string config_path = dir + "/config.json";
  if (!FileExists(config_path)) return NotFoundError(config_path + ": not found");
  ASSIGN_OR_RETURN(std::string config_text, ReadFileToString(config_path));
  ASSIGN_OR_RETURN(m->config, ParseHfConfig(config_text, config_path));
  const std::string gen_path = dir + "/generation_config.json";
  if (FileExists(gen_path)) {
    ASSIGN_OR_RETURN(std::string gen_text, ReadFileToString(gen_path));
    RETURN_IF_ERROR(ParseGenerationConfig(gen_text, gen_path, &m->config, &m->generation_defaults));
  }
  ASSIGN_OR_RETURN(m->quantization,
                   ParseQuantizationConfig(config_text, config_path, /*nested=*/true));
  const std::string quant_path = dir + "/quantize_config.json";
  if (!m->quantization.enabled && FileExists(quant_path)) {
    ASSIGN_OR_RETURN(std::string quant_text, ReadFileToString(quant_path));
    ASSIGN_OR_RETURN(m->quantization,
                     ParseQuantizationConfig(quant_text, quant_path, /*nested=*/false));
  }
  if (options.quantization == "gguf") {
    return InvalidArgumentError(
        fmt::format("--quantization gguf: {} is a Hugging Face directory, not a .gguf file", dir));
  }
  RETURN_IF_ERROR(CheckQuantizationOption(options.quantization, m->quantization, dir));
  WeightBinder binder;
  std::string weights_source;
  RETURN_IF_ERROR(OpenSafetensors(dir, m.get(), &binder, &weights_source));
  binder.set_source(&weights_source);
  binder.set_store(&m->repacked);
  binder.set_quantization(&m->quantization);
  binder.set_float_matrix_dtype(options.float_matrix_dtype);
  RETURN_IF_ERROR(
      BindWeights(*GetArchSpec(m->config.arch).hf_tensors, binder, &m->config, &m->weights));
  RETURN_IF_ERROR(BindKvScales(binder, m->config, &m->weights));
  return m;
}

}  // namespace

StatusOr<std::unique_ptr<LoadedModel>> LoadGgufModel(std::unique_ptr<GgufFile> gguf,
                                                     const LoadOptions& options) {
  auto m = std::make_unique<LoadedModel>();
  m->path = gguf->name();
  m->format = "gguf";
  m->load_options = options;
  if (!options.quantization.empty() && options.quantization != "gguf" &&
      options.quantization != "none" && options.quantization != "None") {
    return InvalidArgumentError(
        fmt::format("--quantization {}: {} is a GGUF file (its tensor types are used; "
                    "--quantization gguf or none)",
                    options.quantization, gguf->name()));
  }
  ASSIGN_OR_RETURN(m->config, ParseGgufConfig(*gguf));
  WeightBinder binder;
  for (const TensorView& t : gguf->tensors()) binder.Add(&t, &gguf->name());
  binder.set_source(&gguf->name());
  binder.set_store(&m->repacked);
  binder.set_float_matrix_dtype(options.float_matrix_dtype);
  RETURN_IF_ERROR(
      BindWeights(*GetArchSpec(m->config.arch).gguf_tensors, binder, &m->config, &m->weights));
  m->gguf = std::move(gguf);  // the views point into its mapping, which does not move
  return m;
}

StatusOr<std::unique_ptr<LoadedModel>> LoadModel(const std::string& path,
                                                 const LoadOptions& options) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return NotFoundError(path + ": no such file or directory");
  if (S_ISDIR(st.st_mode)) {
    std::string dir = path;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    return LoadHfDirectory(dir, options);
  }
  if (path.ends_with(".safetensors") || path.ends_with(".json")) {
    return InvalidArgumentError(
        path + ": pass the model directory (with config.json), not a file inside it");
  }
  ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> gguf, GgufFile::Open(path));
  return LoadGgufModel(std::move(gguf), options);
}

}  // namespace pagellm
