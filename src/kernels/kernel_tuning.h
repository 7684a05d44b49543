// Per-microarchitecture kernel parameters: choices that do not change any result (software
// prefetch distances of the weight streams) but whose best value depends on the core and its
// memory system, so they are picked per CPU (base/cpu_identity.h) from a table of measured
// values instead of being compiled in once. Every value is output-neutral: a software prefetch
// has no architectural effect, so results are bit-identical for any setting.
//
// The table (kernel_tuning.cc) says where each entry was measured; env PAGELLM_KERNEL_TUNING
// ("quant_prefetch=32768,f16_prefetch=0,...") overrides single values for A/B runs. The choice
// is fixed at start-up (read once, before the first kernel runs).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/cpu_identity.h"
#include "pagellm/status.h"

namespace pagellm {

struct KernelTuning {
  // Bytes ahead of the current read at which the packed quantized decode streams (Q4_0 groups,
  // K-quants, IQ4_XS, AWQ/GPTQ int4) issue software prefetches. 0 (here and in the
  // other streams' entries): no software prefetch, the hardware prefetchers alone.
  int64_t quant_prefetch_bytes = 65536;
  // Whether those quantized-stream prefetches go into L2 only (prefetcht1) instead of L1 and
  // L2 (prefetcht0).
  bool quant_prefetch_l2 = false;
  // The same for the packed K-quant / IQ4_XS super-blocks (kquant_packed.h), which measure best
  // nearer than the Q4_0 groups on Zen 5 (kernel_tuning.cc); the L2 choice above applies to
  // them too.
  int64_t kquant_prefetch_bytes = 65536;
  // The same for packed Q8_0 groups, which measure best with another distance than the other
  // quantized streams on Zen 5 (kernel_tuning.cc); the L2 choice above applies to them too.
  int64_t q8_0_prefetch_bytes = 65536;
  // The same for F16/BF16 weights in the lane layout (prefetcht1: into L2 only).
  int64_t f16_prefetch_bytes = 65536;
  // The same for row-major float rows (fp32/f16 decode without packing, the AVX2 kernels).
  int64_t row_prefetch_bytes = 4096;
  // Prefill attention: most floats of query-head accumulators (query tokens x query heads per
  // KV head x head_dim) one task holds, i.e. how many query tokens share each decoded K/V tile
  // (paged_attention.cc; at most kMaxQueryRun tokens). Output-neutral: every query runs the
  // same operations in the same order whatever its run.
  int64_t attention_run_floats = 32768;
  // Decode (batches of at most 16 tokens) of K-quant / IQ4_XS / Q4_1 / Q5_0 / Q5_1 weights (the
  // decode-kernel formats): bytes of the next matrix that a thread with no task left prefetches
  // while it waits at a MatMul's end (ThreadPool ReadAhead): the caller, waiting for the last
  // tasks, the start of the next call's first task; a worker, waiting for the next call, the start
  // of the task it usually claims first. Each stops when its wait ends.
  int64_t idle_read_ahead_bytes = 0;
};

// The table row of a microarchitecture.
KernelTuning KernelTuningFor(CpuMicroarch microarch);
// `base` with the comma-separated key=value pairs of `overrides` applied (keys: quant_prefetch,
// kquant_prefetch, q8_0_prefetch, f16_prefetch, row_prefetch, idle_read_ahead: bytes, multiples
// of 64 in [0, 1 MiB];
// quant_prefetch_l2: 0 or 1).
StatusOr<KernelTuning> ApplyKernelTuningOverrides(KernelTuning base, std::string_view overrides);
// This machine's: its microarch's row, then PAGELLM_KERNEL_TUNING (a malformed value is
// reported once and ignored).
const KernelTuning& GetKernelTuning();
// "quant_prefetch=65536 quant_prefetch_l2=0 kquant_prefetch=65536 q8_0_prefetch=65536
// f16_prefetch=65536 row_prefetch=4096 attention_run_floats=32768 idle_read_ahead=0".
std::string KernelTuningString(const KernelTuning& t);

}  // namespace pagellm
