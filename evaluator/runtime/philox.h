// The counter-based core of kloop's generator, compiled for the host and
// (by nvcc) for the device from this one text, so both draw the same bits.
// Element i of a tensor is a pure function of (key, i): Philox4x32-10 of
// counter i/2 gives 128 bits, 64 for each of elements 2k and 2k+1 (a normal
// pair is one Box-Muller draw of both halves).
//
// Bit-identical on both sides because every floating-point step is one
// correctly rounded IEEE operation written out: no library log, sin or cos
// (their last bits differ between glibc and CUDA), and no contraction of a
// product and a sum into an FMA behind our back (the device side uses the
// _rn intrinsics, which nvcc never fuses; the host file is compiled with
// -ffp-contract=off; fused steps are explicit fma calls on both).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define KLOOP_HD __host__ __device__ __forceinline__
#elif defined(__GNUC__)
#define KLOOP_HD inline __attribute__((always_inline))  // into generator.cpp's FMA clone
#else
#define KLOOP_HD inline
#endif

namespace kloop::philox {

// ---- exact arithmetic, the same instruction on host and device ----------
#if defined(__CUDA_ARCH__)
KLOOP_HD double add(double a, double b) { return __dadd_rn(a, b); }
KLOOP_HD double sub(double a, double b) { return __dsub_rn(a, b); }
KLOOP_HD double mul(double a, double b) { return __dmul_rn(a, b); }
KLOOP_HD double div(double a, double b) { return __ddiv_rn(a, b); }
KLOOP_HD double fused(double a, double b, double c) { return __fma_rn(a, b, c); }
KLOOP_HD double root(double a) { return __dsqrt_rn(a); }
#else
KLOOP_HD double add(double a, double b) { return a + b; }
KLOOP_HD double sub(double a, double b) { return a - b; }
KLOOP_HD double mul(double a, double b) { return a * b; }
KLOOP_HD double div(double a, double b) { return a / b; }
KLOOP_HD double fused(double a, double b, double c) { return std::fma(a, b, c); }
KLOOP_HD double root(double a) { return std::sqrt(a); }
#endif

KLOOP_HD uint32_t mulhi(uint32_t a, uint32_t b) {
  return static_cast<uint32_t>((static_cast<uint64_t>(a) * b) >> 32);
}

// Philox4x32 with 10 rounds (Salmon et al., SC'11) of counter c, key k.
struct Block {
  uint32_t w[4];
};
KLOOP_HD Block philox4x32_10(Block c, uint32_t k0, uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    const uint32_t hi0 = mulhi(0xD2511F53u, c.w[0]), lo0 = 0xD2511F53u * c.w[0];
    const uint32_t hi1 = mulhi(0xCD9E8D57u, c.w[2]), lo1 = 0xCD9E8D57u * c.w[2];
    c = {{hi1 ^ c.w[1] ^ k0, lo1, hi0 ^ c.w[3] ^ k1, lo0}};
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return c;
}

// The block of pair k of the stream `key`: counter (k, 0), key split in two.
KLOOP_HD Block philox_pair(uint64_t k, uint64_t key) {
  return philox4x32_10({{static_cast<uint32_t>(k), static_cast<uint32_t>(k >> 32), 0, 0}},
                       static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32));
}

// ---- transcendental steps from exact operations -------------------------

// The series' coefficients as exact bit patterns (hex literals), so no
// compiler's constant folding stands between the two sides.
// 1/k for odd k = 1 .. 23:
#define KLOOP_PHILOX_INV_ODD                                                                  \
  {0x1.0000000000000p+0, 0x1.5555555555555p-2, 0x1.999999999999ap-3, 0x1.2492492492492p-3, \
   0x1.c71c71c71c71cp-4, 0x1.745d1745d1746p-4, 0x1.3b13b13b13b14p-4, 0x1.1111111111111p-4, \
   0x1.e1e1e1e1e1e1ep-5, 0x1.af286bca1af28p-5, 0x1.8618618618618p-5, 0x1.642c8590b2164p-5}
// 1/n! for n = 0 .. 23:
#define KLOOP_PHILOX_INV_FACTORIAL                                                            \
  {0x1.0000000000000p+0, 0x1.0000000000000p+0, 0x1.0000000000000p-1, 0x1.5555555555555p-3, \
   0x1.5555555555555p-5, 0x1.1111111111111p-7, 0x1.6c16c16c16c17p-10, 0x1.a01a01a01a01ap-13, \
   0x1.a01a01a01a01ap-16, 0x1.71de3a556c734p-19, 0x1.27e4fb7789f5cp-22, 0x1.ae64567f544e4p-26, \
   0x1.1eed8eff8d898p-29, 0x1.6124613a86d09p-33, 0x1.93974a8c07c9dp-37, 0x1.ae7f3e733b81fp-41, \
   0x1.ae7f3e733b81fp-45, 0x1.952c77030ad4ap-49, 0x1.6827863b97d97p-53, 0x1.2f49b46814157p-57, \
   0x1.e542ba4020225p-62, 0x1.71b8ef6dcf572p-66, 0x1.0ce396db7f853p-70, 0x1.761b41316381ap-75}

