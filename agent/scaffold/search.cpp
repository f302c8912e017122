#include "agent/scaffold/search.h"

#include <algorithm>
#include <map>
#include <stdexcept>

namespace kloop {
namespace {

// How far an attempt got: correct > ran (wrong or an integrity violation)
// > compiled > nothing usable.
int progress(Outcome outcome) {
  switch (outcome) {
    case Outcome::kCorrect: return 3;
    case Outcome::kIncorrect:
    case Outcome::kIntegrityViolation:
    case Outcome::kTimeout: return 2;
    case Outcome::kRuntimeError:
    case Outcome::kLoadError: return 1;
    default: return 0;
  }
}

const SearchNode* find(const std::vector<SearchNode>& nodes, const AttemptRef& at) {
  for (const auto& n : nodes) {
    if (n.at == at) return &n;
  }
  return nullptr;
}

// Root first: the attempt and its first parents back to a fresh one.
std::vector<const SearchNode*> lineage(const std::vector<SearchNode>& nodes, const SearchNode* n) {
  std::vector<const SearchNode*> path;
  while (n) {
    path.push_back(n);
    n = n->parents.empty() ? nullptr : find(nodes, n->parents.front());
    if (path.size() > 10000) break;  // a cycle cannot come from plan_round; a store edited by hand might
  }
  std::reverse(path.begin(), path.end());
  return path;
}

}  // namespace

std::vector<const SearchNode*> rank_nodes(const std::vector<SearchNode>& nodes, int round, const std::string& select) {
  std::vector<const SearchNode*> out;
  for (const auto& n : nodes) {
    if (n.at.turn >= round) continue;
    if (select == "speedup" && n.outcome != Outcome::kCorrect) continue;
    out.push_back(&n);
  }
  std::stable_sort(out.begin(), out.end(), [](const SearchNode* a, const SearchNode* b) {
    const int pa = progress(a->outcome), pb = progress(b->outcome);
    if (pa != pb) return pa > pb;
    const double sa = a->speedup.value_or(0), sb = b->speedup.value_or(0);
    if (sa != sb) return sa > sb;
    return a->at < b->at;
  });
  return out;
}

std::vector<PlannedAttempt> plan_round(const ScaffoldConfig& config, int round, const std::vector<SearchNode>& nodes,
                                       const std::string& task, const PromptBuilder& prompts) {
  if (config.kind != "beam" && config.kind != "evolve") {
    throw std::invalid_argument("plan_round: '" + config.kind + "' is not a search scaffold");
  }
  std::vector<PlannedAttempt> out;
  auto fresh = [&](int slot) {
    PlannedAttempt p;
    p.at = {slot, round};
    p.step = "fresh";
    p.messages = {{"user", task}};
    return p;
  };
  const std::vector<const SearchNode*> ranked = round > 1 ? rank_nodes(nodes, round, config.select)
                                                           : std::vector<const SearchNode*>{};
  if (config.kind == "beam") {
    for (int slot = 0; slot < config.samples; ++slot) {
      const std::size_t member = static_cast<std::size_t>(slot / config.expand);
      if (member >= ranked.size() || member >= static_cast<std::size_t>(config.width)) {
        out.push_back(fresh(slot));
        continue;
      }
      const SearchNode* parent = ranked[member];
      PlannedAttempt p;
      p.at = {slot, round};
      p.parents = {parent->at};
      p.step = "refine";
      p.messages = {{"user", task}};
      // The member's own history: its ancestors' answers and feedback
      // (context full), or only its own (context last).
      std::vector<const SearchNode*> path = lineage(nodes, parent);
      if (config.context != "full") path = {parent};
      for (const SearchNode* n : path) {
        p.messages.push_back({"assistant", n->response});
        p.messages.push_back({"user", n->feedback});
      }
      out.push_back(std::move(p));
    }
    return out;
  }
  // evolve
  const std::size_t pool = std::min<std::size_t>(ranked.size(), static_cast<std::size_t>(config.samples));
  for (int slot = 0; slot < config.samples; ++slot) {
    if (pool == 0) {
      out.push_back(fresh(slot));
      continue;
    }
    PlannedAttempt p;
    p.at = {slot, round};
    const std::size_t shown = std::min<std::size_t>(pool, static_cast<std::size_t>(config.parents));
    std::vector<PromptBuilder::ShownCandidate> candidates;
    for (std::size_t k = 0; k < shown; ++k) {
      const SearchNode* n = ranked[(static_cast<std::size_t>(slot) + k) % pool];
      p.parents.push_back(n->at);
      candidates.push_back({std::to_string(k + 1) + " (round " + std::to_string(n->at.turn) + ", attempt " +
                                std::to_string(n->at.sample + 1) + ")",
                            outcome_name(n->outcome), n->speedup, n->code.empty() ? n->response : n->code, n->feedback});
    }
    const bool crossover = config.crossover && shown > 1;
    p.step = crossover ? "crossover" : "mutate";
    p.messages = {{"user", prompts.evolve(task, candidates, crossover, config.mutate_prompt)}};
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace kloop
