// The timing loop of candidate_timing.h.
#include "evaluator/detail/candidate_timing.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <thread>
#include <vector>

#include "evaluator/check/compare.h"

namespace kloop::detail {

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

namespace {

// Chosen here, told only to the timer: after kMaxChecks checks in an
// evaluation (each costs the reference a forward) the chance drops fourfold,
// never to zero; the timing goes on until kMinChecks calls were checked.
constexpr int kMaxChecks = 6;
constexpr int kMinChecks = 2;
// How long after the timer's reply the candidate's may come for nothing to
// be counted: its worker's last steps and a loaded machine's scheduling.
constexpr double kLagSlack = 0.02;
// The handshake's floors: taken over this many empty calls. On a GPU the
// calls whose floors only go into the report (the handshake alone) are
// fewer than those the verdict subtracts (the timer drawing, flushing and
// capturing as in a timed call, kloop's small kernels where the call's work
// goes); where the timer's own spans are long (large inputs and outputs)
// fewer of those, so that they take about a quarter of a second, never
// fewer than 30.
// `floors`: their prep and copy are the calibration's (the handshake keeps them).
int handoff_calls(bool gpu, bool work, const wire::TimerFloors& floors) {
  if (!gpu) return 200;
  if (!work) return 50;
  const double per_call = 2 * (floors.prep + floors.copy) + 50e-6;
  return static_cast<int>(std::clamp(0.25 / per_call, 30.0, 120.0));
}

wire::TimerBatchReply reference_batch(WorkerSession& ref, const wire::TimerBatch& cmd, std::chrono::milliseconds timeout,
                                      double& reference_seconds) {
  const auto t0 = Clock::now();
  auto r = ref.call(cmd, timeout + std::chrono::seconds(30));
  reference_seconds += since(t0);
  if (!r) throw ReferenceDied("the timer (the reference's worker) failed: " + ref.failure() + "\n" + ref.log_tail());
  if (!r->ok()) throw EvaluationError("the timer failed: " + r->message() + "\n" + ref.log_tail());
  return r->reply;
}

}  // namespace

TimerState calibrate_timer(WorkerSession& ref, const wire::Case& c, const TimingRules& rules, const std::string& device,
                           std::chrono::milliseconds timeout) {
  wire::TimerCalibrate cmd;
  cmd.c = c;
  cmd.l2_flush = rules.l2_flush;
  auto r = ref.call(cmd, timeout);
  if (!r || !r->ok()) {
    throw EvaluationError("the timer could not calibrate (" + (r ? r->message() : ref.failure()) + ")\n" +
                          ref.log_tail());
  }
  if (ref.fds().size() != 1) throw EvaluationError("the timer's control block came without its descriptor");
  TimerState t;
  t.floors = r->reply.floors;
  t.control = std::move(ref.fds()[0]);
  t.control_bytes = r->reply.control_bytes;
  t.device = device;
  return t;
}

CallStatus attach_timer(TimerState& timer, WorkerSession& ref, WorkerSession& cand, std::chrono::milliseconds timeout) {
  wire::TimerAttach attach;
  attach.block = "control";
  attach.device = timer.device;
  attach.bytes = timer.control_bytes;
  const CallStatus attached = CallStatus::of(cand.call(attach, timeout, {timer.control.get()}));
  if (!attached.ok()) return attached;
  // The handshake alone, then (GPU) with kloop's small kernels where a
  // timed call's work goes: the floors hold the device's switches between
  // the two processes' contexts as the timed calls meet them.
  const bool gpu = timer.device != "cpu";
  CallStatus served = attached;
  for (const bool work : gpu ? std::vector<bool>{false, true} : std::vector<bool>{false}) {
    const int calls = handoff_calls(gpu, work, timer.floors);
    wire::TimerServe serve;
    serve.samples = calls;
    serve.first = timer.next;
    serve.empty = true;
    serve.work = work;
    if (!cand.send(serve)) return CallStatus::of(std::optional<wire::Outcome<wire::NoReply>>(cand.lost(timeout)));
    wire::TimerHandoff handoff;
    handoff.samples = calls;
    handoff.first = timer.next;
    handoff.deadline_ms = timeout.count();
    handoff.candidate_pid = cand.pid();
    handoff.work = work;
    timer.next += calls;
    auto h = ref.call(handoff, timeout + std::chrono::seconds(30));
    served = CallStatus::of(cand.await<wire::TimerServeReply>(timeout));
    if (!served.ok()) return served;
    if (!h || !h->ok()) {
      throw EvaluationError("the timer could not measure its handshake (" + (h ? h->message() : ref.failure()) + ")\n" +
                            ref.log_tail());
    }
    timer.floors = h->reply.floors;
    if (!work) timer.floors_plain = h->reply.floors;
  }
  return served;
}

CandidateTiming time_candidate(WorkerSession& ref, WorkerSession& cand, TimerState& timer, const TimedRun& run,
                               const ReplyCheck& check_reply, double& candidate_seconds, double& reference_seconds) {
  const auto cand_call = [&](const auto& cmd, const std::vector<int>& fds = {}) {
    const auto t0 = Clock::now();
    auto r = cand.call(cmd, run.timeout, fds);
    candidate_seconds += since(t0);
    check_reply(CallStatus::of(r));
    return r->reply;
  };
  const auto ref_call = [&](const auto& cmd) {
    const auto t0 = Clock::now();
    auto r = ref.call(cmd, run.timeout);
    reference_seconds += since(t0);
    if (!r) throw ReferenceDied("the timer (the reference's worker) failed: " + ref.failure() + "\n" + ref.log_tail());
    if (!r->ok()) throw EvaluationError("the timer failed: " + r->message() + "\n" + ref.log_tail());
    return r->reply;
  };
  // The timing case in the reference (its module computes the checks), its
  // shared block in both workers, the candidate's module warmed up.
  ref_call(wire::Prepare{run.dir, run.timed_case});
  const wire::TimerOpenReply opened = ref_call(wire::TimerOpen{run.timed_case});
  if (ref.fds().size() != 1) throw EvaluationError("the timer's data block came without its descriptor");
  UniqueFd data = std::move(ref.fds()[0]);
  wire::TimerAttach attach;
  attach.block = "data";
  attach.device = timer.device;
  attach.bytes = opened.layout.bytes;
  attach.layout = opened.layout;
  cand_call(attach, {data.get()});
  cand_call(run.setup);

  Unpredictable random;
  CandidateTiming out;
  double observed = 0, outside = 0, windows = 0;
  int processes_ended = 0, unsettled = 0, unwatched = 0, watched = 0;
  double lagged = 0;  // the candidate's replies after the timer's, beyond kLagSlack
  std::string ended_process;
  // The rule's wall clock moves between batches only: a batch's calls were
  // all timed, so none of them is dropped for the time the batch took.
  double rule_clock = 0;
  StoppingRule rule(run.rules, [&rule_clock] { return rule_clock; });
  std::vector<double> spans;
  std::vector<double> preps, windows_seen, tails, captures, betweens;  // the spans as measured (a diagnosis)
  auto run_batch = [&](int n, double per_call, bool count) {
    wire::TimerBatch cmd;
    cmd.samples = n;
    cmd.first = timer.next;
    cmd.l2_flush = run.rules.l2_flush;
    cmd.tolerance = run.tolerance;
    cmd.candidate_pid = cand.pid();
    cmd.threads = run.cpu_threads;
    cmd.deadline_ms = run.timeout.count();
    for (int i = 0; i < n && run.checks; ++i) {
      const double chance = out.checked_calls + static_cast<int>(cmd.check.size()) >= kMaxChecks ? per_call / 4 : per_call;
      if (!random.chance(std::min(1.0, chance))) continue;
      cmd.check.push_back(i);
      if (run.precision && out.error_analysis.empty() && cmd.precision.empty() && random.chance(0.5)) {
        cmd.precision.push_back(i);
      }
    }
    timer.next += static_cast<uint32_t>(n);
    wire::TimerServe serve;
    serve.samples = n;
    serve.first = cmd.first;
    const auto t0 = Clock::now();
    if (!cand.send(serve)) check_reply(CallStatus::of(std::optional<wire::Outcome<wire::NoReply>>(cand.lost(run.timeout))));
    const wire::TimerBatchReply r = reference_batch(ref, cmd, run.timeout, reference_seconds);
    // Whatever the candidate's worker says next, its side forged the handshake.
    if (r.forged) throw ProtocolViolation("the timed calls stopped: " + r.aborted.value_or("a forged handshake"));
    const auto timer_done = Clock::now();
    auto served = cand.await<wire::TimerServeReply>(run.timeout);
    const double seconds = since(t0);
    // GPU: the candidate's worker replies once its last call's work is
    // done: a reply long after the timer saw the batch's calls end is work
    // that ran behind them (a handshake said early), counted in the batch's
    // calls. (On the CPU each call ends only when its processes are quiet.)
    const double lag = run.cpu ? 0.0 : since(timer_done);
    candidate_seconds += seconds - r.check_seconds;
    reference_seconds += r.check_seconds;
    out.checking_seconds += r.check_seconds;
    check_reply(CallStatus::of(served));
    if (r.aborted) throw ProtocolViolation("the timed calls stopped (" + *r.aborted + ") though the worker said it served them");
    if (r.samples.size() != static_cast<std::size_t>(n)) throw EvaluationError("the timer returned too few samples");
    out.persisting_l2_limit = std::max(out.persisting_l2_limit, static_cast<long long>(served->reply.persisting_l2_limit));
    out.persisting_l2_window_bytes =
        std::max(out.persisting_l2_window_bytes, static_cast<long long>(served->reply.persisting_l2_window_bytes));
    observed += seconds - r.check_seconds;
    processes_ended += r.processes_ended;
    unsettled += r.unsettled;
    if (r.ended_process && ended_process.empty()) ended_process = *r.ended_process;
    const double behind = std::max(0.0, lag - kLagSlack);
    outside += behind;
    lagged += behind;
    for (const auto& s : r.samples) {
      if (s.unwatched) {
        // The timer's thread was switched out during the call: its spans
        // hold the host's time, so the call is left out of the timing
        // altogether (a candidate that keeps the timer off the CPU gets
        // no figure at all: the timing runs past its budget).
        ++unwatched;
        continue;
      }
      outside += s.outside;
      ++watched;
      windows += std::max(0.0, s.window - timer.floors.window);
      preps.push_back(s.prep);
      windows_seen.push_back(s.window);
      tails.push_back(s.tail);
      if (s.capture) captures.push_back(*s.capture);
      if (s.between > 0) betweens.push_back(s.between);
      if (!count || rule.done()) continue;  // the batch overshot the stopping point
      if (s.throttled && out.throttled_discarded < kMaxThrottledDiscards) {
        ++out.throttled_discarded;
        continue;
      }
      rule.add(s.seconds + behind / static_cast<double>(r.samples.size()));
      spans.push_back(run.cpu ? s.window : s.window + s.tail);  // the CPU's window holds its tail
    }
    rule_clock = observed;
    for (const auto& c : r.checks) {
      ++out.checked_calls;
      if (c.error_analysis) {
        for (const auto& row : *c.error_analysis) out.error_analysis.push_back(row);
      }
      if (c.passed || !out.timed_wrong.empty()) continue;
      out.timed_wrong = c.message;
      for (const auto& cmp : c.outputs) {
        if (!out.timed_wrong.empty() || cmp.value("passed", false)) continue;
        out.timed_wrong = describe_failed_output(comparison_from_json(cmp), tolerance_from_json(run.tolerance));
      }
      if (out.timed_wrong.empty()) out.timed_wrong = "its outputs did not match the reference's";
    }
    return r;
  };
  int batch = std::max(1, std::min(run.rules.min_samples, 1000));
  while (!rule.done()) {
    const wire::TimerBatchReply r = run_batch(batch, run.check_chance / batch, true);
    const auto& taken = rule.samples();
    const double median = taken.empty() ? 1e-3 : summarize(taken).median;
    double per_call = median;
    if (!r.samples.empty()) per_call = observed / std::max<std::size_t>(1, rule.samples().size());
    // About 0.1 s per batch: few round trips, and no batch the timeout could cut.
    batch = static_cast<int>(std::clamp(0.1 / std::max(per_call, 1e-7), 1.0, 1000.0));
    batch = std::max(1, std::min(batch, run.rules.max_samples - static_cast<int>(taken.size())));
    if (observed > 4 * run.rules.max_seconds + 30) {
      throw EvaluationError("timing went on far past its budget (" + std::to_string(observed) + " s)");
    }
  }
  for (int extra = 0; run.checks && extra < 4 * kMinChecks && out.checked_calls < kMinChecks; ++extra) {
    run_batch(1 + random.below(std::min(batch, 8)), 0.5, false);
  }
  ref_call(wire::TimerClose{});
  cand_call(wire::TimerClose{});
  out.summary = rule.summary();
  out.wall = summarize(spans);
  // Work outside its calls is already counted in each sample; much of it
  // is a finding too (an honest module has none).
  // Well beyond what an honest worker's own steps after a call cost, even
  // on a loaded machine: half the time inside the calls, and 200 us per
  // call on the CPU, 100 us on a GPU. (On an H100 honest small kernels
  // counted 18-37 us a call there, above the handshake's spread: the
  // device's switches between the two contexts around the timer's drawing,
  // flush and copies; the forgers of tests/gpu/fixtures counted 0.5-1 ms a
  // call. The finding only names the work: it is in the time either way.)
  const double per_call = run.cpu ? 200e-6 : 100e-6;
  // Less what honest calls count there on average (the handshake's own
  // spread above its floors, GPU).
  const double beyond_noise = outside - timer.floors.outside_noise * static_cast<double>(watched);
  if (beyond_noise > 0.5 * windows && beyond_noise > per_call * static_cast<double>(rule.samples().size() + 1)) {
    out.outside_work = std::to_string(outside * 1e3) + " ms of the candidate's work fell outside its timed calls, against " +
                       std::to_string(windows * 1e3) + " ms inside them";
  } else if (processes_ended > 0) {
    out.outside_work = std::to_string(processes_ended) + " of its processes (the first: " + ended_process.substr(0, 200) +
                       ") ended during its timed calls, so their work there cannot be counted";
  }
  const auto quantile_of = [](std::vector<double> v, double q) {
    if (v.empty()) return 0.0;
    const auto k = static_cast<std::ptrdiff_t>(q * static_cast<double>(v.size() - 1));
    std::nth_element(v.begin(), v.begin() + k, v.end());
    return v[static_cast<std::size_t>(k)];
  };
  const auto median_of = [&](std::vector<double> v) { return quantile_of(std::move(v), 0.5); };
  out.check = {{"source", "trusted timer (the reference's process)"},
               {"floors", timer.floors},
               {"spans_median",
                {{"prep", median_of(preps)},
                 {"window", median_of(windows_seen)},
                 {"tail", median_of(tails)},
                 {"capture", median_of(captures)},
                 {"between", median_of(betweens)}}},
               {"spans_p90",
                {{"prep", quantile_of(preps, 0.9)},
                 {"window", quantile_of(windows_seen, 0.9)},
                 {"tail", quantile_of(tails, 0.9)},
                 {"capture", quantile_of(captures, 0.9)},
                 {"between", quantile_of(betweens, 0.9)}}},
               {"outside_seconds", outside},
               {"floors_alone", timer.floors_plain},
               {"processes_ended", processes_ended},
               {"unsettled_calls", unsettled},
               {"unwatched_calls", unwatched},
               {"reply_lag_seconds", lagged},
               {"inside_seconds", windows},
               {"checked_calls", out.checked_calls},
               {"observed_seconds", observed}};
  const auto post_call = random.call_id();
  wire::TimePost post = run.post;
  post.call = post_call;
  post.name = "timing.post";
  out.post_call = post_call;
  out.post_exchange = cand_call(post).exchange.value_or(json());
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
