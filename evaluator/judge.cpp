// The judge of judge.h.
#include "evaluator/judge.h"

#include <algorithm>
#include <cstdio>

#include "evaluator/timing/device_figures.h"

namespace kloop {

// One failed output in words, with the tolerance it was held to.
std::string describe_failed_output(const TensorComparison& c, const Tolerance& tol) {
  if (!c.problem.empty()) return c.name + ": " + c.problem;
  char buf[320];
  const bool scaled = c.atol_used > 0 && c.atol_used < tol.atol;
  std::snprintf(
      buf, sizeof(buf), "%s differs in %lld of %lld elements (max abs error %.3g; allowed %.3g + %.3g * |expected|%s)",
      c.name.c_str(), static_cast<long long>(c.mismatches), static_cast<long long>(c.numel), c.max_abs_error,
      scaled ? c.atol_used : tol.atol, tol.rtol, scaled ? ", atol capped at 1% of the expected output's RMS" : "");
  return buf;
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
    if (out.problem.empty() && within_tolerance && protocol.precision_check && r.error_analysis) {
      for (const auto& row : *r.error_analysis) {
        const std::string why = precision_failure(row.candidate_rms_error, row.reference_rms_error, row.rms_fp64);
        if (!why.empty()) {
          out.problem = "output " + std::to_string(row.output) + ": " + why;
          out.problem_kind = "precision";
          break;
        }
      }
    }
    for (const std::size_t k : r.mutated_inputs.value_or(std::vector<std::size_t>{})) {
      j.findings.push_back({"input_mutation", "forward modified its input " + std::to_string(k) + " (" + input_name(k) +
                                                  ") on " + o.test.label + "; inputs must be left unchanged"});
    }
    // A call that returns the previous call's result, where the
    // reference's results differ, was cached across calls.
    if (r.same_as_previous_call.value_or(false) && !r.expected_same_as_previous_call.value_or(true)) {
      j.findings.push_back({"stale_output", "call " + std::to_string(o.test.call) + " of " + o.test.label +
                                                " returned exactly the previous call's result for different "
                                                "inputs (results cached across calls)"});
    }
  }
  out.passed = out.problem.empty();
  for (const auto& cmp : out.outputs) out.passed = out.passed && cmp.passed;
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
  return Decision{VerdictClass::kIncorrect, std::to_string(failed) + " of " + std::to_string(tests.size()) +
                                                " test calls failed; first: " + first->label + ": " + what};
}

std::optional<Decision> judge_timing(const TimingObservation& t, const Protocol& protocol,
                                     std::vector<IntegrityFinding>& integrity) {
  std::string timed_wrong_finding;
  if (!t.timed_wrong.empty()) {
    timed_wrong_finding = "a timed call, on inputs of its own, gave a wrong result (" + t.timed_wrong +
                          "), though the test calls were right: it computes only when checked";
    integrity.push_back({"timed_call_incorrect", timed_wrong_finding});
  }
  if (!t.implausible.empty()) integrity.push_back({"implausible_timing", t.implausible});
  if (!t.cpu) {
    if (t.floor_seconds && protocol.speed_of_light_floor &&
        t.headline_seconds < kBelowFloorFraction * *t.floor_seconds) {
      integrity.push_back({"below_speed_of_light",
                           "the candidate took " + std::to_string(t.headline_seconds * 1e6) + " us, below the " +
                               t.floor_bound + "-bound floor of " + std::to_string(*t.floor_seconds * 1e6) +
                               " us for this problem's FLOPs and bytes on this GPU: it cannot have done the work"});
    }
    // Work the events on kloop's stream did not see (another stream, a
    // thread) still has to finish before the device sync returns.
    if (t.wall_median > 1.5 * t.event_median + 200e-6) {
      integrity.push_back({"unaccounted_work", "the timed stream saw " + std::to_string(t.event_median * 1e6) +
                                                   " us per call but the device was busy for " +
                                                   std::to_string(t.wall_median * 1e6) +
                                                   " us: work ran outside the current stream"});
    }
    integrity.insert(integrity.end(), t.activity.begin(), t.activity.end());
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
  if (!t.implausible.empty()) {
    // Under every protocol: the figure would not be a measurement.
    return Decision{VerdictClass::kIntegrityViolation, "implausible_timing: " + t.implausible};
  }
  if (!t.still_correct) {
    integrity.push_back(
        {"corrupt_after_repeat", "the output was correct at first but wrong after the timed repetitions"});
    if (protocol.integrity_checks) {
      return Decision{VerdictClass::kIntegrityViolation, "corrupt_after_repeat: " + integrity.back().message};
    }
  }
  if (!t.timed_wrong.empty() && protocol.integrity_checks) {
    return Decision{VerdictClass::kIntegrityViolation, "timed_call_incorrect: " + timed_wrong_finding};
  }
  return std::nullopt;
}

}  // namespace kloop
