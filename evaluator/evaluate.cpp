// The evaluation sequence: build, reference worker, candidate worker,
// comparison, timing. Each step that model-written code can break ends in a
// verdict; only failures on kloop's side throw EvaluationError.
#include "evaluator/evaluate.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>

#include <nlohmann/json.hpp>

#include "base/untrusted_tree.h"
#include "evaluator/build/build_config.h"
#include "evaluator/build/content_hash.h"
#include "evaluator/build/environment.h"
#include "evaluator/build/python_env.h"
#include "evaluator/check/activity_audit.h"
#include "evaluator/detail/activity_checks.h"
#include "evaluator/detail/candidate_steps.h"
#include "evaluator/detail/candidate_timing.h"
#include "evaluator/detail/cases.h"
#include "evaluator/detail/worker_session.h"
#include "evaluator/isolation/subprocess.h"
#include "evaluator/judge.h"
#include "evaluator/runtime/host_tensor.h"
#include "evaluator/timing/device_figures.h"

namespace kloop {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace detail;  // worker sessions, work folders and the timing loop

// The candidate's worker in its sandbox: it sees the system folders, the
// worker, its module, the reference's shared folder (read-only) and its own
// folder. A sandbox that cannot be set up refuses the evaluation.
std::unique_ptr<WorkerSession> candidate_session(const EvalOptions& o, const WorkDir& work, const std::string& module,
                                                 bool cpu, const std::string& cache_dir) {
  SandboxSpec s;
  s.level = o.isolation;
  s.hidden = {cache_dir};
  s.read_only = {o.worker_path, sandbox_init_path(o.worker_path), module, work.shared()};
  if (is_python_module(module)) {  // its entry, the host library and the python's own folders
    s.read_only.push_back(fs::path(module).parent_path().string());
    s.read_only.push_back(python_host_library(o.worker_path));
    const PythonEnvironment& py = python_environment();
    s.read_only.insert(s.read_only.end(), py.installation.begin(), py.installation.end());
  }
  s.writable = {work.sandbox()};
  s.weak_as_sandbox_uid = true;
  s.gpu_devices = !cpu;
  s.host_network = !o.isolate_network;
  if (cpu) s.address_space_bytes = o.memory_limit_bytes;
  s.file_size_bytes = o.file_size_limit_bytes;
  s.processes = o.process_limit;
  if (cpu) s.group_memory_bytes = o.memory_limit_bytes;  // the whole tree's, where a cgroup can be made
  s.group_processes = o.process_limit;
  try {
    return std::make_unique<WorkerSession>(o.worker_path, "candidate", work, work.sandbox(), s);
  } catch (const IsolationError& e) {
    // Out of processes or memory (the sandbox's clone or its uid change
    // failed with EAGAIN): the machine's, for now; otherwise the sandbox
    // cannot be made here at all.
    if (machine_exhausted(e.what())) throw EnvironmentError(std::string("the candidate's worker could not start: ") + e.what());
    throw EvaluationError(std::string("refusing to run the candidate: ") + e.what());
  } catch (const std::runtime_error& e) {  // a socket, pipe or log file for it
    throw EnvironmentError(std::string("the candidate's worker could not start: ") + e.what());
  }
}

// The reference's worker: one that cannot be started is the machine's fault.
WorkerSession reference_session(const EvalOptions& o, const WorkDir& work) {
  try {
    return WorkerSession(o.worker_path, "reference", work);
  } catch (const std::runtime_error& e) {
    throw EnvironmentError(std::string("the reference's worker could not start: ") + e.what());
  }
}

// Why the file reads as Python (KernelBench's torch.nn.Module ModelNew), or
// "" when it does not.
std::string python_candidate(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  for (int n = 0; n < 200 && std::getline(in, line); ++n) {
    const std::size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos) continue;
    const std::string l = line.substr(start);
    for (const char* p : {"import torch", "from torch", "import triton", "class ModelNew(nn.Module)",
                          "class ModelNew(torch.nn.Module)", "def forward(self"}) {
      if (l.rfind(p, 0) == 0) return "line " + std::to_string(n + 1) + ": " + l.substr(0, 60);
    }
  }
  return "";
}

