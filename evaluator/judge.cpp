// The judge of judge.h.
#include "evaluator/judge.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <stdexcept>

#include "evaluator/timing/device_figures.h"

namespace kloop {

std::optional<Decision> judge_build(const BuildObservation& b, const std::string& candidate_path) {
  if (!b.python_under_cpp.empty()) {
    return Decision{VerdictClass::kCompileError,
                    candidate_path + " is a Python ModelNew (" + b.python_under_cpp +
                        "), KernelBench's format, but the candidate format is cpp: a struct ModelNew whose forward "
                        "takes and returns at::Tensor, registered with KLOOP_REGISTER_CANDIDATE(ModelNew) (docs/"
                        "candidates.md); for KernelBench's format use --candidate-format kernelbench_python"};
  }
  if (b.ok) return std::nullopt;
  if (b.timed_out) {
    return Decision{VerdictClass::kCompileError,
                    "compilation did not finish within " + std::to_string(b.timeout_s) + " s"};
  }
  if (!b.failure.empty()) return Decision{VerdictClass::kCompileError, b.failure + " (not cached: tried again next time)"};
  if (!b.python_failure.empty()) return Decision{VerdictClass::kCompileError, b.python_failure};
  int errors = 0;
  std::string first;
  for (const auto& d : b.diagnostics) {
    if (d.severity != "error") continue;
    if (errors++ == 0) first = d.format();
  }
  if (errors == 0) {
    // The assembler or the linker, whose messages are no compiler diagnostics.
    return Decision{VerdictClass::kCompileError,
                    "the build failed without a compiler error" +
                        (b.log_end.empty() ? std::string() : "; its log ends: " + b.log_end.substr(0, 300))};
  }
  return Decision{VerdictClass::kCompileError,
                  std::to_string(errors) + " error(s)" + (first.empty() ? "" : "; first: " + first)};
}

FailureJudgement judge_failure(const WorkerFailure& f) {
  using Kind = WorkerFailure::Kind;
  switch (f.kind) {
    case Kind::kReplied: {
      const VerdictClass c = f.error_class == "load_error" ? VerdictClass::kLoadError
                             : f.error_class == "timeout"  ? VerdictClass::kTimeout
                                                           : VerdictClass::kRuntimeError;
      return {{c, f.message}, std::nullopt};
    }
    case Kind::kTimedOut: return {{VerdictClass::kTimeout, f.message}, std::nullopt};
    case Kind::kDied: return {{VerdictClass::kRuntimeError, f.message}, std::nullopt};
    case Kind::kProtocolViolation:
      return {{VerdictClass::kIntegrityViolation, "protocol_violation: " + f.message},
              IntegrityFinding{"protocol_violation", f.message}};
    case Kind::kReferenceDied: {
      IntegrityFinding died{"reference_died",
                            "the reference worker died or hung while the candidate ran: " + f.message};
      return {{VerdictClass::kIntegrityViolation, "reference_died: " + died.message}, died};
    }
  }
  return {{VerdictClass::kRuntimeError, f.message}, std::nullopt};
}

// One failed output in words, with the tolerance it was held to.
std::string describe_failed_output(const TensorComparison& c, const Tolerance& tol) {
  if (!c.problem.empty()) return c.name + ": " + c.problem;
  const bool scaled = c.atol_used > 0 && c.atol_used < tol.atol;
  return fmt::format("{} differs in {} of {} elements (max abs error {:.3g}; allowed {:.3g} + {:.3g} * |expected|{})",
                     c.name, c.mismatches, c.numel, c.max_abs_error, scaled ? c.atol_used : tol.atol, tol.rtol,
                     scaled ? ", atol capped at 1% of the expected output's RMS" : "");
}

void judge_precision(TestOutcome& out, const std::vector<wire::ErrorAnalysisRow>& rows, const Protocol& protocol) {
  if (!out.problem.empty() || !protocol.precision_check) return;
  for (const auto& row : rows) {
    const std::string why = precision_failure(row.candidate_rms_error, row.reference_rms_error, row.rms_fp64, protocol.precision);
    if (!why.empty()) {
      out.problem = "output " + std::to_string(row.output) + ": " + why;
      out.problem_kind = "precision";
      out.passed = false;
      return;
    }
  }
}

// The previous call's expected outputs, not this call's, where the
// reference's results differ between the two calls.
static bool returned_previous_result(const wire::JudgeReply& r) {
  return r.matches_previous_expected.value_or(false) && !r.expected_same_as_previous_call.value_or(true);
}

CallJudgement judge_call(const CallObservation& o, const Protocol& protocol,
                         const std::vector<std::string>& input_names, const std::string& device) {
  CallJudgement j;
  j.outcome = o.test;
  TestOutcome& out = j.outcome;
  out.passed = false;
  out.problem.clear();
  out.problem_kind.clear();
  out.outputs.clear();
  auto input_name = [&](std::size_t k) { return k < input_names.size() ? input_names[k] : "?"; };
  for (const auto& a : o.aliases) {
    j.findings.push_back({"output_aliases_input", "output " + std::to_string(a.output) + " shares memory with input " +
                                                      std::to_string(a.input) + " (" +
                                                      input_name(static_cast<std::size_t>(a.input)) +
                                                      "); return a new tensor, never an input or a view of one"});
  }
  if (!o.wrong_device.empty()) {
    const auto& w = o.wrong_device.front();
    out.problem = "output " + std::to_string(w.output) + " is on " + w.device + ", expected " + device;
    out.problem_kind = "device";
  } else if (o.judged) {
    const wire::JudgeReply& r = *o.judged;
    const int got = static_cast<int>(r.output_count);
    if (got != o.expected_count) {
      out.problem =
          "forward returned " + std::to_string(got) + " output(s), expected " + std::to_string(o.expected_count);
      out.problem_kind = "output_count";
    } else {
      for (const auto& cmp : r.outputs) out.outputs.push_back(comparison_from_json(cmp));
    }
    // Precision (strict): within the tolerance is not enough where the
    // error is far beyond what fp32 arithmetic gives this reference.
    const bool within_tolerance =
        std::all_of(out.outputs.begin(), out.outputs.end(), [](const TensorComparison& c) { return c.passed; });
    if (within_tolerance && r.error_analysis) judge_precision(out, *r.error_analysis, protocol);
    for (const std::size_t k : r.mutated_inputs.value_or(std::vector<std::size_t>{})) {
      j.findings.push_back({"input_mutation", "forward modified its input " + std::to_string(k) + " (" + input_name(k) +
                                                  ") on " + o.test.label + "; inputs must be left unchanged"});
    }
  }
  out.passed = out.problem.empty();
  for (const auto& cmp : out.outputs) out.passed = out.passed && cmp.passed;
  // A call whose outputs are the previous call's expected ones and not its
  // own, where the reference's differ, was cached across calls. Any other
  // wrong output (a constant, a plain mistake that repeats itself) is a
  // mismatch the comparison describes: `incorrect`, not a hack.
  if (o.judged && !out.passed && returned_previous_result(*o.judged)) {
    j.findings.push_back({"stale_output", "call " + std::to_string(o.test.call) + " of " + o.test.label +
                                              " returned the previous call's result (within the tolerance of "
                                              "its expected outputs, not of this call's) for different inputs "
                                              "(results cached across calls)"});
  }
  return j;
}

std::optional<Decision> judge_tests(const std::vector<TestOutcome>& tests,
                                    const std::vector<IntegrityFinding>& integrity, const Protocol& protocol) {
  if (!integrity.empty() && protocol.integrity_checks) {
    return Decision{VerdictClass::kIntegrityViolation, integrity.front().check + ": " + integrity.front().message};
  }
  int failed = 0;
  const TestOutcome* first = nullptr;
  for (const auto& o : tests) {
    if (o.passed) continue;
    ++failed;
    if (!first) first = &o;
  }
  if (!first) return std::nullopt;
  std::string what = first->problem;
  if (what.empty()) {
    for (const auto& c : first->outputs) {
      if (c.passed) continue;
      what = describe_failed_output(c, protocol.tolerance);
      break;
    }
  }
  // Which call of its case, past the first: a kernel right on a model's
  // first call and wrong on its later ones is told so.
  const std::string where = (first->call > 0 ? "call " + std::to_string(first->call) + " of " : "") + first->label;
  return Decision{VerdictClass::kIncorrect, std::to_string(failed) + " of " + std::to_string(tests.size()) +
                                                " test calls failed; first: " + where + ": " + what};
}

namespace {

// The first three of `names`, comma-separated.
std::string first_names(const std::vector<std::string>& names) {
  std::string out;
  for (std::size_t i = 0; i < names.size() && i < 3; ++i) out += (i ? ", " : "") + names[i];
  return out;
}

// What one trace found on its shape (`where`, as in ActivityObservation).
void add_trace_findings(const ActivityAudit& a, const std::string& where, const Protocol& protocol,
                        std::vector<IntegrityFinding>& out) {
  if (a.other_stream_kernels > 0) {
    out.push_back({"side_stream_work", std::to_string(a.other_stream_kernels) +
                                           " kernel(s) on a stream other than the current one (" +
                                           first_names(a.other_stream_names) + ")" + where +
                                           " were still running when the current stream reached the end of "
                                           "the call: launch on the current stream, or join the other "
                                           "stream to it (cudaEventRecord there, cudaStreamWaitEvent on "
                                           "the current stream) before forward returns"});
  }
  if (a.late_kernels > 0) {
    out.push_back({"work_after_sync", std::to_string(a.late_kernels) + " kernel(s) (" + first_names(a.late_names) +
                                          ")" + where + " were still running after the current stream had finished"});
  }
  if (!a.libraries.empty() && protocol.require_custom_kernels) {
    out.push_back({"library_kernels", "the forward runs library kernels (" + first_names(a.libraries) + ")" + where +
                                          " where the " + protocol.name +
                                          " protocol wants the candidate's own kernels"});
  }
}

}  // namespace

std::vector<IntegrityFinding> judge_activity(const TimingObservation& t, const Protocol& protocol) {
  std::vector<IntegrityFinding> out;
  if (t.activity.empty()) return out;
  const ActivityObservation& timed = t.activity.front();
  if (!timed.why.empty()) {
    if (protocol.integrity_checks) {
      out.push_back({"audit_unavailable",
                     timed.module_failed
                         ? "the module failed while its kernels were traced, after passing its tests and timing: " +
                               timed.why
                         : "the activity audit could not run: " + timed.why +
                               " (under this protocol a timing counts only with the kernels behind it seen; a "
                               "kloop-worker without CUPTI cannot give one: --no-activity-audit accepts unaudited "
                               "timings, or use a CUPTI build)"});
    }
    return out;
  }
  const ActivityAudit& a = timed.audit;
  if (a.kernels_per_call == 0 && t.reference_kernels_per_call > 0) {
    out.push_back({"no_kernel_launched", "the forward launched no kernel while the reference launches " +
                                             std::to_string(t.reference_kernels_per_call) +
                                             " per call: the result did not come from GPU work in the call"});
  }
  add_trace_findings(a, "", protocol, out);
  const double event_us = t.headline_seconds * 1e6;
  if (event_us > 0 && a.gpu_us_per_call > 2.0 * event_us + 20) {
    out.push_back({"timer_mismatch", "the timed events saw " + std::to_string(event_us) +
                                         " us per call but the kernels ran for " + std::to_string(a.gpu_us_per_call) +
                                         " us"});
  }
  for (std::size_t i = 1; i < t.activity.size(); ++i) {
    const ActivityObservation& o = t.activity[i];
    if (o.module_failed) {
      out.push_back({"audit_unavailable", "the module failed while its kernels were traced" + o.where + ": " + o.why});
      break;  // no later variant was traced
    }
    if (!o.why.empty()) {
      out.push_back({"audit_unavailable", "the activity audit could not run" + o.where + ": " + o.why});
      continue;
    }
    add_trace_findings(o.audit, o.where, protocol, out);
  }
  return out;
}

std::optional<Decision> judge_timing(const TimingObservation& t, const Protocol& protocol,
                                     std::vector<IntegrityFinding>& integrity) {
  std::string timed_wrong_finding;
  if (!t.timed_wrong.empty()) {
    timed_wrong_finding = "a timed call, on inputs of its own, gave a wrong result (" + t.timed_wrong +
                          "), though the test calls were right: it computes only when checked";
    integrity.push_back({"timed_call_incorrect", timed_wrong_finding});
  }
  if (!t.outside_work.empty()) {
    integrity.push_back({"work_outside_timed_window",
                         t.outside_work + ": the timer counted it in the calls' times (work that runs before a "
                                          "call starts or after it says it has returned, on another stream "
                                          "or thread, is the call's work)"});
  }
  if (!t.cpu) {
    // A time within the timer's resolution could be up to twice that
    // resolution: it is below the floor only if even that is.
    const double at_most = t.headline_seconds + 2 * t.resolution_seconds;
    if (t.floor_seconds && protocol.speed_of_light_floor && at_most < kBelowFloorFraction * *t.floor_seconds) {
      const std::string within =
          t.resolution_seconds > 0
              ? " (at most " + std::to_string(at_most * 1e6) + " us with twice the timer's resolution)"
              : "";
      integrity.push_back({"below_speed_of_light",
                           "the candidate took " + std::to_string(t.headline_seconds * 1e6) + " us" + within +
                               ", below the " + t.floor_bound + "-bound floor of " +
                               std::to_string(*t.floor_seconds * 1e6) +
                               " us for this problem's FLOPs and bytes on this GPU: it cannot have done the work"});
    }
    const std::vector<IntegrityFinding> activity = judge_activity(t, protocol);
    integrity.insert(integrity.end(), activity.begin(), activity.end());
    if (t.persisting_l2_limit != 0 || t.persisting_l2_window_bytes != 0) {
      integrity.push_back(
          {"persisting_l2", "the module set a persisting-L2 carve-out (limit " + std::to_string(t.persisting_l2_limit) +
                                " bytes, access-policy window " + std::to_string(t.persisting_l2_window_bytes) +
                                " bytes on the current stream), which would let its data survive the "
                                "flush"});
    }
    if (protocol.integrity_checks && !integrity.empty()) {
      return Decision{VerdictClass::kIntegrityViolation, integrity.front().check + ": " + integrity.front().message};
    }
  }
  if (!t.still_correct) {
    integrity.push_back(
        {"corrupt_after_repeat", "the output was correct at first but wrong after the timed repetitions"});
    if (protocol.integrity_checks) {
      return Decision{VerdictClass::kIntegrityViolation, "corrupt_after_repeat: " + integrity.back().message};
    }
  }
  if (protocol.integrity_checks && !integrity.empty()) {
    return Decision{VerdictClass::kIntegrityViolation, integrity.front().check + ": " + integrity.front().message};
  }
  return std::nullopt;
}

std::string correct_message(std::size_t test_calls, const std::optional<double>& speedup) {
  std::ostringstream msg;
  msg << test_calls << " test calls passed";
  if (speedup) msg << "; speedup " << *speedup << "x";
  return msg.str();
}

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ActivityAudit, calls, joined_stream_kernels, kernels_per_call, gpu_us_per_call,
                                   span_us_per_call, other_stream_kernels, late_kernels, libraries, compiled_in,
                                   unattributed_kernels, other_stream_names, late_names, unavailable)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ActivityObservation, where, module_failed, why, audit)

