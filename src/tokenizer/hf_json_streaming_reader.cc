#include "tokenizer/hf_json_streaming_reader.h"

namespace pagellm {
namespace {

using nlohmann::json;

// Largest id we accept in a vocabulary: far above any real one (~262K), small enough that a
// corrupt file cannot make us allocate gigabytes.
constexpr int64_t kMaxVocabId = 1 << 21;

class StreamingHandler : public nlohmann::json_sax<json> {
 public:
  explicit StreamingHandler(HfJsonDocument* doc) : doc_(doc) {}

  const std::string& error() const { return error_; }

  bool null() override { return Value(json(nullptr)); }
  bool boolean(bool v) override { return Value(json(v)); }
  bool number_integer(number_integer_t v) override {
    return mode_ == Mode::kVocab ? VocabEntry(v) : Value(json(v));
  }
  bool number_unsigned(number_unsigned_t v) override {
    return mode_ == Mode::kVocab
               ? VocabEntry(v > static_cast<uint64_t>(kMaxVocabId) ? -1 : static_cast<int64_t>(v))
               : Value(json(v));
  }
  bool number_float(number_float_t v, const string_t&) override { return Value(json(v)); }
  bool binary(binary_t&) override { return Fail("unexpected binary value"); }

  bool string(string_t& v) override {
    if (mode_ == Mode::kMerges) {
      const size_t space = v.find(' ', 1);
      if (space == std::string::npos) return Fail("bad merge \"" + v + "\"");
      return AddMerge(std::string_view(v).substr(0, space), std::string_view(v).substr(space + 1));
    }
    if (mode_ == Mode::kMergePair) {
      if (pair_.size() >= 2) return Fail("merge pair with more than two pieces");
      pair_.push_back(std::move(v));
      return true;
    }
    return Value(json(std::move(v)));
  }

  bool start_object(std::size_t) override {
    if (mode_ != Mode::kDom) return Fail("unexpected object in model.vocab/merges");
    if (AtModelMember("vocab")) {
      mode_ = Mode::kVocab;
      doc_->has_vocab = true;
      return true;
    }
    return Open(json::object());
  }
  bool key(string_t& k) override {
    key_ = std::move(k);
    return true;
  }
  bool end_object() override {
    if (mode_ == Mode::kVocab) {
      mode_ = Mode::kDom;
      return true;
    }
    return Close();
  }

  bool start_array(std::size_t) override {
    if (mode_ == Mode::kMerges) {
      mode_ = Mode::kMergePair;
      pair_.clear();
      return true;
    }
    if (mode_ != Mode::kDom) return Fail("unexpected array in model.vocab/merges");
    if (AtModelMember("merges")) {
      mode_ = Mode::kMerges;
      return true;
    }
    return Open(json::array());
  }
  bool end_array() override {
    if (mode_ == Mode::kMergePair) {
      mode_ = Mode::kMerges;
      if (pair_.size() != 2) return Fail("merge pair without two pieces");
      return AddMerge(pair_[0], pair_[1]);
    }
    if (mode_ == Mode::kMerges) {
      mode_ = Mode::kDom;
      return true;
    }
    return Close();
  }

  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& e) override {
    return Fail("JSON error at byte " + std::to_string(position) + ": " + e.what());
  }

 private:
  enum class Mode { kDom, kVocab, kMerges, kMergePair };

  bool Fail(std::string message) {
    if (error_.empty()) error_ = std::move(message);
    return false;
  }

  // Whether a container starting now is root["model"][name].
  bool AtModelMember(const char* name) const {
    return stack_.size() == 2 && stack_keys_[1] == "model" && stack_[1]->is_object() &&
           key_ == name;
  }

  // Stores `v` in the innermost open container (or as the root) and returns where it went.
  json* Insert(json v) {
    if (stack_.empty()) {
      doc_->root = std::move(v);
      return &doc_->root;
    }
    json* top = stack_.back();
    if (top->is_array()) {
      top->push_back(std::move(v));
      return &top->back();
    }
    json& slot = (*top)[key_];
    slot = std::move(v);
    return &slot;
  }
  bool Value(json v) {
    if (mode_ != Mode::kDom) return Fail("unexpected value in model.vocab/merges");
    Insert(std::move(v));
    return true;
  }
  // Pointers into parents stay valid: only the innermost open container ever grows.
  bool Open(json container) {
    const std::string key = stack_.empty() || stack_.back()->is_array() ? "" : key_;
    stack_.push_back(Insert(std::move(container)));
    stack_keys_.push_back(key);
    return true;
  }
  bool Close() {
    if (stack_.empty()) return Fail("unbalanced JSON");
    stack_.pop_back();
    stack_keys_.pop_back();
    return true;
  }

  bool VocabEntry(int64_t id) {
    if (id < 0 || id > kMaxVocabId) return Fail("bad id for vocabulary piece \"" + key_ + "\"");
    doc_->vocab.Set(static_cast<int32_t>(id), std::move(key_), TokenKind::kNormal);
    return true;
  }
  bool AddMerge(std::string_view left, std::string_view right) {
    auto& text = doc_->merge_text;
    if (text.size() + left.size() + right.size() > UINT32_MAX) return Fail("merges too large");
    doc_->merge_offsets.push_back(static_cast<uint32_t>(text.size()));
    text.append(left);
    doc_->merge_offsets.push_back(static_cast<uint32_t>(text.size()));
    text.append(right);
    doc_->merge_offsets.push_back(static_cast<uint32_t>(text.size()));
    return true;
  }

  HfJsonDocument* doc_;
  Mode mode_ = Mode::kDom;
  std::vector<json*> stack_;
  std::vector<std::string> stack_keys_;  // key of each open container in its parent
  std::string key_;
  std::vector<std::string> pair_;
  std::string error_;
};

}  // namespace

StatusOr<HfJsonDocument> ReadHfJsonDocument(std::string_view text) {
  HfJsonDocument doc;
  doc.vocab.Reserve(text.size() / 64);
  StreamingHandler handler(&doc);
  const bool ok = json::sax_parse(text.begin(), text.end(), &handler);
  if (!ok) {
    return DataLossError(handler.error().empty() ? "malformed JSON" : handler.error());
  }
  return doc;
}

}  // namespace pagellm
