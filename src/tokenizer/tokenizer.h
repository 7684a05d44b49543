// Tokenizer interface shared by SentencePiece and byte-level BPE vocabularies.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "pagellm/status.h"

namespace pagellm {

class GgufFile;
struct LoadedModel;

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // add_special: add BOS (and EOS) as the tokenizer's config says (add_bos_token /
  //   add_eos_token; GGUF tokenizer.ggml.add_bos_token).
  // parse_special: text spelling a special/added token (e.g. "<|eot_id|>") becomes that id;
  //   otherwise it is tokenized as plain text. Non-special added tokens (Qwen's "<think>",
  //   GGUF user-defined tokens) are matched either way, as in Hugging Face and llama.cpp.
  virtual std::vector<int32_t> Encode(std::string_view text, bool add_special,
                                      bool parse_special) const = 0;

  // Full decode as Hugging Face does (SentencePiece: leading-space of the first piece dropped,
  // byte-fallback pieces joined into UTF-8; byte-level BPE: bytes mapped back). Invalid UTF-8
  // sequences become U+FFFD. skip_special drops control/special tokens (BOS, EOS, ...).
  // SentencePiece details: the space dropped is that of the first piece that is not special,
  // and only if the tokenizer adds a dummy prefix; special tokens not skipped are written as
  // their piece ("<s>Hello"). U+FFFD replaces each maximal invalid subsequence (as Python's
  // errors="replace" does), for every tokenizer kind.
  virtual std::string Decode(std::span<const int32_t> ids, bool skip_special) const = 0;
  // Decodes ids that continue a sequence in which some earlier token was not special. Same as
  // Decode, except that SentencePiece-style tokenizers keep the leading space of the first
  // piece (Decode drops it as the dummy prefix). IncrementalDetokenizer decodes windows of a
  // longer sequence with it, so that a window starting at "▁the" still yields " the".
  virtual std::string DecodeContinuation(std::span<const int32_t> ids, bool skip_special) const {
    return Decode(ids, skip_special);
  }

  virtual int32_t vocab_size() const = 0;
  // The piece string as stored in the vocabulary (e.g. "▁the", "Ġthe", "<0x0A>").
  virtual std::string IdToPiece(int32_t id) const = 0;
  virtual std::optional<int32_t> PieceToId(std::string_view piece) const = 0;
  virtual bool IsSpecial(int32_t id) const = 0;
  // The bytes token `id` stands for inside generated text, for the grammar engine's token
  // masks: byte-level pieces mapped back through the byte alphabet; SentencePiece pieces with
  // "▁" as a space and <0xNN> as that byte. nullopt for ids that are not text (control,
  // unknown and unused tokens, ids outside the vocabulary).
  virtual std::optional<std::string> TokenBytes(int32_t id) const = 0;

  int32_t bos_id() const { return bos_id_; }  // -1 if none
  int32_t eos_id() const { return eos_id_; }  // -1 if none
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }
  // Ids that end generation by default (eos plus e.g. <|eot_id|>, <|im_end|>).
  const std::vector<int32_t>& stop_ids() const { return stop_ids_; }
  // Jinja chat template from tokenizer_config.json or GGUF (empty if none).
  const std::string& chat_template() const { return chat_template_; }
  std::string bos_token() const { return bos_id_ >= 0 ? IdToPiece(bos_id_) : ""; }
  std::string eos_token() const { return eos_id_ >= 0 ? IdToPiece(eos_id_) : ""; }

  void set_bos_id(int32_t id) { bos_id_ = id; }
  void set_eos_id(int32_t id) { eos_id_ = id; }
  void set_add_bos(bool v) { add_bos_ = v; }
  void set_add_eos(bool v) { add_eos_ = v; }
  void set_stop_ids(std::vector<int32_t> ids) { stop_ids_ = std::move(ids); }
  void set_chat_template(std::string t) { chat_template_ = std::move(t); }

 protected:
  int32_t bos_id_ = -1;
  int32_t eos_id_ = -1;
  bool add_bos_ = false;
  bool add_eos_ = false;
  std::vector<int32_t> stop_ids_;
  std::string chat_template_;
};

// Loads from a Hugging Face model directory: tokenizer.json (preferred for BPE) or
// tokenizer.model (SentencePiece), plus tokenizer_config.json (add_bos_token, special tokens,
// chat_template) and generation_config.json / config.json (bos/eos ids).
StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizerFromDir(const std::string& dir);
// Loads from GGUF metadata: tokenizer.ggml.model "llama" (SentencePiece-style) or "gpt2"
// (byte-level BPE), tokens/scores/token_type/merges, bos/eos/add_bos, chat_template.
StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizerFromGguf(const GgufFile& gguf);
// The tokenizer that belongs to a loaded model: its GGUF vocabulary or its HF directory's files.
StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizerForModel(const LoadedModel& model);

// Streaming detokenization, UTF-8 safe: Push() returns only text that is final, never half a
// multi-byte character, and the concatenation of all pushes plus Flush() equals
// Decode(all ids) minus Decode(prompt ids).
// (If the prompt itself ends inside a multi-byte character, Decode(prompt ids) ends in U+FFFD
// there; the completed character is then part of the streamed text instead.)
// vLLM's algorithm: decode the window ids[prefix_offset:] and emit what it adds beyond
// ids[prefix_offset:read_offset], unless it ends in an incomplete character (U+FFFD).
class IncrementalDetokenizer {
 public:
  IncrementalDetokenizer(const Tokenizer& tokenizer, std::span<const int32_t> prompt_ids,
                         bool skip_special);
  std::string Push(int32_t id);
  // Emits whatever is held back (an incomplete character becomes U+FFFD).
  std::string Flush();

 private:
  std::string DecodeRange(size_t begin, size_t end) const;
  void MarkText(size_t begin, size_t end);
  // Emits what `new_text` (the text of ids_[prefix_offset_:]) adds and advances the window.
  std::string Flush(std::string new_text);

  const Tokenizer& tokenizer_;
  bool skip_special_;
  std::vector<int32_t> ids_;
  size_t prefix_offset_ = 0;
  size_t read_offset_ = 0;
  // Whether a non-special token precedes ids_[prefix_offset_]: windows after one decode as
  // continuations (SentencePiece keeps the leading space).
  bool text_before_prefix_ = false;
};

}  // namespace pagellm
