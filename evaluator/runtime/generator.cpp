// Philox4x32-10 by element index (philox.h, shared with the device side);
// the per-tensor key from SplitMix64 over the seed and the stream name.
#include "evaluator/runtime/generator.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <vector>

namespace kloop {
namespace {

uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double param(const DrawSpec& d, const char* key) {
  auto it = d.params.find(key);
  if (it == d.params.end()) {
    throw std::invalid_argument(std::string("distribution '") + d.kind + "' needs parameter '" + key + "'");
  }
  return it->second;
}


}  // namespace

uint64_t stream_seed(uint64_t seed, const std::string& stream) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
  for (unsigned char c : stream) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  uint64_t x = seed ^ h;
  return splitmix64(x);
}

uint16_t float_to_half(float f) { return philox::half_bits(f); }

uint16_t float_to_bfloat16(float f) { return philox::bfloat16_bits(f); }

philox::Draw resolve_draw(const DrawSpec& draw, const std::string& name, DType dtype, uint64_t seed) {
  using philox::Kind;
  philox::Draw d;
  d.scale = dtype_is_floating(dtype) ? draw.scale : 1.0;
  d.key = stream_seed(seed, name);
  const std::string& k = draw.kind;
  if (k == "rand") {
    d.kind = Kind::kRand;
  } else if (k == "randn") {
    d.kind = Kind::kRandn;
  } else if (k == "uniform") {
    d.kind = Kind::kUniform;
    d.a = param(draw, "low");
    d.b = param(draw, "high");
  } else if (k == "normal") {
    d.kind = Kind::kNormal;
    d.a = param(draw, "mean");
    d.b = param(draw, "std");
  } else if (k == "randint") {
    d.kind = Kind::kRandint;
    d.a = param(draw, "low");
    d.b = param(draw, "high");
    if (static_cast<int64_t>(d.b) <= static_cast<int64_t>(d.a)) {
      throw std::invalid_argument("randint needs high > low for '" + name + "'");
    }
  } else if (k == "ones") {
    d.kind = Kind::kOnes;
  } else if (k == "zeros") {
    d.kind = Kind::kZeros;
  } else if (k == "bernoulli") {
    d.kind = Kind::kBernoulli;
    d.a = param(draw, "p");
  } else if (k == "sign") {
    d.kind = Kind::kSign;
    d.a = draw.params.count("p") ? param(draw, "p") : 0.5;
  } else {
    throw std::invalid_argument("unknown distribution '" + k + "' for '" + name + "'; expected one of " +
                                distribution_kinds());
  }
  const std::string& s = draw.structure;
  if (!s.empty()) {
    if (!is_distribution_structure(s)) {
      throw std::invalid_argument("unknown structure '" + s + "' for '" + name + "'; expected one of " +
                                  distribution_structures());
    }
    if (draw.rows <= 0 || draw.cols <= 0) {
      throw std::invalid_argument("the structure '" + s + "' of '" + name + "' needs a tensor of two or more dimensions");
    }
    if (s == "symmetric" && draw.rows != draw.cols) {
      throw std::invalid_argument("'" + name + "' is symmetric but its matrices are " + std::to_string(draw.rows) +
                                  " x " + std::to_string(draw.cols) + ", not square");
    }
    d.structure = s == "symmetric"          ? philox::Structure::kSymmetric
                  : s == "upper_triangular" ? philox::Structure::kUpper
                                            : philox::Structure::kLower;
    d.rows = static_cast<uint64_t>(draw.rows);
    d.cols = static_cast<uint64_t>(draw.cols);
  }
  return d;
}

std::string distribution_kinds() { return "rand, randn, uniform, normal, randint, ones, zeros, bernoulli, sign"; }
std::string distribution_structures() { return "symmetric, upper_triangular, lower_triangular"; }
bool is_distribution_kind(const std::string& kind) {
  for (const char* k : {"rand", "randn", "uniform", "normal", "randint", "ones", "zeros", "bernoulli", "sign"}) {
    if (kind == k) return true;
  }
  return false;
}
bool is_distribution_structure(const std::string& structure) {
  return structure == "symmetric" || structure == "upper_triangular" || structure == "lower_triangular";
}