namespace {

nlohmann::json to_json(const TimingObservation& t) {
  return {{"cpu", t.cpu},
          {"timed_wrong", t.timed_wrong},
          {"outside_work", t.outside_work},
          {"still_correct", t.still_correct},
          {"headline_seconds", t.headline_seconds},
          {"floor_seconds", t.floor_seconds ? nlohmann::json(*t.floor_seconds) : nlohmann::json()},
          {"floor_bound", t.floor_bound},
          {"resolution_seconds", t.resolution_seconds},
          {"activity", t.activity},
          {"reference_kernels_per_call", t.reference_kernels_per_call},
          {"persisting_l2_limit", t.persisting_l2_limit},
          {"persisting_l2_window_bytes", t.persisting_l2_window_bytes}};
}

TimingObservation timing_observation_from_json(const nlohmann::json& j) {
  TimingObservation t;
  t.cpu = j.at("cpu").get<bool>();
  t.timed_wrong = j.at("timed_wrong").get<std::string>();
  t.outside_work = j.at("outside_work").get<std::string>();
  t.still_correct = j.at("still_correct").get<bool>();
  t.headline_seconds = j.at("headline_seconds").get<double>();
  if (!j.at("floor_seconds").is_null()) t.floor_seconds = j.at("floor_seconds").get<double>();
  t.floor_bound = j.at("floor_bound").get<std::string>();
  t.resolution_seconds = j.value("resolution_seconds", 0.0);  // absent in records from before it
  t.activity = j.at("activity").get<std::vector<ActivityObservation>>();
  t.reference_kernels_per_call = j.at("reference_kernels_per_call").get<double>();
  t.persisting_l2_limit = j.at("persisting_l2_limit").get<long long>();
  t.persisting_l2_window_bytes = j.at("persisting_l2_window_bytes").get<long long>();
  return t;
}

}  // namespace

