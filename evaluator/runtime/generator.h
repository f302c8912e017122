// kloop's own seeded generator for weights and inputs. Values depend only on
// (seed, stream name, distribution, index), never on LibTorch's RNG, so the
// same seed gives the same tensors on every machine and LibTorch version,
// and on the host and the device (generator_device.h draws the same bits
// in device memory; philox.h is the one definition both compile).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "evaluator/runtime/host_tensor.h"
#include "evaluator/runtime/philox.h"

namespace kloop {

// A distribution with its parameters already evaluated to numbers.
struct DrawSpec {
  std::string kind = "randn";  // rand randn uniform normal randint ones zeros bernoulli sign
  std::map<std::string, double> params;
  double scale = 1.0;  // multiplies floating-point draws (hidden-test distributions)
  // "", symmetric, upper_triangular, lower_triangular (philox::Structure),
  // over the tensor's last two dimensions, rows x cols.
  std::string structure;
  int64_t rows = 0, cols = 0;
};

// The distribution kinds and structures, for messages.
std::string distribution_kinds();   // "rand, randn, ..."
std::string distribution_structures();  // "symmetric, upper_triangular, lower_triangular"
bool is_distribution_kind(const std::string& kind);
bool is_distribution_structure(const std::string& structure);

// The per-tensor seed: mixes the run seed with the tensor's stream name.
uint64_t stream_seed(uint64_t seed, const std::string& stream);

// The draw as the counter-based core takes it; throws std::invalid_argument
// naming the tensor for an unknown distribution or a missing parameter.
philox::Draw resolve_draw(const DrawSpec& draw, const std::string& name, DType dtype, uint64_t seed);

HostTensor generate_tensor(const std::string& name, DType dtype, const std::vector<int64_t>& shape,
                           const DrawSpec& draw, uint64_t seed);

// The same values written into `dst` (numel elements of dtype, unaligned
// allowed, not initialised first): the workers draw straight into a
// tensor's memory, with no zero-fill and no copy, and its pages are first
// touched by the drawing threads.
void generate_into(void* dst, const std::string& name, DType dtype, int64_t numel, const DrawSpec& draw,
                   uint64_t seed);

// Float conversion used when drawing half-precision tensors.
uint16_t float_to_half(float f);
uint16_t float_to_bfloat16(float f);

}  // namespace kloop
