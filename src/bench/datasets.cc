#include "bench/datasets.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "fmt/format.h"
#include "tokenizer/tokenizer.h"

namespace pagellm::bench {

namespace {

// Draws until `accept` holds; the bound turns an impossible request (a pool too small for the
// uniqueness asked for) into an error instead of a hang.
constexpr int kMaxDraws = 10000;

template <typename T>
T UniformInt(T lo, T hi, std::mt19937_64& rng) {
  return std::uniform_int_distribution<T>(lo, hi)(rng);
}

}  // namespace

std::vector<int32_t> TokenPoolFromTokenizer(const Tokenizer& tokenizer, int32_t vocab_limit) {
  std::vector<int32_t> pool;
  const int32_t n = std::min(vocab_limit, tokenizer.vocab_size());
  pool.reserve(static_cast<size_t>(std::max(n, 0)));
  for (int32_t id = 0; id < n; ++id) {
    if (tokenizer.IsSpecial(id) || id == tokenizer.bos_id() || id == tokenizer.eos_id()) continue;
    const std::vector<int32_t>& stops = tokenizer.stop_ids();
    if (std::find(stops.begin(), stops.end(), id) != stops.end()) continue;
    pool.push_back(id);
  }
  return pool;
}

namespace {
// Output lengths use their own range ratio when one is given.
template <typename Options>
double OutputRatio(const Options& o) {
  return o.output_range_ratio < 0 ? o.range_ratio : o.output_range_ratio;
}
}  // namespace

StatusOr<std::vector<int>> SampleLengths(int n, int base, double range_ratio, int min_len,
                                         std::mt19937_64& rng) {
  if (!(range_ratio >= 0 && range_ratio < 1))
    return InvalidArgumentError(fmt::format("range ratio must be in [0, 1), got {}", range_ratio));
  if (base < min_len)
    return InvalidArgumentError(fmt::format("length must be >= {}, got {}", min_len, base));
  int lo = static_cast<int>(std::floor(base * (1.0 - range_ratio)));
  int hi = static_cast<int>(std::ceil(base * (1.0 + range_ratio)));
  lo = std::max(lo, min_len);
  hi = std::max(hi, lo);
  std::vector<int> lens(static_cast<size_t>(std::max(n, 0)));
  for (int& len : lens) len = lo == hi ? lo : UniformInt(lo, hi, rng);
  return lens;
}

std::vector<int32_t> RandomTokens(int len, const std::vector<int32_t>& pool, std::mt19937_64& rng) {
  CHECK(!pool.empty()) << "empty token pool";
  std::vector<int32_t> ids(static_cast<size_t>(std::max(len, 0)));
  std::uniform_int_distribution<size_t> pick(0, pool.size() - 1);
  for (int32_t& id : ids) id = pool[pick(rng)];
  return ids;
}

StatusOr<std::vector<TokenPrompt>> BuildRandomDataset(const RandomDatasetOptions& o,
                                                      const std::vector<int32_t>& pool) {
  if (pool.empty()) return InvalidArgumentError("no token ids to draw random prompts from");
  if (o.num_prompts < 1) return InvalidArgumentError("--num-prompts must be >= 1");
  std::mt19937_64 rng(o.seed);
  ASSIGN_OR_RETURN(std::vector<int> in_lens,
                   SampleLengths(o.num_prompts, o.input_len, o.range_ratio, 1, rng));
  ASSIGN_OR_RETURN(std::vector<int> out_lens,
                   SampleLengths(o.num_prompts, o.output_len, OutputRatio(o), 1, rng));
  std::vector<TokenPrompt> prompts(static_cast<size_t>(o.num_prompts));
  for (size_t i = 0; i < prompts.size(); ++i) {
    prompts[i].ids = RandomTokens(in_lens[i], pool, rng);
    prompts[i].output_len = out_lens[i];
  }
  return prompts;
}

StatusOr<std::vector<TokenPrompt>> BuildPrefixSharingDataset(const PrefixSharingOptions& o,
                                                             const std::vector<int32_t>& pool) {
  if (pool.empty()) return InvalidArgumentError("no token ids to draw random prompts from");
  if (o.num_prompts < 1) return InvalidArgumentError("--num-prompts must be >= 1");
  if (o.num_prefixes < 1) return InvalidArgumentError("--num-prefixes must be >= 1");
  if (o.prefix_len < 1) return InvalidArgumentError("--prefix-len must be >= 1");
  if (o.suffix_len < 1) return InvalidArgumentError("--suffix-len must be >= 1");
  if (o.output_len < 1) return InvalidArgumentError("--output-len must be >= 1");
  std::mt19937_64 rng(o.seed);
  // Distinct first tokens keep the groups apart from the first KV block on.
  const bool distinct_first = pool.size() >= static_cast<size_t>(o.num_prefixes);
  std::vector<std::vector<int32_t>> prefixes;
  std::set<std::vector<int32_t>> seen_prefixes;
  std::set<int32_t> first_tokens;
  for (int p = 0; p < o.num_prefixes; ++p) {
    int draws = 0;
    std::vector<int32_t> ids;
    do {
      if (++draws > kMaxDraws)
        return InvalidArgumentError("cannot draw distinct prefixes: vocabulary too small");
      ids = RandomTokens(o.prefix_len, pool, rng);
    } while (seen_prefixes.contains(ids) || (distinct_first && first_tokens.contains(ids[0])));
    seen_prefixes.insert(ids);
    first_tokens.insert(ids[0]);
    prefixes.push_back(std::move(ids));
  }
  std::vector<TokenPrompt> prompts(static_cast<size_t>(o.num_prompts));
  std::set<std::vector<int32_t>> seen_suffixes;
  for (int i = 0; i < o.num_prompts; ++i) {
    TokenPrompt& t = prompts[static_cast<size_t>(i)];
    t.group = i % o.num_prefixes;
    std::vector<int32_t> suffix;
    int draws = 0;
    do {
      if (++draws > kMaxDraws)
        return InvalidArgumentError(fmt::format("cannot draw {} unique suffixes of {} tokens",
                                                o.num_prompts, o.suffix_len));
      suffix = RandomTokens(o.suffix_len, pool, rng);
    } while (seen_suffixes.contains(suffix));
    seen_suffixes.insert(suffix);
    t.ids = prefixes[static_cast<size_t>(t.group)];
    t.ids.insert(t.ids.end(), suffix.begin(), suffix.end());
    t.output_len = o.output_len;
  }
  std::shuffle(prompts.begin(), prompts.end(), rng);
  return prompts;
}

namespace {

class LocalTextTokenizer : public TextTokenizer {
 public:
  explicit LocalTextTokenizer(const Tokenizer& t) : t_(t) {}
  StatusOr<std::vector<int32_t>> Encode(const std::string& text) override {
    return t_.Encode(text, /*add_special=*/false, /*parse_special=*/false);
  }
  StatusOr<std::string> Decode(const std::vector<int32_t>& ids) override {
    return t_.Decode(ids, /*skip_special=*/false);
  }

