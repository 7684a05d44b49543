#include "kernels/moe_routing.h"

#include <cmath>
#include <limits>

#include "pagellm/check.h"

namespace pagellm {

void RouteTopK(const float* logits, int64_t rows, int n_experts, int k, bool normalize,
               int32_t* ids, float* weights) {
  CHECK(k >= 1 && k <= n_experts) << "top-" << k << " of " << n_experts << " experts";
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = logits + r * n_experts;
    int32_t* id = ids + r * k;
    float* w = weights + r * k;
    float max = -std::numeric_limits<float>::infinity();
    for (int e = 0; e < n_experts; ++e)
      if (x[e] > max) max = x[e];
    float sum = 0.0f;
    for (int e = 0; e < n_experts; ++e)
      if (!std::isnan(x[e])) sum += std::exp(x[e] - max);
    // Selection by insertion into the k-long list, largest first; a later expert enters only
    // ahead of strictly smaller ones, so ties keep the lower id first. p is monotone in the
    // logit, so the logits themselves are compared.
    const auto key = [&](int e) {
      return std::isnan(x[e]) ? -std::numeric_limits<float>::infinity() : x[e];
    };
    int n = 0;
    for (int e = 0; e < n_experts; ++e) {
      const float v = key(e);
      int pos = n;
      while (pos > 0 && key(id[pos - 1]) < v) --pos;
      if (pos >= k) continue;
      for (int j = (n < k ? n : k - 1); j > pos; --j) id[j] = id[j - 1];
      id[pos] = e;
      if (n < k) ++n;
    }
    float selected = 0.0f;
    for (int j = 0; j < k; ++j) {
      const float v = x[id[j]];
      w[j] = std::isnan(v) ? 0.0f : std::exp(v - max) / sum;
      selected += w[j];
    }
    if (normalize && selected > 0.0f) {
      for (int j = 0; j < k; ++j) w[j] /= selected;
    }
  }
}

}  // namespace pagellm
