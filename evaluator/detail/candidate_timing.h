// The candidate's timing as the driver runs it, and the reference's
// baseline. The timed calls are the trusted timer's (the reference's
// worker, worker/trusted_timer.cpp): it draws each call's inputs, measures
// the call from its own process and captures and checks the outputs of
// the calls chosen here, unannounced. Nothing the candidate's process says
// enters the timing. For evaluate.cpp; not part of the evaluator's API.
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

// The trusted timer's state across one evaluation: what its spans cost
// alone and with a candidate's worker that runs no module (the floors), the
// control block it shares with that worker, the next call's number.
struct TimerState {
  wire::TimerFloors floors;
  wire::TimerFloors floors_plain;  // GPU: the handshake's alone, without the switches (a diagnosis)
  UniqueFd control;
  uint64_t control_bytes = 0;
  uint32_t next = 1;
  std::string device;
};

// Before any code of the candidate's runs (its worker idle, no module),
// with the device to the timer alone: its control block and its own spans
// at case `c`'s sizes.
TimerState calibrate_timer(WorkerSession& ref, const wire::Case& c, const TimingRules& rules,
                           const std::string& device, std::chrono::milliseconds timeout);

// The candidate's worker started, its module not loaded yet: the control
// block mapped there and the handshake's own cost measured. What the
// candidate's worker did, as a CallStatus (not ok: its verdict).
CallStatus attach_timer(TimerState& timer, WorkerSession& ref, WorkerSession& cand, std::chrono::milliseconds timeout);

// The threads a CPU candidate is given: --threads, else LibTorch's default
// (one per CPU this process may run on).
int granted_cpu_threads(const EvalOptions& o);

// What the timing phase measured.
struct CandidateTiming {
  TimingSummary summary;
  TimingSummary wall;  // each call's span on the device, start to the end of its outputs' copy
  int throttled_discarded = 0;
  long long persisting_l2_limit = 0;         // the candidate worker's word (it clears them)
  long long persisting_l2_window_bytes = 0;
  json post_exchange;  // what time_post published
  json check;          // the timer's figures (floors, outside work, checks)
  int checked_calls = 0;       // timed calls whose outputs the timer captured and checked
  std::string timed_wrong;     // why a checked call was wrong; "" when none was
  std::string outside_work;    // work of the candidate's outside its calls, when it is too much to be noise
  std::vector<wire::ErrorAnalysisRow> error_analysis;  // the precision-checked timed calls' rows
  std::optional<int64_t> post_call;  // the call of the warm-up case the check after timing ran
  double checking_seconds = 0;       // the timer's checks
};

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

// One timing of the candidate loaded in `cand`.
struct TimedRun {
  wire::Case timed_case;   // the timer's: inputs from a nonce the candidate never sees
  wire::TimeSetup setup;   // the candidate's module and warm-up (on inputs of its own)
  wire::TimePost post;     // the call after timing
  TimingRules rules;
  bool cpu = true;
  int cpu_threads = 1;
  std::string dir;         // the evaluation's shared folder
  std::chrono::milliseconds timeout{120000};
  json tolerance;
  bool checks = true;        // checked calls at all (not for the repeated timing of benchmarks)
  double check_chance = 0.25;
  bool precision = false;    // one checked call also against the fp64 twin (strict)
};

// Times the candidate: the timing case prepared in the reference, the
// shared data block mapped in both workers, batches until the stopping rule
// of `rules` is met (each call checked with chance `check_chance` spread
// over its batch, unannounced, and more batches until two calls were), then
// `post` (time_post). The candidate's failures go through `check_reply`
// (which throws); the reference's throw EvaluationError.
CandidateTiming time_candidate(WorkerSession& ref, WorkerSession& cand, TimerState& timer, const TimedRun& run,
                               const ReplyCheck& check_reply, double& candidate_seconds, double& reference_seconds);

// The reference's baseline on case `c`, with a loaded reference worker: from
// the cache (GPU) when an entry under `key` exists, else timed by the
// worker's `baseline` op (TF32 off, and on too for CUDA) and stored, unless
// the card throttled through it (r.not_cached says so).
// evaluate() and measure_baseline() share it, and so share cache entries.
void reference_baseline(WorkerSession& ref, const wire::Case& c, const BaselineKey& key, const TimingRules& rules, bool cpu,
                        bool use_cache, const std::string& cache_dir, std::chrono::milliseconds timeout,
                        BaselineReport& r);

}  // namespace kloop::detail
