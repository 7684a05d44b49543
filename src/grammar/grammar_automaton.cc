#include "grammar/grammar_automaton.h"

namespace pagellm {
namespace {

inline size_t HashKey(uint64_t key) {
  key ^= key >> 31;
  key *= 0x9E3779B97F4A7C15ULL;
  return static_cast<size_t>(key >> 20);
}

// Inserts key into ws.seen; returns false if it was there.
bool MarkSeen(ParserWorkspace& ws, uint64_t key) {
  if ((ws.seen_used.size() + 1) * 2 > ws.seen.size()) {
    std::vector<uint64_t> old;
    old.swap(ws.seen);
    ws.seen.assign(old.empty() ? 256 : old.size() * 2, 0);
    ws.seen_used.clear();
    for (uint64_t k : old) {
      if (k == 0) continue;
      size_t i = HashKey(k) & (ws.seen.size() - 1);
      while (ws.seen[i] != 0) i = (i + 1) & (ws.seen.size() - 1);
      ws.seen[i] = k;
      ws.seen_used.push_back(i);
    }
  }
  const uint64_t stored = key + 1;
  const size_t mask = ws.seen.size() - 1;
  size_t i = HashKey(stored) & mask;
  while (ws.seen[i] != 0) {
    if (ws.seen[i] == stored) return false;
    i = (i + 1) & mask;
  }
  ws.seen[i] = stored;
  ws.seen_used.push_back(i);
  return true;
}

}  // namespace

GrammarAutomaton::GrammarAutomaton(const Grammar& g) : root_(g.root()) {
  rule_starts_.resize(g.num_rules());
  for (int32_t r = 0; r < g.num_rules(); ++r) {
    for (const GrammarSequence& alt : g.alternatives(r)) {
      rule_starts_[r].push_back(static_cast<int32_t>(elements_.size()));
      for (const GrammarSymbol& s : alt) {
        Element e;
        if (s.kind == GrammarSymbol::Kind::kBytes) {
          e.kind = Kind::kBytes;
          e.set = g.byte_set(s.id);
        } else {
          e.kind = Kind::kRef;
          e.rule = s.id;
        }
        elements_.push_back(e);
      }
      elements_.push_back(Element{});  // kEnd
    }
  }
  element_rules_.reserve(elements_.size());
  for (int32_t r = 0; r < g.num_rules(); ++r)
    for (const GrammarSequence& alt : g.alternatives(r))
      element_rules_.insert(element_rules_.end(), alt.size() + 1, r);
}

void GrammarAutomaton::Close(ParserWorkspace& ws, ParserState* out) const {
  while (!ws.work.empty()) {
    const auto [pos, parent] = ws.work.back();
    ws.work.pop_back();
    const uint64_t key =
        (static_cast<uint64_t>(static_cast<uint32_t>(pos)) << 32) | static_cast<uint32_t>(parent);
    if (!MarkSeen(ws, key)) continue;
    const Element& e = elements_[pos];
    switch (e.kind) {
      case Kind::kBytes:
        if (out->tops.size() < kMaxStacks) out->tops.push_back(ws.arena.Intern(pos, parent));
        break;
      case Kind::kEnd:
        if (parent == StackArena::kBottom) {
          out->can_end = true;
        } else {
          const StackArena::Node& n = ws.arena.node(parent);
          ws.work.push_back({n.pos, n.parent});
        }
        break;
      case Kind::kRef: {
        const int32_t cont =
            elements_[pos + 1].kind == Kind::kEnd ? parent : ws.arena.Intern(pos + 1, parent);
        const std::vector<int32_t>& starts = rule_starts_[e.rule];
        // Pushed in reverse so alternatives are expanded in order (stable state order).
        for (auto it = starts.rbegin(); it != starts.rend(); ++it) ws.work.push_back({*it, cont});
        break;
      }
    }
  }
  for (size_t i : ws.seen_used) ws.seen[i] = 0;
  ws.seen_used.clear();
}

void GrammarAutomaton::Start(ParserWorkspace& ws, ParserState* out) const {
  out->tops.clear();
  out->can_end = false;
  const std::vector<int32_t>& starts = rule_starts_[root_];
  for (auto it = starts.rbegin(); it != starts.rend(); ++it)
    ws.work.push_back({*it, StackArena::kBottom});
  Close(ws, out);
}

void GrammarAutomaton::StartAt(int32_t pos, ParserWorkspace& ws, ParserState* out) const {
  out->tops.clear();
  out->can_end = false;
  ws.work.push_back({pos, StackArena::kBottom});
  Close(ws, out);
}

bool GrammarAutomaton::Advance(const ParserState& in, uint8_t b, ParserWorkspace& ws,
                               ParserState* out) const {
  out->tops.clear();
  out->can_end = false;
  // Reverse order keeps the resulting tops in the order of `in` (the worklist is a stack).
  for (auto it = in.tops.rbegin(); it != in.tops.rend(); ++it) {
    const StackArena::Node& n = ws.arena.node(*it);
    if (elements_[n.pos].set.Contains(b)) ws.work.push_back({n.pos + 1, n.parent});
  }
  Close(ws, out);
  return !out->dead();
}

}  // namespace pagellm