// Where the file is GPU code (a CUDA kernel, a load_inline with
// cuda_sources, Triton, tensors put on "cuda"), or "" when it is not.
std::string gpu_code(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  for (int n = 0; n < 5000 && std::getline(in, line); ++n) {
    for (const char* p : {"__global__", "cuda_sources", "#include <cuda", "import triton", "from triton", ".cuda()",
                          "device=\"cuda", "device='cuda", "torch.device(\"cuda", "torch.device('cuda"}) {
      if (line.find(p) == std::string::npos) continue;
      const std::size_t start = line.find_first_not_of(" \t");
      return "line " + std::to_string(n + 1) + ": " + line.substr(start, 60);
    }
  }
  return "";
}

// A Python build's failure in one line: the compiler's first error (a
// load_inline extension that does not compile), else the exception the
// import ended with (the traceback's last line).
std::string python_build_failure(const BuildResult& cb) {
  for (const auto& d : cb.diagnostics) {
    if (d.severity == "error") return "the candidate's extension does not compile; first error: " + d.format();
  }
  std::string last, where;  // the exception, and the candidate's last line it names
  std::istringstream in(cb.log);
  for (std::string line; std::getline(in, line);) {
    if (line.find_first_not_of(" \t") != std::string::npos) last = line;
    const std::size_t at = line.find("module.py\", line ");
    if (line.rfind("  File \"", 0) == 0 && at != std::string::npos) where = line.substr(at);
  }
  return "importing the candidate failed: " + (last.empty() ? std::string("no output") : last) +
         (where.empty() ? "" : " (" + where + ")");
}

}  // namespace

std::string find_worker_executable() {
  if (const char* env = std::getenv("KLOOP_WORKER"); env && *env) return env;
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    fs::path candidate = self.parent_path() / "kloop-worker";
    if (fs::exists(candidate)) return candidate.string();
  }
  throw EvaluationError("cannot find kloop-worker beside " + self.string() + "; set KLOOP_WORKER");
}

std::string detect_cuda_arch(const std::string& device) {
  if (const char* env = std::getenv("KLOOP_CUDA_ARCH"); env && *env) return env;
  CommandResult r = run_command({"nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader", "-i",
                                 nvidia_smi_device_id(device)},
                                "",
                                std::chrono::seconds(30));
  std::string cap = r.output.substr(0, r.output.find('\n'));
  auto dot = cap.find('.');
  if (!r.status.exited || r.status.code != 0 || dot == std::string::npos) {
    throw EvaluationError("cannot read the compute capability of " + device + " from nvidia-smi (" + r.output +
                          "); set KLOOP_CUDA_ARCH, e.g. sm_90a");
  }
  std::string arch = "sm_" + cap.substr(0, dot) + cap.substr(dot + 1, 1);
  // Hopper's wgmma and TMA instructions need the architecture-specific target.
  if (arch == "sm_90") arch = "sm_90a";
  return arch;
}

bool machine_exhausted(const std::string& text) {
  // strerror(EAGAIN), strerror(ENOMEM), Python's and glibc's words for a
  // thread or process that could not be made.
  for (const char* sign : {"Resource temporarily unavailable", "Cannot allocate memory", "can't start new thread",
                           "EAGAIN", "BlockingIOError", "pthread_create failed"}) {
    if (text.find(sign) != std::string::npos) return true;
  }
  return false;
}

bool candidate_is_python(const std::string& path, const std::string& format) {
  if (format == "kernelbench_python") return true;
  if (format == "cpp") return false;
  if (format != "auto") {
    throw EvaluationError("candidate format '" + format + "' is unknown; use cpp, kernelbench_python or auto");
  }
  return is_python_module(path);
}

BuildResult build_candidate_file(Builder& builder, const std::string& path, const std::string& format,
                                 BuildTarget target, const std::string& runtime_requests) {
  if (!candidate_is_python(path, format)) return builder.build(path, ModuleRole::kCandidate, target);
  try {
    return builder.build_python(path, target, runtime_requests);
  } catch (const std::runtime_error& e) {
    throw EvaluationError(std::string("cannot build the Python candidate: ") + e.what());
  }
}