// ln(u) for u in [2^-53, 1]: u = m 2^e with m in [sqrt(1/2), sqrt(2)],
// ln m = 2 atanh(s), s = (m-1)/(m+1), |s| < 0.172; the series to s^23
// leaves less than 1e-18 relative.
KLOOP_HD double log_unit(double u) {
  const double inv_odd[12] = KLOOP_PHILOX_INV_ODD;
  uint64_t bits;
  std::memcpy(&bits, &u, sizeof bits);
  int e = static_cast<int>((bits >> 52) & 0x7ff) - 1023;
  bits = (bits & 0x000fffffffffffffull) | 0x3ff0000000000000ull;  // m in [1, 2)
  double m;
  std::memcpy(&m, &bits, sizeof m);
  if (m > 0x1.6a09e667f3bcdp+0) {  // sqrt(2)
    m = mul(m, 0.5);
    e += 1;
  }
  const double s = div(sub(m, 1.0), add(m, 1.0));
  const double s2 = mul(s, s);
  double p = inv_odd[11];
  for (int k = 10; k >= 0; --k) p = fused(p, s2, inv_odd[k]);
  return fused(static_cast<double>(e), 0x1.62e42fefa39efp-1, mul(mul(2.0, s), p));  // e ln 2 + ln m
}

// sin and cos of x in [0, pi/2): Taylor series to x^23 and x^22 (Horner in
// -x^2), less than 1e-16 absolute at the end of the range.
KLOOP_HD void sincos_quarter(double x, double& s, double& c) {
  const double inv_factorial[24] = KLOOP_PHILOX_INV_FACTORIAL;
  const double y = -mul(x, x);
  double ps = inv_factorial[23], pc = inv_factorial[22];
  for (int k = 21; k >= 1; k -= 2) ps = fused(ps, y, inv_factorial[k]);
  for (int k = 20; k >= 0; k -= 2) pc = fused(pc, y, inv_factorial[k]);
  s = mul(x, ps);
  c = pc;
}

// (cos, sin) of 2 pi u for u in [0, 1): quadrant from 4u (exact), the
// remainder's angle in [0, pi/2).
KLOOP_HD void cos_sin_turn(double u, double& c, double& s) {
  const double t = mul(u, 4.0);
  const int q = static_cast<int>(t);
  const double x = mul(sub(t, static_cast<double>(q)), 0x1.921fb54442d18p+0);  // pi/2
  double sx, cx;
  sincos_quarter(x, sx, cx);
  switch (q & 3) {
    case 0: c = cx; s = sx; break;
    case 1: c = -sx; s = cx; break;
    case 2: c = -cx; s = -sx; break;
    default: c = sx; s = -cx; break;
  }
}

// ---- distributions -------------------------------------------------------

enum class Kind : int { kRand, kRandn, kUniform, kNormal, kRandint, kOnes, kZeros, kBernoulli, kSign };

// A structure over the last two dimensions (rows x cols) of the tensor,
// each matrix of a batch alike, as upstream's get_inputs builds it:
// symmetric (X + X^T) / 2 of the draw (square), upper or lower triangular
// (the draw where col >= row, resp. col <= row; 0 elsewhere).
enum class Structure : int { kNone, kSymmetric, kUpper, kLower };

// One tensor's draw, resolved to numbers (plain data: it is a kernel
// argument).
struct Draw {
  Kind kind = Kind::kRandn;
  double a = 0, b = 0;  // low/high, mean/std, or p
  double scale = 1;     // 1 for integer dtypes
  uint64_t key = 0;     // the tensor's stream
  Structure structure = Structure::kNone;
  uint64_t rows = 1, cols = 1;  // the matrices' shape, for a structure
};

KLOOP_HD double unit_open0(uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }   // [0, 1)
KLOOP_HD double unit_open1(uint64_t bits) { return static_cast<double>((bits >> 11) + 1) * 0x1.0p-53; }  // (0, 1]

