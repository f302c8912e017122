// The python3 that builds and hosts KernelBench-format (Python) candidates:
// the one that imports torch and that kloop's Python host was built for
// (KLOOP_PYTHON overrides; its major.minor must match the host's, because
// the host embeds that version's libpython).
#pragma once

#include <string>
#include <vector>

namespace kloop {

struct PythonEnvironment {
  std::string executable;
  std::string version;                // "3.11"
  std::string torch_version;          // torch.__version__
  std::vector<std::string> sys_path;  // its module search path (folders that exist)
  // What a sandbox must show for it to run: the executable (and what its
  // link resolves to), its prefixes (a venv's pyvenv.cfg, the base install
  // with libpython), and sys_path.
  std::vector<std::string> installation;
};

// Queried once per process. Throws std::runtime_error naming the python,
// what is wrong and the fix, when this kloop has no Python host, the python
// does not import torch, or its version is not the host's.
const PythonEnvironment& python_environment();

// A built Python candidate is its entry's module.py (Builder::build_python).
bool is_python_module(const std::string& library);

// Where the host library and its Python half live.
std::string python_host_library(const std::string& worker_path);  // beside kloop-worker
std::string candidate_host_script();                              // under kloop's data folder

}  // namespace kloop
