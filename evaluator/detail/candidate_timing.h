// The candidate's timing as the driver runs it, and the reference's
// baseline: batches of timed calls on inputs the candidate cannot predict,
// a random, unannounced subset checked against the reference, the claimed
// times held against the driver's own clocks (check_timing_claims). For
// evaluate.cpp; not part of the evaluator's API.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <string>

#include "evaluator/detail/worker_session.h"
#include "evaluator/timing/device_figures.h"
#include "evaluator/timing/sample_stats.h"

namespace kloop::detail {

// What a sample costs beyond the call itself (the L2 flush, the events, the
// syncs, the loop): the same sampling loop around no call, run by the
// reference and timed here. Trusted, and the allowance the check of the
// candidate's claimed times starts from.
// With `fresh_case`, each sample first draws a call's inputs of that case,
// as the candidate's timed calls on fresh inputs do.
double sample_overhead_seconds(WorkerSession& ref, const TimingRules& rules, std::chrono::milliseconds timeout,
                               const wire::Case* fresh_case = nullptr);

// The threads a CPU candidate is given: --threads, else LibTorch's default
// (one per CPU this process may run on).
int granted_cpu_threads(const EvalOptions& o);

// The candidate's timing, driven from here: the worker runs batches of
// exactly the samples asked for, the stopping rule runs in this process, and
// the claimed times are held against the wall time each batch took as seen
// from here (check_timing_claims, sample_stats.h).
struct CandidateTiming {
  TimingSummary summary;
  TimingSummary wall;
  int throttled_discarded = 0;
  long long persisting_l2_limit = 0;         // largest seen before or after a timed sample
  long long persisting_l2_window_bytes = 0;  // largest access-policy window seen on kloop's stream
  json post_exchange;  // what time_post published
  json check;          // the figures of the plausibility check
  int checked_calls = 0;  // timed calls whose output was checked against the reference
  std::string implausible;  // why the claims cannot be true; "" when they can
  std::optional<int64_t> post_call;  // fresh inputs: the call of the timing case the check after timing ran
  double checking_seconds = 0;       // spent checking timed calls (reference and candidate)
};

// Checks the outputs of the timed call the batch stopped after (its
// time_check) against the reference's; throws CandidateFailed or
// ProtocolViolation, or records a finding. Its argument: the call of the
// timing case whose inputs that call had.
using TimedCallCheck = std::function<void(int64_t call)>;

int64_t fresh_call_id(uint64_t random);

// Random numbers the candidate cannot predict: nonces for the timing inputs,
// the order of the input sets, which timed calls are checked.
class Unpredictable {
 public:
  Unpredictable() : rng_(std::random_device{}() ^ (static_cast<uint64_t>(std::random_device{}()) << 32)) {}
  uint64_t nonce() { return rng_(); }
  // A first call id for a run of fresh calls: random in [2^40, 2^62), so
  // no run overlaps the test calls (ids 0, 1, ...) or, but for a chance of
  // about n^2 / 2^62, another run.
  int64_t call_id() { return fresh_call_id(rng_()); }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  int below(int n) { return n <= 1 ? 0 : static_cast<int>(rng_() % static_cast<uint64_t>(n)); }

 private:
  std::mt19937_64 rng_;
};

// The timing case: case `c`'s model and weights with `sets` input sets
// drawn from a fresh nonce, so no timed call repeats a test input, nor one of
// an earlier evaluation or process.
wire::Case timing_case_of(const wire::Case& c, int sets, uint64_t nonce);

// Times the candidate loaded in `cand` after `setup_cmd` (time_setup): the
// stopping rule of `rules` over batches run here, each sample's call
// checked by `check_call` with chance `check_chance` (decided after the call
// returned), the claims held against this process's clocks, then `post_cmd`
// (time_post). Worker failures go through `check_reply`, which throws.
CandidateTiming time_candidate(WorkerSession& cand, const wire::TimeSetup& setup_cmd, const TimingRules& rules,
                               bool cpu, int cpu_threads, double overhead_per_sample,
                               std::chrono::milliseconds timeout, const ReplyCheck& check_reply,
                               double& candidate_seconds, wire::TimePost post_cmd, const TimedCallCheck& check_call,
                               double check_chance, bool fresh);

// The reference's baseline on case `c`, with a loaded reference worker: from
// the cache (GPU) when an entry under `key` exists, else timed by the
// worker's `baseline` op (TF32 off, and on too for CUDA) and stored, unless
// the card throttled through it (r.not_cached says so).
// evaluate() and measure_baseline() share it, and so share cache entries.
void reference_baseline(WorkerSession& ref, const wire::Case& c, const BaselineKey& key, const TimingRules& rules, bool cpu,
                        bool use_cache, const std::string& cache_dir, std::chrono::milliseconds timeout,
                        BaselineReport& r);

}  // namespace kloop::detail
