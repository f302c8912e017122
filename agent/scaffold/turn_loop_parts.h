// What the parts of TurnLoop (turn_loop.cpp: the run; run_check.cpp:
// --check; run_summary.cpp: the summary) share. Internal to agent/scaffold.
#pragma once

#include <string>
#include <vector>

#include "agent/store/run_store.h"

namespace kloop {

// The resolved config's fields that change earlier attempts; more turns,
// samples or problems extend a run instead.
extern const std::vector<std::string> kIdentityFields;

// How far a chain got in the run store: its turns without a gap from turn
// 1, and whether it ended for good (early stop, refusal). Sorts `records`.
struct StoredChain {
  int turns = 0;
  bool stopped = false;
};
StoredChain stored_chain(std::vector<AttemptRecord>& records);

// "N problem(s) excluded by the P protocol, left out of the run: a, b".
// `precision`: the run's (fp32, fp16, bf16); said when it is not fp32.
std::string excluded_note(const std::vector<std::string>& excluded, const std::string& protocol,
                          const std::string& precision);

}  // namespace kloop
