// The retry loop of environment_retry.h.
#include "agent/scaffold/environment_retry.h"

#include <optional>

namespace kloop {

RetriedVerdict evaluate_retrying_environment(const std::function<Verdict()>& evaluate, int retries,
                                             const std::function<void(const std::string&)>& note) {
  const int tries = 1 + (retries < 0 ? 0 : retries);
  std::optional<EnvironmentError> last_error;
  std::optional<Verdict> last_verdict;
  for (int i = 1; i <= tries; ++i) {
    try {
      Verdict v = evaluate();
      if (v.environment_fault.empty()) return {std::move(v), i};
      if (note && i < tries) note("evaluated again (" + std::to_string(i + 1) + " of " + std::to_string(tries) + "): " + v.environment_fault);
      last_verdict = std::move(v);
    } catch (const EnvironmentError& e) {
      if (note && i < tries) note("evaluated again (" + std::to_string(i + 1) + " of " + std::to_string(tries) + "): " + e.what());
      last_error = e;
      last_verdict.reset();
    }
  }
  if (!last_verdict) throw *last_error;
  // The fault came back every time: the candidate's own doing.
  Verdict v = std::move(*last_verdict);
  v.message += " (in each of " + std::to_string(tries) + " evaluations: " + v.environment_fault + ")";
  return {std::move(v), tries};
}

}  // namespace kloop
