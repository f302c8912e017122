// JSON and text renderings of a Verdict.
#include "evaluator/verdict.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace kloop {
namespace {

using json = nlohmann::json;

std::string fmt_number(double v) {
  std::string buf;
  buf = fmt::format("{:.6g}", v);
  return buf;
}

std::string fmt_time(double seconds) {
  std::string buf;
  if (seconds < 1e-3) {
    buf = fmt::format("{:.2f} us", seconds * 1e6);
  } else if (seconds < 1) {
    buf = fmt::format("{:.3f} ms", seconds * 1e3);
  } else {
    buf = fmt::format("{:.3f} s", seconds);
  }
  return buf;
}


}  // namespace

const char* verdict_name(VerdictClass v) {
  switch (v) {
    case VerdictClass::kCompileError: return "compile_error";
    case VerdictClass::kLoadError: return "load_error";
    case VerdictClass::kRuntimeError: return "runtime_error";
    case VerdictClass::kTimeout: return "timeout";
    case VerdictClass::kIncorrect: return "incorrect";
    case VerdictClass::kIntegrityViolation: return "integrity_violation";
    case VerdictClass::kCorrect: return "correct";
  }
  return "?";
}

std::optional<VerdictClass> verdict_from_name(std::string_view name) {
  for (VerdictClass v : {VerdictClass::kCompileError, VerdictClass::kLoadError, VerdictClass::kRuntimeError,
                         VerdictClass::kTimeout, VerdictClass::kIncorrect, VerdictClass::kIntegrityViolation,
                         VerdictClass::kCorrect}) {
    if (name == verdict_name(v)) return v;
  }
  return std::nullopt;
}

