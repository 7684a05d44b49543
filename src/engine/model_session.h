// Everything needed to run one model on the CPU: weights, tokenizer, a paged KV cache, a
// thread pool and the backend bound to them. Used by the offline CLI paths; the serving engine
// owns the same pieces.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "base/thread_pool.h"
#include "dist/communicator.h"
#include "model/model_weights.h"
#include "pagellm/status.h"
#include "tokenizer/tokenizer.h"

namespace pagellm {

struct SessionOptions {
  std::string model_path;
  int threads = 0;        // 0 = all available CPUs
  int max_model_len = 0;  // 0 = the model's max_position_embeddings
  int block_size = 16;
  int num_kv_blocks = 0;  // 0 = enough for one sequence of max_model_len (+ null block)
  bool require_tokenizer = true;
  // --kv-cache-dtype and friends, as EngineConfig (auto = the model dtype).
  KvCacheDtype kv_cache_dtype = KvCacheDtype::kAuto;
  std::vector<int> kv_cache_dtype_skip_layers;
  bool calculate_kv_scales = false;
  std::optional<DType> float_matrix_dtype;  // --dtype (LoadOptions)
  std::string quantization;                 // --quantization (LoadOptions)
  // A tensor-parallel group of more than one rank, this process its rank 0 (not owned;
  // BackendOptions::tensor_parallel_group). Null: the whole model here.
  Communicator* tensor_parallel_group = nullptr;
  // Pipeline stages (BackendOptions::pipeline); tensor_parallel_group is then the world.
  int pipeline_parallel_size = 1;
  std::vector<int> pipeline_layer_partition;
};

class ModelSession {
 public:
  static StatusOr<std::unique_ptr<ModelSession>> Open(const SessionOptions& options);

  const LoadedModel& model() const { return *model_; }
  const ModelConfig& config() const { return model_->config; }
  // Null when the model has no tokenizer and require_tokenizer was false.
  const Tokenizer* tokenizer() const { return tokenizer_.get(); }
  Backend& backend() { return *backend_; }
  KvCacheStorage& kv() { return backend_->kv_cache(); }
  ThreadPool& pool() { return *pool_; }
  int max_model_len() const { return max_model_len_; }
  int block_size() const { return backend_->kv_shape().block_size; }

 private:
  ModelSession() = default;
  std::unique_ptr<LoadedModel> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<Backend> backend_;  // owns the KV cache
  int max_model_len_ = 0;
};

}  // namespace pagellm