 private:
  const Tokenizer& t_;
};

std::string_view Trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  const size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

}  // namespace

std::unique_ptr<TextTokenizer> MakeLocalTextTokenizer(const Tokenizer& tokenizer) {
  return std::make_unique<LocalTextTokenizer>(tokenizer);
}

std::string DefaultTinyStoriesPath() {
  namespace fs = std::filesystem;
  const fs::path rel = fs::path("shared") / "data" / "tinystories_sample.txt";
  std::vector<fs::path> bases = {fs::current_path() / "..", fs::current_path()};
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    // <repo>/<build dir>/pagellm and <repo>/<build dir>/<subdir>/binary
    bases.push_back(exe.parent_path() / ".." / "..");
    bases.push_back(exe.parent_path() / ".." / ".." / "..");
  }
  for (const fs::path& base : bases) {
    const fs::path p = base / rel;
    if (fs::is_regular_file(p, ec)) return fs::weakly_canonical(p, ec).string();
  }
  return "";
}

StatusOr<std::string> ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError(fmt::format("cannot open {}", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> SplitStories(std::string_view text) {
  constexpr std::string_view kSeparator = "<|endoftext|>";
  std::vector<std::string> stories;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find(kSeparator, pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view piece = Trim(text.substr(pos, end - pos));
    if (!piece.empty()) stories.emplace_back(piece);
    pos = end + kSeparator.size();
  }
  return stories;
}

StatusOr<const std::vector<int32_t>*> TextPromptSource::StoryIds(size_t index) {
  auto it = ids_.find(index);
  if (it == ids_.end()) {
    // The newline keeps consecutive stories apart once their ids are joined.
    ASSIGN_OR_RETURN(std::vector<int32_t> ids, tokenizer_->Encode(stories_[index] + "\n"));
    it = ids_.emplace(index, std::move(ids)).first;
  }
  return &it->second;
}

StatusOr<TextPrompt> TextPromptSource::Make(int len, std::mt19937_64& rng) {
  if (stories_.empty()) return InvalidArgumentError("the text corpus is empty");
  if (len < 1) return InvalidArgumentError("a text prompt needs at least one token");
  size_t story = UniformInt<size_t>(0, stories_.size() - 1, rng);
  ASSIGN_OR_RETURN(const std::vector<int32_t>* first, StoryIds(story));
  size_t offset = first->empty() ? 0 : UniformInt<size_t>(0, first->size() - 1, rng);
  TextPrompt p;
  // Stories visited without gaining a token: a corpus that tokenizes to nothing ends the loop.
  size_t barren = 0;
  while (static_cast<int>(p.ids.size()) < len) {
    ASSIGN_OR_RETURN(const std::vector<int32_t>* ids, StoryIds(story));
    const size_t take = std::min(ids->size() - std::min(offset, ids->size()),
                                 static_cast<size_t>(len) - p.ids.size());
    p.ids.insert(p.ids.end(), ids->begin() + static_cast<std::ptrdiff_t>(offset),
                 ids->begin() + static_cast<std::ptrdiff_t>(offset + take));
    barren = take == 0 ? barren + 1 : 0;
    if (barren > stories_.size()) return InvalidArgumentError("the text corpus has no tokens");
    offset = 0;
    story = (story + 1) % stories_.size();
  }
  ASSIGN_OR_RETURN(p.text, tokenizer_->Decode(p.ids));
  return p;
}

StatusOr<std::vector<TextPrompt>> BuildTextDataset(const TextDatasetOptions& o,
                                                   TextPromptSource& source) {
  if (o.num_prompts < 1) return InvalidArgumentError("--num-prompts must be >= 1");
  std::mt19937_64 rng(o.seed);
  ASSIGN_OR_RETURN(std::vector<int> in_lens,
                   SampleLengths(o.num_prompts, o.input_len, o.range_ratio, 1, rng));
  ASSIGN_OR_RETURN(std::vector<int> out_lens,
                   SampleLengths(o.num_prompts, o.output_len, OutputRatio(o), 1, rng));
  std::vector<TextPrompt> prompts;
  prompts.reserve(static_cast<size_t>(o.num_prompts));
  for (int i = 0; i < o.num_prompts; ++i) {
    ASSIGN_OR_RETURN(TextPrompt p, source.Make(in_lens[static_cast<size_t>(i)], rng));
    p.output_len = out_lens[static_cast<size_t>(i)];
    prompts.push_back(std::move(p));
  }
  return prompts;
}

StatusOr<std::vector<Conversation>> BuildConversations(const ConversationOptions& o,
                                                       TextPromptSource& source) {
  if (o.num_conversations < 1) return InvalidArgumentError("--num-conversations must be >= 1");
  if (o.turns < 1) return InvalidArgumentError("--turns must be >= 1");
  std::mt19937_64 rng(o.seed);
  const int total = o.num_conversations * o.turns;
  ASSIGN_OR_RETURN(std::vector<int> in_lens,
                   SampleLengths(total, o.turn_len, o.range_ratio, 1, rng));
  ASSIGN_OR_RETURN(std::vector<int> out_lens,
                   SampleLengths(total, o.output_len, OutputRatio(o), 1, rng));
  std::vector<Conversation> convs(static_cast<size_t>(o.num_conversations));
  size_t k = 0;
  for (Conversation& c : convs) {
    for (int t = 0; t < o.turns; ++t, ++k) {
      ASSIGN_OR_RETURN(TextPrompt p, source.Make(in_lens[k], rng));
      c.user_turns.push_back(std::move(p.text));
      c.output_lens.push_back(out_lens[k]);
    }
  }
  return convs;
}

}  // namespace pagellm::bench
