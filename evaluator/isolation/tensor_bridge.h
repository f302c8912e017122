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
// With `max_bytes` (a candidate's file), a file whose tensors hold more is
// refused before anything is allocated (a sparse file passes every size
// check a file's own length can make).
std::vector<std::pair<std::string, at::Tensor>> read_tensors(const std::string& path, const std::string& device,
                                                             uint64_t max_bytes = 0);
// `tensors` written as a tensor file, tensor i named PREFIX<i> ("output0"),
// from their own memory (a device tensor is copied to the host first).
void write_tensors(const std::string& path, const std::vector<at::Tensor>& tensors, const std::string& prefix);
DType dtype_of(const at::Tensor& tensor);  // throws for types kloop cannot carry
at::ScalarType scalar_type_of(DType dtype);
std::vector<int64_t> shape_of(const at::Tensor& tensor);
// True when the two tensors' storages share any byte (a returned input, a view).
bool storage_overlaps(const at::Tensor& a, const at::Tensor& b);

}  // namespace kloop
