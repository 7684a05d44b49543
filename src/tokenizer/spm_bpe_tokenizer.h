// SpmBpeTokenizer: SentencePiece-style BPE implemented here rather than through
// libsentencepiece. Used for GGUF "llama" vocabularies (pieces + scores + types) and for
// tokenizer.json BPE models with a ▁ metaspace and byte fallback (Mistral, Llama-2 HF).
//
// Why not build a sentencepiece ModelProto for GGUF and load it with libsentencepiece: the
// protobuf headers are not installed, so the proto would have to be hand-serialized, and
// tokenizer.json vocabularies come with merges rather than scores, which libsentencepiece
// cannot express. The algorithm is small and shared with byte-level BPE (BpeMerger): start
// from UTF-8 characters, merge the pair whose concatenation is the best-scoring piece (or has
// the lowest merge rank), leftmost first, then spell characters missing from the vocabulary
// as <0xNN> byte pieces. Tests check it against libsentencepiece on the same vocabulary.
#pragma once

#include <array>
#include <memory>
#include <span>

#include "tokenizer/bpe_merger.h"
#include "tokenizer/spm_style_tokenizer.h"

namespace pagellm {

class SpmBpeTokenizer : public SpmStyleTokenizer {
 public:
  struct Options {
    bool add_dummy_prefix = true;          // prepend "▁" to the text
    bool dummy_prefix_first_only = false;  // ... only where the input starts (Metaspace "first")
    bool dummy_prefix_if_missing = false;  // ... only if the text does not start with a space
    bool escape_spaces = true;             // " " -> "▁"
    bool split_on_metaspace = false;       // merge within "▁"-initial words (Metaspace split)
    bool byte_fallback = true;             // unknown characters -> <0xNN> pieces (else <unk>)
    bool fuse_unk = true;                  // consecutive unknown characters -> one <unk>
    bool ignore_merges = false;            // a word that is a piece is taken whole
  };

  // `vocab` must already mark byte pieces kByte and the unknown piece kUnknown.
  SpmBpeTokenizer(Vocab vocab, BpeMergeTable merges, const Options& options);

  // Merge table of a SentencePiece BPE vocabulary: every split of a mergeable piece (normal,
  // user-defined, unused) into two mergeable pieces, ranked by descending piece score.
  static BpeMergeTable MergesFromScores(const Vocab& vocab, std::span<const float> scores);

 protected:
  void EncodeText(std::string_view text, bool at_text_start,
                  std::vector<int32_t>* out) const override;

 private:
  static bool Mergeable(TokenKind kind) {
    return kind == TokenKind::kNormal || kind == TokenKind::kUserDefined ||
           kind == TokenKind::kUnused;
  }
  void EncodeWord(std::string_view word, BpeMerger* merger, std::vector<int32_t>* out) const;
  void EmitUnknown(std::string_view bytes, bool* last_was_unk, std::vector<int32_t>* out) const;
  void Expand(const std::vector<BpeNode>& tree, int32_t node, std::vector<int32_t>* out) const;

  BpeMergeTable merges_;
  Options options_;
  int32_t unk_id_ = -1;
  std::array<int32_t, 256> byte_ids_;
  bool has_unused_ = false;
};

}  // namespace pagellm
