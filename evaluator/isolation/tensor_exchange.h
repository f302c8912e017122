// How a candidate's outputs, and its inputs after the call, reach the
// reference worker that judges them, and (on the GPU) how the reference's
// inputs reach the candidate. Two transports:
//   file      tensor files in the evaluation's work folder (CPU evaluations,
//             and the fallback when CUDA IPC is refused);
//   cuda_ipc  one device allocation of the candidate's, packed with copies of
//             the tensors and exported with cudaIpcGetMemHandle; the judge
//             maps it and compares in place, so a multi-GB output never
//             crosses the host and the judge sends nothing back.
// The candidate's process never receives a handle, a file or a value of the
// expected outputs: what the reference publishes is a copy of the inputs
// alone, in an allocation of its own.
// Worker code: links LibTorch (and the CUDA runtime in CUDA builds).
#pragma once

#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace kloop {

// The candidate's side: publishes tensors and keeps them available until
// the next publish (or destruction).
class ExchangeExport {
 public:
  ExchangeExport() = default;
  ~ExchangeExport();
  ExchangeExport(const ExchangeExport&) = delete;
  ExchangeExport& operator=(const ExchangeExport&) = delete;

  // `stem` names the files of the file transport (STEM.outputs.kt,
  // STEM.inputs.kt). Returns the description the other side imports.
  nlohmann::json publish(const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs,
                         const std::string& transport, const std::string& stem);
  void release();

 private:
  void* buffer_ = nullptr;  // cuda_ipc: the exported allocation
};

// The judge's side: the published tensors, on `device`. cuda_ipc tensors are
// views of the mapped allocation, valid while this object lives.
class ExchangeImport {
 public:
  ExchangeImport(const nlohmann::json& description, const std::string& device);
  ~ExchangeImport();
  ExchangeImport(const ExchangeImport&) = delete;
  ExchangeImport& operator=(const ExchangeImport&) = delete;

  const std::vector<at::Tensor>& outputs() const { return outputs_; }
  const std::vector<at::Tensor>& inputs() const { return inputs_; }

 private:
  void* mapped_ = nullptr;
  std::vector<at::Tensor> outputs_, inputs_;
};

}  // namespace kloop
