#include "cli/bench_serve_workload.h"

#include <filesystem>
#include <memory>
#include <set>

#include "bench/openai_client.h"
#include "fmt/format.h"
#include "model/gguf_file.h"
#include "spdlog/spdlog.h"
#include "tokenizer/tokenizer.h"

namespace pagellm::cli {
namespace {

// Used to discover the server's token ids when there is neither a local tokenizer nor a corpus.
constexpr const char* kFallbackText =
    "The quick brown fox jumps over the lazy dog. Once upon a time, there was a little girl who "
    "loved to read books about the sea, the stars and the mountains. 0123456789 "
    "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~ abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ";

// How many corpus pieces to tokenize through the server to collect its token ids.
constexpr size_t kPoolStories = 200;

// The tokenizers available for building prompts: local (loaded from a path) or the server's.
class Tokenizers {
 public:
  Tokenizers(const ServeOptions& o, bench::HttpClient& client) : server_(&client, o.model) {
    std::string path = o.tokenizer_model;
    const bool explicit_path = !path.empty();
    std::error_code ec;
    if (!explicit_path && std::filesystem::exists(o.model, ec)) path = o.model;
    if (path.empty()) return;
    auto tok = Load(path);
    if (tok.ok()) {
      local_ = std::move(tok).value();
      local_text_ = bench::MakeLocalTextTokenizer(*local_);
      local_path_ = path;
    } else if (explicit_path) {
      load_error_ = tok.status();
    } else {
      spdlog::warn("no tokenizer loaded from {}: {}", path, tok.status().message());
    }
  }

  const Status& load_error() const { return load_error_; }
  const Tokenizer* local() const { return local_.get(); }
  // The local tokenizer when there is one, else the server's.
  bench::TextTokenizer* text() { return local_text_ ? local_text_.get() : &server_; }
  std::string name() const { return local_ ? local_path_ : "server"; }

 private:
  StatusOr<std::unique_ptr<Tokenizer>> Load(const std::string& path) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!fs::exists(path, ec)) return NotFoundError(fmt::format("{} does not exist", path));
    if (path.ends_with(".gguf")) {
      ASSIGN_OR_RETURN(gguf_, GgufFile::Open(path));
      return LoadTokenizerFromGguf(*gguf_);
    }
    if (fs::is_directory(path, ec)) return LoadTokenizerFromDir(path);
    return LoadTokenizerFromDir(fs::path(path).parent_path().string());
  }

  std::unique_ptr<GgufFile> gguf_;  // kept alive for the tokenizer loaded from it
  std::unique_ptr<Tokenizer> local_;
  std::unique_ptr<bench::TextTokenizer> local_text_;
  std::string local_path_;
  bench::ServerTextTokenizer server_;
  Status load_error_;
};

StatusOr<std::vector<std::string>> LoadCorpus(const ServeOptions& o, bool required,
                                              std::string* path_out) {
  std::string path = o.dataset_path.empty() ? bench::DefaultTinyStoriesPath() : o.dataset_path;
  if (path.empty()) {
    if (required) return NotFoundError("no TinyStories text found; pass --dataset-path");
    return std::vector<std::string>{kFallbackText};
  }
  ASSIGN_OR_RETURN(std::string text, bench::ReadTextFile(path));
  std::vector<std::string> stories = bench::SplitStories(text);
  if (stories.empty()) return InvalidArgumentError(fmt::format("{} holds no text", path));
  *path_out = path;
  return stories;
}

// Token ids random prompts may use.
StatusOr<std::vector<int32_t>> TokenPool(const ServeOptions& o, Tokenizers& toks,
                                         ServeWorkload& w) {
  if (toks.local() != nullptr) {
    const int32_t limit = o.vocab_size > 0 ? o.vocab_size : toks.local()->vocab_size();
    w.tokenizer = toks.name();
    return bench::TokenPoolFromTokenizer(*toks.local(), limit);
  }
  if (o.vocab_size > 0) {
    w.tokenizer = "none";
    std::vector<int32_t> pool(static_cast<size_t>(o.vocab_size));
    for (int32_t i = 0; i < o.vocab_size; ++i) pool[static_cast<size_t>(i)] = i;
    return pool;
  }
  // Neither: the ids the server's tokenizer produces for real text are valid, non-special ids.
  ASSIGN_OR_RETURN(std::vector<std::string> stories, LoadCorpus(o, false, &w.corpus_path));
  std::set<int32_t> ids;
  for (size_t i = 0; i < stories.size() && i < kPoolStories; ++i) {
    ASSIGN_OR_RETURN(std::vector<int32_t> t, toks.text()->Encode(stories[i]));
    ids.insert(t.begin(), t.end());
  }
  if (ids.size() < 2)
    return FailedPreconditionError("the server's /tokenize gave too few token ids");
  w.tokenizer = "server";
  spdlog::info("random prompts draw from {} token ids seen in the server's tokenization",
               ids.size());
  return std::vector<int32_t>(ids.begin(), ids.end());
}