BuildResult Evaluator::build_reference(const ProblemSpec& spec, bool bundled) {
  const BuildTarget target = options_.device == "cpu" ? BuildTarget::kCpu : BuildTarget::kCuda;
  if (bundled && options_.reference_bundle > 1) {
    std::size_t index = 0;
    const auto members = reference_bundle_members(spec.reference_path, options_.reference_bundle, index);
    return builder_.build_reference_bundle(members, index, target);
  }
  return builder_.build(spec.reference_path, ModuleRole::kReference, target);
}

Evaluator::Evaluator(Builder& builder, EvalOptions options) : builder_(builder), options_(std::move(options)) {
#ifndef KLOOP_WITH_CUDA
  if (options_.device != "cpu") {
    throw EvaluationError("device '" + options_.device + "': this kloop was built without CUDA (a CPU LibTorch); build "
                          "it against a CUDA LibTorch (KLOOP_CMAKE_ARGS=-DCMAKE_PREFIX_PATH=... scripts/build) or use "
                          "--device cpu");
  }
#endif
  // "cuda" is the current device, and the workers compare devices by name
  // ("cuda:0" is what a tensor on it says): one spelling from here on.
  if (options_.device == "cuda") options_.device = "cuda:0";
  if (options_.worker_path.empty()) options_.worker_path = find_worker_executable();
  // A candidate's compile runs in the sandbox its evaluation runs in, under
  // its worker's limits (the build runs model-written code too).
  builder_.set_isolation(options_.isolation);
  BuildLimits limits = builder_.config().limits;
  limits.memory_bytes = options_.memory_limit_bytes;
  limits.processes = options_.process_limit;
  limits.file_size_bytes = std::min(limits.file_size_bytes, options_.file_size_limit_bytes);
  builder_.set_limits(limits);
  if (options_.device != "cpu" && builder_.config().cuda_arch.empty()) {
    builder_.set_cuda_arch(detect_cuda_arch(options_.device));
  }
}

Protocol run_protocol(const EvalOptions& options) {
  return at_precision(protocol_by_name(options.protocol), options.precision);
}

std::string read_runtime_build_requests(const std::string& sandbox_dir, const std::string& name) {
  // candidate_host.py's bounds: 16 requests of at most 1 MiB of sources each.
  constexpr uint64_t kMostBytes = 16ull * 1024 * 1024 + (1 << 20);
  std::string text;
  try {
    text = read_file_nofollow(sandbox_dir + "/" + name, kMostBytes, /*single_name=*/true);
  } catch (const std::exception&) {
    return "";  // none, a link, or too long
  }
  const json requests = json::parse(text, nullptr, false);
  if (!requests.is_array() || requests.empty() || requests.size() > 16) return "";
  json kept = json::array();
  for (const auto& r : requests) {
    if (!r.is_object() || !r.contains("kind") || !r["kind"].is_string() || !r.contains("arguments") ||
        !r["arguments"].is_object() || !r["arguments"].contains("name") || !r["arguments"]["name"].is_string()) {
      return "";
    }
    const std::string kind = r["kind"];
    if (kind != "load_inline" && kind != "load") return "";
    json one = {{"kind", kind}, {"arguments", r["arguments"]}};
    if (kind == "load") {
      if (!r.contains("files") || !r["files"].is_array()) return "";
      one["files"] = r["files"];
    }
    kept.push_back(std::move(one));
  }
  return kept.dump();
}

namespace {

// Where the runtime build requests of a candidate file are kept between
// evaluations (in kloop's cache, which no sandbox sees): by the file's
// text and the build's target, so that later evaluations of the same file
// (a rescore, a repeat) build them at once, in one pass.
fs::path stored_requests_path(const std::string& cache_dir, const std::string& candidate_path, bool cpu) {
  ContentHash h;
  h.add("runtime-build-requests").add(cpu ? "cpu" : "cuda").add_file(candidate_path);
  return fs::path(cache_dir) / "runtime-build-requests" / (h.hex() + ".json");
}

}  // namespace

