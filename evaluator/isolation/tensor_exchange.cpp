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

#ifdef KLOOP_WITH_CUDA
uint64_t round_up(uint64_t n, uint64_t g) { return (std::max<uint64_t>(n, 1) + g - 1) / g * g; }

CUmemAllocationProp exportable(int device) {
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return prop;
}

// Maps `handle` read-write on `device` at a fresh address range of `size`.
void map_buffer(VmmBuffer& b, CUmemGenericAllocationHandle handle, uint64_t size, uint64_t granularity, int device,
                const char* what) {
  b.handle = handle;
  b.size = size;
  KLOOP_CUDA_CHECK(cuMemAddressReserve(&b.address, size, granularity, 0, 0),
                   std::string("CUDA IPC: reserving addresses for ") + what);
  KLOOP_CUDA_CHECK(cuMemMap(b.address, size, 0, handle, 0), std::string("CUDA IPC: mapping ") + what);
  b.mapped = true;
  CUmemAccessDesc access = {};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  KLOOP_CUDA_CHECK(cuMemSetAccess(b.address, size, &access, 1), std::string("CUDA IPC: granting access to ") + what);
}
#endif

json file_entry(const std::string& path) { return {{"path", path}}; }

}  // namespace

ExchangeExport::~ExchangeExport() { release(); }

void VmmBuffer::release() {
#ifdef KLOOP_WITH_CUDA
  if (mapped) cuMemUnmap(address, size);
  if (address) cuMemAddressFree(address, size);
  if (handle) cuMemRelease(handle);
#endif
  address = 0;
  size = 0;
  handle = 0;
  mapped = false;
}

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
  KLOOP_CUDA_CHECK(cudaSetDevice(ordinal), "CUDA IPC: selecting the device");
  // VMM memory exported as a POSIX descriptor: it crosses PID namespaces
  // (over the channel, as SCM_RIGHTS), where legacy cudaIpc handles do not.
  CUmemAllocationProp prop = exportable(ordinal);
  size_t granularity = 0;
  KLOOP_CUDA_CHECK(cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
                   "CUDA IPC: granularity");
  const uint64_t size = round_up(total, granularity);
  CUmemGenericAllocationHandle handle = 0;
  KLOOP_CUDA_CHECK(cuMemCreate(&handle, size, &prop, 0),
                   std::string("CUDA IPC: allocating ") + std::to_string(size) + " bytes");
  try {
    map_buffer(buffer_, handle, size, granularity, ordinal, "the exchange buffer");
  } catch (...) {
    if (!buffer_.handle) cuMemRelease(handle);
    release();
    throw;
  }
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
  KLOOP_CUDA_CHECK(cuMemExportToShareableHandle(&fd_, buffer_.handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
                   "CUDA IPC: exporting the exchange buffer");
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
  if (fd < 0) throw std::runtime_error("CUDA IPC: no descriptor came with the description");
  const at::Device dev(device);
  const int ordinal = dev.has_index() ? dev.index() : 0;
  KLOOP_CUDA_CHECK(cudaSetDevice(ordinal), "CUDA IPC: selecting the device");
  const uint64_t total = d.at("bytes");
  if (total > (uint64_t{1} << 46)) throw std::runtime_error("CUDA IPC: a published buffer of " + std::to_string(total) + " bytes");
  // Alignment pads each tensor by less than 256 bytes.
  const uint64_t tensors = d.at("tensors").size();
  if (limits.output_bytes && limits.input_bytes &&
      total > limits.output_bytes + limits.input_bytes + tensors * kAlign) {
    throw std::runtime_error("CUDA IPC: a published buffer of " + std::to_string(total) + " bytes, more than the " +
                             std::to_string(limits.output_bytes + limits.input_bytes) +
                             " the problem's outputs and inputs can have");
  }
  CUmemGenericAllocationHandle handle = 0;
  KLOOP_CUDA_CHECK(cuMemImportFromShareableHandle(&handle, reinterpret_cast<void*>(static_cast<uintptr_t>(fd)),
                                                  CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
                   "CUDA IPC: importing the published buffer");
  CUmemAllocationProp prop = {};
  size_t granularity = 0;
  try {
    KLOOP_CUDA_CHECK(cuMemGetAllocationPropertiesFromHandle(&prop, handle),
                     "CUDA IPC: reading the published buffer's properties");
    KLOOP_CUDA_CHECK(cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
                     "CUDA IPC: granularity");
    // Mapping fails when the allocation is smaller than it claims, so no
    // tensor below can reach past it.
    map_buffer(mapped_, handle, round_up(total, granularity), granularity, ordinal, "the published buffer");
  } catch (...) {
    if (!mapped_.handle) cuMemRelease(handle);
    mapped_.release();
    throw;
  }
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
