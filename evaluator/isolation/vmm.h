// CUDA VMM allocations shared between processes: created exportable as a
// POSIX file descriptor (which travels over a worker channel as SCM_RIGHTS
// and so crosses the sandbox's PID namespace, where legacy cudaIpc handles
// do not) and mapped read-write on the importing side. Worker code; without
// CUDA every function throws.
#pragma once

#include <cstdint>

namespace kloop {

// A CUDA VMM allocation mapped into this process (empty without CUDA).
struct VmmBuffer {
  unsigned long long address = 0;  // CUdeviceptr
  uint64_t size = 0;
  unsigned long long handle = 0;  // CUmemGenericAllocationHandle
  bool mapped = false;
  void release();
};

// A new exportable allocation of at least `bytes` on device `ordinal`,
// mapped read-write here; `what` names it in errors.
VmmBuffer vmm_create(int ordinal, uint64_t bytes, const char* what);
// `b`'s allocation as a new POSIX descriptor (the caller closes it).
int vmm_export(const VmmBuffer& b, const char* what);
// The allocation `fd` names (not taken over), mapped read-write here; it
// must hold at least `bytes` (mapping fails when it is smaller).
VmmBuffer vmm_import(int fd, uint64_t bytes, int ordinal, const char* what);

}  // namespace kloop
