// The chain and search planners (planners.h).
#include "agent/scaffold/planners.h"

#include <algorithm>

namespace kloop {
namespace {

// A chain's turns from turn 1 without a gap.
std::vector<const SearchNode*> chain_history(const ProblemProgress& p, int sample) {
  std::vector<const SearchNode*> turns;
  for (const auto& n : p.done) {
    if (n.at.sample == sample) turns.push_back(&n);
  }
  std::sort(turns.begin(), turns.end(), [](const SearchNode* a, const SearchNode* b) { return a->at.turn < b->at.turn; });
  std::vector<const SearchNode*> history;
  for (const SearchNode* n : turns) {
    if (n->at.turn != static_cast<int>(history.size()) + 1) break;  // a gap: made again from there
    history.push_back(n);
  }
  return history;
}

bool busy(const ProblemProgress& p, int sample) {
  auto of_sample = [&](const std::set<AttemptRef>& s) {
    return std::any_of(s.begin(), s.end(), [&](const AttemptRef& a) { return a.sample == sample; });
  };
  return of_sample(p.in_flight) || of_sample(p.failed);
}

// one_shot, best_of_k and iterative: `samples` chains of `turns` turns.
class ChainPlanner : public Planner {
 public:
  explicit ChainPlanner(const ScaffoldConfig& scaffold) : scaffold_(scaffold) {}

  std::vector<PlannedAttempt> next(const ProblemProgress& p) const override {
    std::vector<PlannedAttempt> out;
    for (int s = 0; s < scaffold_.samples; ++s) {
      if (busy(p, s)) continue;
      const std::vector<const SearchNode*> history = chain_history(p, s);
      if (stopped(p, history) || static_cast<int>(history.size()) >= scaffold_.turns) continue;
      PlannedAttempt a;
      a.at = {s, static_cast<int>(history.size()) + 1};
      if (!history.empty()) a.parents.push_back(history.back()->at);
      a.step = history.empty() ? "fresh" : "refine";
      a.messages = chain_conversation(p.task, history, scaffold_);
      out.push_back(std::move(a));
    }
    return out;
  }

  int attempts_left(const ProblemProgress& p) const override {
    int left = 0;
    for (int s = 0; s < scaffold_.samples; ++s) {
      const std::vector<const SearchNode*> history = chain_history(p, s);
      if (!stopped(p, history)) left += std::max(0, scaffold_.turns - static_cast<int>(history.size()));
    }
    return left;
  }

 private:
  // A chain that ended on its turn budget goes on when the run now has
  // more turns; one that stopped early (early stop, refusal) stays stopped.
  static bool stopped(const ProblemProgress& p, const std::vector<const SearchNode*>& history) {
    return std::any_of(history.begin(), history.end(), [&](const SearchNode* n) { return p.ends_chain.count(n->at) > 0; });
  }
  ScaffoldConfig scaffold_;
};

// beam and evolve: round after round, each from every attempt before it.
class SearchPlanner : public Planner {
 public:
  SearchPlanner(const ScaffoldConfig& scaffold, const PromptBuilder& prompts) : scaffold_(scaffold), prompts_(prompts) {}

  std::vector<PlannedAttempt> next(const ProblemProgress& p) const override {
    // The next round needs every attempt of this one.
    if (!p.in_flight.empty() || !p.failed.empty()) return {};
    for (int round = 1; round <= scaffold_.turns; ++round) {
      std::vector<PlannedAttempt> missing;
      for (auto& a : plan_round(scaffold_, round, p.done, p.task, prompts_)) {
        const bool have = std::any_of(p.done.begin(), p.done.end(), [&](const SearchNode& n) { return n.at == a.at; });
        if (!have) missing.push_back(std::move(a));
      }
      if (!missing.empty()) return missing;
    }
    return {};
  }

  int attempts_left(const ProblemProgress& p) const override {
    const int all = scaffold_.samples * scaffold_.turns;
    int have = 0;
    for (const auto& n : p.done) have += n.at.turn <= scaffold_.turns && n.at.sample < scaffold_.samples ? 1 : 0;
    return std::max(0, all - have);
  }

 private:
  ScaffoldConfig scaffold_;
  const PromptBuilder& prompts_;
};

}  // namespace

std::vector<ChatMessage> chain_conversation(const std::string& task, const std::vector<const SearchNode*>& history,
                                            const ScaffoldConfig& sc) {
  std::vector<ChatMessage> m = {{"user", task}};
  if (history.empty()) return m;
  if (sc.context == "full") {
    for (const SearchNode* h : history) {
      m.push_back({"assistant", h->response});
      m.push_back({"user", h->feedback});
    }
    return m;
  }
  const SearchNode* shown = history.back();
  if (sc.keep_best) {
    for (const SearchNode* h : history) {
      if (h->outcome == Outcome::kCorrect && h->speedup &&
          (!shown->speedup || shown->outcome != Outcome::kCorrect || *h->speedup > *shown->speedup)) {
        shown = h;
      }
    }
  }
  m.push_back({"assistant", shown->response});
  m.push_back({"user", shown->feedback});
  return m;
}

std::unique_ptr<Planner> make_planner(const ScaffoldConfig& scaffold, const PromptBuilder& prompts) {
  if (scaffold.kind == "beam" || scaffold.kind == "evolve") return std::make_unique<SearchPlanner>(scaffold, prompts);
  return std::make_unique<ChainPlanner>(scaffold);
}

}  // namespace kloop
