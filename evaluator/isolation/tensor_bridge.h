// Conversions between the driver's HostTensors and LibTorch tensors, used by
// the worker processes only (the driver does not link LibTorch code paths).
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

#include "evaluator/runtime/host_tensor.h"

namespace kloop {

at::Tensor host_to_tensor(const HostTensor& host);  // a CPU tensor owning a copy
HostTensor tensor_to_host(const at::Tensor& tensor, const std::string& name);
at::Tensor to_device(const at::Tensor& tensor, const std::string& device);
// A tensor file's tensors by name, in its order, on `device`: each read
// straight into a CPU tensor's storage (no HostTensor between), then moved.
std::vector<std::pair<std::string, at::Tensor>> read_tensors(const std::string& path, const std::string& device);
// `tensors` written as a tensor file, tensor i named PREFIX<i> ("output0"),
// from their own memory (a device tensor is copied to the host first).
void write_tensors(const std::string& path, const std::vector<at::Tensor>& tensors, const std::string& prefix);
DType dtype_of(const at::Tensor& tensor);  // throws for types kloop cannot carry
at::ScalarType scalar_type_of(DType dtype);
std::vector<int64_t> shape_of(const at::Tensor& tensor);
// True when the two tensors' storages share any byte (a returned input, a view).
bool storage_overlaps(const at::Tensor& a, const at::Tensor& b);

}  // namespace kloop
