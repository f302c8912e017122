// Verdict: the value an evaluation produces. Compile errors, wrong answers,
// crashes and detected hacks are ordinary verdicts, each carrying the
// diagnostics a feedback turn needs.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "evaluator/build/diagnostics.h"
#include "evaluator/check/compare.h"
#include "evaluator/timing/sample_stats.h"

namespace kloop {

enum class VerdictClass {
  kCompileError,
  kLoadError,
  kRuntimeError,
  kTimeout,
  kIncorrect,
  kIntegrityViolation,
  kCorrect,
};

const char* verdict_name(VerdictClass v);
std::optional<VerdictClass> verdict_from_name(std::string_view name);

// One forward call of one test case, compared with the reference.
struct TestOutcome {
  int case_id = 0;
  int call = 0;
  std::string label;
  // The case's inputs, as the protocol planned them (TestCase): for
  // reports, which classify failures by these rather than by the label.
  std::string scaling;  // "x1", "x3", "x0.01", "x-1", "centered"
  std::string variant;  // the hidden shape variant; "" for the default shape
  bool centered = false;
  bool passed = false;
  std::string problem;       // output count or device mismatch, precision
  std::string problem_kind;  // what `problem` is: "output_count", "device", "precision"
  std::vector<TensorComparison> outputs;
};

// The failed calls a text lists (the first `most`), each followed by its
// outputs that failed with no problem of their own: one walk for the
// verdict's text and the model's feedback, which word them differently.
void for_each_failure(const std::vector<TestOutcome>& tests, int most,
                      const std::function<void(const TestOutcome&)>& failed_call,
                      const std::function<void(const TensorComparison&)>& failed_output);

struct IntegrityFinding {
  std::string check;  // output_aliases_input, input_mutation, stale_output, corrupt_after_repeat
  std::string message;
};

struct BuildSummary {
  bool cached = false;
  bool timed_out = false;
  double seconds = 0;
  double compile_seconds = 0;
  std::string key;
  std::string command;
  std::string log;
  std::vector<CompilerDiagnostic> diagnostics;
};

// Wall time of each phase of one evaluation, in seconds.
struct PhaseTimes {
  double build_candidate = 0;
  double build_reference = 0;
  double reference = 0;
  double candidate = 0;
  double compare = 0;
  double total = 0;
  // Parts of the above spent on integrity checks: timed calls checked
  // against the reference (reference and candidate), the activity audit
  // of the timed case and the shape variants (candidate).
  double timed_checks = 0;
  double activity_audit = 0;
  // The evaluation after the builds, in the order it runs (they add up to
  // total less the builds): the test plan (cases, weights), the reference's
  // worker started with its module loaded, its baseline and the timer's
  // calibration (cached or measured), the candidate's worker started,
  // attached to the timer and its module loaded, the test calls (both
  // workers, the transfers and the checks), the timed phase with its audit,
  // and the end (the deferred fp64 analysis, both workers ended).
  double plan = 0;
  double reference_start = 0;
  double baseline = 0;
  double candidate_start = 0;
  double tests = 0;
  double timing = 0;
  double end = 0;
};

struct Verdict {
  VerdictClass verdict = VerdictClass::kRuntimeError;
  std::string message;  // one line: what happened
  std::string problem;
  std::string device;
  std::string protocol_name;
  nlohmann::json protocol;
  std::string candidate_path;
  BuildSummary build;
  int tests_planned = 0;
  std::vector<TestOutcome> tests;
  std::vector<IntegrityFinding> integrity;
  std::optional<TimingSummary> candidate_time;
  std::optional<TimingSummary> reference_time;       // the baseline the protocol picks
  std::optional<TimingSummary> reference_time_fp32;  // GPU: TF32 off
  std::optional<TimingSummary> reference_time_tf32;  // GPU: TF32 on (cuBLAS and cuDNN)
  std::string baseline = "fp32";                     // which of the two reference_time is
  std::optional<TimingSummary> candidate_wall;       // GPU: host view (launch to completion)
  // The check of the candidate's claimed times against the wall time the
  // driver saw: samples_run, batches, claimed/observed/allowed seconds.
  nlohmann::json timing_check;
  std::string timing_statistic = "median";
  std::optional<double> speedup;
  bool baseline_cached = false;  // the reference times came from the baseline cache
  // When the baseline was measured (UTC), always by the reference alone:
  // before any code of the candidate's ran, or earlier into the cache.
  std::string baseline_measured_at;
  // GPU with a calibration: the speed-of-light floor of the problem's
  // FLOPs and bytes, and the candidate's share of it (100% = at the floor).
  std::optional<double> sol_floor_seconds;
  std::optional<double> sol_percent;
  std::string sol_bound;  // memory or compute
  int throttled_samples_discarded = 0;
  // GPU: what the candidate's forward launched (the activity audit), the
  // reference's kernel count, and the profile digests when asked for.
  nlohmann::json activity;          // null when no audit ran
  // kloop's build (version, commit, compiler, LibTorch, CUDA) and, once the
  // reference has loaded, its device (evaluator/build/environment.h).
  nlohmann::json environment;
  double reference_kernels_per_call = -1;
  std::vector<std::string> vendor_libraries;
  std::string profile_digest;
  std::string reference_digest;
  PhaseTimes phases;
  // How the candidate's outputs reached the judge: "file", "cuda_ipc", or
  // "file (cuda_ipc failed: ...)" when the fallback was taken.
  std::string exchange;
  // How the candidate got its inputs: "drawn", "file", "cuda_ipc", or
  // "drawn (cuda_ipc failed: ...)".
  std::string input_exchange;
  // The sandbox the candidate ran in: "strict", "weak" (sandbox.h).
  std::string isolation;
  // With EvalOptions::fp64_reference: per output of the first test call,
  // max_abs_fp64 and the candidate's and the fp32 reference's max and rms
  // errors against the fp64 reference; or why there is none.
  nlohmann::json error_analysis;
  std::string fp64_unavailable;
  // Why the analysis of some calls waited until the candidate's process had
  // ended (their rows say "deferred": true); "" when none did.
  std::string fp64_deferred;
  std::string log_tail;  // the candidate process's output, for crashes
  // How the cases' modules got their weights: "drawn" (kloop's generator,
  // by name; compiled candidates) or "seeded" (KernelBench's construction:
  // Python candidates). docs/kernelbench.md.
  std::string construction;
  // The protocol's checks that were not applied to this candidate, each
  // with why (e.g. strict's non-identity norm parameters where ModelNew's
  // norm layers do not match the reference's).
  std::vector<std::string> checks_not_applied;
  // A Python candidate: the extensions ModelNew asked for in __init__ or
  // forward rather than at the file's top level, which kloop does not build
  // (docs/kernelbench.md): what ran did without them (the candidate's own
  // fallback, where it has one). From the candidate's process: a claim
  // that explains, never decides.
  std::vector<std::string> runtime_builds;
  // The extensions ModelNew asked for after the import in an earlier pass
  // of this evaluation, which kloop then built in the compile sandbox from
  // what was asked (the runtime build requests, candidate_host.py) before
  // evaluating again: this verdict is the second pass's.
  std::vector<std::string> runtime_builds_made;
  // Where that earlier pass stopped: after the test calls, once its worker
  // had asked (the timing and the rest would only have judged the
  // fallback). "" with one pass.
  std::string runtime_builds_first_pass;
  // What on the machine, rather than the candidate, may have caused this
  // verdict: the reference out of memory beside it (another evaluation's
  // memory), the candidate's process unable to fork or start a thread
  // (EAGAIN: the processes of other evaluations). "" when nothing. A run
  // evaluates again before such a verdict stands (evaluation.environment_retries).
  std::string environment_fault;
  // What the judge decided from, for judging again under a protocol with the
  // same measurements (judge.h: rejudge): {"format": 1, "timing": null, or
  // the timing phase (timing_stage_to_json)}; null only for a verdict made
  // outside Evaluator::evaluate.
  nlohmann::json observed;

  nlohmann::json to_json() const;
  // Human-readable report; the first line is the verdict.
  std::string to_text() const;
};

}  // namespace kloop
