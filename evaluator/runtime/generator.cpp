// xoshiro256** streams seeded through SplitMix64; Box-Muller for normals.
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

class Xoshiro {
 public:
  explicit Xoshiro(uint64_t seed) {
    for (auto& s : s_) s = splitmix64(seed);
  }
  uint64_t next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  double normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    double u1;
    do {
      u1 = uniform();
    } while (u1 <= 0.0);
    double u2 = uniform();
    double r = std::sqrt(-2.0 * std::log(u1));
    spare_ = r * std::sin(2.0 * M_PI * u2);
    has_spare_ = true;
    return r * std::cos(2.0 * M_PI * u2);
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
  double spare_ = 0;
  bool has_spare_ = false;
};

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

uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  int32_t exp = static_cast<int32_t>((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffffu;
  if (((x >> 23) & 0xff) == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0));
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  if (exp <= 0) {
    if (exp < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    uint32_t shift = static_cast<uint32_t>(14 - exp);
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = sign | (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1))) ++half;
  return static_cast<uint16_t>(half);
}

uint16_t float_to_bfloat16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40);
  x += 0x7fffu + ((x >> 16) & 1);  // round to nearest even
  return static_cast<uint16_t>(x >> 16);
}

namespace {

enum class Kind { kRand, kRandn, kUniform, kNormal, kRandint, kOnes, kZeros, kBernoulli };

// The distribution resolved once per tensor, not per element.
struct Resolved {
  Kind kind;
  double a = 0, b = 0;  // low/high, mean/std, or p
};

Resolved resolve(const DrawSpec& draw, const std::string& name) {
  const std::string& k = draw.kind;
  if (k == "rand") return {Kind::kRand};
  if (k == "randn") return {Kind::kRandn};
  if (k == "uniform") return {Kind::kUniform, param(draw, "low"), param(draw, "high")};
  if (k == "normal") return {Kind::kNormal, param(draw, "mean"), param(draw, "std")};
  if (k == "randint") {
    Resolved r{Kind::kRandint, param(draw, "low"), param(draw, "high")};
    if (static_cast<int64_t>(r.b) <= static_cast<int64_t>(r.a)) throw std::invalid_argument("randint needs high > low for '" + name + "'");
    return r;
  }
  if (k == "ones") return {Kind::kOnes};
  if (k == "zeros") return {Kind::kZeros};
  if (k == "bernoulli") return {Kind::kBernoulli, param(draw, "p")};
  throw std::invalid_argument("unknown distribution '" + k + "' for '" + name + "'");
}

// Draws elements [begin, end) of one block. The loops are specialised per
// distribution and per dtype (a switch per element cost more than the
// draw); every value is still draw * scale in double, converted as before.
template <typename Put>
void draw_range(const Resolved& d, Xoshiro& rng, double scale, std::size_t begin, std::size_t end, Put put) {
  switch (d.kind) {
    case Kind::kRand:
      for (std::size_t i = begin; i < end; ++i) put(i, rng.uniform() * scale);
      break;
    case Kind::kRandn:
      for (std::size_t i = begin; i < end; ++i) put(i, rng.normal() * scale);
      break;
    case Kind::kUniform:
      for (std::size_t i = begin; i < end; ++i) put(i, (d.a + (d.b - d.a) * rng.uniform()) * scale);
      break;
    case Kind::kNormal:
      for (std::size_t i = begin; i < end; ++i) put(i, (d.a + d.b * rng.normal()) * scale);
      break;
    case Kind::kRandint: {
      const auto lo = static_cast<int64_t>(d.a);
      const auto span = static_cast<uint64_t>(static_cast<int64_t>(d.b) - lo);
      for (std::size_t i = begin; i < end; ++i) {
        put(i, static_cast<double>(lo + static_cast<int64_t>(rng.next() % span)) * scale);
      }
      break;
    }
    case Kind::kOnes:
      for (std::size_t i = begin; i < end; ++i) put(i, 1.0 * scale);
      break;
    case Kind::kZeros:
      for (std::size_t i = begin; i < end; ++i) put(i, 0.0 * scale);
      break;
    case Kind::kBernoulli:
      for (std::size_t i = begin; i < end; ++i) put(i, (rng.uniform() < d.a ? 1.0 : 0.0) * scale);
      break;
  }
}

// `as` turns the drawn double into the stored element type.
template <typename T, typename As>
void draw_range_as(const Resolved& d, Xoshiro& rng, double scale, uint8_t* bytes, std::size_t begin,
                   std::size_t end, As as) {
  draw_range(d, rng, scale, begin, end, [bytes, as](std::size_t i, double v) {
    const T x = as(v);
    std::memcpy(bytes + i * sizeof(T), &x, sizeof(T));
  });
}

void draw_block(const Resolved& d, Xoshiro& rng, double scale, DType dtype, uint8_t* bytes, std::size_t begin,
                std::size_t end) {
  auto cast = [](auto zero) { return [](double v) { return static_cast<decltype(zero)>(v); }; };
  switch (dtype) {
    case DType::kFloat32: draw_range_as<float>(d, rng, scale, bytes, begin, end, cast(0.0f)); break;
    case DType::kFloat64: draw_range_as<double>(d, rng, scale, bytes, begin, end, cast(0.0)); break;
    case DType::kFloat16:
      draw_range_as<uint16_t>(d, rng, scale, bytes, begin, end,
                              [](double v) { return float_to_half(static_cast<float>(v)); });
      break;
    case DType::kBFloat16:
      draw_range_as<uint16_t>(d, rng, scale, bytes, begin, end,
                              [](double v) { return float_to_bfloat16(static_cast<float>(v)); });
      break;
    case DType::kInt64: draw_range_as<int64_t>(d, rng, scale, bytes, begin, end, cast(int64_t{0})); break;
    case DType::kInt32: draw_range_as<int32_t>(d, rng, scale, bytes, begin, end, cast(int32_t{0})); break;
    case DType::kInt16: draw_range_as<int16_t>(d, rng, scale, bytes, begin, end, cast(int16_t{0})); break;
    case DType::kInt8: draw_range_as<int8_t>(d, rng, scale, bytes, begin, end, cast(int8_t{0})); break;
    case DType::kUInt8: draw_range_as<uint8_t>(d, rng, scale, bytes, begin, end, cast(uint8_t{0})); break;
    case DType::kBool:
      draw_range_as<uint8_t>(d, rng, scale, bytes, begin, end,
                             [](double v) { return static_cast<uint8_t>(v != 0 ? 1 : 0); });
      break;
  }
}

}  // namespace

