// The search scaffolds' planning (ScaffoldConfig: beam and evolve): which
// attempts a round makes, from what, with which prompt. Pure: given the
// problem's attempts so far it always plans the same round, so a run
// resumed mid-round redoes only the attempts the store lacks, with the
// parents it would have had.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "agent/llm/provider.h"
#include "agent/prompt/prompt_builder.h"
#include "agent/scaffold/run_config.h"
#include "agent/store/run_store.h"

namespace kloop {

// One attempt of a problem as the search sees it.
struct SearchNode {
  AttemptRef at;
  Outcome outcome = Outcome::kRuntimeError;
  std::optional<double> speedup;
  std::string response;  // the model's whole answer
  std::string code;      // the candidate extracted from it ("" when none)
  std::string feedback;  // what the evaluation told the model
  std::vector<AttemptRef> parents;
};

struct PlannedAttempt {
  AttemptRef at;
  std::vector<AttemptRef> parents;
  std::string step;  // fresh, refine, mutate, crossover
  std::vector<ChatMessage> messages;
};

// The nodes before `round`, best first under `select` (ties: the earlier
// attempt first); with select "speedup" only correct ones.
std::vector<const SearchNode*> rank_nodes(const std::vector<SearchNode>& nodes, int round, const std::string& select);

// Round `round` (1-based) of a beam or evolve search: config.samples
// attempts, sample 0 .. samples-1, from the nodes of earlier rounds.
std::vector<PlannedAttempt> plan_round(const ScaffoldConfig& config, int round, const std::vector<SearchNode>& nodes,
                                       const std::string& task, const PromptBuilder& prompts);

}  // namespace kloop
