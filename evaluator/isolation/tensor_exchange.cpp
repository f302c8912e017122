// File and CUDA IPC transports for the candidate -> judge direction.
#include "evaluator/isolation/tensor_exchange.h"

#include <ATen/ATen.h>

#include <cstdio>
#include <stdexcept>

#include "evaluator/isolation/tensor_bridge.h"
#include "evaluator/runtime/host_tensor.h"

#ifdef KLOOP_WITH_CUDA
#include <cuda.h>
#include <cuda_runtime_api.h>

#include "base/cuda_check.h"
#endif
#include <unistd.h>

namespace kloop {
namespace {

using json = nlohmann::json;

// Offsets inside the exported allocation: aligned for any dtype and for
// coalesced access.
constexpr uint64_t kAlign = 256;

json file_entry(const std::string& path) { return {{"path", path}}; }

}  // namespace

ExchangeExport::~ExchangeExport() { release(); }

void ExchangeExport::release() {
#ifdef KLOOP_WITH_CUDA
  if (buffer_.address) cudaDeviceSynchronize();
#endif
  buffer_.release();
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

json ExchangeExport::publish(const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs,
                             const std::string& transport, const std::string& stem) {
  release();
  if (transport == "file") {
    write_tensors(stem + ".outputs.safetensors", outputs, "output");
    write_tensors(stem + ".inputs.safetensors", inputs, "input");
    return {{"transport", "file"}, {"outputs", file_entry(stem + ".outputs.safetensors")},
            {"inputs", file_entry(stem + ".inputs.safetensors")}};
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
  const int ordinal = device.has_index() ? device.index() : 0;
  buffer_ = vmm_create(ordinal, total, "the exchange buffer");
  char* base = reinterpret_cast<char*>(buffer_.address);
  std::size_t n = 0;
  for (const auto* list : {&outputs, &inputs}) {
    for (const auto& t : *list) {
      const json& e = tensors[n++];
      at::Tensor view = at::from_blob(base + e["offset"].get<uint64_t>(), t.sizes(),
                                      at::TensorOptions().dtype(t.scalar_type()).device(device));
      view.copy_(t);
    }
  }
  KLOOP_CUDA_CHECK(cudaDeviceSynchronize(), "CUDA IPC: copying into the exchange buffer");
  fd_ = vmm_export(buffer_, "the exchange buffer");
  return {{"transport", "cuda_ipc"}, {"bytes", total}, {"tensors", tensors}};
#else
  (void)stem;
  throw std::runtime_error("this kloop-worker was built without CUDA: no cuda_ipc transport");
#endif
}

ExchangeImport::ExchangeImport(const json& d, const std::string& device, int fd, const ExchangeLimits& limits) {
  const std::string transport = d.at("transport");
  if (transport == "file") {
    for (auto& [name, t] : read_tensors(d.at("outputs").at("path"), device, limits.output_bytes)) {
      outputs_.push_back(std::move(t));
    }
    // Without inputs (a trusted program's outputs alone, port parity) the
    // inputs after the call are not looked at. A candidate's description is
    // the driver's rebuild, which always names them.
    if (!d.contains("inputs")) {
      inputs_published_ = false;
      return;
    }
    for (auto& [name, t] : read_tensors(d.at("inputs").at("path"), device, limits.input_bytes)) {
      inputs_.push_back(std::move(t));
    }
    return;
  }
  if (transport != "cuda_ipc") throw std::invalid_argument("unknown tensor transport '" + transport + "'");
#ifdef KLOOP_WITH_CUDA
  const at::Device dev(device);
  const int ordinal = dev.has_index() ? dev.index() : 0;
  const uint64_t total = d.at("bytes");
  // Alignment pads each tensor by less than 256 bytes.
  const uint64_t tensors = d.at("tensors").size();
  if (limits.output_bytes && limits.input_bytes &&
      total > limits.output_bytes + limits.input_bytes + tensors * kAlign) {
    throw std::runtime_error("CUDA IPC: a published buffer of " + std::to_string(total) + " bytes, more than the " +
                             std::to_string(limits.output_bytes + limits.input_bytes) +
                             " the problem's outputs and inputs can have");
  }
  mapped_ = vmm_import(fd, total, ordinal, "the published buffer");
  char* base = reinterpret_cast<char*>(mapped_.address);
  for (const auto& e : d.at("tensors")) {
    const uint64_t offset = e.at("offset"), bytes = e.at("bytes");
    if (offset > total || bytes > total - offset) throw std::runtime_error("CUDA IPC: a tensor outside the exported buffer");
    auto dtype = parse_dtype(e.at("dtype"));
    if (!dtype) throw std::runtime_error("CUDA IPC: unknown dtype " + e.at("dtype").dump());
    const auto shape = e.at("shape").get<std::vector<int64_t>>();
    uint64_t numel = 1;
    for (int64_t s : shape) {
      if (s < 0 || (s > 0 && numel > total / static_cast<uint64_t>(s))) throw std::runtime_error("CUDA IPC: a corrupt shape");
      numel *= static_cast<uint64_t>(s);
    }
    if (numel * dtype_size(*dtype) != bytes) throw std::runtime_error("CUDA IPC: a tensor's shape and byte count disagree");
    at::Tensor t = at::from_blob(base + offset, shape, at::TensorOptions().dtype(scalar_type_of(*dtype)).device(dev));
    const std::string role = e.at("role");
    if (role != "output" && role != "input") throw std::runtime_error("CUDA IPC: a tensor of role '" + role + "'");
    (role == "output" ? outputs_ : inputs_).push_back(t);
  }
#else
  (void)device;
  (void)fd;
  throw std::runtime_error("this kloop-worker was built without CUDA: no cuda_ipc transport");
#endif
}

ExchangeImport::~ExchangeImport() {
  outputs_.clear();
  inputs_.clear();
#ifdef KLOOP_WITH_CUDA
  if (mapped_.address) cudaDeviceSynchronize();
#endif
  mapped_.release();
}

}  // namespace kloop
