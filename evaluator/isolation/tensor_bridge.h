// Conversions between the driver's HostTensors and LibTorch tensors, used by
// the worker processes only (the driver does not link LibTorch code paths).
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "evaluator/runtime/host_tensor.h"

namespace kloop {

at::Tensor host_to_tensor(const HostTensor& host);  // a CPU tensor owning a copy
HostTensor tensor_to_host(const at::Tensor& tensor, const std::string& name);
at::Tensor to_device(const at::Tensor& tensor, const std::string& device);
DType dtype_of(const at::Tensor& tensor);  // throws for types kloop cannot carry
at::ScalarType scalar_type_of(DType dtype);
std::vector<int64_t> shape_of(const at::Tensor& tensor);
// True when the two tensors' storages share any byte (a returned input, a view).
bool storage_overlaps(const at::Tensor& a, const at::Tensor& b);

}  // namespace kloop
