// The device half of kloop's generator (CUDA builds only, linked into the
// worker): the values of generate_into, drawn by a kernel straight into
// device memory, so inputs of GBs never pass through the host.
#pragma once

#include <cstdint>
#include <string>

#include "evaluator/runtime/generator.h"

namespace kloop {

// Draws into `dst` (device memory aligned to the dtype, numel elements) on
// the legacy default stream and waits for it, or with `stream` (a
// cudaStream_t) enqueues the draw there and returns. Throws
// std::invalid_argument for a bad draw, std::runtime_error for a CUDA error
// (named).
void generate_on_device(void* dst, const std::string& name, DType dtype, int64_t numel, const DrawSpec& draw,
                        uint64_t seed, void* stream = nullptr);

}  // namespace kloop
