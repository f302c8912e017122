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
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "evaluator/build/build_config.h"
#include "evaluator/build/environment.h"
#include "evaluator/check/activity_audit.h"
#include "evaluator/detail/activity_checks.h"
#include "evaluator/detail/candidate_timing.h"
#include "evaluator/detail/cases.h"
#include "evaluator/detail/worker_session.h"
#include "evaluator/isolation/subprocess.h"
#include "evaluator/runtime/host_tensor.h"
#include "evaluator/timing/device_figures.h"

namespace kloop {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace detail;  // worker sessions, work folders and the timing loop

// Part of the cached reference counters' key: bump it when the profiler's
// metric set (RangeProfiler::metric_names) or their JSON form changes.
constexpr int kReferenceMetricsFormat = 1;

// The candidate's worker in its sandbox: it sees the system folders, the
// worker, its module, the reference's shared folder (read-only) and its own
// folder. A sandbox that cannot be set up refuses the evaluation.
WorkerSession candidate_session(const EvalOptions& o, const WorkDir& work, const std::string& module, bool cpu) {
  SandboxSpec s;
  s.level = o.isolation;
  s.read_only = {o.worker_path, sandbox_init_path(o.worker_path), module, work.shared()};
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
    return WorkerSession(o.worker_path, "candidate", work, work.sandbox(), s);
  } catch (const IsolationError& e) {
    throw EvaluationError(std::string("refusing to run the candidate: ") + e.what());
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

// One failed output in words, with the tolerance it was held to.
std::string describe_failed_output(const TensorComparison& c, const Tolerance& tol) {
  if (!c.problem.empty()) return c.name + ": " + c.problem;
  char buf[320];
  const bool scaled = c.atol_used > 0 && c.atol_used < tol.atol;
  std::snprintf(buf, sizeof(buf), "%s differs in %lld of %lld elements (max abs error %.3g; allowed %.3g + %.3g * |expected|%s)",
                c.name.c_str(), static_cast<long long>(c.mismatches), static_cast<long long>(c.numel), c.max_abs_error,
                scaled ? c.atol_used : tol.atol, tol.rtol,
                scaled ? ", atol capped at 1% of the expected output's RMS" : "");
  return buf;
}

VerdictClass class_from_name(const std::string& name) {
  if (name == "load_error") return VerdictClass::kLoadError;
  if (name == "timeout") return VerdictClass::kTimeout;
  return VerdictClass::kRuntimeError;
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
  // A candidate's compile runs in the sandbox its evaluation runs in.
  builder_.set_isolation(options_.isolation);
  if (options_.device != "cpu" && builder_.config().cuda_arch.empty()) {
    builder_.set_cuda_arch(detect_cuda_arch(options_.device));
  }
}

Verdict Evaluator::evaluate(const ProblemSpec& spec, const std::string& candidate_path) {
  const auto start = Clock::now();
  Protocol protocol = protocol_by_name(options_.protocol);
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
  const bool fresh = fresh_timed_inputs(protocol, cpu, options_);
  v.timing_statistic = rules.statistic;
  auto finish = [&](VerdictClass cls, std::string message) {
    v.verdict = cls;
    v.message = std::move(message);
    v.phases.total = since(start);
    return v;
  };

  if (excluded_by_protocol(spec, protocol.name)) {
    throw EvaluationError(spec.name + " is excluded from the " + protocol.name +
                          " protocol (see its spec's deviations); use --protocol kernelbench");
  }

  // 1. Builds: the candidate first, since its errors need no reference.
  if (!fs::exists(candidate_path)) throw EvaluationError(candidate_path + ": no such file");
  if (const std::string why = python_candidate(candidate_path); !why.empty()) {
    return finish(VerdictClass::kCompileError,
                  candidate_path + " is a Python ModelNew (" + why +
                      "), KernelBench's format; kloop's candidates are C++: a struct ModelNew whose forward takes and "
                      "returns at::Tensor, registered with KLOOP_REGISTER_CANDIDATE(ModelNew) (README: Writing a "
                      "candidate)");
  }
  BuildResult cb = builder_.build(candidate_path, ModuleRole::kCandidate, target);
  v.phases.build_candidate = cb.seconds;
  v.build = {cb.cached, cb.timed_out, cb.seconds, cb.compile_seconds, cb.key, cb.command, cb.log, cb.diagnostics};
  if (!cb.ok) {
    if (cb.timed_out) {
      return finish(VerdictClass::kCompileError,
                    "compilation did not finish within " + std::to_string(builder_.config().timeout.count()) + " s");
    }
    int errors = 0;
    for (const auto& d : cb.diagnostics) errors += d.severity == "error" ? 1 : 0;
    std::string first;
    for (const auto& d : cb.diagnostics) {
      if (d.severity == "error") {
        first = d.format();
        break;
      }
    }
    return finish(VerdictClass::kCompileError,
                  std::to_string(errors) + " error(s)" + (first.empty() ? "" : "; first: " + first));
  }
  BuildResult rb = build_reference(spec);
  v.phases.build_reference = rb.seconds;
  if (!rb.ok) {
    throw EvaluationError("the reference " + spec.reference_path + " does not build:\n" +
                          summarize_diagnostics(rb.diagnostics, 20) + (rb.diagnostics.empty() ? rb.log : ""));
  }

  // 2. The test plan and its scratch folder.
  std::vector<TestCase> tests = plan_tests(spec, protocol, cpu || options_.small_dims, options_.seed);
  v.tests_planned = static_cast<int>(tests.size());
  WorkDir work(options_.work_root, options_.keep_work_dir);
  const int calls = protocol.calls_per_case;
  std::vector<wire::Case> cases;
  for (const auto& t : tests) {
    cases.push_back(generate_case(spec, t.dims, t.id, t.seed, t.seed, t.scale, calls,
                                  protocol.randomize_identity_params, t.centered));
  }

  // 3. The two workers. The reference's failures are kloop's (an
  // EvaluationError); the candidate's end in a verdict.
  WorkerSession ref(options_.worker_path, "reference", work);
  bool candidate_started = false;
  auto ref_call = [&](const auto& cmd, std::chrono::milliseconds timeout, double& phase_seconds) {
    const auto t0 = Clock::now();
    auto reply = ref.call(cmd, timeout);
    phase_seconds += since(t0);
    if (!reply && candidate_started) throw ReferenceDied(ref.failure());
    if (!reply || !reply->ok()) {
      throw EvaluationError("the reference of " + spec.name + " failed (" +
                            (reply ? reply->message() : ref.failure()) + ")\n" + ref.log_tail());
    }
    return reply->reply;
  };
  json device_info = ref_call(load_command(rb, "reference", spec, options_), options_.load_timeout,
                              v.phases.reference)
                         .device;
  v.environment["device"] = device_info;
  double overhead = 0;
  // The reference's baseline: from the cache, or measured now, while no
  // process of the candidate exists (none can load the CPU or the GPU
  // beside it, or signal it, to inflate the speedup).
  if (options_.measure_time) {
    const BaselineKey key{spec.name, rb.key, json(tests[0].dims), device_info, KLOOP_TORCH_VERSION, to_json(rules)};
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
    // The trusted per-call overhead of the timing loop, for the timing
    // cross-check: also measured with no candidate process beside it.
    overhead = sample_overhead_seconds(ref, rules, options_.run_timeout, fresh ? &cases[0] : nullptr);
  }
  const std::string module = stage_module(work, cb.library_path);
  WorkerSession cand = candidate_session(options_, work, module, cpu);
  candidate_started = true;
  // A candidate call, timed as the candidate's phase.
  auto cand_call = [&](const auto& cmd, std::chrono::milliseconds timeout, const std::vector<int>& fds = {}) {
    const auto t0 = Clock::now();
    auto reply = cand.call(cmd, timeout, fds);
    v.phases.candidate += since(t0);
    return reply;
  };
  // The verdict of a candidate call that did not succeed, if it did not.
  auto worker_failed = [&](const CallStatus& r) -> std::optional<Verdict> {
    if (!r.replied) {
      v.log_tail = cand.log_tail();
      if (cand.protocol_violation()) {
        v.integrity.push_back({"protocol_violation", cand.failure().substr(std::string("protocol_violation: ").size())});
      }
      return finish(cand.failure_class(), cand.failure());
    }
    if (r.failure) {
      v.log_tail = cand.log_tail();
      return finish(class_from_name(r.failure->error_class), r.failure->message);
    }
    return std::nullopt;
  };
  // From here on the candidate's process exists: whatever it sends is
  // untrusted, and a reference that dies is a verdict on the candidate
  // (it may have been attacked), never a lost attempt.
  try {
    if (auto bad = worker_failed(CallStatus::of(cand_call(load_command(module, "candidate", spec, options_),
                                                           options_.load_timeout)))) {
      return *bad;
    }

    // 4. The tests, one call at a time: the reference draws the inputs and
    // keeps its expected outputs; the candidate gets the same inputs (on the
    // GPU a copy the reference publishes through CUDA IPC, on the CPU drawn
    // again from the same seed) and publishes its outputs and its inputs after
    // the call (CUDA IPC on the GPU, files on the CPU); the reference judges
    // them where they are. Expected values never leave the reference's
    // process, and memory holds one call, so upstream sizes fit.
    v.exchange = !options_.output_transport.empty() ? options_.output_transport : cpu ? "file" : "cuda_ipc";
    if (v.exchange != "file" && v.exchange != "cuda_ipc") {
      throw EvaluationError("output transport '" + v.exchange + "': expected file or cuda_ipc");
    }
    std::string inputs_via = !options_.input_transport.empty() ? options_.input_transport : cpu ? "draw" : "cuda_ipc";
    if (inputs_via != "draw" && inputs_via != "file" && inputs_via != "cuda_ipc") {
      throw EvaluationError("input transport '" + inputs_via + "': expected draw, file or cuda_ipc");
    }
    v.input_exchange = inputs_via == "draw" ? "drawn" : inputs_via;
    const json tolerance = to_json(protocol.tolerance);
    // What the candidate claims it published, rebuilt from what kloop knows:
    // file paths are kloop's own (the candidate's folder, the call's stem),
    // never a path from the reply; from a cuda_ipc description only the layout
    // is taken, which the judge bounds-checks against the mapped memory.
    auto trusted_exchange = [&](const json& claimed, const std::string& stem) -> json {
      if (!claimed.is_object() || !claimed.contains("transport") || !claimed["transport"].is_string()) {
        throw ProtocolViolation("the reply does not say how the outputs were published");
      }
      const std::string via = claimed["transport"];
      if (via == "file") {
        return {{"transport", "file"}, {"outputs", {{"path", stem + ".outputs.safetensors"}}},
                {"inputs", {{"path", stem + ".inputs.safetensors"}}}};
      }
      if (via != "cuda_ipc") throw ProtocolViolation("unknown transport '" + via.substr(0, 40) + "'");
      if (!claimed.contains("bytes") || !claimed["bytes"].is_number_unsigned() || !claimed.contains("tensors") ||
          !claimed["tensors"].is_array() || claimed["tensors"].size() > 4096) {
        throw ProtocolViolation("a cuda_ipc description without a valid size and tensor list");
      }
      return {{"transport", "cuda_ipc"}, {"bytes", claimed["bytes"]}, {"tensors", claimed["tensors"]}};
    };
    auto judge = [&](const json& claimed, const std::string& stem, bool post, bool keep, bool analyze = false) {
      if (claimed.is_object() && claimed.contains("fallback_reason") && v.exchange == "cuda_ipc") {
        // The candidate could not export CUDA IPC memory and published files.
        v.exchange = "file (cuda_ipc failed: " + claimed["fallback_reason"].dump().substr(0, 300) + ")";
      }
      wire::Judge cmd{trusted_exchange(claimed, stem), tolerance, post, keep, analyze,
                      analyze && protocol.precision_check};
      auto send_fds = [&] {
        std::vector<int> fds;
        if (cmd.exchange["transport"] == "cuda_ipc") {
          if (cand.fds().size() != 1) throw ProtocolViolation("a cuda_ipc reply must carry exactly one descriptor");
          fds.push_back(cand.fds()[0].get());
        }
        return fds;
      };
      const auto t0 = Clock::now();
      auto answer = ref.call(cmd, options_.run_timeout, send_fds());
      v.phases.compare += since(t0);
      if (answer && !answer->ok() && v.exchange == "cuda_ipc") {
        // The driver or the container refused CUDA IPC: the same tensors as
        // files, and files for the rest of this evaluation.
        v.exchange = "file (cuda_ipc failed: " + answer->message() + ")";
        auto exported = cand_call(wire::Export{"file"}, options_.run_timeout);
        if (auto bad = worker_failed(CallStatus::of(exported))) throw CandidateFailed{*bad};
        cmd.exchange = trusted_exchange(exported->reply.exchange.value_or(json()), stem);
        answer = ref.call(cmd, options_.run_timeout, send_fds());
      }
      if (!answer) throw ReferenceDied(ref.failure() + "\n" + ref.log_tail());
      if (!answer->ok()) {
        // What the candidate published could not be read: its failure.
        if (answer->error_class() == "exchange_error") {
          throw ProtocolViolation("its published tensors are unreadable (" + answer->message() + ")");
        }
        throw EvaluationError("judging the candidate of " + spec.name + " failed (" + answer->message() + ")\n" +
                              ref.log_tail());
      }
      return answer->reply;
    };
    auto transport = [&] { return v.exchange == "cuda_ipc" ? "cuda_ipc" : "file"; };
    bool all_passed = true;
    for (std::size_t ti = 0; ti < tests.size(); ++ti) {
      const TestCase& t = tests[ti];
      const wire::Case& c = cases[ti];
      ref_call(wire::Prepare{work.shared(), c}, options_.run_timeout, v.phases.reference);
      for (int call = 0; call < calls; ++call) {
        TestOutcome o;
        o.case_id = t.id;
        o.call = call;
        o.label = t.label();
        o.scaling = t.scaling;
        o.variant = t.variant;
        o.centered = t.centered;
        const bool first = ti == 0 && call == 0;
        // The fp64 twin: the first call (--fp64-reference, and strict's
        // precision check), and under strict every call of the centered
        // case, whose outputs strict judges against it where fp32 itself
        // strays (compare_with_exact_allowance).
        const bool analyzed = (first && options_.fp64_reference) ||
                              (protocol.precision_check && ((ti == 0 && call == 0) || t.centered));
        const wire::Expect expect_cmd{work.shared(), c, call, first, analyzed, inputs_via != "draw" ? inputs_via : ""};
        const wire::ExpectReply expected = ref_call(expect_cmd, options_.run_timeout, v.phases.reference);
        if (expected.inputs_exchange_error) {
          // The reference could not publish them: the candidate draws them
          // itself (same generator, same seed) from here on.
          v.input_exchange = "drawn (" + inputs_via + " failed: " + *expected.inputs_exchange_error + ")";
          inputs_via = "draw";
        }
        const int expected_count = static_cast<int>(expected.output_shapes.size());
        if (expected_count != spec.outputs) {
          throw EvaluationError(spec.spec_path + ": field 'outputs': says " + std::to_string(spec.outputs) +
                                " but the reference returns " + std::to_string(expected_count));
        }
        wire::Run run_cmd{work.shared(), work.sandbox(), c, call, transport(), expected.inputs_exchange};
        std::vector<int> input_fds;
        if (expected.inputs_exchange && expected.inputs_exchange->value("transport", "") == "cuda_ipc") {
          if (ref.fds().size() != 1) throw EvaluationError("the reference published CUDA inputs without a descriptor");
          input_fds.push_back(ref.fds()[0].get());
        }
        auto ran = cand_call(run_cmd, options_.run_timeout, input_fds);
        if (ran && ran->error_class() == "exchange_error") {
          // The candidate could not map the reference's inputs: it draws them
          // itself (same generator, same seed) from here on.
          if (inputs_via != "cuda_ipc") throw ProtocolViolation("it reported an input exchange error for inputs it was not sent");
          v.input_exchange = "drawn (cuda_ipc failed: " + ran->message() + ")";
          inputs_via = "draw";
          run_cmd.inputs_exchange.reset();
          ran = cand_call(run_cmd, options_.run_timeout);
        }
        if (auto bad = worker_failed(CallStatus::of(ran))) return *bad;
        const wire::RunReply& info = ran->reply;
        for (const auto& a : info.aliases) {
          const int out = a.output, in = a.input;
          if (out < 0 || out >= expected_count || in < 0 || in >= static_cast<int>(spec.inputs.size())) {
            throw ProtocolViolation("an aliasing report names output " + std::to_string(out) + " and input " +
                                    std::to_string(in) + ", which do not exist");
          }
          v.integrity.push_back({"output_aliases_input",
                                 "output " + std::to_string(out) + " shares memory with input " + std::to_string(in) +
                                     " (" + spec.inputs[static_cast<std::size_t>(in)].name +
                                     "); return a new tensor, never an input or a view of one"});
        }
        if (!info.wrong_device.empty()) {
          const auto& w = info.wrong_device[0];
          o.problem = "output " + std::to_string(w.output) + " is on " + w.device + ", expected " + options_.device;
          o.problem_kind = "device";
        } else {
          const std::string stem = work.sandbox() + "/case" + std::to_string(t.id) + ".call" + std::to_string(call) + ".candidate";
          const wire::JudgeReply j = judge(info.exchange.value_or(json()), stem, false, call + 1 < calls, analyzed);
          if (j.error_analysis) {
            if (!v.error_analysis.is_array()) v.error_analysis = json::array();
            for (const auto& r : *j.error_analysis) {
              json row = r;
              row["case"] = t.label();
              v.error_analysis.push_back(std::move(row));
            }
          }
          v.fp64_unavailable = j.fp64_unavailable.value_or(v.fp64_unavailable);
          const int got = static_cast<int>(j.output_count);
          if (got != expected_count) {
            o.problem = "forward returned " + std::to_string(got) + " output(s), expected " + std::to_string(expected_count);
            o.problem_kind = "output_count";
          } else {
            for (const auto& cmp : j.outputs) o.outputs.push_back(comparison_from_json(cmp));
          }
          // Precision (strict): within the tolerance is not enough where the
          // error is far beyond what fp32 arithmetic gives this reference.
          const bool within_tolerance =
              std::all_of(o.outputs.begin(), o.outputs.end(), [](const TensorComparison& c) { return c.passed; });
          if (o.problem.empty() && within_tolerance && protocol.precision_check && j.error_analysis) {
            for (const auto& row : *j.error_analysis) {
              const std::string why = precision_failure(row.candidate_rms_error, row.reference_rms_error, row.rms_fp64);
              if (!why.empty()) {
                o.problem = "output " + std::to_string(row.output) + ": " + why;
                o.problem_kind = "precision";
                break;
              }
            }
          }
          for (const std::size_t k : j.mutated_inputs.value_or(std::vector<std::size_t>{})) {
            v.integrity.push_back({"input_mutation", "forward modified its input " + std::to_string(k) + " (" +
                                                         spec.inputs.at(k).name + ") on " + t.label() +
                                                         "; inputs must be left unchanged"});
          }
          // A call that returns the previous call's result, where the
          // reference's results differ, was cached across calls.
          if (j.same_as_previous_call.value_or(false) && !j.expected_same_as_previous_call.value_or(true)) {
            v.integrity.push_back({"stale_output", "call " + std::to_string(call) + " of " + t.label() +
                                                       " returned exactly the previous call's result for different "
                                                       "inputs (results cached across calls)"});
          }
        }
        o.passed = o.problem.empty();
        for (const auto& cmp : o.outputs) o.passed = o.passed && cmp.passed;
        all_passed = all_passed && o.passed;
        v.tests.push_back(std::move(o));
      }
    }

    if (!v.integrity.empty() && protocol.integrity_checks) {
      cand.finish();
      return finish(VerdictClass::kIntegrityViolation, v.integrity.front().check + ": " + v.integrity.front().message);
    }
    if (!all_passed) {
      cand.finish();
      int failed = 0;
      const TestOutcome* first = nullptr;
      for (const auto& o : v.tests) {
        if (!o.passed) {
          ++failed;
          if (!first) first = &o;
        }
      }
      std::string what = first->problem;
      if (what.empty()) {
        for (const auto& c : first->outputs) {
          if (c.passed) continue;
          what = describe_failed_output(c, protocol.tolerance);
          break;
        }
      }
      return finish(VerdictClass::kIncorrect, std::to_string(failed) + " of " + std::to_string(v.tests.size()) +
                                                  " test calls failed; first: " + first->label + ": " + what);
    }

    // 5. The reference's trace, for the candidate's activity audit (its
    // baseline was taken before the candidate started). Only a correct
    // candidate needs it.
    std::optional<wire::ProfileReply> reference_profile;
    if (options_.measure_time) {
      if (!cpu && options_.activity_audit) {
        // The trace is taken every time (the audit compares this run's
        // launches); the counters come from the cache when this reference
        // was profiled before on this device, since their replay passes
        // cost tens of seconds at upstream sizes.
        const BaselineKey counters_key{spec.name, rb.key, json(tests[0].dims), device_info, KLOOP_TORCH_VERSION,
                                       {{"counters", kReferenceMetricsFormat}}};
        std::optional<json> cached_metrics;
        if (options_.profile) cached_metrics = load_reference_metrics(builder_.config().cache_dir, counters_key);
        const auto t0 = Clock::now();
        wire::Profile profile_cmd;
        profile_cmd.dir = work.shared();
        profile_cmd.c = cases[0];
        profile_cmd.counters = options_.profile && !cached_metrics;
        auto r = ref.call(profile_cmd, options_.run_timeout);
        v.phases.reference += since(t0);
        if (!r) throw EvaluationError("the reference of " + spec.name + " failed (" + ref.failure() + ")\n" + ref.log_tail());
        if (r->ok()) {
          reference_profile = r->reply;
          if (cached_metrics) {
            reference_profile->metrics = *cached_metrics;
          } else if (options_.profile && reference_profile->metrics &&
                     reference_profile->metrics->value("unavailable", "").empty() &&
                     !reference_profile->metrics->value("kernels", json::array()).empty()) {
            store_reference_metrics(builder_.config().cache_dir, counters_key, *reference_profile->metrics);
          }
        }
      }
    }

    // 6. Timing, then one more call that must still be correct.
    if (options_.measure_time) {
      // The timed calls get inputs of their own, from a nonce: the model of
      // case 0 (same weights), never a test input, never an earlier run's.
      const wire::Case timing_case = timing_case_of(cases[0], calls, Unpredictable().nonce());
      ref_call(wire::Prepare{work.shared(), timing_case}, options_.run_timeout, v.phases.reference);
      std::string timed_wrong;
      int check_number = 0;
      auto check_timed_call = [&](int64_t call) {
        ref_call(wire::Expect{work.shared(), timing_case, call, false, false, ""}, options_.run_timeout, v.phases.reference);
        const std::string name = "timing.check" + std::to_string(check_number++);
        auto checked = cand_call(wire::TimeCheck{0, work.sandbox(), name, transport()}, options_.run_timeout);
        if (auto bad = worker_failed(CallStatus::of(checked))) throw CandidateFailed{*bad};
        const wire::JudgeReply j =
            judge(checked->reply.exchange.value_or(json()), work.sandbox() + "/" + name, false, false);
        if (!timed_wrong.empty()) return;
        if (j.output_count != j.expected_count) {
          timed_wrong = "returned " + std::to_string(j.output_count) + " output(s), expected " +
                        std::to_string(j.expected_count);
        }
        for (const auto& cmp : j.outputs) {
          if (!timed_wrong.empty() || cmp.value("passed", false)) continue;
          const TensorComparison c = comparison_from_json(cmp);
          timed_wrong = describe_failed_output(c, protocol.tolerance);
        }
      };
      wire::TimeSetup setup;
      setup.dir = work.shared();
      setup.c = timing_case;
      setup.post_case = cases[0];
      setup.rules = to_json(rules);
      wire::TimePost post;
      post.out_dir = work.sandbox();
      post.transport = transport();
      const CandidateTiming timed = time_candidate(
          cand, setup, rules, cpu, granted_cpu_threads(options_), overhead, options_.run_timeout,
          [&](const CallStatus& r) {
            if (auto bad = worker_failed(r)) throw CandidateFailed{*bad};
          },
          v.phases.candidate, post, check_timed_call, options_.timed_check_chance, fresh);
      std::string timed_wrong_finding;
      if (!timed_wrong.empty()) {
        timed_wrong_finding = "a timed call, on inputs of its own, gave a wrong result (" + timed_wrong +
                              "), though the test calls were right: it computes only when checked";
        v.integrity.push_back({"timed_call_incorrect", timed_wrong_finding});
      }
      v.candidate_time = timed.summary;
      v.phases.timed_checks = timed.checking_seconds;
      v.throttled_samples_discarded = timed.throttled_discarded;
      v.timing_check = timed.check;
      if (!timed.implausible.empty()) v.integrity.push_back({"implausible_timing", timed.implausible});
      // Judged now: the activity audit below replaces what the candidate holds.
      bool still_correct = true;
      {
        // Fresh inputs: the reference computes that call's outputs now.
        if (timed.post_call) {
          ref_call(wire::Expect{work.shared(), timing_case, *timed.post_call, false, false, ""}, options_.run_timeout,
                   v.phases.reference);
        }
        const wire::JudgeReply j = timed.post_call
                           ? judge(timed.post_exchange, work.sandbox() + "/timing.post", false, false)
                           : judge(timed.post_exchange, work.sandbox() + "/case" + std::to_string(tests[0].id) + ".post",
                                   true, false);
        still_correct = j.output_count == j.expected_count;
        for (const auto& cmp : j.outputs) still_correct = still_correct && cmp.value("passed", false);
      }
      if (!cpu) {
        if (auto cal = load_calibration(builder_.config().cache_dir, device_info)) {
          const DimValues& d = tests[0].dims;
          const SpeedOfLight sol = speed_of_light(spec.flop_count(d), spec.byte_count(d), *cal);
          const double t = v.candidate_time->headline(rules.statistic);
          v.sol_floor_seconds = sol.floor_seconds;
          v.sol_bound = sol.bound;
          if (t > 0) v.sol_percent = 100.0 * sol.floor_seconds / t;
          if (protocol.speed_of_light_floor && t < kBelowFloorFraction * sol.floor_seconds) {
            v.integrity.push_back({"below_speed_of_light",
                                   "the candidate took " + std::to_string(t * 1e6) + " us, below the " + sol.bound +
                                       "-bound floor of " + std::to_string(sol.floor_seconds * 1e6) +
                                       " us for this problem's FLOPs and bytes on this GPU: it cannot have done "
                                       "the work"});
          }
        }
        v.candidate_wall = timed.wall;
        // Work the events on kloop's stream did not see (another stream, a
        // thread) still has to finish before the device sync returns.
        const double event = v.candidate_time->median, wall = v.candidate_wall->median;
        if (wall > 1.5 * event + 200e-6) {
          v.integrity.push_back({"unaccounted_work", "the timed stream saw " + std::to_string(event * 1e6) +
                                                         " us per call but the device was busy for " +
                                                         std::to_string(wall * 1e6) +
                                                         " us: work ran outside the current stream"});
        }
        if (options_.activity_audit) {
          const auto audit_start = Clock::now();
          audit_candidate_activity(spec, tests[0].dims, cand, work, cases[0], reference_profile, device_info,
                                   rules, protocol, options_, builder_.config().cache_dir, v);
          if (v.activity.contains("kernels_per_call")) audit_shape_variants(tests, cases, cand, work, protocol, options_, v);
          v.phases.activity_audit = since(audit_start);
        }
        if (timed.persisting_l2_limit != 0 || timed.persisting_l2_window_bytes != 0) {
          v.integrity.push_back(
              {"persisting_l2", "the module set a persisting-L2 carve-out (limit " +
                                    std::to_string(timed.persisting_l2_limit) + " bytes, access-policy window " +
                                    std::to_string(timed.persisting_l2_window_bytes) +
                                    " bytes on the current stream), which would let its data survive the flush"});
        }
        if (protocol.integrity_checks && !v.integrity.empty()) {
          cand.finish();
          return finish(VerdictClass::kIntegrityViolation, v.integrity.front().check + ": " + v.integrity.front().message);
        }
      }
      if (!timed.implausible.empty()) {
        // Under every protocol: the figure would not be a measurement.
        cand.finish();
        return finish(VerdictClass::kIntegrityViolation, "implausible_timing: " + timed.implausible);
      }
      if (!still_correct) {
        v.integrity.push_back({"corrupt_after_repeat",
                               "the output was correct at first but wrong after the timed repetitions"});
        if (protocol.integrity_checks) {
          cand.finish();
          return finish(VerdictClass::kIntegrityViolation, "corrupt_after_repeat: " + v.integrity.back().message);
        }
      }
      if (!timed_wrong.empty() && protocol.integrity_checks) {
        cand.finish();
        return finish(VerdictClass::kIntegrityViolation, "timed_call_incorrect: " + timed_wrong_finding);
      }
      if (v.reference_time && v.candidate_time->headline(rules.statistic) > 0) {
        v.speedup = v.reference_time->headline(rules.statistic) / v.candidate_time->headline(rules.statistic);
      }
    }
    cand.finish();
    ref.finish();
    std::ostringstream msg;
    msg << v.tests.size() << " test calls passed";
    if (v.speedup) msg << "; speedup " << *v.speedup << "x";
    return finish(VerdictClass::kCorrect, msg.str());
  } catch (const CandidateFailed& f) {
    return f.verdict;
  } catch (const ProtocolViolation& e) {
    v.log_tail = cand.log_tail();
    v.integrity.push_back({"protocol_violation", e.what()});
    return finish(VerdictClass::kIntegrityViolation, std::string("protocol_violation: ") + e.what());
  } catch (const json::exception& e) {
    v.log_tail = cand.log_tail();
    v.integrity.push_back({"protocol_violation", std::string("a reply kloop cannot read: ") + e.what()});
    return finish(VerdictClass::kIntegrityViolation, "protocol_violation: " + v.integrity.back().message);
  } catch (const ReferenceDied& e) {
    v.log_tail = cand.log_tail();
    v.integrity.push_back({"reference_died", std::string("the reference worker died or hung while the candidate ran: ") +
                                                 e.what()});
    return finish(VerdictClass::kIntegrityViolation, "reference_died: " + v.integrity.back().message);
  }
}

std::vector<TimingSummary> Evaluator::repeat_candidate_timing(const ProblemSpec& spec, const std::string& candidate_path,
                                                             int n) {
  const Protocol protocol = protocol_by_name(options_.protocol);
  const bool cpu = options_.device == "cpu";
  const BuildTarget target = cpu ? BuildTarget::kCpu : BuildTarget::kCuda;
  const TimingRules rules = timing_rules(protocol, cpu, options_);
  const bool fresh = fresh_timed_inputs(protocol, cpu, options_);
  BuildResult cb = builder_.build(candidate_path, ModuleRole::kCandidate, target);
  BuildResult rb = build_reference(spec);
  if (!cb.ok || !rb.ok) throw EvaluationError("repeat timing: the " + std::string(cb.ok ? "reference" : "candidate") + " does not build");
  const TestCase t = plan_tests(spec, protocol, cpu || options_.small_dims, options_.seed).front();
  const wire::Case c = generate_case(spec, t.dims, t.id, t.seed, t.seed, t.scale, protocol.calls_per_case,
                                     protocol.randomize_identity_params);
  WorkDir work(options_.work_root, options_.keep_work_dir);
  double overhead = 0;
  {
    WorkerSession ref(options_.worker_path, "reference", work);
    CallStatus status = CallStatus::of(ref.call(load_command(rb, "reference", spec, options_), options_.load_timeout));
    if (status.ok()) {  // the weights file; inputs are drawn where they are used
      status = CallStatus::of(ref.call(wire::Prepare{work.shared(), c}, options_.run_timeout));
    }
    if (!status.ok()) {
      throw EvaluationError("repeat timing: the reference failed: " +
                            (status.failure ? status.failure->message : ref.failure()));
    }
    overhead = sample_overhead_seconds(ref, rules, options_.run_timeout, fresh ? &c : nullptr);
    ref.finish();
  }
  std::vector<TimingSummary> out;
  for (int i = 0; i < n; ++i) {
    const std::string module = stage_module(work, cb.library_path);
    WorkerSession cand = candidate_session(options_, work, module, cpu);
    auto fail = [&](const CallStatus& r) {
      if (!r.ok()) {
        throw EvaluationError("repeat timing: the candidate failed: " + (r.failure ? r.failure->message : cand.failure()));
      }
    };
    fail(CallStatus::of(cand.call(load_command(module, "candidate", spec, options_), options_.load_timeout)));
    double seconds = 0;
    CandidateTiming timed;
    try {
      // Each process its own nonce: no cache in a file carries over.
      wire::TimeSetup setup;
      setup.dir = work.shared();
      setup.c = timing_case_of(c, protocol.calls_per_case, Unpredictable().nonce());
      setup.post_case = c;
      setup.rules = to_json(rules);
      wire::TimePost post;
      post.out_dir = work.sandbox();
      timed = time_candidate(cand, setup, rules, cpu, granted_cpu_threads(options_), overhead, options_.run_timeout,
                             fail, seconds, post, nullptr, 0, fresh);
    } catch (const ProtocolViolation& e) {
      throw EvaluationError(std::string("repeat timing: protocol_violation: ") + e.what());
    }
    if (!timed.implausible.empty()) throw EvaluationError("repeat timing: implausible_timing: " + timed.implausible);
    out.push_back(timed.summary);
    cand.finish();
  }
  return out;
}

}  // namespace kloop
