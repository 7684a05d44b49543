#include "grammar/rule_inliner.h"

#include <algorithm>
#include <cstdint>
#include <set>
#include <vector>

namespace pagellm {
namespace {

// A leaf: at most this many alternatives of at most this many byte sets each.
constexpr size_t kMaxLeafAlternatives = 16;
constexpr size_t kMaxLeafLength = 8;
// A rule gets no more alternatives than this by inlining.
constexpr size_t kMaxHostAlternatives = 64;
// Passes (a rule that becomes a leaf by inlining is inlined in the next pass).
constexpr int kMaxPasses = 4;
// A leaf whose alternatives may start with this many bytes or more (a character class) is
// "broad": each site it is inlined into becomes a position whose token table is a walk over
// most of the vocabulary at compile time (a few ms with 150k tokens), so such sites are capped
// (bounded strings make one site per character of their maximum length).
constexpr int kBroadFirstBytes = 32;
constexpr int kMaxBroadSites = 128;

using Alternatives = std::vector<GrammarSequence>;

bool IsBroad(const Alternatives& alts, const Grammar& g) {
  ByteSet first;
  for (const GrammarSequence& alt : alts) {
    if (alt.empty()) continue;
    const ByteSet& set = g.byte_set(alt[0].id);
    for (int w = 0; w < 4; ++w) first.bits[w] |= set.bits[w];
  }
  int n = 0;
  for (uint64_t w : first.bits) n += __builtin_popcountll(w);
  return n >= kBroadFirstBytes;
}

bool IsLeaf(const Alternatives& alts) {
  if (alts.empty() || alts.size() > kMaxLeafAlternatives) return false;
  for (const GrammarSequence& alt : alts) {
    if (alt.size() > kMaxLeafLength) return false;
    for (const GrammarSymbol& s : alt)
      if (s.kind != GrammarSymbol::Kind::kBytes) return false;
  }
  return true;
}

// leaf[r]: 0 not a leaf, 1 a leaf, 2 a broad leaf.
// `alt` with every reference to a leaf rule (other than `self`) replaced by the leaf's
// alternatives; false (nothing done) when the expansion would pass `max_count` alternatives or
// the broad-site budget.
bool Expand(const GrammarSequence& alt, const std::vector<Alternatives>& rules,
            const std::vector<uint8_t>& leaf, int32_t self, size_t max_count, int* broad_budget,
            Alternatives* out) {
  Alternatives result(1);
  bool expanded = false;
  int broad = 0;
  for (const GrammarSymbol& s : alt) {
    if (s.kind == GrammarSymbol::Kind::kRule && s.id != self && leaf[s.id]) {
      const Alternatives& sub = rules[s.id];
      if (result.size() * sub.size() > max_count) return false;
      if (leaf[s.id] == 2 && ++broad > *broad_budget) return false;
      Alternatives next;
      next.reserve(result.size() * sub.size());
      for (const GrammarSequence& prefix : result) {
        for (const GrammarSequence& piece : sub) {
          GrammarSequence seq = prefix;
          seq.insert(seq.end(), piece.begin(), piece.end());
          next.push_back(std::move(seq));
        }
      }
      result = std::move(next);
      expanded = true;
    } else {
      for (GrammarSequence& seq : result) seq.push_back(s);
    }
  }
  if (!expanded) return false;
  *broad_budget -= broad;
  *out = std::move(result);
  return true;
}

size_t CountSymbols(const Alternatives& alts) {
  size_t n = 0;
  for (const GrammarSequence& a : alts) n += a.size();
  return n;
}

}  // namespace

Grammar InlineLeafRules(const Grammar& g) {
  const int32_t num_rules = g.num_rules();
  std::vector<Alternatives> rules(num_rules);
  for (int32_t r = 0; r < num_rules; ++r) rules[r] = g.alternatives(r);
  // The grammar may grow to twice its size (and never past the validation limit).
  const size_t budget = std::min(Grammar::kMaxSymbols, 2 * g.num_symbols() + 4096);
  size_t total = g.num_symbols();
  std::vector<uint8_t> leaf(num_rules);
  int broad_budget = kMaxBroadSites;
  for (int pass = 0; pass < kMaxPasses; ++pass) {
    for (int32_t r = 0; r < num_rules; ++r)
      leaf[r] = !IsLeaf(rules[r]) ? 0 : IsBroad(rules[r], g) ? 2 : 1;
    bool changed = false;
    for (int32_t host = 0; host < num_rules; ++host) {
      Alternatives& alts = rules[host];
      Alternatives next;
      bool host_changed = false;
      for (size_t i = 0; i < alts.size(); ++i) {
        Alternatives expanded;
        const size_t room = kMaxHostAlternatives -
                            std::min(kMaxHostAlternatives, next.size() + alts.size() - i - 1);
        if (room > 0 && Expand(alts[i], rules, leaf, host, room, &broad_budget, &expanded) &&
            total + CountSymbols(expanded) - alts[i].size() <= budget) {
          total += CountSymbols(expanded) - alts[i].size();
          next.insert(next.end(), expanded.begin(), expanded.end());
          host_changed = true;
        } else {
          next.push_back(alts[i]);
        }
      }
      if (!host_changed) continue;
      // Equal alternatives (two leaves that share a member) would only duplicate stacks.
      std::set<std::vector<std::pair<int, int32_t>>> seen;
      Alternatives unique;
      for (GrammarSequence& seq : next) {
        std::vector<std::pair<int, int32_t>> k;
        for (const GrammarSymbol& s : seq) k.push_back({static_cast<int>(s.kind), s.id});
        if (seen.insert(std::move(k)).second) unique.push_back(std::move(seq));
      }
      alts = std::move(unique);
      changed = true;
    }
    if (!changed) break;
  }
  // Rebuild with the rules reachable from the root, in their original order.
  std::vector<int32_t> remap(num_rules, -1);
  std::vector<int32_t> stack = {g.root()};
  remap[g.root()] = 0;
  while (!stack.empty()) {
    const int32_t r = stack.back();
    stack.pop_back();
    for (const GrammarSequence& alt : rules[r])
      for (const GrammarSymbol& s : alt)
        if (s.kind == GrammarSymbol::Kind::kRule && remap[s.id] < 0) {
          remap[s.id] = 0;
          stack.push_back(s.id);
        }
  }
  Grammar out;
  for (int32_t r = 0; r < num_rules; ++r)
    if (remap[r] >= 0) remap[r] = out.AddRule(g.rule_name(r));
  for (int32_t r = 0; r < num_rules; ++r) {
    if (remap[r] < 0) continue;
    for (const GrammarSequence& alt : rules[r]) {
      GrammarSequence seq;
      seq.reserve(alt.size());
      for (const GrammarSymbol& s : alt)
        seq.push_back(s.kind == GrammarSymbol::Kind::kBytes ? out.Bytes(g.byte_set(s.id))
                                                            : Grammar::Ref(remap[s.id]));
      out.AddAlternative(remap[r], std::move(seq));
    }
  }
  out.set_root(remap[g.root()]);
  return out;
}

}  // namespace pagellm
