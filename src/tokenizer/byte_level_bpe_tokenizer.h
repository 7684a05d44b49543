// ByteLevelBpeTokenizer: GPT-2 style byte-level BPE (GPT-2, Llama-3, Qwen2/3). Text is split by
// the pre-tokenizer regexes into words; each word's UTF-8 bytes start as the 256 byte tokens
// (spelled with GPT-2's printable byte alphabet, "Ġ" for a space) and are merged by rank.
// Decoding maps the byte alphabet back, so any byte string round-trips.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizer/base_tokenizer.h"
#include "tokenizer/bpe_merger.h"
#include "tokenizer/regex_splitter.h"

namespace pagellm {

class ByteLevelBpeTokenizer : public BaseTokenizer {
 public:
  struct Options {
    bool add_prefix_space = false;  // prepend " " to text that does not start with one
    bool ignore_merges = false;     // a word that is a vocabulary token is taken whole (Llama-3)
  };

  // `vocab` holds the model's byte-level pieces; `pre_tokenizers` are applied in order, each
  // splitting the pieces of the previous one (none: every text segment is one word).
  static StatusOr<std::unique_ptr<ByteLevelBpeTokenizer>> Create(
      Vocab vocab, BpeMergeTable merges, std::vector<std::unique_ptr<RegexSplitter>> pre_tokenizers,
      const Options& options);

  std::string Decode(std::span<const int32_t> ids, bool skip_special) const override;
  std::optional<std::string> TokenBytes(int32_t id) const override;

  // GPT-2's byte alphabet: the code point that spells byte `b`, and its inverse (-1 if the
  // code point spells no byte).
  static uint32_t ByteToCodePoint(uint8_t b);
  static int CodePointToByte(uint32_t cp);

 protected:
  void EncodeText(std::string_view text, bool at_text_start,
                  std::vector<int32_t>* out) const override;

 private:
  ByteLevelBpeTokenizer() = default;
  void EncodeWord(std::string_view word, BpeMerger* merger, std::vector<int32_t>* ids,
                  std::vector<int32_t>* out) const;
  void AppendTokenBytes(int32_t id, std::string* out) const;
  // The bytes a piece stands for: its characters mapped back through the byte alphabet, or,
  // if one of them is not in it (an added token such as "<think>\n"), the piece itself, as in
  // Hugging Face's ByteLevel decoder.
  static std::string PieceBytes(std::string_view piece);

  BpeMergeTable merges_;
  std::vector<std::unique_ptr<RegexSplitter>> pre_tokenizers_;
  Options options_;
  std::array<int32_t, 256> byte_ids_{};
  // Bytes of the model's own tokens (ids < model_size_), concatenated; token i is
  // arena_[offsets_[i], offsets_[i + 1]). Added tokens are converted on the fly.
  int32_t model_size_ = 0;
  std::string arena_;
  std::vector<uint32_t> offsets_;
  std::unordered_map<std::string_view, int32_t> bytes_to_id_;  // for ignore_merges
};

}  // namespace pagellm
