#include "evaluator/parity.h"

#include <cmath>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "evaluator/build/environment.h"
#include "evaluator/check/compare.h"
#include "evaluator/isolation/subprocess.h"
#include "evaluator/protocol.h"

namespace kloop {
namespace {

// Sets `seconds` to the wall time from its making to stop() or its end,
// whichever comes first: a phase's time however the phase ends.
struct PhaseTimer {
  double& seconds;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  bool stopped = false;
  void stop() {
    if (stopped) return;
    stopped = true;
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  ~PhaseTimer() { stop(); }
};

namespace fs = std::filesystem;
using json = nlohmann::json;

bool imports_torch(const std::string& python) {
  const CommandResult r = run_command({python, "-c", "import torch"}, "", std::chrono::seconds(120));
  return r.status.exited && r.status.code == 0;
}

}  // namespace

UpstreamHost::UpstreamHost(std::string python, std::string log_path)
    : python_(std::move(python)), log_path_(std::move(log_path)) {}

UpstreamHost::~UpstreamHost() {
  if (process_) process_->kill();
  std::error_code ec;
  fs::remove(log_path_, ec);
}

json UpstreamHost::run(const json& request, std::chrono::seconds timeout) {
  if (!process_) {
    ++starts_;
    process_ = std::make_unique<WorkerProcess>(
        std::vector<std::string>{python_, data_dir() + "/evaluator/problem/upstream_parity.py", "--serve"},
        fs::path(log_path_).parent_path().string(), log_path_, SandboxSpec{});
  }
  auto failed = [&](const std::string& why) {
    process_->kill();
    process_.reset();
    const std::string log = file_tail(log_path_, 2000);
    return json{{"ok", false}, {"kind", "error"}, {"error", why + (log.empty() ? "" : "; its output ends:\n" + log)}};
  };
  if (!process_->send(request.dump())) return failed("the python3 running upstream files is gone");
  const auto reply = process_->receive(timeout);
  if (!reply) {
    return failed(process_->timed_out() ? "no answer within " + std::to_string(timeout.count()) + " s"
                                        : "the python3 running upstream files ended without an answer");
  }
  json j;
  try {
    j = json::parse(reply->line);
  } catch (const json::exception&) {
    return failed("an answer that is not JSON");
  }
  if (!j.is_object()) return failed("an answer that is not a JSON object");
  // A failed task on a GPU may leave a CUDA error with the process.
  if (!j.value("ok", false) && j.value("kind", "") == "error" && request.value("device", "cpu") != "cpu") {
    process_->kill();
    process_.reset();
  }
  return j;
}

std::string find_python_with_torch(const std::string& configured) {
  std::string chosen = configured;
  if (chosen.empty()) {
    if (const char* env = std::getenv("KLOOP_PYTHON"); env && *env) chosen = env;
  }
  if (!chosen.empty()) {
    if (!imports_torch(chosen)) {
      throw std::runtime_error(chosen + " cannot import torch; give a python3 that can (--python, KLOOP_PYTHON)");
    }
    return chosen;
  }
  for (const char* candidate : {"python3", "/usr/bin/python3"}) {
    if (imports_torch(candidate)) return candidate;
  }
  throw std::runtime_error("no python3 here imports torch (tried python3 on the PATH and /usr/bin/python3); install "
                           "PyTorch (Debian: apt-get install python3-torch) or give one with --python");
}

ParityResult check_parity(Evaluator& evaluator, const ProblemSpec& spec, const ParityOptions& options) {
  ParityResult r;
  r.problem = spec.name;
  r.deviations = spec.deviations;
  const auto file = spec.provenance.find("file");
  if (file == spec.provenance.end()) {
    r.status = "missing";
    r.details.push_back("the spec names no upstream file (provenance.file)");
    return r;
  }
  const fs::path upstream = fs::path(options.upstream_root) / file->second;
  r.upstream_file = upstream.string();
  if (!fs::is_regular_file(upstream)) {
    r.status = "missing";
    r.details.push_back(upstream.string() + ": not found in the checkout");
    return r;
  }
  std::unique_ptr<HeldReferenceCase> held;
  try {
    PhaseTimer timed{r.reference_seconds};
    held = evaluator.hold_reference_case(spec, options.seeded);
  } catch (const std::exception& e) {
    r.status = "error";
    r.details.push_back(std::string("kloop's reference: ") + e.what());
    return r;
  }
  r.gpu = held->device().value("name", "");
  // Upstream's files beside the reference's, in the held case's folder
  // (/dev/shm where it can be), removed with it.
  const fs::path dir = held->folder();
  const std::string args_file = (dir / "args.json").string();
  std::ofstream(args_file) << held->args().dump();
  const std::string dims_file = (dir / "dims.json").string();
  std::ofstream(dims_file) << held->dims().dump();
  const std::string out_file = (dir / "upstream.safetensors").string();
  const std::string device = evaluator.options().device;
  std::unique_ptr<UpstreamHost> own_host;
  UpstreamHost* host = options.host;
  if (!host) {
    own_host = std::make_unique<UpstreamHost>(options.python.empty() ? find_python_with_torch("") : options.python,
                                              (dir / "upstream.log").string());
    host = own_host.get();
  }
  PhaseTimer upstream_timer{r.upstream_seconds};
  json request = {{"task", upstream.string()},  {"args", args_file}, {"weights", held->weights_file()},
                  {"inputs", held->inputs_file()}, {"out", out_file},   {"dims", dims_file},
                  {"device", device}};
  if (options.seeded) request["seed"] = held->construction_seed();
  const json reply = host->run(request, options.timeout);
  upstream_timer.stop();
  if (!reply.value("ok", false)) {
    r.status = reply.value("kind", std::string("error"));
    if (r.status != "key_mismatch" && r.status != "arg_mismatch" && r.status != "weights_mismatch") r.status = "error";
    if (r.status == "weights_mismatch") {
      r.weights = "differ";
      r.weights_compared = reply.value("weights_compared", 0);
      for (const auto& d : reply.value("differ", json::array())) r.details.push_back("weights differ: " + d.get<std::string>());
    }
    if (reply.contains("error")) r.details.push_back("upstream: " + reply["error"].get<std::string>());
    for (const char* k : {"upstream_only", "kloop_only", "shapes"}) {
      if (reply.contains(k) && !reply[k].empty()) {
        r.details.push_back(std::string(k) == "shapes" ? "shapes differ: " + reply[k].dump()
                                                       : std::string("state_dict keys ") + k + ": " + reply[k].dump());
      }
    }
    return r;
  }
  if (options.seeded) {
    r.weights = "equal";
    r.weights_compared = reply.value("weights_compared", 0);
  }
  // kloop's references run in full FP32; upstream's outputs made with TF32
  // would be judged against them as if the port differed.
  const json tf32 = reply.value("tf32", json());
  if (!tf32.is_object() || tf32.value("cublas", true) || tf32.value("cudnn", true)) {
    r.status = "error";
    r.details.push_back("upstream's forward ran with TF32 allowed (" +
                        (tf32.is_object() ? tf32.dump() : std::string("not reported")) +
                        "); kloop's references run in full FP32, so the outputs are not comparable");
    return r;
  }
  // Judged where the reference's outputs are (its worker, on its device),
  // by the comparison that judges candidates.
  PhaseTimer compare_timer{r.compare_seconds};
  const Tolerance tol = protocol_by_name("strict").tolerance;
  HeldJudgement judged;
  try {
    judged = held->judge(out_file, tol);
  } catch (const std::exception& e) {
    r.status = "error";
    r.details.push_back(std::string("kloop's judge: ") + e.what());
    return r;
  }
  if (judged.output_count != judged.expected_count) {
    r.status = "mismatch";
    r.details.push_back("upstream returns " + std::to_string(judged.output_count) + " output(s), kloop " +
                        std::to_string(judged.expected_count));
    return r;
  }
  bool passed = true;
  r.bitwise = judged.identical.size() == judged.outputs.size();
  for (std::size_t i = 0; i < judged.outputs.size(); ++i) {
    const TensorComparison& cmp = judged.outputs[i];
    r.bitwise = r.bitwise && judged.identical[i];
    r.max_abs_error = std::max(r.max_abs_error, cmp.max_abs_error);
    r.max_rel_error = std::max(r.max_rel_error, cmp.max_rel_error);
    if (!cmp.passed) {
      passed = false;
      r.details.push_back("output " + std::to_string(i) + ": " +
                          (cmp.problem.empty() ? std::to_string(cmp.mismatches) + " of " + std::to_string(cmp.numel) +
                                                     " values outside atol " + std::to_string(cmp.atol_used) +
                                                     " + rtol " + std::to_string(tol.rtol)
                                               : cmp.problem));
    }
  }
  r.status = passed ? "match" : "mismatch";
  return r;
}

}  // namespace kloop
