// KV cache groups: how a model's layers share the block pool when some layers attend through a
// sliding window (Gemma 2/3 local layers, Mistral) and others see the whole sequence.
//
// The idea is vLLM's hybrid KV cache manager. Layers are split into groups of G layers with the
// same window; every group has its own block table per request, and one pool block holds the
// K/V of G layers (storage "regions" 0..G-1: layer l lives in region layer_region[l] of the
// blocks of its group's table). A window group frees the blocks that fell fully out of its
// window while a full-attention group keeps all of them, so a request of L tokens holds
//   full groups x ceil(L / block_size) + window groups x min(ceil(L / block_size), W)
// blocks, W = WindowBlocks(window, block_size).
//
// G is the greatest common divisor of the layer counts of the distinct windows, so no region is
// padding: Gemma-3-1B (4 global + 22 local layers) gets G = 2, 2 full and 11 window groups;
// Gemma 2 (alternating) gets G = layers / 2. A model without windows is one full group of all
// layers (G = num_layers, region = layer), which is exactly the historic single-table layout.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace pagellm {

struct KvCacheGroupSpec {
  int32_t sliding_window = 0;  // 0: full attention
  std::vector<int> layers;     // G layers, ascending; layers[r] uses storage region r
};

struct KvCacheGroups {
  std::vector<KvCacheGroupSpec> groups;  // full-attention groups first, then by window
  std::vector<int> layer_group;          // [num_layers] -> group index
  std::vector<int> layer_region;         // [num_layers] -> region (index within its group)
  int layers_per_group = 0;              // G

  int num_groups() const { return static_cast<int>(groups.size()); }
  int num_layers() const { return static_cast<int>(layer_group.size()); }
  // One full-attention group: the historic layout (region = layer, one block table).
  bool is_single_full() const { return groups.size() == 1 && groups[0].sliding_window == 0; }
  std::vector<int32_t> windows() const;
  int num_full_groups() const;
};

// One group of all layers with full attention.
KvCacheGroups SingleFullKvCacheGroup(int num_layers);

// Groups for per-layer windows ([num_layers], 0 = full attention), as described above.
KvCacheGroups MakeKvCacheGroups(std::span<const int> layer_windows);

// Most blocks a window group holds for one request once a step's blocks are allocated for
// step_tokens new tokens: the blocks spanning the window - 1 positions the first of them can
// see back plus the step's own, ceil((window + step_tokens - 2) / block_size) + 1; decoding
// (one token) gives ceil((window - 1) / block_size) + 1 <= window / block_size + 1.
int64_t WindowBlocks(int32_t window, int32_t block_size, int64_t step_tokens = 1);

// Blocks of the whole pool a request of num_tokens tokens holds at most in a step of
// step_tokens tokens (1: decoding), over every group: a group with window 0 holds
// ceil(num_tokens / block_size), a window group min(that, WindowBlocks).
int64_t BlocksPerRequest(std::span<const int32_t> group_windows, int32_t block_size,
                         int64_t num_tokens, int64_t step_tokens = 1);

}  // namespace pagellm
