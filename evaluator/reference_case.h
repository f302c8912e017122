// One case of a reference held in its worker so that another program can
// run the same case and be judged against it (port parity: an upstream
// Python task file). The case's weights (by state_dict name) and its call's
// inputs are written as kloop tensor files for that program; the
// reference's outputs stay in the worker, on its device, and judge()
// compares the program's outputs with them there, as an evaluation judges a
// candidate. No expected output is written, read back or compared on the
// host: at upstream sizes (several GB a tensor) that was the slow part.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "evaluator/check/compare.h"

namespace kloop {

namespace detail {
class WorkDir;
class WorkerSession;
}  // namespace detail

// kloop's comparison of one program's outputs with the reference's.
struct HeldJudgement {
  std::vector<TensorComparison> outputs;  // per output both have
  std::vector<bool> identical;            // per output: bit for bit (dtype, shape and bytes)
  std::size_t output_count = 0;           // the program's
  std::size_t expected_count = 0;         // the reference's
};

class HeldReferenceCase {
 public:
  // Made by Evaluator::hold_reference_case.
  HeldReferenceCase(std::unique_ptr<detail::WorkDir> work, std::unique_ptr<detail::WorkerSession> worker,
                    std::chrono::milliseconds run_timeout);
  ~HeldReferenceCase();
  HeldReferenceCase(const HeldReferenceCase&) = delete;
  HeldReferenceCase& operator=(const HeldReferenceCase&) = delete;

  const std::string& weights_file() const { return weights_file_; }
  const std::string& inputs_file() const { return inputs_file_; }
  const nlohmann::json& args() const { return args_; }  // [{name, type, value}] at the case's dims
  const nlohmann::json& dims() const { return dims_; }
  // The device as the worker reports it (name, compute capability, ...;
  // {"device": "cpu"} on the CPU).
  const nlohmann::json& device() const { return device_; }
  // The seed torch's generator had before a seeded case's constructor.
  uint64_t construction_seed() const { return construction_seed_; }
  // A folder for the other program's files, removed with this object.
  std::string folder() const;

  // The outputs in `outputs_file` (a kloop tensor file, safetensors) judged
  // against the reference's under `tol`. Throws EvaluationError when the
  // file cannot be read or the worker fails, saying why.
  HeldJudgement judge(const std::string& outputs_file, const Tolerance& tol);

 private:
  friend class Evaluator;
  std::unique_ptr<detail::WorkDir> work_;
  std::unique_ptr<detail::WorkerSession> worker_;
  std::chrono::milliseconds run_timeout_;
  std::string weights_file_, inputs_file_;
  nlohmann::json args_, dims_, device_;
  uint64_t construction_seed_ = 0;
};

}  // namespace kloop
