// Prompt sets for the benchmarks, all deterministic for a seed:
//  - random: uniformly drawn token ids (special tokens excluded, as vLLM's random dataset does),
//    lengths fixed or uniform in [L(1-r), L(1+r)];
//  - prefix sharing: P distinct shared prefixes, each request = one prefix + a unique suffix;
//  - text (TinyStories): real text cut to a token count with a tokenizer (local or the
//    server's), starting at a random token of a random story;
//  - multi-turn conversations: user turns of text; the runner resends the growing history.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "pagellm/status.h"

namespace pagellm {
class Tokenizer;
}

namespace pagellm::bench {

// Ids a random prompt may use: those below `vocab_limit` that the tokenizer does not mark as
// special (BOS, EOS, control tokens), so that a random prompt never contains an end of text.
std::vector<int32_t> TokenPoolFromTokenizer(const Tokenizer& tokenizer, int32_t vocab_limit);

// `n` lengths uniform over the integers in [floor(base * (1 - r)), ceil(base * (1 + r))]
// (vLLM's --random-range-ratio), never below `min_len`. r in [0, 1).
StatusOr<std::vector<int>> SampleLengths(int n, int base, double range_ratio, int min_len,
                                         std::mt19937_64& rng);

std::vector<int32_t> RandomTokens(int len, const std::vector<int32_t>& pool, std::mt19937_64& rng);

struct TokenPrompt {
  std::vector<int32_t> ids;
  int output_len = 0;
  int group = -1;  // prefix-sharing: index of the shared prefix
};

struct RandomDatasetOptions {
  int num_prompts = 0;
  int input_len = 0;
  int output_len = 0;
  double range_ratio = 0;
  double output_range_ratio = -1;  // < 0: the same as range_ratio
  uint64_t seed = 0;
};
StatusOr<std::vector<TokenPrompt>> BuildRandomDataset(const RandomDatasetOptions& o,
                                                      const std::vector<int32_t>& pool);

struct PrefixSharingOptions {
  int num_prompts = 0;
  int num_prefixes = 1;
  int prefix_len = 0;
  int suffix_len = 1;
  int output_len = 0;
  uint64_t seed = 0;
};
// Request i uses prefix i mod P before the order is shuffled (so every group has
// floor(N/P) or ceil(N/P) requests, interleaved in time). Prefixes are pairwise different
// from their first token on when the pool allows it, so that no two groups share a KV block;
// suffixes are unique across all requests.
StatusOr<std::vector<TokenPrompt>> BuildPrefixSharingDataset(const PrefixSharingOptions& o,
                                                             const std::vector<int32_t>& pool);

// Text <-> token ids without special tokens: the local tokenizer or a server's /tokenize.
class TextTokenizer {
 public:
  virtual ~TextTokenizer() = default;
  virtual StatusOr<std::vector<int32_t>> Encode(const std::string& text) = 0;
  virtual StatusOr<std::string> Decode(const std::vector<int32_t>& ids) = 0;
};

// Wraps pagellm's tokenizer (no BOS/EOS added, special-token text left as text).
std::unique_ptr<TextTokenizer> MakeLocalTextTokenizer(const Tokenizer& tokenizer);

// The TinyStories sample shipped next to the repository (../shared/data/tinystories_sample.txt),
// looked up from the working directory and from the executable's directory; "" if not found.
std::string DefaultTinyStoriesPath();
StatusOr<std::string> ReadTextFile(const std::string& path);

// Pieces of a corpus separated by "<|endoftext|>" (TinyStories' separator), trimmed, empty
// pieces dropped.
std::vector<std::string> SplitStories(std::string_view text);

struct TextPrompt {
  std::string text;
  std::vector<int32_t> ids;  // the tokenizer's ids of the cut (the server may add BOS)
  int output_len = 0;
};

// Cuts corpus text to token counts. Each story is tokenized once (lazily) and cached.
class TextPromptSource {
 public:
  TextPromptSource(std::vector<std::string> stories, TextTokenizer* tokenizer)
      : stories_(std::move(stories)), tokenizer_(tokenizer) {}
  // `len` tokens of consecutive stories, starting at a random token of a random story.
  StatusOr<TextPrompt> Make(int len, std::mt19937_64& rng);

 private:
  StatusOr<const std::vector<int32_t>*> StoryIds(size_t index);
  std::vector<std::string> stories_;
  TextTokenizer* tokenizer_;
  std::map<size_t, std::vector<int32_t>> ids_;
};

struct TextDatasetOptions {
  int num_prompts = 0;
  int input_len = 0;
  int output_len = 0;
  double range_ratio = 0;
  double output_range_ratio = -1;  // < 0: the same as range_ratio
  uint64_t seed = 0;
};
StatusOr<std::vector<TextPrompt>> BuildTextDataset(const TextDatasetOptions& o,
                                                   TextPromptSource& source);

struct Conversation {
  std::vector<std::string> user_turns;
  std::vector<int> output_lens;  // per turn
};
struct ConversationOptions {
  int num_conversations = 0;
  int turns = 1;
  int turn_len = 0;  // tokens of new user text per turn
  int output_len = 0;
  double range_ratio = 0;
  double output_range_ratio = -1;  // < 0: the same as range_ratio
  uint64_t seed = 0;
};
StatusOr<std::vector<Conversation>> BuildConversations(const ConversationOptions& o,
                                                       TextPromptSource& source);

}  // namespace pagellm::bench