void AddTokenRequests(std::vector<bench::TokenPrompt> prompts, ServeWorkload& w) {
  for (bench::TokenPrompt& p : prompts) {
    SingleRequest r;
    r.prompt_len = static_cast<int>(p.ids.size());
    r.prompt = std::move(p.ids);
    r.output_len = p.output_len;
    r.group = p.group;
    w.requests.push_back(std::move(r));
  }
}

}  // namespace

StatusOr<ServeWorkload> BuildServeWorkload(const ServeOptions& o, bench::HttpClient& client) {
  ServeWorkload w;
  Tokenizers toks(o, client);
  if (!toks.load_error().ok()) return toks.load_error().WithContext("--tokenizer-model");
  if (o.dataset == "random" || o.dataset == "prefix-sharing") {
    ASSIGN_OR_RETURN(std::vector<int32_t> pool, TokenPool(o, toks, w));
    if (pool.empty()) return InvalidArgumentError("no token ids to draw prompts from");
    w.probe_prompt =
        std::vector<int32_t>(pool.begin(), pool.begin() + std::min<size_t>(4, pool.size()));
    if (o.dataset == "random") {
      bench::RandomDatasetOptions r;
      r.num_prompts = o.num_prompts;
      r.input_len = o.input_len;
      r.output_len = o.output_len;
      r.range_ratio = o.range_ratio;
      r.output_range_ratio = o.output_range_ratio;
      r.seed = o.seed;
      ASSIGN_OR_RETURN(std::vector<bench::TokenPrompt> prompts, bench::BuildRandomDataset(r, pool));
      AddTokenRequests(std::move(prompts), w);
    } else {
      bench::PrefixSharingOptions p;
      p.num_prompts = o.num_prompts;
      p.num_prefixes = o.num_prefixes;
      p.prefix_len = o.prefix_len;
      p.suffix_len = o.suffix_len;
      p.output_len = o.output_len;
      p.seed = o.seed;
      ASSIGN_OR_RETURN(std::vector<bench::TokenPrompt> prompts,
                       bench::BuildPrefixSharingDataset(p, pool));
      AddTokenRequests(std::move(prompts), w);
    }
    return w;
  }
  if (o.dataset != "tinystories" && o.dataset != "multi-turn")
    return InvalidArgumentError(
        fmt::format("--dataset must be random, tinystories, prefix-sharing or multi-turn, got '{}'",
                    o.dataset));
  w.text_prompts = true;
  w.tokenizer = toks.name();
  w.probe_prompt = "Once upon a time";
  ASSIGN_OR_RETURN(std::vector<std::string> stories, LoadCorpus(o, true, &w.corpus_path));
  bench::TextPromptSource source(std::move(stories), toks.text());
  if (o.dataset == "tinystories") {
    bench::TextDatasetOptions t;
    t.num_prompts = o.num_prompts;
    t.input_len = o.input_len;
    t.output_len = o.output_len;
    t.range_ratio = o.range_ratio;
    t.output_range_ratio = o.output_range_ratio;
    t.seed = o.seed;
    ASSIGN_OR_RETURN(std::vector<bench::TextPrompt> prompts, bench::BuildTextDataset(t, source));
    for (bench::TextPrompt& p : prompts) {
      SingleRequest r;
      r.prompt_len = static_cast<int>(p.ids.size());
      r.prompt = std::move(p.text);
      r.output_len = p.output_len;
      w.requests.push_back(std::move(r));
    }
    return w;
  }
  bench::ConversationOptions c;
  c.num_conversations = o.num_conversations;
  c.turns = o.turns;
  c.turn_len = o.turn_len;
  c.output_len = o.output_len;
  c.range_ratio = o.range_ratio;
  c.output_range_ratio = o.output_range_ratio;
  c.seed = o.seed;
  ASSIGN_OR_RETURN(w.conversations, bench::BuildConversations(c, source));
  return w;
}

}  // namespace pagellm::cli
