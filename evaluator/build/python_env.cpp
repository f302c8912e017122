#include "evaluator/build/python_env.h"

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "evaluator/build/build_config.h"
#include "evaluator/build/environment.h"
#include "evaluator/isolation/subprocess.h"

namespace kloop {
namespace {

namespace fs = std::filesystem;

PythonEnvironment query() {
  const std::string host_version = KLOOP_PYTHON_VERSION;
  if (host_version.empty()) {
    throw std::runtime_error(
        "this kloop was built without its Python host, so it cannot run KernelBench-format (Python) candidates: "
        "install a python3 that imports torch and its embedding headers (Debian: python3-dev python3-torch "
        "pybind11-dev) and configure kloop again");
  }
  PythonEnvironment p;
  const char* env = std::getenv("KLOOP_PYTHON");
  p.executable = env && *env ? env : KLOOP_PYTHON_EXECUTABLE;
  const std::string probe =
      "import json, os, sys\nimport torch\n"
      "print(json.dumps({'version': '%d.%d' % sys.version_info[:2], 'torch': torch.__version__, "
      "'path': [p for p in sys.path if p], 'install': [os.path.realpath(sys.executable), "
      "sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]}))";
  CommandResult r = run_command({p.executable, "-I", "-c", probe}, "", std::chrono::seconds(120));
  nlohmann::json j;
  const std::size_t line = r.output.rfind("{\"version\"");
  if (r.status.exited && r.status.code == 0 && line != std::string::npos) {
    j = nlohmann::json::parse(r.output.substr(line), nullptr, false);
  }
  if (!j.is_object()) {
    throw std::runtime_error(p.executable + " cannot run Python candidates (it must import torch): " + r.output +
                             "; give a python3 with torch in KLOOP_PYTHON");
  }
  p.version = j.value("version", "");
  p.torch_version = j.value("torch", "");
  if (p.version != host_version) {
    throw std::runtime_error(p.executable + " is Python " + p.version + ", but kloop's Python host embeds Python " +
                             host_version + "; set KLOOP_PYTHON to a python" + host_version +
                             " with torch, or configure kloop with this one");
  }
  std::error_code ec;
  for (const auto& d : j.value("path", std::vector<std::string>{})) {
    if (fs::exists(d, ec)) p.sys_path.push_back(fs::absolute(d, ec).string());
  }
  p.installation = p.sys_path;
  for (const auto& d : j.value("install", std::vector<std::string>{})) {
    if (!d.empty() && fs::exists(d, ec)) p.installation.push_back(fs::absolute(d, ec).string());
  }
  return p;
}

}  // namespace

const PythonEnvironment& python_environment() {
  static std::mutex mutex;
  static std::unique_ptr<PythonEnvironment> cached;
  std::lock_guard<std::mutex> lock(mutex);
  if (!cached) cached = std::make_unique<PythonEnvironment>(query());
  return *cached;
}

bool is_python_module(const std::string& library) {
  return library.size() > 3 && library.compare(library.size() - 3, 3, ".py") == 0;
}

std::string python_host_library(const std::string& worker_path) {
  return (fs::path(worker_path).parent_path() / "libkloop_python_host.so").string();
}

std::string candidate_host_script() { return data_dir() + "/evaluator/isolation/python/candidate_host.py"; }

}  // namespace kloop