namespace {

// Elements [begin, end) (begin even) of one tensor, stored by `as`; the
// loop is specialised per dtype (a switch per element cost as much as the
// draw).
template <typename T, typename As>
KLOOP_HD void draw_range(const philox::Draw& d, uint8_t* bytes, std::size_t begin, std::size_t end, As as) {
  double v[2];
  for (std::size_t i = begin; i < end; i += 2) {
    philox::pair_values(d, i / 2, v);
    const T x0 = as(v[0]);
    std::memcpy(bytes + i * sizeof(T), &x0, sizeof(T));
    if (i + 1 < end) {
      const T x1 = as(v[1]);
      std::memcpy(bytes + (i + 1) * sizeof(T), &x1, sizeof(T));
    }
  }
}

// An x86-64 build without -mfma would call libm for every fma (most of a
// normal's cost); the clone for FMA hardware has the instruction inlined,
// with the same correctly rounded results.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__FMA__)
__attribute__((target_clones("fma", "default")))
#endif
void draw_block(const philox::Draw& d, DType dtype, uint8_t* bytes, std::size_t begin, std::size_t end) {
  // Integers through int64 (exact for every drawn value), then narrowed
  // modulo 2^bits: defined for any value, the same on the device.
  auto cast = [](auto zero) {
    return [](double v) { return static_cast<decltype(zero)>(static_cast<int64_t>(v)); };
  };
  auto real = [](auto zero) { return [](double v) { return static_cast<decltype(zero)>(v); }; };
  switch (dtype) {
    case DType::kFloat32: draw_range<float>(d, bytes, begin, end, real(0.0f)); break;
    case DType::kFloat64: draw_range<double>(d, bytes, begin, end, real(0.0)); break;
    case DType::kFloat16:
      draw_range<uint16_t>(d, bytes, begin, end, [](double v) { return philox::half_bits(static_cast<float>(v)); });
      break;
    case DType::kBFloat16:
      draw_range<uint16_t>(d, bytes, begin, end,
                           [](double v) { return philox::bfloat16_bits(static_cast<float>(v)); });
      break;
    case DType::kInt64: draw_range<int64_t>(d, bytes, begin, end, cast(int64_t{0})); break;
    case DType::kInt32: draw_range<int32_t>(d, bytes, begin, end, cast(int32_t{0})); break;
    case DType::kInt16: draw_range<int16_t>(d, bytes, begin, end, cast(int16_t{0})); break;
    case DType::kInt8: draw_range<int8_t>(d, bytes, begin, end, cast(int8_t{0})); break;
    case DType::kUInt8: draw_range<uint8_t>(d, bytes, begin, end, cast(uint8_t{0})); break;
    case DType::kBool:
      draw_range<uint8_t>(d, bytes, begin, end, [](double v) { return static_cast<uint8_t>(v != 0 ? 1 : 0); });
      break;
  }
}

}  // namespace

// Every element is a function of its index alone, so the tensor is cut
// into blocks of 2^20 elements drawn on all cores, and the values do not
// depend on how many there are.
void generate_into(void* dst, const std::string& name, DType dtype, int64_t numel, const DrawSpec& draw,
                   uint64_t seed) {
  constexpr std::size_t kBlock = std::size_t{1} << 20;  // even: blocks start on a pair
  const auto n = static_cast<std::size_t>(numel);
  auto* bytes = static_cast<uint8_t*>(dst);
  const philox::Draw d = resolve_draw(draw, name, dtype, seed);
  const std::size_t blocks = (n + kBlock - 1) / kBlock;
  auto fill = [&](std::size_t b) { draw_block(d, dtype, bytes, b * kBlock, std::min(n, (b + 1) * kBlock)); };
  const std::size_t threads = std::min<std::size_t>(blocks, std::max(1u, std::thread::hardware_concurrency()));
  if (threads <= 1) {
    for (std::size_t b = 0; b < blocks; ++b) fill(b);
    return;
  }
  std::vector<std::thread> pool;
  for (std::size_t k = 0; k < threads; ++k) {
    pool.emplace_back([&, k] {
      for (std::size_t b = k; b < blocks; b += threads) fill(b);
    });
  }
  for (auto& th : pool) th.join();
}

HostTensor generate_tensor(const std::string& name, DType dtype, const std::vector<int64_t>& shape,
                           const DrawSpec& draw, uint64_t seed) {
  HostTensor t;
  t.name = name;
  t.dtype = dtype;
  t.shape = shape;
  resolve_draw(draw, name, dtype, seed);  // a bad distribution fails before the allocation
  t.bytes.resize(static_cast<std::size_t>(t.numel()) * dtype_size(dtype));
  generate_into(t.bytes.data(), name, dtype, t.numel(), draw, seed);
  return t;
}

}  // namespace kloop
