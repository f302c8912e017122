// The scaffolds as planners: each says, from one problem's attempts so far,
// which attempts come next. Every scaffold's attempts then go through the
// same stages (attempt_stages.h); only this choice differs.
//
//   one_shot, best_of_k, iterative  chains: sample s is a chain of turns,
//       each turn prompted with the chain's history (scaffold.context);
//       a chain goes on while it has turns left and did not stop for good
//   beam, evolve  searches in rounds: a round is planned (search.h) once
//       every attempt of the rounds before it is done
//
// Planning is a pure function of the attempts so far, so a run resumed
// mid-way plans what it would have planned.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "agent/prompt/prompt_builder.h"
#include "agent/scaffold/run_config.h"
#include "agent/scaffold/search.h"

namespace kloop {

// One problem's attempts as a planner sees them.
struct ProblemProgress {
  std::string task;                 // the rendered task prompt
  std::vector<SearchNode> done;     // with a verdict (stored, or made now)
  std::set<AttemptRef> ends_chain;  // of those, the ones that ended their chain for good
  std::set<AttemptRef> in_flight;   // planned and not yet done
  std::set<AttemptRef> failed;      // ended this run without a verdict: their chain or round waits for a rerun
};

class Planner {
 public:
  virtual ~Planner() = default;
  // The attempts to make now (none: wait for those in flight, or nothing
  // is left). Never one that is done, in flight or failed.
  virtual std::vector<PlannedAttempt> next(const ProblemProgress& progress) const = 0;
  // How many attempts this problem would still need, at most.
  virtual int attempts_left(const ProblemProgress& progress) const = 0;
};

std::unique_ptr<Planner> make_planner(const ScaffoldConfig& scaffold, const PromptBuilder& prompts);

// The conversation for a chain's next turn under the scaffold's context
// strategy, from its earlier turns (in order).
std::vector<ChatMessage> chain_conversation(const std::string& task, const std::vector<const SearchNode*>& history,
                                            const ScaffoldConfig& scaffold);

}  // namespace kloop
