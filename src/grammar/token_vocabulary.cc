#include "grammar/token_vocabulary.h"

#include <algorithm>

#include "pagellm/check.h"

namespace pagellm {

TokenVocabulary::TokenVocabulary(std::vector<std::optional<std::string>> token_bytes,
                                 int32_t mask_size, std::vector<int32_t> eos_ids)
    : mask_size_(mask_size), eos_ids_(std::move(eos_ids)) {
  CHECK_GE(static_cast<size_t>(mask_size), token_bytes.size());
  offsets_.assign(static_cast<size_t>(mask_size) + 1, 0);
  usable_.assign(static_cast<size_t>(mask_size), 0);
  // FNV-1a over ids, bytes and EOS ids.
  uint64_t h = 1469598103934665603ULL;
  auto mix = [&h](uint64_t v) {
    h ^= v;
    h *= 1099511628211ULL;
  };
  for (int32_t id = 0; id < mask_size; ++id) {
    offsets_[id] = static_cast<uint32_t>(arena_.size());
    if (static_cast<size_t>(id) < token_bytes.size() && token_bytes[id].has_value() &&
        !token_bytes[id]->empty() &&
        std::find(eos_ids_.begin(), eos_ids_.end(), id) == eos_ids_.end()) {
      arena_ += *token_bytes[id];
      usable_[id] = 1;
      sorted_.push_back(id);
      for (char c : *token_bytes[id]) mix(static_cast<uint8_t>(c));
    }
    mix(0x100 + static_cast<uint64_t>(usable_[id]));
  }
  offsets_[mask_size] = static_cast<uint32_t>(arena_.size());
  for (int32_t id : eos_ids_) mix(0x200 + static_cast<uint64_t>(id));
  mix(static_cast<uint64_t>(mask_size));
  fingerprint_ = h;
  std::stable_sort(sorted_.begin(), sorted_.end(),
                   [this](int32_t a, int32_t b) { return bytes(a) < bytes(b); });
}

}  // namespace pagellm