// Elements 2k and 2k+1 of the tensor, as doubles before the dtype's
// conversion.
KLOOP_HD void element_pair(const Draw& d, uint64_t k, double v[2]) {
  if (d.kind == Kind::kOnes || d.kind == Kind::kZeros) {
    v[0] = v[1] = mul(d.kind == Kind::kOnes ? 1.0 : 0.0, d.scale);
    return;
  }
  const Block r = philox_pair(k, d.key);
  const uint64_t b0 = (static_cast<uint64_t>(r.w[0]) << 32) | r.w[1];
  const uint64_t b1 = (static_cast<uint64_t>(r.w[2]) << 32) | r.w[3];
  switch (d.kind) {
    case Kind::kRand:
      v[0] = mul(unit_open0(b0), d.scale);
      v[1] = mul(unit_open0(b1), d.scale);
      return;
    case Kind::kUniform: {
      const double span = sub(d.b, d.a);
      v[0] = mul(add(d.a, mul(span, unit_open0(b0))), d.scale);
      v[1] = mul(add(d.a, mul(span, unit_open0(b1))), d.scale);
      return;
    }
    case Kind::kRandn:
    case Kind::kNormal: {
      const double radius = root(mul(-2.0, log_unit(unit_open1(b0))));
      double c, s;
      cos_sin_turn(unit_open0(b1), c, s);
      double z0 = mul(radius, c), z1 = mul(radius, s);
      if (d.kind == Kind::kNormal) {
        z0 = add(d.a, mul(d.b, z0));
        z1 = add(d.a, mul(d.b, z1));
      }
      v[0] = mul(z0, d.scale);
      v[1] = mul(z1, d.scale);
      return;
    }
    case Kind::kRandint: {
      const auto lo = static_cast<int64_t>(d.a);
      const auto span = static_cast<uint64_t>(static_cast<int64_t>(d.b) - lo);
      v[0] = static_cast<double>(lo + static_cast<int64_t>(b0 % span));
      v[1] = static_cast<double>(lo + static_cast<int64_t>(b1 % span));
      return;
    }
    case Kind::kBernoulli:
      v[0] = mul(unit_open0(b0) < d.a ? 1.0 : 0.0, d.scale);
      v[1] = mul(unit_open0(b1) < d.a ? 1.0 : 0.0, d.scale);
      return;
    case Kind::kSign: {
      // Labels: +1 with probability p, else -1. A scaling keeps them labels:
      // only its sign applies (x-1 flips them; x3 and x0.01 do nothing).
      const double flip = d.scale < 0 ? -1.0 : 1.0;
      v[0] = unit_open0(b0) < d.a ? flip : -flip;
      v[1] = unit_open0(b1) < d.a ? flip : -flip;
      return;
    }
    default:
      v[0] = v[1] = 0;
      return;
  }
}

// Element i of the draw before any structure.
KLOOP_HD double element_value(const Draw& d, uint64_t i) {
  double v[2];
  element_pair(d, i / 2, v);
  return v[i & 1];
}

// Element i of a structured draw whose own value is `own`.
KLOOP_HD double structured_value(const Draw& d, uint64_t i, double own) {
  const uint64_t col = i % d.cols, row = (i / d.cols) % d.rows;
  switch (d.structure) {
    case Structure::kUpper: return col >= row ? own : 0.0;
    case Structure::kLower: return col <= row ? own : 0.0;
    case Structure::kSymmetric: {
      if (row == col) return own;
      const uint64_t mirror = i - row * d.cols - col + col * d.cols + row;  // (col, row) of the same matrix
      return mul(add(own, element_value(d, mirror)), 0.5);
    }
    default: return own;
  }
}

// Elements 2k and 2k+1 of the tensor, with its structure, as doubles
// before the dtype's conversion.
KLOOP_HD void pair_values(const Draw& d, uint64_t k, double v[2]) {
  element_pair(d, k, v);
  if (d.structure == Structure::kNone) return;
  v[0] = structured_value(d, 2 * k, v[0]);
  v[1] = structured_value(d, 2 * k + 1, v[1]);
}

// ---- storing: round to nearest even, the same bits on both sides ---------

KLOOP_HD uint16_t half_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const int32_t exp = static_cast<int32_t>((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffffu;
  if (((x >> 23) & 0xff) == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0));
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  if (exp <= 0) {
    if (exp < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    const uint32_t shift = static_cast<uint32_t>(14 - exp);
    uint32_t half = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = sign | (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1))) ++half;
  return static_cast<uint16_t>(half);
}

KLOOP_HD uint16_t bfloat16_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40);
  x += 0x7fffu + ((x >> 16) & 1);
  return static_cast<uint16_t>(x >> 16);
}

}  // namespace kloop::philox