// Blocks of 2^20 elements, each its own stream, so large tensors (inputs of
// several GB at upstream sizes) are drawn on all cores and the result does
// not depend on how many there are. Block 0 keeps the tensor's stream, so a
// small tensor is the same as before blocks existed.
void generate_into(void* dst, const std::string& name, DType dtype, int64_t numel, const DrawSpec& draw,
                   uint64_t seed) {
  constexpr std::size_t kBlock = std::size_t{1} << 20;
  const auto n = static_cast<std::size_t>(numel);
  auto* bytes = static_cast<uint8_t*>(dst);
  const Resolved d = resolve(draw, name);
  const double scale = dtype_is_floating(dtype) ? draw.scale : 1.0;
  const std::size_t blocks = (n + kBlock - 1) / kBlock;
  auto fill = [&](std::size_t b) {
    Xoshiro rng(b == 0 ? stream_seed(seed, name) : stream_seed(seed, name + "#block" + std::to_string(b)));
    draw_block(d, rng, scale, dtype, bytes, b * kBlock, std::min(n, (b + 1) * kBlock));
  };
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
  resolve(draw, name);  // a bad distribution fails before the allocation
  t.bytes.resize(static_cast<std::size_t>(t.numel()) * dtype_size(dtype));
  generate_into(t.bytes.data(), name, dtype, t.numel(), draw, seed);
  return t;
}

}  // namespace kloop