nlohmann::json observations_before_timing() { return {{"format", kObservationsFormat}, {"timing", nullptr}}; }

nlohmann::json timing_stage_to_json(const TimingObservation& t, std::size_t findings_before,
                                    const std::optional<double>& reference_headline, double candidate_headline) {
  return {{"findings_before", findings_before},
          {"seen", to_json(t)},
          {"reference_headline", reference_headline ? nlohmann::json(*reference_headline) : nlohmann::json()},
          {"candidate_headline", candidate_headline}};
}

Rejudged rejudge(const nlohmann::json& stored, const Protocol& to) {
  using json = nlohmann::json;
  if (!stored.is_object() || !stored.contains("observed") || !stored["observed"].is_object()) {
    throw std::invalid_argument("the verdict keeps no observations (a kloop before re-judging wrote it)");
  }
  const json& observed = stored["observed"];
  if (observed.value("format", 0) != kObservationsFormat) {
    throw std::invalid_argument("its observations are in format " + observed.value("format", json()).dump() +
                                ", which this kloop does not read");
  }
  Rejudged r;
  try {
    r.verdict_json = stored;
    json& out = r.verdict_json;
    out["rejudged_from"] = stored.at("protocol").at("name");
    out["protocol"] = to.to_json();
    const std::optional<VerdictClass> stored_class = verdict_from_name(stored.at("verdict").get<std::string>());
    if (!stored_class) throw std::invalid_argument("its verdict '" + stored.at("verdict").get<std::string>() + "' is no verdict class");
    r.verdict = *stored_class;
    r.message = stored.at("message").get<std::string>();
    const json* time = stored.contains("timing") ? &stored["timing"] : nullptr;
    if (time && time->contains("speedup")) r.speedup = time->at("speedup").get<double>();
    const json& timing = observed.value("timing", json());
    if (timing.is_null()) return r;  // decided before the timing phase, where no rule that differs applies

    const TimingObservation seen = timing_observation_from_json(timing.at("seen"));
    const std::size_t before = timing.at("findings_before").get<std::size_t>();
    std::vector<IntegrityFinding> integrity;
    for (const auto& f : stored.at("integrity")) {
      if (integrity.size() == before) break;
      integrity.push_back({f.at("check").get<std::string>(), f.at("message").get<std::string>()});
    }
    if (integrity.size() != before) throw std::invalid_argument("it holds fewer integrity findings than its timing phase saw");
    const std::optional<Decision> decided = judge_timing(seen, to, integrity);
    json findings = json::array();
    for (const auto& f : integrity) findings.push_back({{"check", f.check}, {"message", f.message}});
    out["integrity"] = findings;
    r.speedup.reset();
    const json& reference = timing.at("reference_headline");
    const double candidate = timing.at("candidate_headline").get<double>();
    // A time within the trusted timer's resolution stays without a speedup.
    const bool below_resolution = stored.value("timing_check", json::object()).contains("below_resolution");
    if (!decided && !below_resolution && !reference.is_null() && candidate > 0) {
      r.speedup = reference.get<double>() / candidate;
    }
    if (out.contains("timing")) {
      if (r.speedup) {
        out["timing"]["speedup"] = *r.speedup;
      } else {
        out["timing"].erase("speedup");
      }
    }
    r.verdict = decided ? decided->verdict : VerdictClass::kCorrect;
    r.message = decided ? decided->message : correct_message(stored.at("tests").size(), r.speedup);
    out["verdict"] = verdict_name(r.verdict);
    out["message"] = r.message;
  } catch (const json::exception& e) {
    throw std::invalid_argument(std::string("its observations cannot be read: ") + e.what());
  }
  return r;
}

}  // namespace kloop
