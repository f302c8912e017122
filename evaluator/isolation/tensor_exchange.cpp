// File and CUDA IPC transports for the candidate -> judge direction.
#include "evaluator/isolation/tensor_exchange.h"

#include <ATen/ATen.h>

#include <cstdio>
#include <stdexcept>

#include "evaluator/isolation/tensor_bridge.h"
#include "evaluator/runtime/host_tensor.h"

#ifdef KLOOP_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace kloop {
namespace {

using json = nlohmann::json;

// Offsets inside the exported allocation: aligned for any dtype and for
// coalesced access.
constexpr uint64_t kAlign = 256;

#ifdef KLOOP_WITH_CUDA
void check(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess) {
    cudaGetLastError();
    throw std::runtime_error("CUDA IPC: " + what + ": " + cudaGetErrorString(e));
  }
}

std::string to_hex(const void* data, std::size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) {
    s += digits[p[i] >> 4];
    s += digits[p[i] & 15];
  }
  return s;
}

void from_hex(const std::string& s, void* data, std::size_t n) {
  if (s.size() != 2 * n) throw std::invalid_argument("CUDA IPC: a handle of " + std::to_string(s.size()) + " hex digits");
  auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  auto* p = static_cast<unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<unsigned char>(nibble(s[2 * i]) << 4 | nibble(s[2 * i + 1]));
}
#endif

json file_entry(const std::string& path) { return {{"path", path}}; }

}  // namespace

ExchangeExport::~ExchangeExport() { release(); }

void ExchangeExport::release() {
#ifdef KLOOP_WITH_CUDA
  if (buffer_) cudaFree(buffer_);
#endif
  buffer_ = nullptr;
}

json ExchangeExport::publish(const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs,
                             const std::string& transport, const std::string& stem) {
  release();
  if (transport == "file") {
    std::vector<HostTensor> out_host, in_host;
    for (std::size_t i = 0; i < outputs.size(); ++i) out_host.push_back(tensor_to_host(outputs[i], "output" + std::to_string(i)));
    for (std::size_t k = 0; k < inputs.size(); ++k) in_host.push_back(tensor_to_host(inputs[k], "input" + std::to_string(k)));
    write_tensor_file(stem + ".outputs.kt", out_host);
    write_tensor_file(stem + ".inputs.kt", in_host);
    return {{"transport", "file"}, {"outputs", file_entry(stem + ".outputs.kt")},
            {"inputs", file_entry(stem + ".inputs.kt")}};
  }
  if (transport != "cuda_ipc") throw std::invalid_argument("unknown tensor transport '" + transport + "'");
  for (const auto* list : {&outputs, &inputs}) {
    for (const auto& t : *list) {
      if (!t.is_cuda()) throw std::invalid_argument("cuda_ipc carries CUDA tensors only, not " + t.device().str());
    }
  }
#ifdef KLOOP_WITH_CUDA
  json tensors = json::array();
  uint64_t total = 0;
  auto plan = [&](const at::Tensor& t, const char* role, std::size_t index) {
    const uint64_t bytes = static_cast<uint64_t>(t.numel()) * t.element_size();
    tensors.push_back({{"role", role}, {"index", index}, {"dtype", dtype_name(dtype_of(t))}, {"shape", t.sizes().vec()},
                       {"offset", total}, {"bytes", bytes}});
    total += (bytes + kAlign - 1) / kAlign * kAlign;
  };
  for (std::size_t i = 0; i < outputs.size(); ++i) plan(outputs[i], "output", i);
  for (std::size_t k = 0; k < inputs.size(); ++k) plan(inputs[k], "input", k);
  const at::Device device = outputs.empty() ? (inputs.empty() ? at::Device("cuda:0") : inputs[0].device()) : outputs[0].device();
  check(cudaMalloc(&buffer_, std::max<uint64_t>(total, kAlign)), "allocating " + std::to_string(total) + " bytes");
  std::size_t n = 0;
  for (const auto* list : {&outputs, &inputs}) {
    for (const auto& t : *list) {
      const json& e = tensors[n++];
      at::Tensor view = at::from_blob(static_cast<char*>(buffer_) + e["offset"].get<uint64_t>(), t.sizes(),
                                      at::TensorOptions().dtype(t.scalar_type()).device(device));
      view.copy_(t);
    }
  }
  check(cudaDeviceSynchronize(), "copying into the exchange buffer");
  cudaIpcMemHandle_t handle;
  check(cudaIpcGetMemHandle(&handle, buffer_), "exporting the exchange buffer");
  return {{"transport", "cuda_ipc"}, {"handle", to_hex(&handle, sizeof(handle))}, {"bytes", total},
          {"tensors", tensors}};
#else
  (void)stem;
  throw std::runtime_error("this kloop-worker was built without CUDA: no cuda_ipc transport");
#endif
}

ExchangeImport::ExchangeImport(const json& d, const std::string& device) {
  const std::string transport = d.at("transport");
  if (transport == "file") {
    for (auto& h : read_tensor_file(d.at("outputs").at("path"))) outputs_.push_back(to_device(host_to_tensor(h), device));
    for (auto& h : read_tensor_file(d.at("inputs").at("path"))) inputs_.push_back(to_device(host_to_tensor(h), device));
    return;
  }
  if (transport != "cuda_ipc") throw std::invalid_argument("unknown tensor transport '" + transport + "'");
#ifdef KLOOP_WITH_CUDA
  cudaIpcMemHandle_t handle;
  from_hex(d.at("handle").get<std::string>(), &handle, sizeof(handle));
  check(cudaIpcOpenMemHandle(&mapped_, handle, cudaIpcMemLazyEnablePeerAccess), "opening the candidate's buffer");
  const uint64_t total = d.at("bytes");
  for (const auto& e : d.at("tensors")) {
    const uint64_t offset = e.at("offset"), bytes = e.at("bytes");
    if (offset + bytes > total) throw std::runtime_error("CUDA IPC: a tensor outside the exported buffer");
    auto dtype = parse_dtype(e.at("dtype"));
    if (!dtype) throw std::runtime_error("CUDA IPC: unknown dtype " + e.at("dtype").dump());
    at::Tensor t = at::from_blob(static_cast<char*>(mapped_) + offset, e.at("shape").get<std::vector<int64_t>>(),
                                 at::TensorOptions().dtype(scalar_type_of(*dtype)).device(at::Device(device)));
    if (static_cast<uint64_t>(t.numel()) * t.element_size() != bytes) {
      throw std::runtime_error("CUDA IPC: a tensor's shape and byte count disagree");
    }
    (e.at("role") == "output" ? outputs_ : inputs_).push_back(t);
  }
#else
  (void)device;
  throw std::runtime_error("this kloop-worker was built without CUDA: no cuda_ipc transport");
#endif
}

ExchangeImport::~ExchangeImport() {
  outputs_.clear();
  inputs_.clear();
#ifdef KLOOP_WITH_CUDA
  if (mapped_) {
    cudaDeviceSynchronize();
    cudaIpcCloseMemHandle(mapped_);
  }
#endif
}

}  // namespace kloop
