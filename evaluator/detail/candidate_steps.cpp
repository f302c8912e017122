// The steps of one candidate's evaluation after both workers started
// (candidate_steps.h).
#include "evaluator/detail/candidate_steps.h"

#include <fmt/format.h>

#include <algorithm>

#include "evaluator/build/build_config.h"
#include "evaluator/detail/activity_checks.h"
#include "evaluator/detail/candidate_timing.h"
#include "evaluator/judge.h"
#include "evaluator/timing/device_figures.h"

namespace kloop::detail {

namespace {
// GPU: twice one small kernel's launch and run where no calibration of the
// device says it (an H100's is about 4.3 us): a candidate's time below
// twice that is launch-bound and gets no speedup.
constexpr double kLaunchBoundDefault = 10e-6;

// Part of the cached reference counters' key: bump it when the profiler's
// metric set (RangeProfiler::metric_names) or their JSON form changes.
constexpr int kReferenceMetricsFormat = 1;

}  // namespace

CandidateSteps::CandidateSteps(const ProblemSpec& spec, const Protocol& protocol, const EvalOptions& options,
                               const TimingRules& rules, std::string cache_dir, const WorkDir& work, WorkerSession& ref,
                               WorkerSession& cand, Verdict& v, Finish finish)
    : spec_(spec),
      protocol_(protocol),
      options_(options),
      rules_(rules),
      cache_dir_(std::move(cache_dir)),
      cpu_(options.device == "cpu"),
      work_(work),
      ref_(ref),
      cand_(cand),
      v_(v),
      finish_(std::move(finish)) {}

std::optional<Verdict> CandidateSteps::worker_failed(const CallStatus& r) {
  if (r.ok()) return std::nullopt;
  // Died before it announced a phase: it never loaded the module, so
  // nothing of the candidate's ran; the machine could not start it.
  if (!r.replied && !cand_.started()) {
    throw EnvironmentError("the candidate's worker ended before it started (" + cand_.failure() + ")");
  }
  WorkerFailure seen = cand_.failure_observed();
  if (r.replied) seen = {WorkerFailure::Kind::kReplied, r.failure->error_class, r.failure->message};
  v_.log_tail = cand_.log_tail();
  const FailureJudgement judged = judge_failure(seen);
  if (judged.finding) v_.integrity.push_back(*judged.finding);
  // A process that could not fork or start a thread may have met the
  // machine's limits rather than its own: evaluated again before it stands.
  const VerdictClass c = judged.decision.verdict;
  if ((c == VerdictClass::kLoadError || c == VerdictClass::kRuntimeError) &&
      machine_exhausted(seen.message + "\n" + v_.log_tail)) {
    v_.environment_fault = "the candidate's process ran out of processes, threads or memory (" +
                           judged.decision.message.substr(0, 300) + ")";
  }
  return finish_(judged.decision.verdict, judged.decision.message);
}

void CandidateSteps::reference_failed(const std::string& error_class, const std::string& message,
                                      const std::string& what) {
  if (error_class == "out_of_memory") {
    v_.log_tail = cand_.log_tail();
    // Another evaluation's memory, or the candidate's: evaluated again
    // before this verdict stands (a candidate that always leaves no room
    // gets it).
    v_.environment_fault = "the reference ran out of memory beside the candidate";
    throw CandidateFailed{finish_(VerdictClass::kRuntimeError,
                                  "out of memory beside the candidate: the reference could not judge it (" +
                                      message.substr(0, 600) +
                                      "); the candidate's process must leave the device room for the reference")};
  }
  throw EvaluationError(what + " failed (" + message + ")\n" + ref_.log_tail());
}

// What the candidate claims it published, rebuilt from what kloop knows:
// file paths are kloop's own (the candidate's folder, the call's stem),
// never a path from the reply; from a cuda_ipc description only the layout
// is taken, which the judge bounds-checks against the mapped memory.
json CandidateSteps::trusted_exchange(const json& claimed, const std::string& stem) const {
  if (!claimed.is_object() || !claimed.contains("transport") || !claimed["transport"].is_string()) {
    throw ProtocolViolation("the reply does not say how the outputs were published");
  }
  const std::string via = claimed["transport"];
  if (via == "file") {
    return {{"transport", "file"},
            {"outputs", {{"path", stem + ".outputs.safetensors"}}},
            {"inputs", {{"path", stem + ".inputs.safetensors"}}}};
  }
  if (via != "cuda_ipc") throw ProtocolViolation("unknown transport '" + via.substr(0, 40) + "'");
  if (!claimed.contains("bytes") || !claimed["bytes"].is_number_unsigned() || !claimed.contains("tensors") ||
      !claimed["tensors"].is_array() || claimed["tensors"].size() > 4096) {
    throw ProtocolViolation("a cuda_ipc description without a valid size and tensor list");
  }
  return {{"transport", "cuda_ipc"}, {"bytes", claimed["bytes"]}, {"tensors", claimed["tensors"]}};
}

wire::JudgeReply CandidateSteps::judge(const json& claimed, const std::string& stem, bool post, bool keep,
                                       bool analyze) {
  if (claimed.is_object() && claimed.contains("fallback_reason") && v_.exchange == "cuda_ipc") {
    // The candidate could not export CUDA IPC memory and published files.
    v_.exchange = "file (cuda_ipc failed: " + claimed["fallback_reason"].dump().substr(0, 300) + ")";
  }
  wire::Judge cmd;
  cmd.exchange = trusted_exchange(claimed, stem);
  cmd.tolerance = tolerance_;
  cmd.post = post;
  cmd.keep_for_next_call = keep;
  cmd.error_analysis = analyze;
  cmd.exact_allowance = analyze && protocol_.precision_check;
  cmd.defer_analysis = analyze;
  auto send_fds = [&] {
    std::vector<int> fds;
    if (cmd.exchange["transport"] == "cuda_ipc") {
      if (cand_.fds().size() != 1) throw ProtocolViolation("a cuda_ipc reply must carry exactly one descriptor");
      fds.push_back(cand_.fds()[0].get());
    }
    return fds;
  };
  const auto t0 = Clock::now();
  auto answer = ref_.call(cmd, options_.run_timeout, send_fds());
  v_.phases.compare += since(t0);
  if (answer && !answer->ok() && v_.exchange == "cuda_ipc") {
    // The driver or the container refused CUDA IPC: the same tensors as
    // files, and files for the rest of this evaluation.
    v_.exchange = "file (cuda_ipc failed: " + answer->message() + ")";
    auto exported = cand_call(wire::Export{"file"}, options_.run_timeout);
    if (auto bad = worker_failed(CallStatus::of(exported))) throw CandidateFailed{*bad};
    cmd.exchange = trusted_exchange(exported->reply.exchange.value_or(json()), stem);
    answer = ref_.call(cmd, options_.run_timeout, send_fds());
  }
  if (!answer) throw ReferenceDied(ref_.failure() + "\n" + ref_.log_tail());
  if (!answer->ok()) {
    // What the candidate published could not be read: its failure.
    if (answer->error_class() == "exchange_error") {
      throw ProtocolViolation("its published tensors are unreadable (" + answer->message() + ")");
    }
    reference_failed(answer->error_class(), answer->message(), "judging the candidate of " + spec_.name);
  }
  return answer->reply;
}

namespace {

std::string shapes_text(const std::vector<std::vector<int64_t>>& shapes) {
  std::string out;
  for (std::size_t i = 0; i < shapes.size() && i < 8; ++i) {
    out += i ? ", [" : "[";
    for (std::size_t k = 0; k < shapes[i].size(); ++k) out += (k ? "," : "") + std::to_string(shapes[i][k]);
    out += "]";
  }
  if (shapes.size() > 8) out += ", ...";
  return out;
}

// Why strict's non-identity norm values cannot be applied to this
// candidate, or "" when its norm layers (the weight shapes it reports, in
// the order it built them) are the reference's (registration order).
std::string norm_layers_mismatch(const std::vector<std::vector<int64_t>>& reference,
                                 const std::vector<std::vector<int64_t>>& candidate) {
  if (reference == candidate) return "";
  if (candidate.empty()) {
    return "ModelNew builds no norm layer kloop can set (torch.nn BatchNorm, InstanceNorm, LayerNorm or GroupNorm "
           "with affine parameters) where the reference has " +
           std::to_string(reference.size()) + " (" + shapes_text(reference) + ")";
  }
  return "ModelNew's norm layers (" + std::to_string(candidate.size()) + ": " + shapes_text(candidate) +
         ") are not the reference's (" + std::to_string(reference.size()) + ": " + shapes_text(reference) +
         "), so kloop cannot hand both the same values";
}

}  // namespace

std::optional<Verdict> CandidateSteps::run_tests(const std::vector<TestCase>& tests, std::vector<wire::Case>& cases,
                                                 int calls) {
  // Outputs travel by CUDA IPC on a GPU, by files on the CPU.
  v_.exchange = !options_.output_transport.empty() ? options_.output_transport : cpu_ ? "file" : "cuda_ipc";
  if (v_.exchange != "file" && v_.exchange != "cuda_ipc") {
    throw EvaluationError("output transport '" + v_.exchange + "': expected file or cuda_ipc");
  }
  inputs_via_ = !options_.input_transport.empty() ? options_.input_transport : cpu_ ? "draw" : "cuda_ipc";
  if (inputs_via_ != "draw" && inputs_via_ != "file" && inputs_via_ != "cuda_ipc") {
    throw EvaluationError("input transport '" + inputs_via_ + "': expected draw, file or cuda_ipc");
  }
  v_.input_exchange = inputs_via_ == "draw" ? "drawn" : inputs_via_;
  tolerance_ = to_json(protocol_.tolerance);
  std::vector<std::string> input_names;
  for (const auto& in : spec_.inputs) input_names.push_back(in.name);
  // Strict's non-identity norm values under seeded construction: the
  // reference's norm layers, from the first case's prepare.
  std::optional<std::vector<std::vector<int64_t>>> reference_norms;
  for (std::size_t ti = 0; ti < tests.size(); ++ti) {
    const TestCase& t = tests[ti];
    const wire::Case& c = cases[ti];
    const wire::PrepareReply prepared =
        ref_call(wire::Prepare{work_.shared(), c}, options_.run_timeout, v_.phases.reference);
    if (ti == 0) reference_norms = prepared.norm_layers;
    for (int call = 0; call < calls; ++call) {
      CallObservation o;
      o.test.case_id = t.id;
      o.test.call = call;
      o.test.label = t.label();
      o.test.scaling = t.scaling;
      o.test.variant = t.variant;
      o.test.centered = t.centered;
      const bool first = ti == 0 && call == 0;
      // The fp64 twin: the first call (--fp64-reference, and strict's
      // precision check), and under strict every call of the centered
      // case, whose outputs strict judges against it where fp32 itself
      // strays (compare_with_exact_allowance).
      const bool analyzed =
          (options_.fp64_reference && (first || options_.fp64_every_call)) || (protocol_.precision_check && ((ti == 0 && call == 0) || t.centered));
      const wire::Expect expect_cmd{work_.shared(), c, call, first, analyzed, inputs_via_ != "draw" ? inputs_via_ : ""};
      const wire::ExpectReply expected = ref_call(expect_cmd, options_.run_timeout, v_.phases.reference);
      if (expected.inputs_exchange_error) {
        // The reference could not publish them: the candidate draws them
        // itself (same generator, same seed) from here on.
        v_.input_exchange = "drawn (" + inputs_via_ + " failed: " + *expected.inputs_exchange_error + ")";
        inputs_via_ = "draw";
      }
      const int expected_count = static_cast<int>(expected.output_shapes.size());
      o.expected_count = expected_count;
      if (expected_count != spec_.outputs) {
        throw EvaluationError(spec_.spec_path + ": field 'outputs': says " + std::to_string(spec_.outputs) +
                              " but the reference returns " + std::to_string(expected_count));
      }
      wire::Run run_cmd{work_.shared(), work_.sandbox(), c, call, transport(), expected.inputs_exchange};
      std::vector<int> input_fds;
      if (expected.inputs_exchange && expected.inputs_exchange->value("transport", "") == "cuda_ipc") {
        if (ref_.fds().size() != 1) throw EvaluationError("the reference published CUDA inputs without a descriptor");
        input_fds.push_back(ref_.fds()[0].get());
      }
      auto ran = cand_call(run_cmd, options_.run_timeout, input_fds);
      if (ran && ran->error_class() == "exchange_error") {
        // The candidate could not map the reference's inputs: it draws them
        // itself (same generator, same seed) from here on.
        if (inputs_via_ != "cuda_ipc")
          throw ProtocolViolation("it reported an input exchange error for inputs it was not sent");
        v_.input_exchange = "drawn (cuda_ipc failed: " + ran->message() + ")";
        inputs_via_ = "draw";
        run_cmd.inputs_exchange.reset();
        ran = cand_call(run_cmd, options_.run_timeout);
      }
      if (auto bad = worker_failed(CallStatus::of(ran))) return *bad;
      const wire::RunReply& info = ran->reply;
      // Named, not judged (the candidate's own claim): at most a few, short.
      for (const auto& name : info.runtime_builds) {
        const std::string shown = name.substr(0, 100);
        if (v_.runtime_builds.size() < 8 &&
            std::find(v_.runtime_builds.begin(), v_.runtime_builds.end(), shown) == v_.runtime_builds.end()) {
          v_.runtime_builds.push_back(shown);
        }
      }
      if (ti == 0 && call == 0 && reference_norms) {
        const std::string why = norm_layers_mismatch(*reference_norms, info.norm_layers.value_or(
                                                                           std::vector<std::vector<int64_t>>{}));
        if (!why.empty()) {
          // Not applied, rather than failing a correct kernel: every case
          // keeps the norm layers' own initialisation, from the start.
          v_.checks_not_applied.push_back("non-identity norm parameters: " + why);
          for (auto& each : cases) each.randomize_identity_params = false;
          return run_tests(tests, cases, calls);
        }
      }
      for (const auto& a : info.aliases) {
        if (a.output < 0 || a.output >= expected_count || a.input < 0 ||
            a.input >= static_cast<int>(spec_.inputs.size())) {
          throw ProtocolViolation("an aliasing report names output " + std::to_string(a.output) + " and input " +
                                  std::to_string(a.input) + ", which do not exist");
        }
      }
      o.aliases = info.aliases;
      o.wrong_device = info.wrong_device;
      if (o.wrong_device.empty()) {
        const std::string stem =
            work_.sandbox() + "/case" + std::to_string(t.id) + ".call" + std::to_string(call) + ".candidate";
        o.judged = judge(info.exchange.value_or(json()), stem, false, call + 1 < calls, analyzed);
        if (o.judged->error_analysis) {
          if (!v_.error_analysis.is_array()) v_.error_analysis = json::array();
          for (const auto& r : *o.judged->error_analysis) {
            json row = r;
            row["case"] = t.label();
            v_.error_analysis.push_back(std::move(row));
          }
        }
        v_.fp64_unavailable = o.judged->fp64_unavailable.value_or(v_.fp64_unavailable);
        if (o.judged->fp64_deferred) {
          v_.fp64_deferred = "the fp64 twin did not run beside the candidate (" +
                             o.judged->fp64_deferred->substr(0, 300) + "); analyzed after its process ended";
        }
      }
      CallJudgement judged = judge_call(o, protocol_, input_names, options_.device);
      v_.integrity.insert(v_.integrity.end(), judged.findings.begin(), judged.findings.end());
      v_.tests.push_back(std::move(judged.outcome));
    }
  }

  if (const auto decided = judge_tests(v_.tests, v_.integrity, protocol_)) {
    cand_.finish();
    return finish_(decided->verdict, decided->message);
  }

  return std::nullopt;
}

std::optional<Verdict> CandidateSteps::time_and_audit(const std::vector<TestCase>& tests,
                                                      const std::vector<wire::Case>& cases, int calls,
                                                      const json& device_info, const std::string& reference_key,
                                                      TimerState& timer) {
  // The reference's trace, for the candidate's activity audit (its
  // baseline was taken before the candidate started). Only a correct
  // candidate needs it.
  std::optional<wire::ProfileReply> reference_profile;
  if (!cpu_ && options_.activity_audit) {
    // The trace is taken every time (the audit compares this run's
    // launches); the counters come from the cache when this reference
    // was profiled before on this device, since their replay passes
    // cost tens of seconds at upstream sizes.
    const BaselineKey counters_key{spec_.name,  reference_key,       json(tests[0].dims),
                                   device_info, KLOOP_TORCH_VERSION, {{"counters", kReferenceMetricsFormat}},
                                   precision_name(protocol_.precision)};
    std::optional<json> cached_metrics;
    if (options_.profile) cached_metrics = load_reference_metrics(cache_dir_, counters_key);
    const auto t0 = Clock::now();
    wire::Profile profile_cmd;
    profile_cmd.dir = work_.shared();
    profile_cmd.c = cases[0];
    profile_cmd.counters = options_.profile && !cached_metrics;
    auto r = ref_.call(profile_cmd, options_.run_timeout);
    v_.phases.reference += since(t0);
    if (!r)
      throw EvaluationError("the reference of " + spec_.name + " failed (" + ref_.failure() + ")\n" + ref_.log_tail());
    if (r->ok()) {
      reference_profile = r->reply;
      if (cached_metrics) {
        reference_profile->metrics = *cached_metrics;
      } else if (options_.profile && reference_profile->metrics &&
                 reference_profile->metrics->value("unavailable", "").empty() &&
                 !reference_profile->metrics->value("kernels", json::array()).empty()) {
        store_reference_metrics(cache_dir_, counters_key, *reference_profile->metrics);
      }
    }
  }

  // Timing by the trusted timer, then one more call that must still be
  // correct. The timer's inputs come from a nonce the candidate never sees;
  // its warm-up and the call after timing from another (case 0's model and
  // weights, never a test input, never an earlier run's).
  Unpredictable random;
  TimedRun run;
  run.timed_case = timing_case_of(cases[0], 1, random.nonce());
  const wire::Case warm_case = timing_case_of(cases[0], 1, random.nonce());
  run.setup = wire::TimeSetup{work_.shared(), warm_case, cases[0], to_json(rules_), false, random.call_id()};
  run.post = wire::TimePost{work_.sandbox(), transport(), std::nullopt, std::nullopt};
  run.rules = rules_;
  run.cpu = cpu_;
  run.cpu_threads = granted_cpu_threads(options_);
  run.dir = work_.shared();
  run.timeout = options_.run_timeout;
  run.tolerance = to_json(protocol_.tolerance);
  run.check_chance = options_.timed_check_chance;
  run.checks = options_.timed_check_chance > 0;
  run.precision = protocol_.precision_check;
  const CandidateTiming timed = time_candidate(
      ref_, cand_, timer, run,
      [&](const CallStatus& r) {
        if (auto bad = worker_failed(r)) throw CandidateFailed{*bad};
      },
      v_.phases.candidate, v_.phases.reference);
  v_.candidate_time = timed.summary;
  v_.phases.timed_checks = timed.checking_seconds;
  v_.throttled_samples_discarded = timed.throttled_discarded;
  v_.timing_check = timed.check;
  for (const auto& row : timed.error_analysis) {
    if (!v_.error_analysis.is_array()) v_.error_analysis = json::array();
    json r = row;
    r["case"] = "timed call";
    v_.error_analysis.push_back(std::move(r));
  }
  TimingObservation seen;
  seen.cpu = cpu_;
  seen.timed_wrong = timed.timed_wrong;
  seen.outside_work = timed.outside_work;
  if (!timed.error_analysis.empty()) {
    TestOutcome timed_call;
    judge_precision(timed_call, timed.error_analysis, protocol_);
    if (!timed_call.problem.empty() && seen.timed_wrong.empty()) seen.timed_wrong = "precision: " + timed_call.problem;
  }
  // Judged now: the activity audit below replaces what the candidate holds.
  {
    ref_call(wire::Expect{work_.shared(), warm_case, *timed.post_call, false, false, ""}, options_.run_timeout,
             v_.phases.reference);
    const wire::JudgeReply j = judge(timed.post_exchange, work_.sandbox() + "/timing.post", false, false);
    seen.still_correct = j.output_count == j.expected_count;
    for (const auto& cmp : j.outputs) seen.still_correct = seen.still_correct && cmp.value("passed", false);
  }
  // GPU: the least time compared with the reference (below).
  double launch_bound = 0;
  if (!cpu_) {
    seen.headline_seconds = v_.candidate_time->headline(rules_.statistic);
    seen.resolution_seconds = v_.timing_check.value("floors", json::object()).value("resolution", 0.0);
    launch_bound = kLaunchBoundDefault;
    if (auto cal = load_calibration(cache_dir_, device_info)) {
      if (cal->small_kernel_seconds > 0) launch_bound = 2 * cal->small_kernel_seconds;
      const DimValues& d = tests[0].dims;
      const SpeedOfLight sol = speed_of_light(spec_.flop_count(d), spec_.byte_count(d), *cal);
      v_.sol_floor_seconds = sol.floor_seconds;
      v_.sol_bound = sol.bound;
      if (seen.headline_seconds > 0) v_.sol_percent = 100.0 * sol.floor_seconds / seen.headline_seconds;
      seen.floor_seconds = sol.floor_seconds;
      seen.floor_bound = sol.bound;
    }
    v_.candidate_wall = timed.wall;
    if (options_.activity_audit) {
      const auto audit_start = Clock::now();
      seen.activity.push_back(audit_candidate_activity(spec_, tests[0].dims, cand_, work_, cases[0],
                                                       reference_profile, device_info, rules_, protocol_, options_,
                                                       cache_dir_, v_));
      if (v_.activity.contains("kernels_per_call")) {
        for (auto& o : audit_shape_variants(tests, cases, cand_, work_, protocol_, options_, v_)) {
          seen.activity.push_back(std::move(o));
        }
      }
      v_.phases.activity_audit = since(audit_start);
      seen.reference_kernels_per_call = v_.reference_kernels_per_call;
    }
    seen.persisting_l2_limit = timed.persisting_l2_limit;
    seen.persisting_l2_window_bytes = timed.persisting_l2_window_bytes;
  }
  const std::optional<double> reference_headline =
      v_.reference_time ? std::optional<double>(v_.reference_time->headline(rules_.statistic)) : std::nullopt;
  const double candidate_headline = v_.candidate_time->headline(rules_.statistic);
  v_.observed["timing"] = timing_stage_to_json(seen, v_.integrity.size(), reference_headline, candidate_headline);
  if (const auto decided = judge_timing(seen, protocol_, v_.integrity)) {
    cand_.finish();
    return finish_(decided->verdict, decided->message);
  }
  // A time within the trusted timer's resolution is not a measurement, and
  // (GPU) one of a launch-bound call is not comparable with the reference's:
  // the baseline's events hold the reference's launches, while the
  // candidate's launches go on while the device switches to its context,
  // a switch subtracted with the window's floor. No speedup is claimed
  // from either (docs/protocols.md: the trusted timer).
  const double resolution = v_.timing_check.value("floors", json::object()).value("resolution", 0.0);
  if ((resolution > 0 && candidate_headline < 2 * resolution) || candidate_headline < launch_bound) {
    v_.timing_check["below_resolution"] =
        "the candidate's " + rules_.statistic + " (" + fmt::format("{:.2f} us", candidate_headline * 1e6) +
        ") is within twice the trusted timer's resolution on this device (" + fmt::format("{:.2f} us", resolution * 1e6) +
        ") or below twice one small kernel's launch and run (" + fmt::format("{:.2f} us", launch_bound * 1e6) +
        ", launch-bound: the reference's time holds its launches, the candidate's window does not): no speedup is "
        "claimed; time it at larger sizes (--dims full)";
    return std::nullopt;
  }
  if (reference_headline && candidate_headline > 0) v_.speedup = *reference_headline / candidate_headline;
  return std::nullopt;
}

std::optional<Verdict> CandidateSteps::analyze_deferred() {
  if (v_.fp64_deferred.empty()) return std::nullopt;
  const wire::AnalyzeDeferredReply r = ref_call(wire::AnalyzeDeferred{}, options_.run_timeout, v_.phases.reference);
  for (const auto& call : r.calls) {
    auto test = std::find_if(v_.tests.begin(), v_.tests.end(),
                             [&](const TestOutcome& t) { return t.case_id == call.case_id && t.call == call.call; });
    if (test == v_.tests.end()) {
      throw EvaluationError("the reference analyzed case " + std::to_string(call.case_id) + " call " +
                            std::to_string(call.call) + ", which no test called");
    }
    if (call.fp64_unavailable) v_.fp64_unavailable = *call.fp64_unavailable;
    if (!call.error_analysis) continue;
    if (!v_.error_analysis.is_array()) v_.error_analysis = json::array();
    for (const auto& row : *call.error_analysis) {
      json j = row;
      j["case"] = test->label;
      j["deferred"] = true;
      if (call.identical.value_or(false)) j["identical_to_reference"] = true;  // its outputs were not kept
      v_.error_analysis.push_back(std::move(j));
    }
    judge_precision(*test, *call.error_analysis, protocol_);
  }
  if (const auto decided = judge_tests(v_.tests, v_.integrity, protocol_)) {
    v_.speedup.reset();  // what was timed is not a correct candidate
    return finish_(decided->verdict, decided->message);
  }
  return std::nullopt;
}

}  // namespace kloop::detail
