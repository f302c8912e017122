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
                               const json* fresh_case) {
  constexpr int kSamples = 200;
  json cmd = {{"op", "timing_floor"}, {"samples", kSamples}, {"l2_flush", rules.l2_flush}};
  if (fresh_case) {
    cmd["case"] = *fresh_case;
    cmd["first_call"] = int64_t{1} << 40;  // values do not matter here, only the drawing's cost
  }
  const auto t0 = Clock::now();
  auto r = ref.call_stepwise(cmd, timeout, [](const json&) {});
  const double wall = since(t0);
  if (!r || !r->value("ok", false)) throw EvaluationError("the reference could not run the timing loop");
  return wall / kSamples;
}

int granted_cpu_threads(const EvalOptions& o) {
  if (o.threads > 0) return o.threads;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  return std::max(1u, std::thread::hardware_concurrency());
}

int64_t fresh_call_id(uint64_t random) { return static_cast<int64_t>((random >> 2) | (uint64_t{1} << 40)); }

json timing_case_of(const json& c, int sets, uint64_t nonce) {
  json t = c;
  t["seed"] = nonce;
  t["calls"] = std::max(2, sets);
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

CandidateTiming time_candidate(WorkerSession& cand, const json& setup_cmd, const TimingRules& rules, bool cpu,
                               int cpu_threads, double overhead_per_sample, std::chrono::milliseconds timeout,
                               const std::function<void(const std::optional<json>&)>& check_reply,
                               double& candidate_seconds, json post_cmd, const TimedCallCheck& check_call,
                               double check_chance, bool fresh) {
  auto call = [&](const json& cmd) {
    const auto t0 = Clock::now();
    auto r = cand.call(cmd, timeout);
    const double seconds = since(t0);
    candidate_seconds += seconds;
    check_reply(r);
    return std::make_pair(*r, seconds);
  };
  Unpredictable random;
  json setup_cmd_sent = setup_cmd;
  if (fresh) setup_cmd_sent["warmup_first_call"] = random.call_id();
  auto [setup, setup_seconds] = call(setup_cmd_sent);
  (void)setup_seconds;
  const int sets = static_cast<int>(setup_cmd.at("case").value("calls", 1));
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
    json order = json::array();
    for (int i = 0; i < n && !fresh; ++i) order.push_back(next_set());
    json batch_cmd = {{"op", "time_batch"}, {"samples", n}, {"l2_flush", rules.l2_flush}};
    if (fresh) {
      batch_cmd["first_call"] = first;
    } else {
      batch_cmd["sets"] = order;
    }
    double checking = 0;
    int next_step = 0;
    auto on_step = [&](const json& step) {
      const json& i_json = step["sample_done"];
      if (!i_json.is_number_integer() || i_json.get<int>() != next_step) {
        throw ProtocolViolation("a timing batch stopped at a sample out of order");
      }
      const int i = next_step++;
      if (!checkable) return;
      const int set = fresh ? -1 : order[static_cast<std::size_t>(i)].get<int>();
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
    check_reply(reply);
    const json& r = *reply;
    if (next_step != n) throw ProtocolViolation("a timing batch did not stop after each of its samples");
    const json samples = r.value("samples", json()), walls = r.value("wall", json()), thr = r.value("throttled", json());
    if (!samples.is_array() || samples.size() != static_cast<std::size_t>(n) || !walls.is_array() ||
        walls.size() != samples.size() || !thr.is_array() || thr.size() != samples.size()) {
      throw ProtocolViolation("a timing batch did not return the " + std::to_string(n) + " samples asked for");
    }
    ++batches;
    run += n;
    observed += seconds;
    for (std::size_t i = 0; i < samples.size(); ++i) {
      const double t = samples[i].is_number() ? samples[i].get<double>() : -1;
      const double w = walls[i].is_number() ? walls[i].get<double>() : -1;
      if (!std::isfinite(t) || t < 0 || t > 1e4 || !std::isfinite(w) || w < 0 || w > 1e4 || !thr[i].is_boolean()) {
        throw ProtocolViolation("a timing sample that is not a time");
      }
      claimed += t;
      if (!count || rule.done()) continue;  // the batch overshot the stopping point
      if (thr[i].get<bool>() && out.throttled_discarded < kMaxThrottledDiscards) {
        ++out.throttled_discarded;
        continue;
      }
      rule.add(t);
      wall.push_back(w);
    }
    if (const json& l2 = r.value("persisting_l2_limit", json(0)); l2.is_number() && l2.get<double>() != 0) {
      out.persisting_l2_limit = std::max(out.persisting_l2_limit, l2.get<long long>());
    }
    if (const json& w = r.value("persisting_l2_window_bytes", json(0)); w.is_number() && w.get<double>() != 0) {
      out.persisting_l2_window_bytes = std::max(out.persisting_l2_window_bytes, w.get<long long>());
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
    post_cmd["call"] = *out.post_call;
    post_cmd["name"] = "timing.post";
  }
  auto [post, unused] = call(post_cmd);
  (void)unused;
  out.post_exchange = post.value("exchange", json());
  return out;
}

void reference_baseline(WorkerSession& ref, const json& c, const BaselineKey& key, const TimingRules& rules, bool cpu,
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
  auto reply = ref.call({{"op", "baseline"}, {"case", c}, {"rules", to_json(rules)}}, timeout);
  if (!reply || !reply->value("ok", false)) {
    r.error = reply ? reply->value("message", "baseline failed") : ref.failure() + "\n" + last_lines(ref.log_tail(), 5);
    return;
  }
  r.fp32 = summary_from_json(reply->at("fp32").at("timing"));
  const int fp32_discarded = reply->at("fp32").value("throttled_discarded", 0);
  int tf32_discarded = 0;
  if (reply->contains("tf32")) {
    r.tf32 = summary_from_json(reply->at("tf32").at("timing"));
    tf32_discarded = reply->at("tf32").value("throttled_discarded", 0);
  }
  r.throttled_discarded = fp32_discarded + tf32_discarded;
  r.input_bytes = reply->value("input_bytes", 0.0);
  r.measured_at = utc_now();
  if (cpu) return;
  r.not_cached = baseline_not_kept(fp32_discarded, tf32_discarded);
  if (r.not_cached.empty()) store_baseline(cache_dir, key, Baseline{*r.fp32, r.tf32, r.measured_at});
}

}  // namespace kloop::detail
