// Evaluator: one candidate against one problem's reference, under a
// protocol, in isolated worker processes (docs/isolation.md). The reference
// worker draws weights and inputs and computes expected outputs and the
// baseline; the candidate worker sees only weights and inputs; the driver
// compares. Whatever the candidate does, the result is a Verdict.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <map>
#include <string>

#include "evaluator/build/builder.h"
#include "evaluator/eval_defaults.h"
#include "evaluator/isolation/sandbox.h"
#include "evaluator/problem/spec.h"
#include "evaluator/protocol.h"
#include "evaluator/reference_case.h"
#include "evaluator/timing/device_figures.h"
#include "evaluator/verdict.h"

namespace kloop {

// Something on kloop's side failed (the reference, the spec, the machine):
// not a verdict on the candidate.
class EvaluationError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The machine, not the candidate nor kloop's code: a worker that could not
// start (fork or clone failed: EAGAIN, ENOMEM; it died before it loaded
// anything). Passes: a caller evaluates again, a bounded number of times,
// and stores nothing as the candidate's verdict meanwhile.
class EnvironmentError : public EvaluationError {
 public:
  using EvaluationError::EvaluationError;
};

// Whether a failure's words are the machine's lack of processes or memory
// (EAGAIN from fork, clone or thread creation; ENOMEM).
bool machine_exhausted(const std::string& text);

struct EvalOptions {
  std::string device = "cpu";
  std::string protocol = "strict";
  // KernelBench's precision (protocol.h): floating-point inputs, weights,
  // reference, baseline and tolerance in fp32, fp16 or bf16.
  Precision precision = Precision::kFp32;
  uint64_t seed = 1;
  std::chrono::milliseconds load_timeout{60000};
  std::chrono::milliseconds run_timeout{static_cast<long long>(kDefaultRunTimeoutSeconds * 1000)};
  uint64_t memory_limit_bytes = static_cast<uint64_t>(kDefaultMemoryLimitGb * (1ull << 30));
  int threads = 0;                                // intra-op threads; 0 = LibTorch's default
  bool measure_time = true;
  std::optional<double> max_timing_seconds;  // caps the protocol's timing budget
  std::string work_root;                     // "" = /dev/shm if usable, else the temp dir
  bool keep_work_dir = false;
  std::string worker_path;  // "" = kloop-worker beside this executable, or $KLOOP_WORKER
  // What a candidate file is: "cpp" (kloop's kernel API), "kernelbench_python"
  // (KernelBench's Python ModelNew, run by the Python host) or "auto" (Python
  // when the file ends in .py, else C++).
  std::string candidate_format = "auto";
  bool small_dims = false;  // GPU: run at the spec's small cpu dims (tests, quick looks)
  bool activity_audit = true;  // GPU: trace the candidate's kernels (streams, late work, libraries)
  bool profile = false;        // GPU: hardware counters and the profile digests (slower)
  // Error analysis against an fp64 twin of the reference on the first test
  // call: how far the candidate and the fp32 reference each are from it.
  bool fp64_reference = false;
  // With fp64_reference: every call of every test case analyzed, not only
  // the first (kloop mutate's equivalence oracle; costs an fp64 run of the
  // reference per call).
  bool fp64_every_call = false;
  // How the candidate gets each test call's inputs: "draw" (kloop's
  // generator in its own process, same seed), "file" or "cuda_ipc" (a copy
  // the reference publishes). "" = cuda_ipc on the GPU, draw on the CPU.
  std::string input_transport;
  // How the candidate's outputs reach the judge: "file" or "cuda_ipc" ("" =
  // cuda_ipc on the GPU, file on the CPU). Refused CUDA IPC falls back to files.
  std::string output_transport;
  // The candidate runs in a new, empty network namespace. Off only to run
  // under an external profiler (ncu, nsys), whose injected library talks to
  // its host through sockets that namespace cuts.
  bool isolate_network = true;
  // How the candidate's worker is sandboxed (evaluator/isolation/sandbox.h):
  // strict (namespaces, own uid, minimal filesystem, seccomp) or weak (no
  // namespaces: for machines that forbid them, and for ncu/nsys).
  Isolation isolation = Isolation::kStrict;
  uint64_t file_size_limit_bytes = 64ull << 30;  // RLIMIT_FSIZE of the candidate
  uint64_t process_limit = 512;                  // RLIMIT_NPROC of the candidate's uid
  // The chance that a timing batch keeps one of its outputs for a check
  // against the reference (docs/protocols.md). Tests set 1 to make every
  // eligible batch a checked one.
  double timed_check_chance = 0.25;
  // check_reference and audit_reference: each reference compiles in a
  // bundle of this many references from its folder (Builder::
  // build_reference_bundle), about ten times cheaper per reference when a
  // command or a test suite goes through a whole level. 0 or 1: alone.
  std::size_t reference_bundle = 0;
};

// The references a bundled build of `reference` compiles with it: the
// problem references in its folder (each .cpp beside a .yaml of the same
// name), sorted by path and cut into bundles of `size`; `index` gets its
// place in its bundle. Every process that asks gets the same bundle, so
// tests in separate processes share one compile.
std::vector<std::string> reference_bundle_members(const std::string& reference, std::size_t size, std::size_t& index);

// Builds the references at `reference_paths` before a check or an audit
// goes through them, all cores at once: in bundles when
// options.reference_bundle asks for them, else one by one. Progress on
// stderr.
void prebuild_references(const BuilderConfig& config, const std::vector<std::string>& reference_paths,
                         const EvalOptions& options);

// What running a problem's reference alone shows (for spec authors and CI).
struct ReferenceReport {
  std::string problem;
  bool ok = false;
  std::string error;  // build or run failure
  int outputs = 0;
  std::vector<std::string> output_shapes;
  bool finite = false;         // no NaN/Inf in any output
  bool deterministic = false;  // same seed twice, bitwise-identical outputs
  bool seed_sensitive = false; // another seed changes the outputs
  int variants_checked = 0;    // hidden shape variants run (at cpu dims on CPU)
  double build_seconds = 0;
  double run_seconds = 0;
};

// One reason a task may not measure what it claims (see `kloop audit`).
struct AuditFlag {
  std::string check;   // zeros_pass, constant_output, seed_invariant, input_independent, weight_independent
  std::string reason;
};

struct AuditReport {
  std::string problem;
  std::string error;  // the reference failed; no flags then
  double max_abs_output = 0;
  bool has_weights = false;
  std::vector<AuditFlag> flags;
};

// The reference's baselines at the run's dims, measured without files
// (inputs drawn in the worker), for `kloop baseline` and the baseline cache.
struct BaselineReport {
  std::string problem;
  std::string error;
  bool cached = false;
  std::string measured_at;  // when (UTC), by a reference with no candidate process alive
  std::optional<TimingSummary> fp32;
  std::optional<TimingSummary> tf32;
  double input_bytes = 0;
  int throttled_discarded = 0;
  std::string not_cached;  // why a measured GPU baseline was not cached ("": it was)
  double seconds = 0;  // wall time of the whole measurement
};

// Whether a candidate file is KernelBench's Python format under
// EvalOptions::candidate_format ("auto": a .py file); EvaluationError for an
// unknown format.
bool candidate_is_python(const std::string& path, const std::string& format);
// Builds a candidate file as its format says: C++ through the compiler,
// Python through the Python host's build (EvaluationError when this kloop
// cannot run Python candidates, saying why).
// `runtime_requests`: a Python candidate's runtime build requests
// (Builder::build_python).
BuildResult build_candidate_file(Builder& builder, const std::string& path, const std::string& format,
                                 BuildTarget target, const std::string& runtime_requests = "");

// The runtime build requests a Python candidate's worker left in its folder
// `sandbox_dir` (candidate_host.py's REQUESTS_FILE), checked and rewritten
// as kloop's own JSON; "" when there are none or they are malformed (the
// file is the candidate's to write: read without following a link, bounded).
// `name`: the file's name there (kloop's own copy in its cache has another).
std::string read_runtime_build_requests(const std::string& sandbox_dir,
                                        const std::string& name = "kloop-runtime-builds.json");

class Evaluator {
 public:
  Evaluator(Builder& builder, EvalOptions options);
  // A KernelBench-format candidate whose ModelNew asked for extensions
  // after the import is evaluated twice: the first pass's worker writes
  // what it asked for, kloop builds that in the compile sandbox, and the
  // verdict is the second pass's (Verdict::runtime_builds_made). The
  // requests are kept in kloop's cache by the file's text, so a later
  // evaluation of the same file builds them at once, in one pass.
  Verdict evaluate(const ProblemSpec& spec, const std::string& candidate_path);
  // Builds and runs the reference at the run's dims (cpu dims on CPU).
  ReferenceReport check_reference(const ProblemSpec& spec);
  // The same for several, in order. References of one bundle (built
  // bundled, EvalOptions::reference_bundle) share one worker process.
  // `on_report` hears of each report as it is made.
  std::vector<ReferenceReport> check_references(const std::vector<ProblemSpec>& specs,
                                                const std::function<void(const ReferenceReport&)>& on_report = {});
  // Draws case 0 (the run's seed, the spec's cpu dims on CPU or with
  // small_dims, else its full dims) as an evaluation does, runs the
  // reference on it in a worker that keeps its outputs, and writes the
  // case's weights and inputs for another program (reference_case.h).
  // Throws EvaluationError when the reference does not build or run.
  // Its weights drawn from kloop's generator, or `seeded` as KernelBench
  // builds it (docs/kernelbench.md); either way written.
  std::unique_ptr<HeldReferenceCase> hold_reference_case(const ProblemSpec& spec, bool seeded = false);
  // Runs the reference over several seeds, with weights and inputs varied
  // separately, and flags degenerate outputs under the protocol's tolerance.
  AuditReport audit_reference(const ProblemSpec& spec);
  // Times the reference with TF32 off and on at the run's dims, reusing and
  // filling the baseline cache that evaluate() uses (same key).
  BaselineReport measure_baseline(const ProblemSpec& spec, bool use_cache = true);
  // Measures this GPU's copy bandwidth and GEMM rates and stores them as the
  // calibration the speed-of-light floor comes from.
  Calibration calibrate();
  // The candidate's timing repeated `n` times, each in a fresh worker process
  // on the same weights and inputs: how repeatable kloop's figure is.
  // `checks`: each run's timing check (the timer's floors and spans).
  std::vector<TimingSummary> repeat_candidate_timing(const ProblemSpec& spec, const std::string& candidate_path, int n,
                                                     std::vector<nlohmann::json>* checks = nullptr);
  // The reference built for the evaluation's device (the CPU or a GPU).
  // `bundled`: as a member of its folder's bundle when
  // options_.reference_bundle asks for one (checks and audits only: a
  // bundle's build key is not the reference's own, and baselines are
  // cached under the reference's own).
  BuildResult build_reference(const ProblemSpec& spec, bool bundled = false);

  const EvalOptions& options() const { return options_; }
  const BuilderConfig& builder_config() const { return builder_.config(); }

 private:
  Verdict evaluate_pass(const ProblemSpec& spec, const std::string& candidate_path);

  Builder& builder_;
  EvalOptions options_;
  // Per candidate file, the runtime build requests its builds make.
  std::map<std::string, std::string> runtime_requests_;
  std::string requests_seen_;  // what the last pass's worker left
  bool first_pass_stopped_ = false;  // the last pass ended after the test calls for new requests
};

// The options' protocol at their precision (at_precision).
Protocol run_protocol(const EvalOptions& options);

// Locates kloop-worker: $KLOOP_WORKER, then beside the running executable.
std::string find_worker_executable();

// The nvcc architecture of a CUDA device ("sm_90a" for Hopper), from
// $KLOOP_CUDA_ARCH or nvidia-smi; throws EvaluationError when neither tells.
std::string detect_cuda_arch(const std::string& device);

}  // namespace kloop
