// The Python host: a KernelBench-format candidate (a Python file whose
// ModelNew is a torch.nn.Module) run inside kloop-worker by an embedded
// interpreter, so that it speaks the same worker protocol, under the same
// sandbox, as a compiled candidate. The host is a library of its own
// (libkloop_python_host.so, linked to libpython), which the worker opens
// only for a Python candidate: the worker itself never links Python.
// The Python side is candidate_host.py; tensors cross as DLPack capsules,
// so the candidate's tensors share memory with the worker's (the aliasing
// and mutation checks see through the crossing).
#pragma once

#include <kloop/kernel_api.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kloop::python_host {

struct Options {
  std::string candidate;              // the candidate's .py file
  std::string extensions;             // the folder its build compiled load_inline extensions into
  std::string host_script;            // candidate_host.py
  std::vector<std::string> sys_path;  // the module search path of the python3 that built it
  std::string device;                 // "cpu" or "cuda:N"
};

// One constructor argument, in the order the problem's get_init_inputs()
// passes them: its spec type (int, float, bool, ints, string) and value as JSON.
struct Arg {
  std::string type;
  std::string json;
};

class Host {
 public:
  virtual ~Host() = default;
  // The tensors forward takes; -1 for forward(self, *inputs).
  virtual int arity() const = 0;
  // ModelNew(*args) with every weight loaded by state_dict name; `unused`
  // gets the weights ModelNew has no entry for. Throws std::runtime_error
  // with the Python traceback.
  // `dtype` ("" or a dtype name: float16, bfloat16): the model is converted
  // to it before it takes the weights (KernelBench's .to(dtype)).
  virtual std::unique_ptr<ModuleRunner> create(const std::vector<std::pair<std::string, at::Tensor>>& weights,
                                               const std::vector<Arg>& args, std::vector<std::string>& unused,
                                               const std::string& dtype) = 0;
  // ModelNew(*args) built as KernelBench's eval builds it (candidate_host.py:
  // create_seeded): torch seeded with `seed` right before the constructor,
  // on the CPU, then moved to the device. With `norm_seed`, the norm layers
  // it builds take strict's non-identity values; `norm_layers` gets the
  // weight shapes of those that did, in the order they were built.
  // Then moved with .to(device, dtype) ("" = float32).
  virtual std::unique_ptr<ModuleRunner> create_seeded(const std::vector<Arg>& args, uint64_t seed,
                                                      std::optional<uint64_t> norm_seed,
                                                      std::vector<std::vector<int64_t>>& norm_layers,
                                                      const std::string& dtype) = 0;
  // The extensions ModelNew asked for after the import, which the build did
  // not make (candidate_host.py: runtime_builds), in the order asked.
  virtual std::vector<std::string> runtime_builds() = 0;
};

// The library's one entry point: the interpreter started and the candidate
// imported, or nullptr with `error` set (the traceback of a failed import,
// or what is missing).
using OpenFn = Host* (*)(const Options& options, std::string* error);
constexpr const char* kOpenSymbol = "kloop_python_host_open";
constexpr const char* kLibraryName = "libkloop_python_host.so";

}  // namespace kloop::python_host
