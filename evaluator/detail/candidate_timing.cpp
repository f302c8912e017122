// The timing loop of candidate_timing.h.
#include "evaluator/detail/candidate_timing.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <thread>
#include <vector>

namespace kloop::detail {

double sample_overhead_seconds(WorkerSession& ref, const TimingRules& rules, std::chrono::milliseconds timeout,
                               const wire::Case* fresh_case) {
  constexpr int kSamples = 200;
  wire::TimingFloor cmd;
  cmd.samples = kSamples;
  cmd.l2_flush = rules.l2_flush;
  if (fresh_case) {
    cmd.c = *fresh_case;
    cmd.first_call = int64_t{1} << 40;  // values do not matter here, only the drawing's cost
  }
  const auto t0 = Clock::now();
  auto r = ref.call_stepwise(cmd, timeout, [](int64_t) {});
  const double wall = since(t0);
  if (!r || !r->ok()) throw EvaluationError("the reference could not run the timing loop");
  return wall / kSamples;
}

int granted_cpu_threads(const EvalOptions& o) {
  if (o.threads > 0) return o.threads;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  return std::max(1u, std::thread::hardware_concurrency());
}

int64_t fresh_call_id(uint64_t random) { return static_cast<int64_t>((random >> 2) | (uint64_t{1} << 40)); }

wire::Case timing_case_of(const wire::Case& c, int sets, uint64_t nonce) {
  wire::Case t = c;
  t.seed = nonce;
  t.calls = std::max(2, sets);
  return t;
}

// Which timed calls are checked is decided here after each call has
// returned (the worker stops after every sample until told to go on), each
// call on its own with the chance EvalOptions::timed_check_chance spread
// over its batch, so nothing the candidate can read before or during a call
// says whether it will be checked, and a check says nothing about the calls
// after it. Past kMaxChecks in an evaluation (each costs the reference one
// forward on the same inputs) the chance drops fourfold, never to zero.
constexpr int kMaxChecks = 6;
constexpr int kMinFreshChecks = 2;

CandidateTiming time_candidate(WorkerSession& cand, const wire::TimeSetup& setup_cmd, const TimingRules& rules,
                               bool cpu, int cpu_threads, double overhead_per_sample,
                               std::chrono::milliseconds timeout, const ReplyCheck& check_reply,
                               double& candidate_seconds, wire::TimePost post_cmd, const TimedCallCheck& check_call,
                               double check_chance, bool fresh) {
  auto call = [&](const auto& cmd) {
    const auto t0 = Clock::now();
    auto r = cand.call(cmd, timeout);
    candidate_seconds += since(t0);
    check_reply(CallStatus::of(r));
    return r->reply;
  };
  Unpredictable random;
  wire::TimeSetup setup_cmd_sent = setup_cmd;
  if (fresh) setup_cmd_sent.warmup_first_call = random.call_id();
  call(setup_cmd_sent);
  const int sets = setup_cmd.c.calls;
  int previous_set = -1;
  auto next_set = [&] {
    // Never the set of the call before: no two consecutive calls share inputs.
    int s = sets <= 1 ? 0 : previous_set < 0 ? random.below(sets) : (previous_set + 1 + random.below(sets - 1)) % sets;
    previous_set = s;
    return s;
  };
  // The rule's wall clock is `observed`: the batches' wall time as this
  // process saw it, the checks of timed calls taken out. The checks are
  // kloop's own work, and time they took must not cut short the evidence
  // the claims are held against (a 0.3 s budget spent on the first batch's
  // checks left 10 samples, too few to catch a clock slowed tenfold).
  double claimed = 0, observed = 0;
  StoppingRule rule(rules, [&observed] { return observed; });
  CandidateTiming out;
  std::set<int> checked_sets;
  std::vector<double> wall;
  int run = 0, batches = 0;
  // CPU only: the kernel's account of the candidate tree's CPU time over
  // the batches, the checked calls' taken out; unknown (nullopt) once any
  // reading fails. It starts at minus the first reading.
  auto cpu_now = [&]() -> std::optional<double> {
    return cpu ? process_tree_cpu_seconds(cand.pid()) : std::nullopt;
  };
  std::optional<double> cpu_used = cpu_now();
  if (cpu_used) *cpu_used = -*cpu_used;
  int batch = std::max(1, std::min(rules.min_samples, 1000));
  // Any output size: the size the module claims is its word, not a reason to skip checks.
  const bool checkable = static_cast<bool>(check_call);
  // A batch of n samples: fresh inputs (sample i on call first + i), else
  // the sets in an order where no call repeats the one before. After each
  // sample, with chance `per_call` (a set no check has seen yet counts
  // double), that call's outputs are checked against the reference's. The
  // time spent checking is this process's own and leaves the batch's wall
  // time as the wall check sees it.
  auto run_batch = [&](int n, double per_call, bool count) {
    const int64_t first = fresh ? random.call_id() : 0;
    wire::TimeBatch batch_cmd;
    batch_cmd.samples = n;
    batch_cmd.l2_flush = rules.l2_flush;
    for (int i = 0; i < n && !fresh; ++i) batch_cmd.sets.push_back(static_cast<std::size_t>(next_set()));
    if (fresh) batch_cmd.first_call = first;
    double checking = 0;
    int next_step = 0;
    auto on_step = [&](int64_t step) {
      if (step != next_step) throw ProtocolViolation("a timing batch stopped at a sample out of order");
      const int i = next_step++;
      if (!checkable) return;
      const int set = fresh ? -1 : static_cast<int>(batch_cmd.sets[static_cast<std::size_t>(i)]);
      double chance = per_call * (!fresh && !checked_sets.count(set) ? 2 : 1);
      if (out.checked_calls >= kMaxChecks) chance /= 4;
      if (!random.chance(std::min(1.0, chance))) return;
      const auto t0 = Clock::now();
      const auto cpu_before = cpu_used ? cpu_now() : std::nullopt;
      ++out.checked_calls;
      if (!fresh) checked_sets.insert(set);
      check_call(fresh ? first + i : set);
      checking += since(t0);
      out.checking_seconds += since(t0);
      const auto cpu_after = cpu_before ? cpu_now() : std::nullopt;
      if (cpu_after) {
        *cpu_used -= *cpu_after - *cpu_before;
      } else {
        cpu_used.reset();
      }
    };
    const auto t0 = Clock::now();
    auto reply = cand.call_stepwise(batch_cmd, timeout, on_step);
    const double seconds = since(t0) - checking;
    candidate_seconds += seconds;
    check_reply(CallStatus::of(reply));
    const wire::TimeBatchReply& r = reply->reply;
    if (next_step != n) throw ProtocolViolation("a timing batch did not stop after each of its samples");
    const auto& samples = r.samples;
    const auto& walls = r.wall;
    const auto& thr = r.throttled;
    if (samples.size() != static_cast<std::size_t>(n) || walls.size() != samples.size() || thr.size() != samples.size()) {
      throw ProtocolViolation("a timing batch did not return the " + std::to_string(n) + " samples asked for");
    }
    ++batches;
    run += n;
    observed += seconds;
    for (std::size_t i = 0; i < samples.size(); ++i) {
      const double t = samples[i];
      const double w = walls[i];
      if (!std::isfinite(t) || t < 0 || t > 1e4 || !std::isfinite(w) || w < 0 || w > 1e4) {
        throw ProtocolViolation("a timing sample that is not a time");
      }
      claimed += t;
      if (!count || rule.done()) continue;  // the batch overshot the stopping point
      if (thr[i] && out.throttled_discarded < kMaxThrottledDiscards) {
        ++out.throttled_discarded;
        continue;
      }
      rule.add(t);
      wall.push_back(w);
    }
    if (r.persisting_l2_limit != 0) {
      out.persisting_l2_limit = std::max(out.persisting_l2_limit, static_cast<long long>(r.persisting_l2_limit));
    }
    if (r.persisting_l2_window_bytes != 0) {
      out.persisting_l2_window_bytes =
          std::max(out.persisting_l2_window_bytes, static_cast<long long>(r.persisting_l2_window_bytes));
    }
  };
  while (!rule.done()) {
    run_batch(batch, check_chance / batch, true);
    const auto& taken = rule.samples();
    const double median = taken.empty() ? 1e-3 : summarize(taken).median;
    // About 0.1 s per batch: few round trips, and no batch the timeout could cut.
    batch = static_cast<int>(std::clamp(0.1 / std::max(median + overhead_per_sample, 1e-7), 1.0, 1000.0));
    batch = std::max(1, std::min(batch, rules.max_samples - static_cast<int>(taken.size())));
    if (observed > 4 * rules.max_seconds + 30) {
      throw ProtocolViolation("timing went on far past its budget (" + std::to_string(observed) + " s)");
    }
  }
  // Every input set gets at least one checked call (fresh inputs: at least
  // kMinFreshChecks calls are checked): more batches, like the others (each
  // call checked by chance, after it returned), until each has.
  auto checks_wanted = [&] {
    return fresh ? out.checked_calls < kMinFreshChecks : static_cast<int>(checked_sets.size()) < std::min(sets, kMaxChecks);
  };
  for (int extra = 0; checkable && extra < 4 * std::max(sets, kMinFreshChecks) && checks_wanted(); ++extra) {
    const int n = 1 + random.below(std::min(batch, 8));
    run_batch(n, 0.5, false);
  }
  if (run == 0) throw ProtocolViolation("no timing batch could be held against the wall clock");
  out.summary = rule.summary();
  out.wall = summarize(wall);
  TimingClaims claims;
  claims.cpu = cpu;
  claims.samples = run;
  claims.batches = batches;
  claims.claimed_seconds = claimed;
  claims.observed_seconds = observed;
  claims.overhead_per_sample = overhead_per_sample;
  claims.cpu_threads = cpu_threads;
  claims.clock_tick = 1.0 / static_cast<double>(std::max(1L, sysconf(_SC_CLK_TCK)));
  if (cpu_used) {
    if (const auto end = cpu_now()) claims.cpu_seconds = *cpu_used + *end;
  }
  const TimingClaimCheck verdict = check_timing_claims(claims);
  out.check = {{"samples_run", run},          {"batches", batches},
               {"claimed_seconds", claimed},  {"observed_seconds", observed},
               {"allowed_seconds", verdict.allowed_seconds}, {"overhead_per_sample", overhead_per_sample},
               {"input_sets", sets},          {"checked_calls", out.checked_calls}};
  if (claims.cpu_seconds) {
    out.check["cpu_seconds"] = *claims.cpu_seconds;
    out.check["cpu_threads"] = cpu_threads;
  }
  if (verdict.cpu_allowed_seconds > 0) out.check["cpu_allowed_seconds"] = verdict.cpu_allowed_seconds;
  if (!verdict.plausible) out.implausible = verdict.why;
  if (fresh) {
    out.post_call = random.call_id();
    post_cmd.call = *out.post_call;
    post_cmd.name = "timing.post";
  }
  out.post_exchange = call(post_cmd).exchange.value_or(json());
  return out;
}

void reference_baseline(WorkerSession& ref, const wire::Case& c, const BaselineKey& key, const TimingRules& rules, bool cpu,
                        bool use_cache, const std::string& cache_dir, std::chrono::milliseconds timeout,
                        BaselineReport& r) {
  if (use_cache && !cpu) {
    if (auto cached = load_baseline(cache_dir, key)) {
      r.cached = true;
      r.fp32 = cached->fp32;
      r.tf32 = cached->tf32;
      r.measured_at = cached->measured_at;
      return;
    }
  }
  auto outcome = ref.call(wire::Baseline{c, to_json(rules)}, timeout);
  if (!outcome || !outcome->ok()) {
    r.error = outcome ? outcome->message() : ref.failure() + "\n" + last_lines(ref.log_tail(), 5);
    return;
  }
  const wire::BaselineReply& reply = outcome->reply;
  r.fp32 = summary_from_json(reply.fp32.timing);
  const int fp32_discarded = reply.fp32.throttled_discarded;
  int tf32_discarded = 0;
  if (reply.tf32) {
    r.tf32 = summary_from_json(reply.tf32->timing);
    tf32_discarded = reply.tf32->throttled_discarded;
  }
  r.throttled_discarded = fp32_discarded + tf32_discarded;
  r.input_bytes = reply.input_bytes;
  r.measured_at = utc_now();
  if (cpu) return;
  r.not_cached = baseline_not_kept(fp32_discarded, tf32_discarded);
  if (r.not_cached.empty()) store_baseline(cache_dir, key, Baseline{*r.fp32, r.tf32, r.measured_at});
}

}  // namespace kloop::detail
