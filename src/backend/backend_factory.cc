#include "backend/backend_factory.h"

#include "backend/cpu_backend.h"
#include "backend/tensor_parallel_backend.h"

namespace pagellm {

StatusOr<std::unique_ptr<Backend>> CreateBackend(const LoadedModel& model,
                                                 const BackendOptions& options) {
  const SimdLevel level = options.cpu_simd_level.value_or(ActiveSimdLevel());
  if (options.tensor_parallel_group != nullptr && options.tensor_parallel_group->size() > 1)
    return TensorParallelBackend::Create(model, options.tensor_parallel_group, options.pool,
                                         options.max_positions, level, options.pipeline);
  switch (options.kind) {
    case BackendKind::kCpu:
      return std::unique_ptr<Backend>(
          std::make_unique<CpuBackend>(model, options.pool, options.max_positions, level));
  }
  return InvalidArgumentError("unknown backend kind");
}

int64_t BackendActivationBytes(BackendKind kind, const ModelConfig& config, int64_t num_tokens,
                               int64_t num_logit_rows) {
  switch (kind) {
    case BackendKind::kCpu:
      return CpuBackend::ActivationBytes(config, num_tokens, num_logit_rows);
  }
  return 0;
}

}  // namespace pagellm