json Verdict::to_json() const {
  json tests_json = json::array();
  int passed = 0;
  for (const auto& t : tests) {
    passed += t.passed ? 1 : 0;
    json outs = json::array();
    for (const auto& c : t.outputs) outs.push_back(kloop::to_json(c));
    json tj = {{"case", t.case_id}, {"call", t.call},         {"label", t.label},       {"scaling", t.scaling},
               {"variant", t.variant}, {"centered", t.centered}, {"passed", t.passed}, {"outputs", outs}};
    if (!t.problem.empty()) tj["problem"] = t.problem;
    if (!t.problem_kind.empty()) tj["problem_kind"] = t.problem_kind;
    tests_json.push_back(tj);
  }
  json integ = json::array();
  for (const auto& f : integrity) integ.push_back({{"check", f.check}, {"message", f.message}});
  json diags = json::array();
  for (const auto& d : build.diagnostics) {
    diags.push_back({{"file", d.file}, {"line", d.line}, {"column", d.column}, {"severity", d.severity},
                     {"message", d.message}});
  }
  json j = {{"verdict", verdict_name(verdict)},
            {"message", message},
            {"problem", problem},
            {"device", device},
            {"protocol", protocol},
            // KernelBench's precision the evaluation ran at (also in the protocol's record).
            {"precision", protocol.is_object() ? protocol.value("precision", "fp32") : std::string("fp32")},
            {"candidate", candidate_path},
            {"build",
             {{"cached", build.cached},
              {"timed_out", build.timed_out},
              {"seconds", build.seconds},
              {"compile_seconds", build.compile_seconds},
              {"key", build.key},
              {"command", build.command},
              {"diagnostics", diags},
              {"log", build.log}}},
            {"tests_planned", tests_planned},
            {"tests_run", tests.size()},
            {"tests_passed", passed},
            {"tests", tests_json},
            {"integrity", integ},
            {"phases",
             {{"build_candidate", phases.build_candidate},
              {"build_reference", phases.build_reference},
              {"reference", phases.reference},
              {"candidate", phases.candidate},
              {"compare", phases.compare},
              {"timed_checks", phases.timed_checks},
              {"activity_audit", phases.activity_audit},
              {"plan", phases.plan},
              {"reference_start", phases.reference_start},
              {"baseline", phases.baseline},
              {"candidate_start", phases.candidate_start},
              {"tests", phases.tests},
              {"timing", phases.timing},
              {"end", phases.end},
              {"total", phases.total}}}};
  if (!exchange.empty()) j["exchange"] = exchange;
  if (!input_exchange.empty()) j["input_exchange"] = input_exchange;
  if (!isolation.empty()) j["isolation"] = isolation;
  if (!environment_fault.empty()) j["environment_fault"] = environment_fault;
  if (!timing_check.is_null()) j["timing_check"] = timing_check;
  if (!error_analysis.is_null()) j["error_analysis"] = error_analysis;
  if (!fp64_unavailable.empty()) j["fp64_unavailable"] = fp64_unavailable;
  if (!fp64_deferred.empty()) j["fp64_deferred"] = fp64_deferred;
  if (!construction.empty()) j["construction"] = construction;
  if (!checks_not_applied.empty()) j["checks_not_applied"] = checks_not_applied;
  if (!runtime_builds.empty()) j["runtime_builds"] = runtime_builds;
  if (!runtime_builds_made.empty()) j["runtime_builds_made"] = runtime_builds_made;
  if (!runtime_builds_first_pass.empty()) j["runtime_builds_first_pass"] = runtime_builds_first_pass;
  if (candidate_time || reference_time) {
    json timing = {{"statistic", timing_statistic}};
    if (candidate_time) timing["candidate"] = kloop::to_json(*candidate_time);
    if (reference_time) timing["reference"] = kloop::to_json(*reference_time);
    if (reference_time_fp32) timing["reference_fp32"] = kloop::to_json(*reference_time_fp32);
    if (reference_time_tf32) timing["reference_tf32"] = kloop::to_json(*reference_time_tf32);
    if (candidate_wall) timing["candidate_wall"] = kloop::to_json(*candidate_wall);
    timing["baseline"] = baseline;
    timing["baseline_cached"] = baseline_cached;
    if (!baseline_measured_at.empty()) {
      timing["baseline_provenance"] = {{"source", baseline_cached ? "cache" : "measured"},
                                       {"measured_at", baseline_measured_at},
                                       {"candidate_process_alive", false}};
    }
    if (speedup) timing["speedup"] = *speedup;
    if (sol_floor_seconds) {
      timing["speed_of_light"] = {{"floor_seconds", *sol_floor_seconds}, {"bound", sol_bound}};
      if (sol_percent) timing["speed_of_light"]["percent"] = *sol_percent;
    }
    timing["throttled_samples_discarded"] = throttled_samples_discarded;
    j["timing"] = timing;
  }
  if (!environment.is_null()) j["environment"] = environment;
  if (!activity.is_null()) {
    j["activity"] = activity;
    j["activity"]["reference_kernels_per_call"] = reference_kernels_per_call;
    j["activity"]["vendor_libraries"] = vendor_libraries;
  }
  if (!profile_digest.empty()) j["profile_digest"] = profile_digest;
  if (!reference_digest.empty()) j["reference_digest"] = reference_digest;
  if (!log_tail.empty()) j["log_tail"] = log_tail;
  if (!observed.is_null()) j["observed"] = observed;
  return j;
}

void for_each_failure(const std::vector<TestOutcome>& tests, int most,
                      const std::function<void(const TestOutcome&)>& failed_call,
                      const std::function<void(const TensorComparison&)>& failed_output) {
  int shown = 0;
  for (const auto& t : tests) {
    if (t.passed || shown >= most) continue;
    ++shown;
    failed_call(t);
    for (const auto& c : t.outputs) {
      if (!c.passed) failed_output(c);
    }
  }
}

