// The planner module's entry point: KV-cache capacity planning with vLLM's semantics.
//
//   memory_plan.h      PlanInput -> MemoryPlan (pure arithmetic), the refusal message
//   cpu_plan.h         PlanCpuKvCache: what the CPU engine allocates (engine and `plan` agree)
//   kv_cache_dtype.h   --kv-cache-dtype and bytes per element / per token
//   model_footprint.h  weights from shapes, tensor-parallel split, GPU activation estimate
//   device_catalog.h   named GPUs (--gpu A100-80GB ...)
//   host_memory.h      memory available to this process (cgroup limits included)
//   byte_size.h        sizes in reports ("79.15 GiB")
//
// See docs/CAPACITY_PLANNING.md for the formulas and worked examples.
#pragma once

#include "base/kv_cache_dtype.h"
#include "planner/byte_size.h"
#include "planner/cpu_plan.h"
#include "planner/device_catalog.h"
#include "planner/host_memory.h"
#include "planner/memory_plan.h"
#include "planner/model_footprint.h"
