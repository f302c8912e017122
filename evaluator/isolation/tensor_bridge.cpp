// HostTensor <-> at::Tensor.
#include "evaluator/isolation/tensor_bridge.h"

#include <ATen/ATen.h>

#include <cstring>
#include <stdexcept>


namespace kloop {

at::ScalarType scalar_type_of(DType d) {
  switch (d) {
    case DType::kFloat32: return at::kFloat;
    case DType::kFloat64: return at::kDouble;
    case DType::kFloat16: return at::kHalf;
    case DType::kBFloat16: return at::kBFloat16;
    case DType::kInt64: return at::kLong;
    case DType::kInt32: return at::kInt;
    case DType::kInt16: return at::kShort;
    case DType::kInt8: return at::kChar;
    case DType::kUInt8: return at::kByte;
    case DType::kBool: return at::kBool;
  }
  return at::kFloat;
}

DType dtype_of(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat: return DType::kFloat32;
    case at::kDouble: return DType::kFloat64;
    case at::kHalf: return DType::kFloat16;
    case at::kBFloat16: return DType::kBFloat16;
    case at::kLong: return DType::kInt64;
    case at::kInt: return DType::kInt32;
    case at::kShort: return DType::kInt16;
    case at::kChar: return DType::kInt8;
    case at::kByte: return DType::kUInt8;
    case at::kBool: return DType::kBool;
    default:
      throw std::invalid_argument(std::string("kloop: tensors of type ") + c10::toString(t.scalar_type()) +
                                  " are not supported as outputs");
  }
}

std::vector<int64_t> shape_of(const at::Tensor& t) { return t.sizes().vec(); }

at::Tensor host_to_tensor(const HostTensor& host) {
  at::Tensor t = at::empty(host.shape, at::TensorOptions().dtype(scalar_type_of(host.dtype)));
  if (!host.bytes.empty()) std::memcpy(t.data_ptr(), host.bytes.data(), host.bytes.size());
  return t;
}

HostTensor tensor_to_host(const at::Tensor& tensor, const std::string& name) {
  HostTensor h;
  h.name = name;
  h.dtype = dtype_of(tensor);
  h.shape = shape_of(tensor);
  at::Tensor cpu = tensor.detach().to(at::kCPU).contiguous();
  h.bytes.resize(static_cast<std::size_t>(cpu.numel()) * cpu.element_size());
  if (!h.bytes.empty()) std::memcpy(h.bytes.data(), cpu.data_ptr(), h.bytes.size());
  return h;
}

at::Tensor to_device(const at::Tensor& tensor, const std::string& device) {
  if (device == "cpu") return tensor;
  return tensor.to(at::Device(device));
}

std::vector<std::pair<std::string, at::Tensor>> read_tensors(const std::string& path, const std::string& device,
                                                             uint64_t max_bytes) {
  const TensorFileReader file(path);
  if (max_bytes) {
    uint64_t total = 0;
    for (const TensorFileEntry& e : file.entries()) total += e.bytes;
    if (total > max_bytes) {
      throw std::runtime_error(path + ": its tensors hold " + std::to_string(total) + " bytes, more than the " +
                               std::to_string(max_bytes) + " the problem's tensors can have");
    }
  }
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (std::size_t i = 0; i < file.entries().size(); ++i) {
    const TensorFileEntry& e = file.entries()[i];
    at::Tensor t = at::empty(e.shape, at::TensorOptions().dtype(scalar_type_of(e.dtype)));
    file.read(i, t.data_ptr());
    out.emplace_back(e.name, to_device(t, device));
  }
  return out;
}

void write_tensors(const std::string& path, const std::vector<at::Tensor>& tensors, const std::string& prefix) {
  std::vector<at::Tensor> host;  // kept alive while the file is written
  std::vector<TensorFileSource> sources;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    host.push_back(tensors[i].detach().to(at::kCPU).contiguous());
    const at::Tensor& t = host.back();
    sources.push_back({prefix + std::to_string(i), dtype_of(t), shape_of(t), t.data_ptr(),
                       static_cast<uint64_t>(t.numel()) * t.element_size()});
  }
  write_tensor_file(path, sources);
}

bool storage_overlaps(const at::Tensor& a, const at::Tensor& b) {
  if (!a.defined() || !b.defined() || !a.has_storage() || !b.has_storage()) return false;
  if (a.device() != b.device()) return false;
  const auto* a0 = static_cast<const char*>(a.storage().data());
  const auto* b0 = static_cast<const char*>(b.storage().data());
  if (!a0 || !b0) return false;
  const char* a1 = a0 + a.storage().nbytes();
  const char* b1 = b0 + b.storage().nbytes();
  return a0 < b1 && b0 < a1;
}

}  // namespace kloop
