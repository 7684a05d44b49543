#include "engine/model_session.h"

#include <filesystem>

#include "backend/backend_factory.h"
#include "engine/kv_calibration.h"
#include "fmt/format.h"
#include "model/gguf_file.h"

namespace pagellm {

StatusOr<std::unique_ptr<ModelSession>> ModelSession::Open(const SessionOptions& o) {
  std::unique_ptr<ModelSession> s(new ModelSession());
  ASSIGN_OR_RETURN(s->model_,
                   LoadModel(o.model_path, LoadOptions{o.float_matrix_dtype, o.quantization}));
  auto tok = LoadTokenizerForModel(*s->model_);
  if (tok.ok()) {
    s->tokenizer_ = std::move(tok).value();
  } else if (o.require_tokenizer) {
    return tok.status();
  }
  const ModelConfig& c = s->model_->config;
  s->max_model_len_ = o.max_model_len > 0 ? o.max_model_len : c.max_position_embeddings;
  if (s->max_model_len_ <= 0) return InvalidArgumentError("max_model_len must be positive");
  if (o.block_size < 1 || o.block_size > 256)
    return InvalidArgumentError(
        fmt::format("--block-size must be in [1, 256], got {}", o.block_size));
  KvCacheShape shape;
  shape.num_layers = c.num_layers;
  shape.num_kv_heads = c.num_kv_heads;
  shape.head_dim = c.head_dim;
  shape.block_size = o.block_size;
  shape.num_blocks = o.num_kv_blocks > 0
                         ? o.num_kv_blocks
                         : (s->max_model_len_ + o.block_size - 1) / o.block_size + 1;
  ASSIGN_OR_RETURN(KvElementFormat kv_format,
                   ResolveKvCacheFormat(o.kv_cache_dtype, c.weight_dtype,
                                        o.kv_cache_dtype_skip_layers, c.num_layers));
  shape.dtype = kv_format.storage_dtype;
  shape.skip_layers = kv_format.skip_layers;
  shape.skip_dtype = kv_format.skip_dtype;
  s->pool_ = std::make_unique<ThreadPool>(o.threads);
  BackendOptions backend_options(s->pool_.get(), s->max_model_len_);
  backend_options.tensor_parallel_group = o.tensor_parallel_group;
  backend_options.pipeline.pipeline_parallel_size = o.pipeline_parallel_size;
  backend_options.pipeline.layer_partition = o.pipeline_layer_partition;
  ASSIGN_OR_RETURN(s->backend_, CreateBackend(*s->model_, backend_options));
  RETURN_IF_ERROR(s->backend_->AllocateKvCache(shape, /*num_swap_blocks=*/0));
  if (s->tokenizer_) {
    RETURN_IF_ERROR(CalibrateKvCache(*s->model_, *s->tokenizer_, s->max_model_len_,
                                     o.calculate_kv_scales, s->backend_.get(), s->pool_.get()));
  }
  return s;
}

}  // namespace pagellm
