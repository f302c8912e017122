// xoshiro256** streams seeded through SplitMix64; Box-Muller for normals.
#include "evaluator/runtime/generator.h"

#include <cmath>
#include <cstring>
#include <stdexcept>

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

template <typename T>
void store(std::vector<unsigned char>& bytes, std::size_t i, T v) {
  std::memcpy(bytes.data() + i * sizeof(T), &v, sizeof(T));
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

HostTensor generate_tensor(const std::string& name, DType dtype, const std::vector<int64_t>& shape,
                           const DrawSpec& draw, uint64_t seed) {
  HostTensor t;
  t.name = name;
  t.dtype = dtype;
  t.shape = shape;
  const auto n = static_cast<std::size_t>(t.numel());
  t.bytes.assign(n * dtype_size(dtype), 0);
  Xoshiro rng(stream_seed(seed, name));
  const bool floating = dtype_is_floating(dtype);
  const double scale = floating ? draw.scale : 1.0;

  auto draw_one = [&]() -> double {
    const std::string& k = draw.kind;
    if (k == "rand") return rng.uniform();
    if (k == "randn") return rng.normal();
    if (k == "uniform") return param(draw, "low") + (param(draw, "high") - param(draw, "low")) * rng.uniform();
    if (k == "normal") return param(draw, "mean") + param(draw, "std") * rng.normal();
    if (k == "randint") {
      auto lo = static_cast<int64_t>(param(draw, "low"));
      auto hi = static_cast<int64_t>(param(draw, "high"));
      if (hi <= lo) throw std::invalid_argument("randint needs high > low for '" + name + "'");
      return static_cast<double>(lo + static_cast<int64_t>(rng.next() % static_cast<uint64_t>(hi - lo)));
    }
    if (k == "ones") return 1.0;
    if (k == "zeros") return 0.0;
    if (k == "bernoulli") return rng.uniform() < param(draw, "p") ? 1.0 : 0.0;
    throw std::invalid_argument("unknown distribution '" + k + "' for '" + name + "'");
  };

  for (std::size_t i = 0; i < n; ++i) {
    double v = draw_one() * scale;
    switch (dtype) {
      case DType::kFloat32: store(t.bytes, i, static_cast<float>(v)); break;
      case DType::kFloat64: store(t.bytes, i, v); break;
      case DType::kFloat16: store(t.bytes, i, float_to_half(static_cast<float>(v))); break;
      case DType::kBFloat16: store(t.bytes, i, float_to_bfloat16(static_cast<float>(v))); break;
      case DType::kInt64: store(t.bytes, i, static_cast<int64_t>(v)); break;
      case DType::kInt32: store(t.bytes, i, static_cast<int32_t>(v)); break;
      case DType::kInt16: store(t.bytes, i, static_cast<int16_t>(v)); break;
      case DType::kInt8: store(t.bytes, i, static_cast<int8_t>(v)); break;
      case DType::kUInt8: store(t.bytes, i, static_cast<uint8_t>(v)); break;
      case DType::kBool: store(t.bytes, i, static_cast<uint8_t>(v != 0 ? 1 : 0)); break;
    }
  }
  return t;
}

}  // namespace kloop
