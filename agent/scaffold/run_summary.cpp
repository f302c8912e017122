// The summary printed after a run (TurnLoop::run's LoopSummary).
#include <fmt/format.h>

#include <sstream>

#include "agent/scaffold/turn_loop.h"

namespace kloop {
namespace {

// The errors, and what a stopped or failed run kept for the next one.
std::string what_was_kept(const LoopSummary& s) {
  std::ostringstream out;
  for (const auto& e : s.errors) out << "error: " << e << "\n";
  if (s.chains_incomplete) out << s.chains_incomplete << " chain(s) incomplete; run the same command again to resume\n";
  if (!s.stopped.empty()) {
    out << "stopped (" << s.stopped << "): " << s.attempts_run << " attempt(s) recorded in " << s.run_path;
    if (s.answers_kept) out << ", " << s.answers_kept << " answer(s) kept that the next run evaluates without a request";
    if (s.requests_cut) out << ", " << s.requests_cut << " request(s) cut in flight (their cost recorded)";
    out << "; run the same command again to resume\n";
  }
  if (!s.fatal_error.empty()) out << "stopped: " << s.fatal_error << "\n";
  return out.str();
}

}  // namespace

std::string format_summary(const LoopSummary& s) {
  std::ostringstream out;
  out << "run " << s.run_path << (s.shard.empty() ? "" : " shard " + s.shard) << ": " << s.problems << " problem(s), "
      << s.chains << " chain(s); " << s.attempts_run
      << " attempt(s) run now, " << s.attempts_resumed << " resumed from the run store";
  const std::string cost = fmt::format("; {} tokens, ${:.4f}\n", s.tokens, s.cost_usd);
  out << cost;
  if (s.transport_faults > 0) {
    out << fmt::format("transport faults: {} stream(s) broke after HTTP 200 (the provider's fault, resent, never "
                       "evaluated), ${:.4f} of the cost\n",
                       s.transport_faults, s.transport_fault_cost_usd);
  }
  out << "turn   correct   fast_1   (best so far over samples; of " << s.problems << " problems)\n";
  for (const auto& t : s.by_turn) {
    std::string line;
    line = fmt::format("{:4}   {:7}   {:6}\n", t.turn, t.correct, t.fast_1);
    out << line;
  }
  if (!s.by_turn.empty() && s.by_turn.size() > 1) {
    const auto& a = s.by_turn.front();
    const auto& b = s.by_turn.back();
    out << "one-shot -> iterative: correct " << a.correct << " -> " << b.correct << ", fast_1 " << a.fast_1 << " -> "
        << b.fast_1 << "\n";
  }
  if (!s.excluded.empty()) {
    out << s.excluded.size() << " problem(s) excluded by the protocol and not counted:";
    for (const auto& n : s.excluded) out << " " << n;
    out << "\n";
  }
  // How busy each device was over the run (several queues, or a GPU's).
  if (s.attempts_run > 0 && (s.queues.size() > 1 || (s.queues.size() == 1 && s.queues[0].device != "cpu"))) {
    for (std::size_t i = 0; i < s.queues.size(); ++i) {
      const auto& q = s.queues[i];
      std::string line;
      line = fmt::format("queue {} ({}): {} evaluation(s), busy {:.1f} s of {:.1f} s ({:.0f}%)\n", i, q.device.c_str(),
                         q.evaluations, q.busy_seconds, s.seconds,
                         s.seconds > 0 ? 100.0 * q.busy_seconds / s.seconds : 0.0);
      out << line;
    }
  }
  if (s.compiles.builds > 0) {
    const std::string line =
        fmt::format("compiles: {} on {} slot(s), at most {} at once, {:.1f} s waited for a slot\n", s.compiles.builds,
                    s.compiles.slots, s.compiles.most_in_flight, s.compiles.wait_seconds);
    out << line;
  }
  out << what_was_kept(s);
  return out.str();
}

}  // namespace kloop
