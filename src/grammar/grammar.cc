#include "grammar/grammar.h"

#include <algorithm>
#include <map>

#include "fmt/format.h"

namespace pagellm {

int32_t Grammar::AddRule(std::string_view name) {
  std::string unique(name.empty() ? "rule" : name);
  if (FindRule(unique) >= 0) {
    // The rule count makes the suffix unique at the first try unless a name already ends in it.
    for (size_t i = rules_.size();; ++i) {
      std::string candidate = fmt::format("{}-{}", unique, i);
      if (FindRule(candidate) < 0) {
        unique = std::move(candidate);
        break;
      }
    }
  }
  rule_ids_.emplace(unique, static_cast<int32_t>(rules_.size()));
  rules_.push_back({std::move(unique), {}});
  return static_cast<int32_t>(rules_.size() - 1);
}

int32_t Grammar::FindRule(std::string_view name) const {
  auto it = rule_ids_.find(std::string(name));
  return it == rule_ids_.end() ? -1 : it->second;
}

void Grammar::AddAlternative(int32_t rule, GrammarSequence seq) {
  CHECK(rule >= 0 && rule < num_rules());
  num_symbols_ += seq.size() + 1;
  rules_[rule].alts.push_back(std::move(seq));
}

GrammarSymbol Grammar::Bytes(const ByteSet& set) {
  auto [it, inserted] = byte_set_ids_.emplace(set.bits, static_cast<int32_t>(byte_sets_.size()));
  if (inserted) byte_sets_.push_back(set);
  return {GrammarSymbol::Kind::kBytes, it->second};
}

GrammarSequence Grammar::Literal(std::string_view text) {
  GrammarSequence seq;
  seq.reserve(text.size());
  for (char c : text) seq.push_back(Byte(static_cast<uint8_t>(c)));
  return seq;
}

StatusOr<GrammarSymbol> Grammar::Repeat(const GrammarSequence& seq, int64_t min, int64_t max,
                                        std::string_view name_hint) {
  constexpr int64_t kMaxCount = 10000;
  if (min < 0 || (max >= 0 && max < min))
    return InvalidArgumentError(fmt::format("invalid repetition {{{},{}}}", min, max));
  if (min > kMaxCount || (max >= 0 && max - min > kMaxCount))
    return InvalidArgumentError(fmt::format("repetition count {} is over the limit of {}",
                                            max >= 0 ? max : min, kMaxCount));
  if (static_cast<size_t>(max >= 0 ? max : min + 1) * (seq.size() + 1) + num_symbols_ > kMaxSymbols)
    return InvalidArgumentError("repetition makes the grammar too large");
  // The repeated item as one symbol.
  GrammarSymbol item;
  if (seq.size() == 1) {
    item = seq[0];
  } else {
    item = Ref(AddRule(fmt::format("{}-item", name_hint)));
    AddAlternative(item.id, seq);
  }
  const int32_t rule = AddRule(name_hint);
  GrammarSequence body(static_cast<size_t>(min), item);
  if (max < 0) {
    const int32_t star = AddRule(fmt::format("{}-star", name_hint));
    AddAlternative(star, {item, Ref(star)});
    AddAlternative(star, {});
    body.push_back(Ref(star));
  } else if (max > min) {
    // opt_1 ::= item | "" ; opt_k ::= item opt_{k-1} | ""
    int32_t prev = -1;
    for (int64_t k = 1; k <= max - min; ++k) {
      const int32_t opt = AddRule(fmt::format("{}-opt", name_hint));
      if (prev < 0)
        AddAlternative(opt, {item});
      else
        AddAlternative(opt, {item, Ref(prev)});
      AddAlternative(opt, {});
      prev = opt;
    }
    body.push_back(Ref(prev));
  }
  AddAlternative(rule, std::move(body));
  return Ref(rule);
}

GrammarSymbol Grammar::Choice(std::vector<GrammarSequence> alts, std::string_view name_hint) {
  const int32_t rule = AddRule(name_hint);
  for (GrammarSequence& a : alts) AddAlternative(rule, std::move(a));
  return Ref(rule);
}

Status Grammar::Validate() const {
  if (root_ < 0 || root_ >= num_rules()) return InvalidArgumentError("grammar has no root rule");
  if (rules_.size() > kMaxRules || num_symbols_ > kMaxSymbols)
    return InvalidArgumentError(
        fmt::format("grammar too large: {} rules and {} symbols (limits {} and {})", rules_.size(),
                    num_symbols_, kMaxRules, kMaxSymbols));
  for (const Rule& r : rules_) {
    for (const GrammarSequence& alt : r.alts) {
      for (const GrammarSymbol& s : alt) {
        if (s.kind == GrammarSymbol::Kind::kRule && rules_[s.id].alts.empty())
          return InvalidArgumentError(
              fmt::format("rule '{}' is used but never defined", rules_[s.id].name));
      }
    }
  }
  // Nullable rules by fixpoint.
  const size_t n = rules_.size();
  std::vector<uint8_t> nullable(n, 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      if (nullable[r]) continue;
      for (const GrammarSequence& alt : rules_[r].alts) {
        const bool all = std::all_of(alt.begin(), alt.end(), [&](const GrammarSymbol& s) {
          return s.kind == GrammarSymbol::Kind::kRule && nullable[s.id];
        });
        if (all) {
          nullable[r] = 1;
          changed = true;
          break;
        }
      }
    }
  }
  // Productive rules (some alternative can finish) by fixpoint; a reachable rule that is not
  // productive is a dead end (e.g. recursion without a base case): a matcher could enter it
  // and never complete, so it is refused.
  std::vector<uint8_t> productive(n, 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      if (productive[r]) continue;
      for (const GrammarSequence& alt : rules_[r].alts) {
        const bool all = std::all_of(alt.begin(), alt.end(), [&](const GrammarSymbol& s) {
          return s.kind == GrammarSymbol::Kind::kRule ? productive[s.id] != 0
                                                      : !byte_sets_[s.id].Empty();
        });
        if (all) {
          productive[r] = 1;
          changed = true;
          break;
        }
      }
    }
  }
  {
    std::vector<uint8_t> reached(n, 0);
    std::vector<int32_t> todo = {root_};
    reached[root_] = 1;
    while (!todo.empty()) {
      const int32_t r = todo.back();
      todo.pop_back();
      if (!productive[r])
        return InvalidArgumentError(fmt::format(
            "rule '{}' can never complete (recursion without a base case, or an empty character "
            "class)",
            rules_[r].name));
      for (const GrammarSequence& alt : rules_[r].alts)
        for (const GrammarSymbol& s : alt)
          if (s.kind == GrammarSymbol::Kind::kRule && !reached[s.id]) {
            reached[s.id] = 1;
            todo.push_back(s.id);
          }
    }
  }
  // Edges r -> s where s can start r without a byte consumed. Following such an edge from a
  // non-final position pushes a return position, so a cycle through one of those grows the
  // stack forever without reading a byte (left recursion, which the automaton's closure cannot
  // run). A cycle of tail positions only is fine: the closure sees the same (position, stack)
  // again and stops (e.g. (a*)*).
  struct Edge {
    int32_t to;
    bool pushes;
  };
  std::vector<std::vector<Edge>> edges(n);
  for (size_t r = 0; r < n; ++r) {
    for (const GrammarSequence& alt : rules_[r].alts) {
      for (size_t i = 0; i < alt.size(); ++i) {
        const GrammarSymbol& s = alt[i];
        if (s.kind == GrammarSymbol::Kind::kBytes) break;
        edges[r].push_back({s.id, i + 1 < alt.size()});
        if (!nullable[s.id]) break;
      }
    }
  }
  // Strongly connected components (Kosaraju, iterative: generated grammars chain thousands of
  // rules); a pushing edge inside a component is left recursion.
  std::vector<int32_t> order;
  order.reserve(n);
  {
    std::vector<uint8_t> seen(n, 0);
    std::vector<std::pair<int32_t, size_t>> stack;
    for (size_t start = 0; start < n; ++start) {
      if (seen[start]) continue;
      seen[start] = 1;
      stack.push_back({static_cast<int32_t>(start), 0});
      while (!stack.empty()) {
        auto& [r, next] = stack.back();
        if (next == edges[r].size()) {
          order.push_back(r);
          stack.pop_back();
          continue;
        }
        const int32_t s = edges[r][next++].to;
        if (!seen[s]) {
          seen[s] = 1;
          stack.push_back({s, 0});
        }
      }
    }
  }
  std::vector<std::vector<int32_t>> reverse(n);
  for (size_t r = 0; r < n; ++r)
    for (const Edge& e : edges[r]) reverse[e.to].push_back(static_cast<int32_t>(r));
  std::vector<int32_t> component(n, -1);
  int32_t num_components = 0;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if (component[*it] >= 0) continue;
    std::vector<int32_t> todo = {*it};
    component[*it] = num_components;
    while (!todo.empty()) {
      const int32_t r = todo.back();
      todo.pop_back();
      for (int32_t s : reverse[r]) {
        if (component[s] < 0) {
          component[s] = num_components;
          todo.push_back(s);
        }
      }
    }
    ++num_components;
  }
  for (size_t r = 0; r < n; ++r) {
    for (const Edge& e : edges[r]) {
      if (e.pushes && component[e.to] == component[r])
        return InvalidArgumentError(fmt::format(
            "rule '{}' is left-recursive (it can reach itself without matching any character)",
            rules_[r].name));
    }
  }
  return Status::Ok();
}