Verdict Evaluator::evaluate(const ProblemSpec& spec, const std::string& candidate_path) {
  const bool cpu = options_.device == "cpu";
  const bool python = fs::exists(candidate_path) && candidate_is_python(candidate_path, options_.candidate_format);
  auto& known = runtime_requests_[candidate_path];
  fs::path stored;
  if (python) {
    try {
      stored = stored_requests_path(builder_.config().cache_dir, candidate_path, cpu);
      if (known.empty() && fs::exists(stored)) known = read_runtime_build_requests(stored.parent_path().string(),
                                                                                 stored.filename().string());
    } catch (const std::exception&) {
      stored.clear();  // unreadable: evaluated in two passes, as the first time
    }
  }
  requests_seen_.clear();
  first_pass_stopped_ = false;
  Verdict v = evaluate_pass(spec, candidate_path);
  std::string requests = std::move(requests_seen_);
  requests_seen_.clear();
  const std::string first_pass = first_pass_stopped_
                                     ? "stopped after the test calls, when ModelNew had asked for extensions"
                                     : "ran to its end";
  if (!requests.empty() && requests != known) {
    // ModelNew asked for extensions after the import (KernelBench's eval
    // builds them wherever they are asked for): built now, in the compile
    // sandbox, from what was asked, and the file evaluated again with them.
    known = requests;
    if (!stored.empty()) {
      std::error_code ec;
      fs::create_directories(stored.parent_path(), ec);
      try {
        replace_file(stored.parent_path().string(), stored.filename().string(), requests);
      } catch (const std::exception&) {
        // not kept: the next evaluation takes two passes again
      }
    }
    const double first = v.phases.total;
    v = evaluate_pass(spec, candidate_path);
    requests_seen_.clear();
    v.phases.total += first;
    v.runtime_builds_first_pass = first_pass;
  }
  if (!known.empty()) {
    for (const auto& r : json::parse(known)) {
      const std::string name = r["arguments"]["name"].get<std::string>().substr(0, 100);
      if (std::find(v.runtime_builds.begin(), v.runtime_builds.end(), name) == v.runtime_builds.end() &&
          std::find(v.runtime_builds_made.begin(), v.runtime_builds_made.end(), name) == v.runtime_builds_made.end()) {
        v.runtime_builds_made.push_back(name);
      }
    }
  }
  return v;
}

