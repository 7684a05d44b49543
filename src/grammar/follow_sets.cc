#include "grammar/follow_sets.h"

#include <cstdint>

namespace pagellm {
namespace {

using Kind = GrammarAutomaton::Kind;

// a |= b; whether a grew.
bool Merge(ByteSet& a, const ByteSet& b) {
  bool grew = false;
  for (int w = 0; w < 4; ++w) {
    const uint64_t merged = a.bits[w] | b.bits[w];
    grew |= merged != a.bits[w];
    a.bits[w] = merged;
  }
  return grew;
}

// Propagates sets along edges (from -> to: set[to] |= set[from]) to the fixpoint. Each set
// grows at most 256 times, so the work is O(256 x edges).
void Propagate(const std::vector<std::vector<int32_t>>& edges, std::vector<ByteSet>& sets) {
  const size_t n = sets.size();
  std::vector<int32_t> work;
  std::vector<uint8_t> queued(n, 1);
  for (size_t r = n; r-- > 0;) work.push_back(static_cast<int32_t>(r));
  while (!work.empty()) {
    const int32_t from = work.back();
    work.pop_back();
    queued[from] = 0;
    for (int32_t to : edges[from]) {
      if (Merge(sets[to], sets[from]) && !queued[to]) {
        queued[to] = 1;
        work.push_back(to);
      }
    }
  }
}

// Which rules may match the empty string: an alternative is nullable once every reference in
// it is (and it has no byte set); counts of pending references make it linear.
std::vector<uint8_t> Nullable(const GrammarAutomaton& a) {
  const int32_t num_rules = a.num_rules();
  std::vector<uint8_t> nullable(num_rules, 0);
  std::vector<int32_t> pending;   // [alternative] references not yet known nullable
  std::vector<int32_t> alt_rule;  // [alternative] its rule
  std::vector<std::vector<int32_t>> occurs(num_rules);  // [rule] alternatives referencing it
  std::vector<int32_t> work;
  for (int32_t r = 0; r < num_rules; ++r) {
    for (int32_t start : a.rule_starts(r)) {
      const int32_t alt = static_cast<int32_t>(pending.size());
      int32_t refs = 0;
      bool has_bytes = false;
      for (int32_t pos = start; a.element(pos).kind != Kind::kEnd; ++pos) {
        if (a.element(pos).kind == Kind::kBytes) {
          has_bytes = true;
        } else {
          ++refs;
          occurs[a.element(pos).rule].push_back(alt);
        }
      }
      pending.push_back(has_bytes ? -1 : refs);
      alt_rule.push_back(r);
      if (refs == 0 && !has_bytes && !nullable[r]) {
        nullable[r] = 1;
        work.push_back(r);
      }
    }
  }
  while (!work.empty()) {
    const int32_t t = work.back();
    work.pop_back();
    for (int32_t alt : occurs[t]) {
      if (pending[alt] <= 0 || --pending[alt] != 0) continue;
      const int32_t r = alt_rule[alt];
      if (!nullable[r]) {
        nullable[r] = 1;
        work.push_back(r);
      }
    }
  }
  return nullable;
}

}  // namespace

std::vector<ByteSet> ComputeFollowSets(const GrammarAutomaton& a) {
  const int32_t num_rules = a.num_rules();
  const std::vector<uint8_t> nullable = Nullable(a);
  // FIRST: the byte sets and the FIRST of the rules each alternative may start with.
  std::vector<ByteSet> first(num_rules);
  std::vector<std::vector<int32_t>> first_edges(num_rules);  // [T] rules starting with T
  for (int32_t r = 0; r < num_rules; ++r) {
    for (int32_t start : a.rule_starts(r)) {
      for (int32_t pos = start;; ++pos) {
        const GrammarAutomaton::Element& e = a.element(pos);
        if (e.kind == Kind::kEnd) break;
        if (e.kind == Kind::kBytes) {
          Merge(first[r], e.set);
          break;
        }
        first_edges[e.rule].push_back(r);
        if (!nullable[e.rule]) break;
      }
    }
  }
  Propagate(first_edges, first);
  // follow[T] = union over references to T in S of FIRST(rest of the alternative), plus
  // follow[S] when that rest may be empty (edge S -> T).
  std::vector<ByteSet> follow(num_rules);
  std::vector<std::vector<int32_t>> follow_edges(num_rules);
  // One backward pass per alternative: `suffix` is FIRST of the elements after the current one.
  for (int32_t r = 0; r < num_rules; ++r) {
    for (int32_t start : a.rule_starts(r)) {
      int32_t end = start;
      while (a.element(end).kind != Kind::kEnd) ++end;
      ByteSet suffix;
      bool suffix_nullable = true;
      for (int32_t pos = end - 1; pos >= start; --pos) {
        const GrammarAutomaton::Element& e = a.element(pos);
        if (e.kind == Kind::kBytes) {
          suffix = e.set;
          suffix_nullable = false;
          continue;
        }
        Merge(follow[e.rule], suffix);
        if (suffix_nullable) follow_edges[r].push_back(e.rule);
        if (nullable[e.rule]) {
          Merge(suffix, first[e.rule]);
        } else {
          suffix = first[e.rule];
          suffix_nullable = false;
        }
      }
    }
  }
  Propagate(follow_edges, follow);
  return follow;
}

}  // namespace pagellm