namespace {

std::string ByteSetText(const ByteSet& set) {
  auto esc = [](int b) {
    if (b >= 0x20 && b < 0x7f && b != '\\' && b != ']' && b != '-' && b != '^' && b != '"')
      return std::string(1, static_cast<char>(b));
    return fmt::format("\\x{:02X}", b);
  };
  std::string out = "[";
  for (int b = 0; b < 256;) {
    if (!set.Contains(static_cast<uint8_t>(b))) {
      ++b;
      continue;
    }
    int e = b;
    while (e + 1 < 256 && set.Contains(static_cast<uint8_t>(e + 1))) ++e;
    out += esc(b);
    if (e > b) out += "-" + esc(e);
    b = e + 1;
  }
  return out + "]";
}

}  // namespace

std::string Grammar::ToGbnf() const {
  std::string out;
  for (const Rule& r : rules_) {
    out += r.name + " ::= ";
    for (size_t a = 0; a < r.alts.size(); ++a) {
      if (a > 0) out += " | ";
      if (r.alts[a].empty()) out += "\"\"";
      for (size_t i = 0; i < r.alts[a].size(); ++i) {
        const GrammarSymbol& s = r.alts[a][i];
        if (i > 0) out += " ";
        out += s.kind == GrammarSymbol::Kind::kRule ? rules_[s.id].name
                                                    : ByteSetText(byte_sets_[s.id]);
      }
    }
    out += "\n";
  }
  return out;
}

}  // namespace pagellm
