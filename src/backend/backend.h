// The forward-pass interface the engine drives: one ragged batch (base/forward_batch.h) per step.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/forward_batch.h"
#include "pagellm/status.h"

namespace pagellm {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Status Forward(const ForwardBatch& batch, ForwardOutput* out) = 0;
};

}  // namespace pagellm
