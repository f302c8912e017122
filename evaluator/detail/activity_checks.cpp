// The activity checks of activity_checks.h.
#include "evaluator/detail/activity_checks.h"

#include <algorithm>
#include <set>

#include "evaluator/detail/candidate_timing.h"
#include "profiler/digest.h"

namespace kloop::detail {
namespace {

// The profile digest of one model from the worker's `profile` reply.
std::string digest_of(const wire::ProfileReply& prof, const std::string& role, double median_seconds,
                      const ProblemSpec& spec, const DimValues& dims, const std::optional<Calibration>& cal) {
  profiler::ActivityTrace trace;
  if (prof.trace) {
    trace = profiler::activity_trace_from_json(*prof.trace);
  } else {
    trace.unavailable = prof.trace_unavailable.value_or("no trace");
  }
  profiler::MetricsReport metrics;
  if (prof.metrics) {
    metrics = profiler::metrics_report_from_json(*prof.metrics);
  } else {
    metrics.unavailable = "hardware counters were not requested";
  }
  profiler::DigestInputs in;
  in.role = role;
  in.forward_median_us = median_seconds * 1e6;
  in.problem_flops = spec.flop_count(dims);
  in.problem_bytes = spec.byte_count(dims);
  in.forwards = static_cast<int>(prof.stream_done_ns.size());
  if (in.forwards < 1) in.forwards = 1;
  if (cal) {
    in.rates = profiler::DeviceRates{cal->device.value("name", ""), cal->dram_bytes_per_s, cal->fp32_flops_per_s,
                                     cal->tf32_flops_per_s, cal->bf16_flops_per_s, cal->device.value("sms", 0), 64};
  }
  return profiler::make_digest(trace, metrics, in, 1500);
}

// The activity audit of one model from the worker's `profile` reply.
ActivityAudit activity_of(const wire::ProfileReply& prof) {
  if (!prof.trace) {
    ActivityAudit a;
    a.unavailable = prof.trace_unavailable.value_or("no trace");
    return a;
  }
  return audit_activity(profiler::activity_trace_from_json(*prof.trace), prof.stream_done_ns, prof.flush_bytes,
                        prof.own_objects);
}

// The union of the libraries every audit found, for the verdict.
void note_libraries(const ActivityAudit& a, Verdict& v) {
  std::set<std::string> libraries(v.vendor_libraries.begin(), v.vendor_libraries.end());
  libraries.insert(a.libraries.begin(), a.libraries.end());
  v.vendor_libraries.assign(libraries.begin(), libraries.end());
}

}  // namespace

// The candidate's activity audit (and, when asked, its counters and the two
// digests), after its timing: what the trace saw goes to the judge
// (judge_activity), what it describes to the verdict.
ActivityObservation audit_candidate_activity(const ProblemSpec& spec, const DimValues& dims, WorkerSession& cand,
                              const WorkDir& work, const wire::Case& run_case,
                              const std::optional<wire::ProfileReply>& reference_profile,
                              const json& device_info, const TimingRules& rules, const Protocol& protocol,
                                             const EvalOptions& options, const std::string& cache_dir,
                                             Verdict& v) {
  wire::Profile cmd;
  cmd.dir = work.shared();
  cmd.c = run_case;
  cmd.counters = options.profile;
  // Inputs it has never seen, like the timed calls (no replay of a test's).
  cmd.first_call = Unpredictable().call_id();
  auto reply = cand.call(cmd, options.run_timeout);
  ActivityObservation seen;
  if (!reply || !reply->ok()) {
    seen.module_failed = true;
    seen.why = reply ? reply->message() : cand.failure();
    v.activity = {{"unavailable", seen.why}};
    return seen;
  }
  seen.audit = activity_of(reply->reply);
  const ActivityAudit& a = seen.audit;
  if (!a.unavailable.empty()) {
    seen.why = a.unavailable;
    v.activity = {{"unavailable", seen.why}};
    return seen;
  }
  v.activity = {{"calls", a.calls},
                {"kernels_per_call", a.kernels_per_call},
                {"gpu_us_per_call", a.gpu_us_per_call},
                {"span_us_per_call", a.span_us_per_call},
                {"other_stream_kernels", a.other_stream_kernels},
                {"joined_stream_kernels", a.joined_stream_kernels},
                {"late_kernels", a.late_kernels},
                {"unattributed_kernels", a.unattributed_kernels}};
  if (!a.compiled_in.empty()) v.activity["compiled_in"] = a.compiled_in;
  v.activity["evidence"] = kActivityEvidence;
  if (reference_profile) {
    const ActivityAudit ra = activity_of(*reference_profile);
    if (ra.unavailable.empty()) v.reference_kernels_per_call = ra.kernels_per_call;
  }
  note_libraries(a, v);
  const double event_us = v.candidate_time ? v.candidate_time->headline(rules.statistic) * 1e6 : 0;
  if (options.profile) {
    const auto cal = load_calibration(cache_dir, device_info);
    v.profile_digest = digest_of(reply->reply, "candidate", event_us * 1e-6, spec, dims, cal);
    if (reference_profile && v.reference_time) {
      v.reference_digest =
          digest_of(*reference_profile, "reference", v.reference_time->headline(rules.statistic), spec, dims, cal);
    }
  }
  return seen;
}

// Every shape variant's calls traced as well (under protocols that check
// integrity), for the judge: library kernels, side-stream or late work on a
// hidden shape count as on the timed one, and a module that fails while
// traced there fails the audit (no later variant is traced).
std::vector<ActivityObservation> audit_shape_variants(const std::vector<TestCase>& tests,
                                                      const std::vector<wire::Case>& cases, WorkerSession& cand,
                                                      const WorkDir& work, const Protocol& protocol,
                                                      const EvalOptions& options, Verdict& v) {
  std::vector<ActivityObservation> out;
  if (!protocol.integrity_checks) return out;
  std::set<std::string> traced = {tests[0].variant};
  for (std::size_t i = 1; i < tests.size() && i < cases.size(); ++i) {
    if (!traced.insert(tests[i].variant).second) continue;
    const std::string where = " on shape variant '" + tests[i].variant + "'";
    wire::Profile cmd;
    cmd.dir = work.shared();
    cmd.c = cases[i];
    cmd.first_call = Unpredictable().call_id();
    auto reply = cand.call(cmd, options.run_timeout);
    ActivityObservation& seen = out.emplace_back();
    seen.where = where;
    if (!reply || !reply->ok()) {
      seen.module_failed = true;
      seen.why = reply ? reply->message() : cand.failure();
      return out;
    }
    seen.audit = activity_of(reply->reply);
    const ActivityAudit& a = seen.audit;
    if (!a.unavailable.empty()) {
      seen.why = a.unavailable;
      continue;
    }
    v.activity["variants"][tests[i].variant] = {{"kernels_per_call", a.kernels_per_call},
                                                {"gpu_us_per_call", a.gpu_us_per_call},
                                                {"libraries", a.libraries}};
    note_libraries(a, v);
  }
  return out;
}

}  // namespace kloop::detail
