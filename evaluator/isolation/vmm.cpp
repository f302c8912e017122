// CUDA VMM allocations shared between processes (vmm.h).
#include "evaluator/isolation/vmm.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#ifdef KLOOP_WITH_CUDA
#include <cuda.h>
#include <cuda_runtime_api.h>

#include "base/cuda_check.h"
#endif

namespace kloop {

#ifdef KLOOP_WITH_CUDA
namespace {

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

// A buffer over `handle` (just created or imported) set up by `setup`;
// when that throws, whatever it had set up and the handle are released.
template <class Setup>
VmmBuffer owning(CUmemGenericAllocationHandle handle, Setup&& setup) {
  VmmBuffer b;
  try {
    setup(b);
  } catch (...) {
    if (!b.handle) cuMemRelease(handle);
    b.release();
    throw;
  }
  return b;
}

}  // namespace
#endif

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

VmmBuffer vmm_create(int ordinal, uint64_t bytes, const char* what) {
#ifdef KLOOP_WITH_CUDA
  KLOOP_CUDA_CHECK(cudaSetDevice(ordinal), std::string("CUDA IPC: selecting the device for ") + what);
  CUmemAllocationProp prop = exportable(ordinal);
  size_t granularity = 0;
  KLOOP_CUDA_CHECK(cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
                   "CUDA IPC: granularity");
  const uint64_t size = round_up(bytes, granularity);
  CUmemGenericAllocationHandle handle = 0;
  KLOOP_CUDA_CHECK(cuMemCreate(&handle, size, &prop, 0),
                   std::string("CUDA IPC: allocating ") + std::to_string(size) + " bytes for " + what);
  return owning(handle, [&](VmmBuffer& b) { map_buffer(b, handle, size, granularity, ordinal, what); });
#else
  (void)ordinal;
  (void)bytes;
  throw std::runtime_error(std::string("this kloop-worker was built without CUDA: no shared device memory for ") + what);
#endif
}

int vmm_export(const VmmBuffer& b, const char* what) {
#ifdef KLOOP_WITH_CUDA
  int fd = -1;
  KLOOP_CUDA_CHECK(cuMemExportToShareableHandle(&fd, b.handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
                   std::string("CUDA IPC: exporting ") + what);
  return fd;
#else
  (void)b;
  throw std::runtime_error(std::string("this kloop-worker was built without CUDA: cannot export ") + what);
#endif
}

VmmBuffer vmm_import(int fd, uint64_t bytes, int ordinal, const char* what) {
#ifdef KLOOP_WITH_CUDA
  if (fd < 0) throw std::runtime_error(std::string("CUDA IPC: no descriptor came for ") + what);
  if (bytes > (uint64_t{1} << 46)) throw std::runtime_error("CUDA IPC: a shared buffer of " + std::to_string(bytes) + " bytes");
  KLOOP_CUDA_CHECK(cudaSetDevice(ordinal), std::string("CUDA IPC: selecting the device for ") + what);
  CUmemGenericAllocationHandle handle = 0;
  KLOOP_CUDA_CHECK(cuMemImportFromShareableHandle(&handle, reinterpret_cast<void*>(static_cast<uintptr_t>(fd)),
                                                  CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
                   std::string("CUDA IPC: importing ") + what);
  return owning(handle, [&](VmmBuffer& b) {
    CUmemAllocationProp prop = {};
    size_t granularity = 0;
    KLOOP_CUDA_CHECK(cuMemGetAllocationPropertiesFromHandle(&prop, handle),
                     std::string("CUDA IPC: reading the properties of ") + what);
    KLOOP_CUDA_CHECK(cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
                     "CUDA IPC: granularity");
    // Mapping fails when the allocation is smaller than it claims, so no
    // view of it can reach past it.
    map_buffer(b, handle, round_up(bytes, granularity), granularity, ordinal, what);
  });
#else
  (void)fd;
  (void)bytes;
  (void)ordinal;
  throw std::runtime_error(std::string("this kloop-worker was built without CUDA: cannot map ") + what);
#endif
}

}  // namespace kloop