Verdict Evaluator::evaluate_pass(const ProblemSpec& given, const std::string& candidate_path) {
  const auto start = Clock::now();
  const ProblemSpec spec = spec_at_precision(given, options_.precision);
  Protocol protocol = run_protocol(options_);
  const bool cpu = options_.device == "cpu";
  const BuildTarget target = cpu ? BuildTarget::kCpu : BuildTarget::kCuda;

  Verdict v;
  v.problem = spec.name;
  v.device = options_.device;
  v.protocol_name = protocol.name;
  v.protocol = protocol.to_json();
  v.candidate_path = candidate_path;
  v.isolation = isolation_name(options_.isolation);
  v.environment = build_environment();
  const TimingRules rules = timing_rules(protocol, cpu, options_);
  v.timing_statistic = rules.statistic;
  v.observed = observations_before_timing();
  // GPU code on a CPU evaluation fails to build or to run; the failure's
  // traceback says less than one line does (it stays in log_tail).
  const std::string gpu_where = cpu && fs::exists(candidate_path) ? gpu_code(candidate_path) : "";
  bool wrong_format = false;  // a Python file given as C++: that is the one line to say
  auto finish = [&](VerdictClass cls, std::string message) {
    v.verdict = cls;
    v.message = std::move(message);
    if (!gpu_where.empty() && !wrong_format && (cls == VerdictClass::kCompileError || cls == VerdictClass::kLoadError ||
                               cls == VerdictClass::kRuntimeError)) {
      v.log_tail += (v.log_tail.empty() ? "" : "\n") + v.message;
      v.message = "this candidate is GPU code (" + gpu_where +
                  ") and this evaluation runs on the CPU: evaluate it with --device cuda";
    }
    // A candidate written for fp32 only meets float16/bfloat16 tensors in
    // an fp16/bf16 run: its error (ATen's "expected scalar type Float but
    // found Half", a dtype mismatch of its output) says why in these words.
    if (options_.precision != Precision::kFp32 &&
        (cls == VerdictClass::kRuntimeError || cls == VerdictClass::kLoadError ||
         (cls == VerdictClass::kIncorrect && v.message.find("dtype mismatch") != std::string::npos))) {
      const std::string dtype = dtype_name(precision_dtype(options_.precision));
      v.message += " [this evaluation runs in " + std::string(precision_name(options_.precision)) +
                   ": the inputs, weights and expected outputs are " + dtype +
                   " tensors; a candidate written for float32 only must handle " + dtype + "]";
    }
    v.phases.total = since(start);
    return v;
  };

  if (excluded_by_protocol(spec, protocol.name, options_.precision)) {
    throw EvaluationError(spec.name + " is excluded from the " + protocol.name + " protocol at " +
                          precision_name(options_.precision) + " as degenerate (its spec's audit decisions: " +
                          spec.spec_path + "); use --protocol kernelbench-v0.1");
  }

  // 1. Builds: the candidate first, since its errors need no reference.
  if (!fs::exists(candidate_path)) throw EvaluationError(candidate_path + ": no such file");
  const bool python = candidate_is_python(candidate_path, options_.candidate_format);
  BuildObservation built;
  if (!python) built.python_under_cpp = python_candidate(candidate_path);
  wrong_format = !built.python_under_cpp.empty();
  if (auto decided = judge_build(built, candidate_path)) return finish(decided->verdict, decided->message);
  // The builds' phases are their wall time here, not the builder's own
  // figure: a cache key can make a precompiled header first (seconds).
  auto build_start = Clock::now();
  BuildResult cb =
      build_candidate_file(builder_, candidate_path, options_.candidate_format, target, runtime_requests_[candidate_path]);
  v.phases.build_candidate = since(build_start);
  v.build = {cb.cached, cb.timed_out, cb.seconds, cb.compile_seconds, cb.key, cb.command, cb.log, cb.diagnostics};
  built.ok = cb.ok;
  built.timed_out = cb.timed_out;
  built.timeout_s = builder_.config().timeout.count();
  built.failure = cb.failure;
  if (python && !cb.ok && cb.failure.empty()) built.python_failure = python_build_failure(cb);
  built.diagnostics = cb.diagnostics;
  {
    std::istringstream log(cb.log);
    for (std::string line; std::getline(log, line);) {
      if (line.find_first_not_of(" \t\r") != std::string::npos) built.log_end = line;
    }
  }
  if (auto decided = judge_build(built, candidate_path)) return finish(decided->verdict, decided->message);
  build_start = Clock::now();
  BuildResult rb = build_reference(spec);
  v.phases.build_reference = since(build_start);
  if (!rb.ok) {
    throw EvaluationError("the reference " + spec.reference_path + " does not build:\n" +
                          summarize_diagnostics(rb.diagnostics, 20) + (rb.diagnostics.empty() ? rb.log : ""));
  }

  // 2. The test plan and its scratch folder.
  auto step_start = Clock::now();
  // Ends one of PhaseTimes' steps and starts the next.
  auto step = [&](double& seconds) {
    const auto now = Clock::now();
    seconds += std::chrono::duration<double>(now - step_start).count();
    step_start = now;
  };
  std::vector<TestCase> tests = plan_tests(spec, protocol, cpu || options_.small_dims, options_.seed);
  v.tests_planned = static_cast<int>(tests.size());
  WorkDir work(options_.work_root, options_.keep_work_dir);
  // What ModelNew asked to build after the import, read when this pass
  // ends, however it ends, before its folder goes (evaluate()).
  struct RequestsLeft {
    const WorkDir& work;
    bool python;
    std::string& out;
    ~RequestsLeft() {
      if (python) out = read_runtime_build_requests(work.sandbox());
    }
  } requests_left{work, python, requests_seen_};
  // New requests end the pass after the test calls (ModelNew is built at
  // each case's first call, under its seed): evaluate() builds them and
  // evaluates again, and the rest of this pass would only judge the
  // fallback (on a GPU at upstream sizes, the timing's seconds). The
  // verdict stands only if the file is gone or back to what was known when
  // evaluate() reads it after the candidate's process has ended: the
  // candidate's doing, and not a correct one.
  auto asked_for_builds = [&]() -> std::optional<Verdict> {
    if (!python) return std::nullopt;
    const std::string asked = read_runtime_build_requests(work.sandbox());
    if (asked.empty() || asked == runtime_requests_[candidate_path]) return std::nullopt;
    first_pass_stopped_ = true;
    return finish(VerdictClass::kRuntimeError,
                  "ModelNew asked for extensions after the import and this pass ended there; the file is "
                  "evaluated again with them built");
  };
  const int calls = protocol.calls_per_case;
  // A KernelBench-format candidate is built as KernelBench builds it, and
  // so is the reference it is judged against (wire::Construction).
  const wire::Construction construction = python ? wire::Construction::kSeeded : wire::Construction::kDrawn;
  v.construction = python ? "seeded" : "drawn";
  std::vector<wire::Case> cases;
  for (const auto& t : tests) {
    cases.push_back(generate_case(spec, t.dims, t.id, t.seed, t.seed, t.scale, calls,
                                  protocol.randomize_identity_params, t.centered, construction));
  }

  step(v.phases.plan);
  // 3. The two workers. The reference's failures are kloop's (an
  // EvaluationError); the candidate's end in a verdict.
  WorkerSession ref = reference_session(options_, work);
  // A reference reply before the candidate's module is loaded (after, CandidateSteps makes the calls).
  auto ref_reply = [&](auto reply) {
    if (!reply && !ref.started()) {
      throw EnvironmentError("the reference's worker ended before it started (" + ref.failure() + ")");
    }
    if (!reply || !reply->ok()) {
      throw EvaluationError("the reference of " + spec.name + " failed (" +
                            (reply ? reply->message() : ref.failure()) + ")\n" + ref.log_tail());
    }
    return reply->reply;
  };
  const auto ref_t0 = Clock::now();
  const bool ref_sent = ref.send(load_command(rb, "reference", spec, options_));
  // The candidate's worker starts while the reference's loads (each spends
  // about half a second loading LibTorch), with no module of the
  // candidate's in it: it loads one only after the baseline, when
  // CandidateSteps asks it to. Until then it runs kloop's code alone. A
  // reference that fails is still the first thing said.
  const std::string module = stage_module(work, cb.library_path);
  std::unique_ptr<WorkerSession> cand_started;
  std::exception_ptr cand_error;
  try {
    cand_started = candidate_session(options_, work, module, cpu, builder_.config().cache_dir);
  } catch (...) {
    cand_error = std::current_exception();
  }
  std::optional<wire::Outcome<wire::LoadReply>> ref_loaded;
  if (ref_sent) {
    ref_loaded = ref.await<wire::LoadReply>(options_.load_timeout);
  } else {
    ref.lost(options_.load_timeout);
  }
  v.phases.reference += since(ref_t0);
  json device_info = ref_reply(std::move(ref_loaded)).device;
  if (cand_error) std::rethrow_exception(cand_error);
  WorkerSession& cand = *cand_started;
  v.environment["device"] = device_info;
  step(v.phases.reference_start);
  // The candidate's worker up and idle (waiting for its next command)
  // before anything is measured beside it. Its failure to start is judged
  // as the first candidate call's, once CandidateSteps exists.
  auto ready = cand.call(wire::Ready{}, options_.load_timeout);
  step(v.phases.candidate_start);
  std::optional<TimerState> timer;
  // The reference's baseline: from the cache, or measured now, while no
  // code of the candidate's has run (its worker, idle, holds no module:
  // nothing can load the CPU or the GPU beside the reference, or signal
  // it, to inflate the speedup).
  if (options_.measure_time) {
    const BaselineKey key{spec.name,          rb.key,         json(tests[0].dims),
                          device_info,        KLOOP_TORCH_VERSION, to_json(rules),
                          precision_name(options_.precision)};
    BaselineReport b;
    const auto t0 = Clock::now();
    reference_baseline(ref, cases[0], key, rules, cpu, true, builder_.config().cache_dir, options_.run_timeout, b);
    v.phases.reference += since(t0);
    if (!b.error.empty()) {
      throw EvaluationError("the reference of " + spec.name + " failed (" + b.error + ")\n" + ref.log_tail());
    }
    v.reference_time_fp32 = b.fp32;
    v.reference_time_tf32 = b.tf32;
    v.baseline_cached = b.cached;
    v.baseline_measured_at = b.measured_at;
    const bool use_tf32 = !cpu && protocol.tf32_baseline;
    v.baseline = use_tf32 ? "tf32" : "fp32";
    v.reference_time = use_tf32 ? v.reference_time_tf32 : v.reference_time_fp32;
    if (cpu) v.reference_time_fp32.reset();
    // The trusted timer's own spans (drawing, flushing, copying outputs):
    // also measured with no candidate code beside it.
    timer = calibrate_timer(ref, cases[0], rules, options_.device, options_.run_timeout);
  }
  step(v.phases.baseline);
  CandidateSteps steps(spec, protocol, options_, rules, builder_.config().cache_dir, work, ref, cand, v, finish);
  // From here on the candidate's module is loaded: whatever its process
  // sends is untrusted, and a reference that dies is a verdict on the
  // candidate (it may have been attacked), never a lost attempt.
  auto judged = [&](const WorkerFailure& f) {
    v.log_tail = cand.log_tail();
    const FailureJudgement j = judge_failure(f);
    if (j.finding) v.integrity.push_back(*j.finding);
    return finish(j.decision.verdict, j.decision.message);
  };
  try {
    if (auto bad = steps.worker_failed(CallStatus::of(ready))) return *bad;
    // The timer's handshake with the candidate's worker, measured while no
    // module of the candidate's is in it.
    if (timer) {
      if (auto bad = steps.worker_failed(attach_timer(*timer, ref, cand, options_.load_timeout))) return *bad;
    }
    if (auto bad = steps.worker_failed(CallStatus::of(steps.cand_call(load_command(module, "candidate", spec, options_),
                                                                       options_.load_timeout)))) {
      return *bad;
    }
    step(v.phases.candidate_start);

    // 4. The tests, streamed call by call through both workers, judged.
    auto decided = steps.run_tests(tests, cases, calls);
    step(v.phases.tests);
    if (const auto stop = asked_for_builds()) return *stop;
    // A decided verdict is a copy made when it was decided: the step it ended goes in too.
    if (decided) {
      decided->phases = v.phases;
      return *decided;
    }
    // 5. and 6. The reference's trace, the timing, the call after it and the
    // activity audit, judged.
    if (options_.measure_time) {
      decided = steps.time_and_audit(tests, cases, calls, device_info, rb.key, *timer);
      step(v.phases.timing);
      if (decided) {
        decided->phases = v.phases;
        return *decided;
      }
    }
    cand.finish();
    // What the reference could not analyze beside the candidate, with the
    // candidate's process gone (it cannot hold the device's memory now).
    decided = steps.analyze_deferred();
    if (decided) {
      step(v.phases.end);
      decided->phases = v.phases;
      return *decided;
    }
    ref.finish();
    step(v.phases.end);
    return finish(VerdictClass::kCorrect, correct_message(v.tests.size(), v.speedup));
  } catch (const CandidateFailed& f) {
    return f.verdict;
  } catch (const ProtocolViolation& e) {
    return judged({WorkerFailure::Kind::kProtocolViolation, "", e.what()});
  } catch (const json::exception& e) {
    return judged({WorkerFailure::Kind::kProtocolViolation, "", std::string("a reply kloop cannot read: ") + e.what()});
  } catch (const ReferenceDied& e) {
    return judged({WorkerFailure::Kind::kReferenceDied, "", e.what()});
  }
}

