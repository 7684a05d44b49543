#include "dist/communicator.h"

#include <algorithm>

namespace pagellm {

void SumInRankOrder(const float* parts, int num_ranks, int64_t n, float* x) {
  std::copy_n(parts, n, x);
  for (int r = 1; r < num_ranks; ++r) {
    const float* p = parts + int64_t{r} * n;
    for (int64_t i = 0; i < n; ++i) x[i] += p[i];
  }
}

}  // namespace pagellm
