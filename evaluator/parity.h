// Port parity: does kloop's C++ port of a task compute what the upstream
// Python task file computes? Each upstream file (a KernelBench checkout's
// KernelBench/levelN/NAME.py, as the spec's provenance names it) runs in a
// python3 with torch (evaluator/problem/upstream_parity.py, kept for many
// tasks by an UpstreamHost) on kloop's own weights (loaded by state_dict
// name) and inputs, and its outputs are judged by the judge that judges
// candidates, in the reference's worker where kloop's outputs stay
// (HeldReferenceCase), under the strict protocol's tolerance. Upstream code runs as the user who
// pointed at the checkout, outside the candidate sandbox: it is the user's
// trusted source, as a reference is.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "evaluator/evaluate.h"

namespace kloop {

class WorkerProcess;

// The python3 that runs upstream task files, started once for many tasks
// (upstream_parity.py --serve): Python, torch and CUDA start once, not per
// task. A task that ends the process or outlasts its time costs a restart,
// as does a failed task on a GPU (a CUDA error can stay with the process).
class UpstreamHost {
 public:
  // `log_path`: the process's stdout and stderr (removed with the host).
  UpstreamHost(std::string python, std::string log_path);
  ~UpstreamHost();
  UpstreamHost(const UpstreamHost&) = delete;
  UpstreamHost& operator=(const UpstreamHost&) = delete;

  // The harness's answer to one request (upstream_parity.py's flags as
  // keys); {"ok": false, "kind": "error", "error": why} when the process
  // died, hung or answered nothing readable.
  nlohmann::json run(const nlohmann::json& request, std::chrono::seconds timeout);
  int starts() const { return starts_; }  // processes started so far

 private:
  std::string python_;
  std::string log_path_;
  std::unique_ptr<WorkerProcess> process_;
  int starts_ = 0;
};

struct ParityOptions {
  std::string upstream_root;  // a KernelBench checkout (the folder holding KernelBench/level1/...)
  std::string python;         // with torch; "" = find_python_with_torch("")
  std::chrono::seconds timeout{600};
  // Runs the upstream files; borrowed, for many tasks. None: a host of the
  // call's own, for this task alone.
  UpstreamHost* host = nullptr;
  // KernelBench's construction instead of kloop's weights: kloop's reference
  // built after torch's generator was seeded, upstream's Model likewise with
  // the same seed; their state_dicts compared tensor by tensor, bit for bit
  // (ParityResult::weights), then the outputs as usual.
  bool seeded = false;
};

struct ParityResult {
  std::string problem;
  std::string upstream_file;
  // match (within the strict tolerance), mismatch, key_mismatch (state_dict
  // names or shapes differ), weights_mismatch (seeded: a tensor differs), arg_mismatch (a constructor parameter kloop's
  // spec lacks), missing (no upstream file), error (either side failed)
  std::string status;
  bool bitwise = false;  // every output identical bit for bit
  double max_abs_error = 0;
  double max_rel_error = 0;
  std::vector<std::string> details;     // what differs, in words
  std::vector<std::string> deviations;  // the spec's own account of how the port differs
  std::string gpu;                      // the GPU kloop's reference ran on, by name ("" on the CPU)
  // Seeded construction: "equal" (every state_dict tensor bit for bit),
  // "differ" (details name them), "" when not compared; how many tensors.
  std::string weights;
  int weights_compared = 0;
  // Wall seconds: kloop's reference case (its worker started, weights and
  // inputs drawn and written, its outputs computed and kept), upstream's
  // task in the host (reading them, running, writing its outputs), and
  // judging those in the reference's worker.
  double reference_seconds = 0;
  double upstream_seconds = 0;
  double compare_seconds = 0;
};

ParityResult check_parity(Evaluator& evaluator, const ProblemSpec& spec, const ParityOptions& options);

// `configured` when given (--python, $KLOOP_PYTHON), else the first of
// python3 on the PATH and /usr/bin/python3 that imports torch; throws
// std::runtime_error naming what was tried and the fix.
std::string find_python_with_torch(const std::string& configured);

}  // namespace kloop
