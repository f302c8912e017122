// How a candidate's outputs, and its inputs after the call, reach the
// reference worker that judges them, and (on the GPU) how the reference's
// inputs reach the candidate. Two transports:
//   file      tensor files in the evaluation's work folder (CPU evaluations,
//             and the fallback when CUDA IPC is refused);
//   cuda_ipc  one device allocation (CUDA VMM) packed with copies of the
//             tensors and exported as a POSIX file descriptor, which travels
//             over the worker channel (SCM_RIGHTS) and so crosses the
//             sandbox's PID namespace; the judge maps it and compares in
//             place, so a multi-GB output never crosses the host and the
//             judge sends nothing back. The description (layout) is
//             untrusted: every offset and size is checked against the
//             mapping, which itself fails if the memory is smaller.
// The candidate's process never receives a handle, a file or a value of the
// expected outputs: what the reference publishes is a copy of the inputs
// alone, in an allocation of its own.
// Worker code: links LibTorch (and the CUDA runtime in CUDA builds).
#pragma once

#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "evaluator/isolation/vmm.h"

namespace kloop {

// The candidate's side: publishes tensors and keeps them available until
// the next publish (or destruction).
class ExchangeExport {
 public:
  ExchangeExport() = default;
  ~ExchangeExport();
  ExchangeExport(const ExchangeExport&) = delete;
  ExchangeExport& operator=(const ExchangeExport&) = delete;

  // `stem` names the files of the file transport (STEM.outputs.safetensors,
  // STEM.inputs.safetensors). Returns the description the other side imports.
  nlohmann::json publish(const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs,
                         const std::string& transport, const std::string& stem);
  void release();
  // The descriptor of the last cuda_ipc publish (owned here), or -1.
  int fd() const { return fd_; }

 private:
  VmmBuffer buffer_;  // cuda_ipc: the exported allocation, mapped here
  int fd_ = -1;
};

// What the judge takes from a candidate's publication: the bytes the
// problem's outputs and inputs can have (the judge's own tensors' element
// counts at the widest dtype). 0 = no limit (a trusted publisher).
struct ExchangeLimits {
  uint64_t output_bytes = 0;
  uint64_t input_bytes = 0;
};

// The judge's side: the published tensors, on `device`. cuda_ipc tensors are
// views of the mapped allocation, valid while this object lives.
class ExchangeImport {
 public:
  // `fd`: the descriptor that came with a cuda_ipc description (not taken
  // over). A publication larger than `limits` is refused before anything
  // is allocated or mapped.
  ExchangeImport(const nlohmann::json& description, const std::string& device, int fd = -1,
                 const ExchangeLimits& limits = {});
  ~ExchangeImport();
  ExchangeImport(const ExchangeImport&) = delete;
  ExchangeImport& operator=(const ExchangeImport&) = delete;

  const std::vector<at::Tensor>& outputs() const { return outputs_; }
  const std::vector<at::Tensor>& inputs() const { return inputs_; }
  // False for a file description that names no inputs (a trusted program's
  // outputs alone: port parity).
  bool inputs_published() const { return inputs_published_; }

 private:
  VmmBuffer mapped_;
  std::vector<at::Tensor> outputs_, inputs_;
  bool inputs_published_ = true;
};

}  // namespace kloop