std::vector<TimingSummary> Evaluator::repeat_candidate_timing(const ProblemSpec& given,
                                                             const std::string& candidate_path, int n,
                                                             std::vector<nlohmann::json>* checks) {
  const ProblemSpec spec = spec_at_precision(given, options_.precision);
  const Protocol protocol = run_protocol(options_);
  const bool cpu = options_.device == "cpu";
  const BuildTarget target = cpu ? BuildTarget::kCpu : BuildTarget::kCuda;
  const TimingRules rules = timing_rules(protocol, cpu, options_);
  BuildResult cb =
      build_candidate_file(builder_, candidate_path, options_.candidate_format, target, runtime_requests_[candidate_path]);
  BuildResult rb = build_reference(spec);
  if (!cb.ok || !rb.ok) throw EvaluationError("repeat timing: the " + std::string(cb.ok ? "reference" : "candidate") + " does not build");
  const TestCase t = plan_tests(spec, protocol, cpu || options_.small_dims, options_.seed).front();
  const wire::Case c =
      generate_case(spec, t.dims, t.id, t.seed, t.seed, t.scale, protocol.calls_per_case,
                    protocol.randomize_identity_params, false,
                    candidate_is_python(candidate_path, options_.candidate_format) ? wire::Construction::kSeeded
                                                                                    : wire::Construction::kDrawn);
  WorkDir work(options_.work_root, options_.keep_work_dir);
  // The reference's worker is the timer of every candidate process.
  WorkerSession ref(options_.worker_path, "reference", work);
  CallStatus status = CallStatus::of(ref.call(load_command(rb, "reference", spec, options_), options_.load_timeout));
  if (status.ok()) {  // the weights file; inputs are drawn where they are used
    status = CallStatus::of(ref.call(wire::Prepare{work.shared(), c}, options_.run_timeout));
  }
  if (!status.ok()) {
    throw EvaluationError("repeat timing: the reference failed: " +
                          (status.failure ? status.failure->message : ref.failure()));
  }
  TimerState timer = calibrate_timer(ref, c, rules, options_.device, options_.run_timeout);
  std::vector<TimingSummary> out;
  for (int i = 0; i < n; ++i) {
    const std::string module = stage_module(work, cb.library_path);
    const auto cand_started = candidate_session(options_, work, module, cpu, builder_.config().cache_dir);
    WorkerSession& cand = *cand_started;
    auto fail = [&](const CallStatus& r) {
      if (!r.ok()) {
        throw EvaluationError("repeat timing: the candidate failed: " + (r.failure ? r.failure->message : cand.failure()));
      }
    };
    fail(attach_timer(timer, ref, cand, options_.load_timeout));
    fail(CallStatus::of(cand.call(load_command(module, "candidate", spec, options_), options_.load_timeout)));
    double candidate_seconds = 0, reference_seconds = 0;
    CandidateTiming timed;
    try {
      // Each process its own nonces: no cache in a file carries over.
      Unpredictable random;
      TimedRun run;
      run.timed_case = timing_case_of(c, 1, random.nonce());
      run.setup = wire::TimeSetup{work.shared(), timing_case_of(c, 1, random.nonce()), c, to_json(rules), false,
                                  random.call_id()};
      run.post = wire::TimePost{work.sandbox(), cpu ? "file" : "cuda_ipc", std::nullopt, std::nullopt};
      run.rules = rules;
      run.cpu = cpu;
      run.cpu_threads = granted_cpu_threads(options_);
      run.dir = work.shared();
      run.timeout = options_.run_timeout;
      run.tolerance = to_json(protocol.tolerance);
      run.checks = false;  // a benchmark of the timer: the evaluation checks
      timed = time_candidate(ref, cand, timer, run, fail, candidate_seconds, reference_seconds);
    } catch (const ProtocolViolation& e) {
      throw EvaluationError(std::string("repeat timing: protocol_violation: ") + e.what());
    }
    out.push_back(timed.summary);
    if (checks) checks->push_back(timed.check);
    cand.finish();
  }
  ref.finish();
  return out;
}

}  // namespace kloop