std::string Verdict::to_text() const {
  std::ostringstream out;
  const std::string precision = protocol.is_object() ? protocol.value("precision", "fp32") : "fp32";
  out << problem << " [" << protocol_name << (precision == "fp32" ? "" : ", " + precision) << ", " << device
      << "]: " << verdict_name(verdict);
  if (!message.empty()) out << ": " << message;
  out << "\n";
  if (verdict == VerdictClass::kCompileError) {
    out << summarize_diagnostics(build.diagnostics, 20);
    if (build.diagnostics.empty()) {
      std::string tail = build.log.size() > 2000 ? build.log.substr(build.log.size() - 2000) : build.log;
      out << tail << (tail.empty() || tail.back() == '\n' ? "" : "\n");
    }
  }
  // One line per distinct finding, with how often it was made.
  std::vector<std::pair<const IntegrityFinding*, int>> distinct;
  for (const auto& f : integrity) {
    auto same = std::find_if(distinct.begin(), distinct.end(), [&](const auto& d) {
      return d.first->check == f.check && d.first->message == f.message;
    });
    if (same == distinct.end()) {
      distinct.push_back({&f, 1});
    } else {
      ++same->second;
    }
  }
  for (const auto& [f, count] : distinct) {
    out << "  integrity check " << f->check << ": " << f->message;
    if (count > 1) out << " (" << count << " times)";
    out << "\n";
  }
  int passed = 0;
  for (const auto& t : tests) passed += t.passed ? 1 : 0;
  if (!tests.empty()) {
    out << "  tests: " << passed << "/" << tests.size() << " calls passed (" << tests_planned
        << " test cases planned)\n";
  }
  for_each_failure(
      tests, 3,
      [&](const TestOutcome& t) {
        out << "  failed: " << t.label << " (case " << t.case_id << ", call " << t.call << ")";
        if (!t.problem.empty()) out << ": " << t.problem;
        out << "\n";
      },
      [&](const TensorComparison& c) {
        if (!c.problem.empty()) {
          out << "    " << c.name << ": " << c.problem << "\n";
          return;
        }
        out << "    " << c.name << ": " << c.mismatches << " of " << c.numel << " elements differ; max abs error "
            << fmt_number(c.max_abs_error) << ", max rel error " << fmt_number(c.max_rel_error)
            << " (largest expected magnitude " << fmt_number(c.max_abs_expected) << ")";
        if (c.non_finite) out << "; " << c.non_finite << " NaN/Inf where a finite value was expected";
        out << "\n";
        for (const auto& m : c.first_mismatches) {
          out << "      at " << shape_string(m.index) << ": expected " << fmt_number(m.expected) << ", got "
              << fmt_number(m.actual) << "\n";
        }
      });
  if (candidate_time && reference_time && speedup) {
    const std::string& st = timing_statistic;
    out << "  candidate " << st << " " << fmt_time(candidate_time->headline(st)) << " (IQR "
        << fmt_time(candidate_time->q1) << " - " << fmt_time(candidate_time->q3) << ", n=" << candidate_time->n
        << ")  reference " << fmt_time(reference_time->headline(st)) << " (" << baseline << ", n=" << reference_time->n
        << ")  speedup " << fmt_number(*speedup) << "x\n";
    if (reference_time_fp32 && reference_time_tf32) {
      out << "  baselines: FP32 " << fmt_time(reference_time_fp32->headline(st)) << ", TF32 "
          << fmt_time(reference_time_tf32->headline(st)) << (baseline_cached ? " (from the baseline cache)" : "")
          << "\n";
    }
    if (sol_floor_seconds && sol_percent) {
      out << "  speed of light: " << sol_bound << "-bound floor " << fmt_time(*sol_floor_seconds) << "; candidate at "
          << fmt_number(*sol_percent) << "% of it\n";
    }
  }
  if (timing_check.is_object() && timing_check.contains("below_resolution")) {
    out << "  timing: " << timing_check["below_resolution"].get<std::string>() << "\n";
  }
  if (!activity.is_null() && activity.contains("kernels_per_call")) {
    out << "  activity: " << fmt_number(activity["kernels_per_call"].get<double>()) << " kernels per call ("
        << fmt_number(activity["gpu_us_per_call"].get<double>()) << " us of kernel time)";
    if (reference_kernels_per_call >= 0) out << "; the reference launches " << fmt_number(reference_kernels_per_call);
    if (!vendor_libraries.empty()) {
      out << "; library kernels:";
      for (const auto& l : vendor_libraries) out << " " << l;
    }
    if (activity.value("unattributed_kernels", 0) > 0) {
      out << "; " << activity["unattributed_kernels"].get<int>() << " kernel(s) judged by name (launch not seen)";
    }
    if (activity.contains("compiled_in")) {
      out << "; its own kernels use";
      for (const auto& t : activity["compiled_in"]) out << " " << t.get<std::string>();
    }
    out << "\n";
    if (activity.contains("evidence")) out << "  activity evidence: " << activity["evidence"].get<std::string>() << "\n";
  }
  for (const auto& e : error_analysis.is_array() ? error_analysis : json::array()) {
    auto num = [](const json& v) { return v.is_number() ? v.get<double>() : NAN; };
    const std::string line = fmt::format(
        "  vs fp64 reference, output {} ({}max |value| {:.3g}): candidate max abs error {:.3g} (rms {:.3g}), "
        "{} reference {:.3g} (rms {:.3g})\n",
        e.value("output", 0), e.contains("case") ? (e.value("case", "") + "; ").c_str() : "",
        num(e.value("max_abs_fp64", json())), num(e.value("candidate_max_abs_error", json())),
        num(e.value("candidate_rms_error", json())), precision, num(e.value("reference_max_abs_error", json())),
        num(e.value("reference_rms_error", json())));
    out << line;
  }
  if (!fp64_unavailable.empty()) out << "  fp64 reference: " << fp64_unavailable << "\n";
  if (!fp64_deferred.empty()) out << "  fp64 reference: " << fp64_deferred << "\n";
  if (construction == "seeded") {
    out << "  weights: seeded construction (KernelBench's contract: the generator seeded before Model and before "
           "ModelNew)\n";
  }
  for (const auto& c : checks_not_applied) out << "  check not applied: " << c << "\n";
  for (const auto& name : runtime_builds_made) {
    out << "  built at run time: ModelNew asked for extension '" << name
        << "' in __init__ or forward; kloop built it in the compile sandbox from that call's arguments, and "
           "this verdict is of the file with it\n";
  }
  for (const auto& name : runtime_builds) {
    out << "  not built: ModelNew asked for extension '" << name
        << "' in __init__ or forward, and kloop could not build it from that call (its build failed, or "
           "its arguments are not text and flags: the build log says which), so what ran did without it\n";
  }
  if (!profile_digest.empty()) out << "  profile:\n" << profile_digest << (profile_digest.back() == '\n' ? "" : "\n");
  if (!reference_digest.empty()) {
    out << "  reference profile:\n" << reference_digest << (reference_digest.back() == '\n' ? "" : "\n");
  }
  if (!log_tail.empty() && verdict != VerdictClass::kCorrect && verdict != VerdictClass::kIncorrect) {
    out << "  candidate process output (last lines):\n";
    std::istringstream lines(log_tail);
    std::string line;
    while (std::getline(lines, line)) out << "    | " << line << "\n";
  }
  std::string buf;
  buf = fmt::format("  time: build {:.2f}s{}, reference {:.2f}s, candidate {:.2f}s, compare {:.3f}s, total {:.2f}s\n",
                    phases.build_candidate, build.cached ? " (cached)" : "", phases.reference, phases.candidate,
                    phases.compare, phases.total);
  out << buf;
  if (phases.reference_start > 0) {
    buf = fmt::format(
        "  steps: builds {:.2f}s (reference {:.2f}s), plan {:.2f}s, reference worker {:.2f}s, baseline {:.2f}s, "
        "candidate worker {:.2f}s, tests {:.2f}s, timing {:.2f}s, end {:.2f}s\n",
        phases.build_candidate + phases.build_reference, phases.build_reference, phases.plan, phases.reference_start, phases.baseline, phases.candidate_start, phases.tests, phases.timing,
        phases.end);
    out << buf;
  }
  if (phases.timed_checks > 0 || phases.activity_audit > 0) {
    buf = fmt::format("  checks: timed-call checks {:.2f}s, activity audit {:.2f}s (within the above)\n",
                      phases.timed_checks, phases.activity_audit);
    out << buf;
  }
  if (!exchange.empty()) {
    out << "  tensors: inputs " << (input_exchange.empty() ? "drawn" : input_exchange) << ", outputs " << exchange
        << "\n";
  }
  if (protocol.is_object() && protocol.contains("atol")) {
    const double magnitude = protocol.value("magnitude", 0.0);
    const std::string tol =
        fmt::format("  tolerance: |actual - expected| <= {:g} + {:g} * |expected|{}\n", protocol.value("atol", 0.0),
                    protocol.value("rtol", 0.0), magnitude > 0 ? " (atol at most 1% of the output's RMS)" : "");
    out << tol;
  }
  if (!isolation.empty()) out << "  isolation: " << isolation << "\n";
  return out.str();
}

}  // namespace kloop
