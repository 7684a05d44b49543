#include "kv/kv_cache_groups.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "pagellm/check.h"

namespace pagellm {

std::vector<int32_t> KvCacheGroups::windows() const {
  std::vector<int32_t> w;
  w.reserve(groups.size());
  for (const KvCacheGroupSpec& g : groups) w.push_back(g.sliding_window);
  return w;
}

int KvCacheGroups::num_full_groups() const {
  return static_cast<int>(
      std::count_if(groups.begin(), groups.end(),
                    [](const KvCacheGroupSpec& g) { return g.sliding_window == 0; }));
}

KvCacheGroups SingleFullKvCacheGroup(int num_layers) {
  CHECK_GT(num_layers, 0);
  KvCacheGroups g;
  g.layers_per_group = num_layers;
  g.groups.resize(1);
  for (int l = 0; l < num_layers; ++l) {
    g.groups[0].layers.push_back(l);
    g.layer_group.push_back(0);
    g.layer_region.push_back(l);
  }
  return g;
}

KvCacheGroups MakeKvCacheGroups(std::span<const int> layer_windows) {
  CHECK(!layer_windows.empty());
  // window -> its layers, ascending; std::map orders full attention (0) first.
  std::map<int, std::vector<int>> by_window;
  for (size_t l = 0; l < layer_windows.size(); ++l) {
    CHECK_GE(layer_windows[l], 0);
    by_window[layer_windows[l]].push_back(static_cast<int>(l));
  }
  int g_size = 0;
  for (const auto& [window, layers] : by_window)
    g_size = std::gcd(g_size, static_cast<int>(layers.size()));
  KvCacheGroups out;
  out.layers_per_group = g_size;
  out.layer_group.assign(layer_windows.size(), 0);
  out.layer_region.assign(layer_windows.size(), 0);
  for (const auto& [window, layers] : by_window) {
    for (size_t start = 0; start < layers.size(); start += g_size) {
      KvCacheGroupSpec spec;
      spec.sliding_window = window;
      for (int r = 0; r < g_size; ++r) {
        const int layer = layers[start + r];
        spec.layers.push_back(layer);
        out.layer_group[layer] = out.num_groups();
        out.layer_region[layer] = r;
      }
      out.groups.push_back(std::move(spec));
    }
  }
  return out;
}

int64_t WindowBlocks(int32_t window, int32_t block_size, int64_t step_tokens) {
  CHECK_GT(window, 0);
  CHECK_GT(block_size, 0);
  CHECK_GT(step_tokens, 0);
  // A run of m positions spans at most ceil((m - 1) / block_size) + 1 blocks.
  const int64_t span = int64_t{window} + step_tokens - 1;
  return (span - 1 + block_size - 1) / block_size + 1;
}

int64_t BlocksPerRequest(std::span<const int32_t> group_windows, int32_t block_size,
                         int64_t num_tokens, int64_t step_tokens) {
  const int64_t full = (num_tokens + block_size - 1) / block_size;
  int64_t total = 0;
  for (int32_t w : group_windows)
    total += w == 0 ? full : std::min(full, WindowBlocks(w, block_size, step_tokens));
  return total;
}

}  // namespace pagellm
