// The one place that names backend implementations: callers hold std::unique_ptr<Backend>.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "backend/backend.h"
#include "backend/pipeline_schedule.h"
#include "base/cpu_features.h"
#include "base/thread_pool.h"
#include "dist/communicator.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "pagellm/status.h"

namespace pagellm {

enum class BackendKind {
  kCpu,  // backend/cpu_backend.h: the host kernels (kernels/), dispatched by base/cpu_features.h
};

struct BackendOptions {
  BackendOptions(ThreadPool* pool, int max_positions) : pool(pool), max_positions(max_positions) {}

  BackendKind kind = BackendKind::kCpu;
  // Host threads for the kernels (not owned; must outlive the backend). May be null (the
  // caller's thread does all the work).
  ThreadPool* pool = nullptr;
  // Longest position Forward will see + 1 (bounds the RoPE tables).
  int max_positions = 0;
  // kCpu: the SIMD level of every kernel; unset = ActiveSimdLevel(). Tests pin a level to
  // compare kernel levels (tests/backend_ops_test.cc).
  std::optional<SimdLevel> cpu_simd_level;
  // A tensor-parallel group of more than one rank (not owned; must outlive the backend), this
  // process being its rank 0 and the others in RunTensorParallelWorker
  // (backend/tensor_parallel_backend.h): the backend splits the model across the group. Null:
  // the whole model here.
  Communicator* tensor_parallel_group = nullptr;
  // Pipeline parallelism: tensor_parallel_group is then the world of tp x pp ranks, split into
  // pipeline.pipeline_parallel_size stages (backend/rank_placement.h).
  PipelineOptions pipeline;
};

// Binds a backend to `model` (which must outlive it). Its KV cache is allocated separately
// (Backend::AllocateKvCache) once the planner has sized it.
StatusOr<std::unique_ptr<Backend>> CreateBackend(const LoadedModel& model,
                                                 const BackendOptions& options);

// Bytes of activation scratch one step of `num_tokens` tokens with `num_logit_rows` logits rows
// needs on a backend of `kind`, for memory planning without a model instance.
int64_t BackendActivationBytes(BackendKind kind, const ModelConfig& config, int64_t num_tokens,
                               int64_t num_logit_rows);

}  // namespace pagellm
