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

// The first three of `names`, comma-separated.
std::string first_names(const std::vector<std::string>& names) {
  std::string out;
  for (std::size_t i = 0; i < names.size() && i < 3; ++i) out += (i ? ", " : "") + names[i];
  return out;
}

// What one audit found, as integrity findings; `where` names the calls
// ("" for the timed case, else " on shape variant 'odd'").
void add_activity_findings(const ActivityAudit& a, const std::string& where, const Protocol& protocol, Verdict& v) {
  if (a.other_stream_kernels > 0) {
    v.integrity.push_back({"side_stream_work", std::to_string(a.other_stream_kernels) +
                                                   " kernel(s) on a stream other than the current one (" +
                                                   first_names(a.other_stream_names) + ")" + where +
                                                   " were still running when the current stream reached the end of "
                                                   "the call: launch on the current stream, or join the other "
                                                   "stream to it (cudaEventRecord there, cudaStreamWaitEvent on "
                                                   "the current stream) before forward returns"});
  }
  if (a.late_kernels > 0) {
    v.integrity.push_back({"work_after_sync", std::to_string(a.late_kernels) + " kernel(s) (" +
                                                  first_names(a.late_names) + ")" + where +
                                                  " were still running after the current stream had finished"});
  }
  std::set<std::string> libraries(v.vendor_libraries.begin(), v.vendor_libraries.end());
  libraries.insert(a.libraries.begin(), a.libraries.end());
  v.vendor_libraries.assign(libraries.begin(), libraries.end());
  if (!a.libraries.empty() && protocol.require_custom_kernels) {
    v.integrity.push_back({"library_kernels", "the forward runs library kernels (" + first_names(a.libraries) + ")" +
                                                  where + " where the " + protocol.name +
                                                  " protocol wants the candidate's own kernels"});
  }
}

}  // namespace

// The candidate's activity audit (and, when asked, its counters and the two
// digests), after its timing. What it finds becomes integrity findings: no
// kernel where the reference launches some, kernels on other streams, work
// still running after kloop's stream finished, library kernels where the
// protocol wants custom ones, and event times far below the kernel time.
void audit_candidate_activity(const ProblemSpec& spec, const DimValues& dims, WorkerSession& cand,
                              const WorkDir& work, const wire::Case& run_case,
                              const std::optional<wire::ProfileReply>& reference_profile,
                              const json& device_info, const TimingRules& rules, const Protocol& protocol,
                              const EvalOptions& options, const std::string& cache_dir, Verdict& v) {
  wire::Profile cmd;
  cmd.dir = work.shared();
  cmd.c = run_case;
  cmd.counters = options.profile;
  // Inputs it has never seen, like the timed calls (no replay of a test's).
  if (protocol.fresh_timed_inputs) cmd.first_call = Unpredictable().call_id();
  auto reply = cand.call(cmd, options.run_timeout);
  // An audit that cannot run fails closed where integrity is checked: the
  // module's timings stand only with its kernels seen (a module that throws,
  // exits or confuses the trace only when traced gains nothing).
  auto unavailable = [&](const std::string& why, bool module_failed) {
    v.activity = {{"unavailable", why}};
    if (!protocol.integrity_checks) return;
    v.integrity.push_back(
        {"audit_unavailable",
         (module_failed ? "the module failed while its kernels were traced, after passing its tests and timing: "
                        : "the activity audit could not run: ") +
             why +
             (module_failed ? std::string()
                            : std::string(" (under this protocol a timing counts only with the kernels behind it "
                                          "seen; a kloop-worker without CUPTI cannot give one: --no-activity-audit "
                                          "accepts unaudited timings, or use a CUPTI build)"))});
  };
  if (!reply || !reply->ok()) {
    unavailable(reply ? reply->message() : cand.failure(), true);
    return;
  }
  const ActivityAudit a = activity_of(reply->reply);
  if (!a.unavailable.empty()) {
    unavailable(a.unavailable, false);
    return;
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
  if (reference_profile) {
    const ActivityAudit ra = activity_of(*reference_profile);
    if (ra.unavailable.empty()) v.reference_kernels_per_call = ra.kernels_per_call;
  }
  if (a.kernels_per_call == 0 && v.reference_kernels_per_call > 0) {
    v.integrity.push_back({"no_kernel_launched", "the forward launched no kernel while the reference launches " +
                                                     std::to_string(v.reference_kernels_per_call) +
                                                     " per call: the result did not come from GPU work in the call"});
  }
  add_activity_findings(a, "", protocol, v);
  const double event_us = v.candidate_time ? v.candidate_time->headline(rules.statistic) * 1e6 : 0;
  if (event_us > 0 && a.gpu_us_per_call > 2.0 * event_us + 20) {
    v.integrity.push_back({"timer_mismatch", "the timed events saw " + std::to_string(event_us) +
                                                 " us per call but the kernels ran for " +
                                                 std::to_string(a.gpu_us_per_call) + " us"});
  }
  if (options.profile) {
    const auto cal = load_calibration(cache_dir, device_info);
    v.profile_digest = digest_of(reply->reply, "candidate", event_us * 1e-6, spec, dims, cal);
    if (reference_profile && v.reference_time) {
      v.reference_digest =
          digest_of(*reference_profile, "reference", v.reference_time->headline(rules.statistic), spec, dims, cal);
    }
  }
}

// Every shape variant's calls traced as well (under protocols that check
// integrity): library kernels, side-stream or late work on a hidden shape
// count as on the timed one, and a module that fails while traced there
// fails the audit.
void audit_shape_variants(const std::vector<TestCase>& tests, const std::vector<wire::Case>& cases, WorkerSession& cand,
                          const WorkDir& work, const Protocol& protocol, const EvalOptions& options, Verdict& v) {
  if (!protocol.integrity_checks) return;
  std::set<std::string> traced = {tests[0].variant};
  for (std::size_t i = 1; i < tests.size() && i < cases.size(); ++i) {
    if (!traced.insert(tests[i].variant).second) continue;
    const std::string where = " on shape variant '" + tests[i].variant + "'";
    wire::Profile cmd;
    cmd.dir = work.shared();
    cmd.c = cases[i];
    if (protocol.fresh_timed_inputs) cmd.first_call = Unpredictable().call_id();
    auto reply = cand.call(cmd, options.run_timeout);
    if (!reply || !reply->ok()) {
      v.integrity.push_back({"audit_unavailable", "the module failed while its kernels were traced" + where + ": " +
                                                      (reply ? reply->message() : cand.failure())});
      return;
    }
    const ActivityAudit a = activity_of(reply->reply);
    if (!a.unavailable.empty()) {
      v.integrity.push_back({"audit_unavailable", "the activity audit could not run" + where + ": " + a.unavailable});
      continue;
    }
    v.activity["variants"][tests[i].variant] = {{"kernels_per_call", a.kernels_per_call},
                                                {"gpu_us_per_call", a.gpu_us_per_call},
                                                {"libraries", a.libraries}};
    add_activity_findings(a, where, protocol, v);
  }
}

}  // namespace kloop::detail
