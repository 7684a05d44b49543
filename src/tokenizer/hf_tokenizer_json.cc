#include "tokenizer/hf_tokenizer_json.h"

#include <nlohmann/json.hpp>

#include <climits>
#include <optional>

#include "base/mapped_file.h"
#include "tokenizer/byte_level_bpe_tokenizer.h"
#include "tokenizer/hf_json_streaming_reader.h"
#include "tokenizer/spm_bpe_tokenizer.h"

namespace pagellm {
namespace {

using nlohmann::json;

// A JSON value's "type" string, or "" if it has none.
std::string TypeOf(const json& j) {
  if (!j.is_object()) return "";
  auto it = j.find("type");
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

bool BoolField(const json& j, const char* key, bool fallback) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

// Flattens {"type": "Sequence", <list_key>: [...]} into its parts (or the value itself).
// Nesting deeper than real files use is left unflattened (and so rejected as an unknown
// step) rather than recursed into: a hostile file must not exhaust the stack.
std::vector<const json*> Flatten(const json& j, const char* list_key, int depth = 0) {
  std::vector<const json*> out;
  if (j.is_null()) return out;
  if (depth < 8 && TypeOf(j) == "Sequence" && j.contains(list_key) && j[list_key].is_array()) {
    for (const json& part : j[list_key]) {
      for (const json* p : Flatten(part, list_key, depth + 1)) out.push_back(p);
    }
  } else {
    out.push_back(&j);
  }
  return out;
}

// An integer that fits a token id, else nullopt (get<int32_t> would silently wrap).
std::optional<int32_t> AsId(const json& j) {
  if (!j.is_number_integer()) return std::nullopt;
  const int64_t v = j.get<int64_t>();
  if (v < 0 || v > INT32_MAX) return std::nullopt;
  return static_cast<int32_t>(v);
}

// Resolves the merge list against the vocabulary; the rank is the position in the list.
StatusOr<BpeMergeTable> ResolveMerges(const HfJsonDocument& doc) {
  BpeMergeTable table;
  table.Reserve(doc.merge_count());
  for (size_t i = 0; i < doc.merge_count(); ++i) {
    const std::string_view left = doc.merge_left(i);
    const std::string_view right = doc.merge_right(i);
    if (!AddMerge(doc.vocab, left, right, static_cast<int32_t>(i), &table)) {
      return DataLossError("merge \"" + std::string(left) + " " + std::string(right) +
                           "\" uses a piece missing from the vocabulary");
    }
  }
  return table;
}

// Normalizers we implement are the SentencePiece-style Prepend("▁") and Replace(" ", "▁").
// NFC (Qwen) is accepted but not applied: text that is already NFC, which is nearly all text
// and every test vector, tokenizes identically; composing it would need Unicode data tables.
struct NormalizerInfo {
  bool prepend_metaspace = false;
  bool replace_space = false;
};

StatusOr<NormalizerInfo> ReadNormalizer(const json& root) {
  NormalizerInfo info;
  auto it = root.find("normalizer");
  if (it == root.end()) return info;
  for (const json* n : Flatten(*it, "normalizers")) {
    const std::string type = TypeOf(*n);
    if (type == "NFC") continue;
    if (type == "Prepend" && n->value("prepend", "") == "\xE2\x96\x81") {
      info.prepend_metaspace = true;
    } else if (type == "Replace" && n->contains("pattern") && (*n)["pattern"].is_object() &&
               (*n)["pattern"].value("String", "") == " " &&
               n->value("content", "") == "\xE2\x96\x81") {
      info.replace_space = true;
    } else {
      return UnimplementedError("unsupported normalizer \"" + type + "\"");
    }
  }
  return info;
}

std::optional<int32_t> SpecialTokenId(const json& post, const std::string& name) {
  // const operator[] on a missing key is undefined behaviour in nlohmann::json: use find.
  const auto specials = post.find("special_tokens");
  if (specials == post.end() || !specials->is_object()) return std::nullopt;
  const auto token = specials->find(name);
  if (token == specials->end() || !token->is_object()) return std::nullopt;
  const auto ids = token->find("ids");
  if (ids == token->end() || !ids->is_array() || ids->empty()) return std::nullopt;
  return AsId((*ids)[0]);
}

// TemplateProcessing's single-sequence template: [SpecialToken...] Sequence A [SpecialToken...].
void ReadPostProcessor(const json& root, HfTokenizerJson* out) {
  auto it = root.find("post_processor");
  if (it == root.end()) return;
  for (const json* p : Flatten(*it, "processors")) {
    if (TypeOf(*p) != "TemplateProcessing" || !p->contains("single")) continue;
    const json& single = (*p)["single"];
    if (!single.is_array()) continue;
    bool seen_sequence = false;
    for (const json& item : single) {
      if (item.contains("Sequence")) {
        seen_sequence = true;
      } else if (item.contains("SpecialToken") && item["SpecialToken"].contains("id") &&
                 item["SpecialToken"]["id"].is_string()) {
        auto id = SpecialTokenId(*p, item["SpecialToken"]["id"].get<std::string>());
        if (!id) continue;
        if (!seen_sequence && !out->template_bos) out->template_bos = id;
        if (seen_sequence) out->template_eos = id;
      }
    }
  }
}

StatusOr<std::unique_ptr<BaseTokenizer>> BuildByteLevel(const json& root, const json& model,
                                                        Vocab vocab, BpeMergeTable merges) {
  std::vector<std::unique_ptr<RegexSplitter>> stages;
  ByteLevelBpeTokenizer::Options options;
  options.ignore_merges = BoolField(model, "ignore_merges", false);
  ASSIGN_OR_RETURN(NormalizerInfo norm, ReadNormalizer(root));
  if (norm.prepend_metaspace || norm.replace_space) {
    return UnimplementedError("metaspace normalizer with a byte-level model");
  }
  auto pre = root.find("pre_tokenizer");
  if (pre != root.end()) {
    for (const json* p : Flatten(*pre, "pretokenizers")) {
      const std::string type = TypeOf(*p);
      if (type == "ByteLevel") {
        options.add_prefix_space = BoolField(*p, "add_prefix_space", false);
        if (BoolField(*p, "use_regex", true)) {
          ASSIGN_OR_RETURN(auto stage, RegexSplitter::Create(kGpt2Pattern));
          stages.push_back(std::move(stage));
        }
      } else if (type == "Split") {
        if (p->value("behavior", "") != "Isolated" || BoolField(*p, "invert", false)) {
          return UnimplementedError("Split pre-tokenizer other than Isolated");
        }
        const json& pattern = p->contains("pattern") ? (*p)["pattern"] : json();
        const bool literal = pattern.contains("String");
        const json& value = literal ? pattern["String"] : pattern.value("Regex", json());
        if (!value.is_string()) return DataLossError("Split pre-tokenizer without a pattern");
        ASSIGN_OR_RETURN(auto stage, RegexSplitter::Create(value.get<std::string>(), literal));
        stages.push_back(std::move(stage));
      } else {
        return UnimplementedError("unsupported pre-tokenizer " + type);
      }
    }
  }
  ASSIGN_OR_RETURN(auto tok, ByteLevelBpeTokenizer::Create(std::move(vocab), std::move(merges),
                                                           std::move(stages), options));
  return std::unique_ptr<BaseTokenizer>(std::move(tok));
}

StatusOr<std::unique_ptr<BaseTokenizer>> BuildSpmStyle(const json& root, const json& model,
                                                       Vocab vocab, BpeMergeTable merges) {
  SpmBpeTokenizer::Options options;
  options.byte_fallback = BoolField(model, "byte_fallback", false);
  options.fuse_unk = BoolField(model, "fuse_unk", false);
  options.ignore_merges = BoolField(model, "ignore_merges", false);
  ASSIGN_OR_RETURN(NormalizerInfo norm, ReadNormalizer(root));
  options.add_dummy_prefix = norm.prepend_metaspace;
  options.escape_spaces = norm.replace_space;
  auto pre = root.find("pre_tokenizer");
  if (pre != root.end()) {
    for (const json* p : Flatten(*pre, "pretokenizers")) {
      if (TypeOf(*p) != "Metaspace" || p->value("replacement", "\xE2\x96\x81") != "\xE2\x96\x81") {
        return UnimplementedError("unsupported pre-tokenizer with a metaspace BPE model");
      }
      // Newer files say prepend_scheme; older ones add_prefix_space.
      std::string scheme = p->value("prepend_scheme", "");
      if (scheme.empty()) scheme = BoolField(*p, "add_prefix_space", true) ? "always" : "never";
      options.escape_spaces = true;
      options.add_dummy_prefix = scheme != "never";
      options.dummy_prefix_first_only = scheme == "first";
      options.dummy_prefix_if_missing = true;
      options.split_on_metaspace = BoolField(*p, "split", true);
    }
  }
  if (!options.escape_spaces) {
    return UnimplementedError("BPE model that is neither byte-level nor metaspace (▁) style");
  }
  if (options.byte_fallback) {
    for (int32_t id = 0; id < vocab.size(); ++id) {
      if (SpmStyleTokenizer::ParseBytePiece(vocab.piece(id)) >= 0)
        vocab.set_kind(id, TokenKind::kByte);
    }
  }
  auto unk = model.find("unk_token");
  if (unk != model.end() && unk->is_string()) {
    if (auto id = vocab.Find(unk->get<std::string>())) vocab.set_kind(*id, TokenKind::kUnknown);
  }
  return std::unique_ptr<BaseTokenizer>(
      std::make_unique<SpmBpeTokenizer>(std::move(vocab), std::move(merges), options));
}

// Byte-level if any pre-tokenizer or decoder step is ByteLevel.
bool IsByteLevel(const json& root) {
  for (const char* key : {"pre_tokenizer", "decoder"}) {
    auto it = root.find(key);
    if (it == root.end()) continue;
    for (const char* list : {"pretokenizers", "decoders"}) {
      for (const json* p : Flatten(*it, list)) {
        if (TypeOf(*p) == "ByteLevel") return true;
      }
    }
  }
  return false;
}

StatusOr<HfTokenizerJson> Parse(HfJsonDocument doc) {
  const json& root = doc.root;
  if (!root.is_object() || !root.contains("model") || !root["model"].is_object()) {
    return DataLossError("no model object");
  }
  const json& model = root["model"];
  const std::string type = TypeOf(model);
  if (!type.empty() && type != "BPE") return UnimplementedError("tokenizer model type " + type);
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    auto it = model.find(key);
    if (it != model.end() && it->is_string() && !it->get<std::string>().empty()) {
      return UnimplementedError(std::string("BPE ") + key);
    }
  }
  if (!doc.has_vocab) return DataLossError("model.vocab missing");
  ASSIGN_OR_RETURN(BpeMergeTable merges, ResolveMerges(doc));
  Vocab vocab = std::move(doc.vocab);
  HfTokenizerJson out;
  if (IsByteLevel(root)) {
    ASSIGN_OR_RETURN(out.tokenizer,
                     BuildByteLevel(root, model, std::move(vocab), std::move(merges)));
  } else {
    ASSIGN_OR_RETURN(out.tokenizer,
                     BuildSpmStyle(root, model, std::move(vocab), std::move(merges)));
  }
  auto added = root.find("added_tokens");
  if (added != root.end() && added->is_array()) {
    for (const json& t : *added) {
      const auto id = t.is_object() && t.contains("id") ? AsId(t["id"]) : std::nullopt;
      if (!id || !t.contains("content") || !t["content"].is_string()) {
        return DataLossError("bad entry in added_tokens");
      }
      RETURN_IF_ERROR(out.tokenizer->AddToken(*id, t["content"].get<std::string>(),
                                              BoolField(t, "special", false)));
    }
  }
  ReadPostProcessor(root, &out);
  return out;
}

}  // namespace

StatusOr<HfTokenizerJson> ParseHfTokenizerJson(std::string_view text, const std::string& name) {
  auto doc = ReadHfJsonDocument(text);
  if (!doc.ok()) return doc.status().WithContext(name);
  // Accessors throw on unexpected shapes that the checks in Parse miss; a malformed file must
  // be an error, not a crash.
  try {
    auto result = Parse(std::move(doc).value());
    if (!result.ok()) return result.status().WithContext(name);
    return result;
  } catch (const json::exception& e) {
    return DataLossError(name + ": " + e.what());
  }
}

StatusOr<HfTokenizerJson> LoadHfTokenizerJson(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  return ParseHfTokenizerJson(text, path);
}

}  // namespace pagellm
