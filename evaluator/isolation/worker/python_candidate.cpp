// A KernelBench-format candidate: its build's module.py, imported by the
// Python host (evaluator/isolation/python) in this process, which then
// serves every command exactly as for a compiled candidate.
#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>

#include "evaluator/isolation/worker/worker.h"

namespace kloop::worker {

wire::LoadReply Worker::load_python(const wire::Load& cmd) {
  if (role_ != "candidate") throw WorkerError{"load_error", "kloop-worker: only a candidate can be a Python module"};
  set_phase("starting Python for " + cmd.library);
  // Global: the extension modules Python imports (torch._C) resolve
  // libpython's symbols through it.
  handle_ = dlopen(cmd.python_host.c_str(), RTLD_NOW | RTLD_GLOBAL);
  library_ = cmd.library;
  if (!handle_) {
    const char* err = dlerror();
    throw WorkerError{"load_error", std::string("this kloop cannot run Python candidates: ") + (err ? err : "?")};
  }
  auto open = reinterpret_cast<python_host::OpenFn>(dlsym(handle_, python_host::kOpenSymbol));
  if (!open) throw WorkerError{"load_error", cmd.python_host + " is not kloop's Python host"};
  const std::filesystem::path dir = std::filesystem::path(cmd.library).parent_path();
  python_host::Options o;
  o.candidate = cmd.library;
  o.extensions = (dir / "extensions").string();
  o.host_script = (dir / "candidate_host.py").string();
  o.sys_path = cmd.python_path;
  o.device = device_;
  // Triton compiles a launcher for each kernel at its first call, into its
  // cache in the sandbox's private HOME: named here, before Python reads
  // its environment, so that the activity audit can count those launchers
  // (and so the Triton kernels they start) as the candidate's own.
  std::string triton_cache;
  if (const char* home = std::getenv("HOME"); home && home[0] == '/') {
    triton_cache = std::string(home) + "/triton/";
    setenv("TRITON_CACHE_DIR", triton_cache.c_str(), 1);
  }
  std::string error;
  python_.reset(open(o, &error));
  if (!python_) throw WorkerError{"load_error", error};
  // The activity audit counts the kernels of every library under the
  // candidate's folder (its extensions) and its Triton cache as its own;
  // a vendor library copied there is still told by its kernels' names.
  own_objects_ = {dir.string() + "/"};
  if (!triton_cache.empty()) own_objects_.push_back(triton_cache);
  arity_ = python_->arity();
  if (arity_ < 0) arity_ = cmd.arity;  // forward(self, *inputs) takes what it is given
  if (cmd.arity >= 0 && arity_ != cmd.arity) {
    python_.reset();
    throw WorkerError{"load_error", "forward takes " + std::to_string(arity_) +
                                        " tensor argument(s), but the problem passes " + std::to_string(cmd.arity)};
  }
  return {arity_, 0, session_->info()};
}

std::unique_ptr<ModuleRunner> Worker::construct_python(const std::map<std::string, at::Tensor>& params,
                                                       const std::vector<wire::Arg>& args,
                                                       const std::string& precision) {
  std::vector<std::pair<std::string, at::Tensor>> weights(params.begin(), params.end());
  std::vector<python_host::Arg> positional;
  for (const auto& a : args) positional.push_back({a.type, a.value.dump()});
  std::vector<std::string> unused;
  std::unique_ptr<ModuleRunner> m = python_->create(weights, positional, unused, precision);
  if (!unused.empty()) {
    std::string names;
    for (const auto& n : unused) names += (names.empty() ? "" : ", ") + n;
    phase(role_, "ModelNew's state_dict has no entry for the problem's weights " + names +
                     ": ModelNew keeps its own values there");
  }
  return m;
}

std::unique_ptr<ModuleRunner> Worker::construct_python_seeded(const wire::Case& c) {
  std::vector<python_host::Arg> positional;
  for (const auto& a : c.args) positional.push_back({a.type, a.value.dump()});
  norm_layers_.clear();
  std::optional<uint64_t> norm_seed;
  if (c.randomize_identity_params) norm_seed = c.norm_seed();
  return python_->create_seeded(positional, c.construction_seed(), norm_seed, norm_layers_, c.precision);
}

}  // namespace kloop::worker
