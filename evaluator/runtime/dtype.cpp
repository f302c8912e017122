// Element-type names, sizes and a scalar loader shared by files and checks.
#include "evaluator/runtime/dtype.h"

#include <cstdint>
#include <cstring>

namespace kloop {
namespace {

struct DTypeInfo {
  DType dtype;
  const char* name;
  std::size_t size;
  bool floating;
};

constexpr DTypeInfo kInfos[] = {
    {DType::kFloat32, "float32", 4, true}, {DType::kFloat64, "float64", 8, true},
    {DType::kFloat16, "float16", 2, true}, {DType::kBFloat16, "bfloat16", 2, true},
    {DType::kInt64, "int64", 8, false},    {DType::kInt32, "int32", 4, false},
    {DType::kInt16, "int16", 2, false},    {DType::kInt8, "int8", 1, false},
    {DType::kUInt8, "uint8", 1, false},    {DType::kBool, "bool", 1, false},
};

const DTypeInfo& info(DType dtype) {
  for (const auto& i : kInfos) {
    if (i.dtype == dtype) return i;
  }
  return kInfos[0];
}

}  // namespace

float half_to_float(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: renormalise
      exp = 127 - 15 + 1;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3ff;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

float bfloat16_to_float(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

const char* dtype_name(DType dtype) { return info(dtype).name; }
std::size_t dtype_size(DType dtype) { return info(dtype).size; }
bool dtype_is_floating(DType dtype) { return info(dtype).floating; }
const char* dtype_choices() {
  return "float32, float64, float16, bfloat16, int64, int32, int16, int8, uint8, bool";
}

std::optional<DType> parse_dtype(const std::string& name) {
  for (const auto& i : kInfos) {
    if (name == i.name) return i.dtype;
  }
  if (name == "float") return DType::kFloat32;
  if (name == "double") return DType::kFloat64;
  if (name == "long") return DType::kInt64;
  return std::nullopt;
}

double dtype_load(DType dtype, const void* data, std::size_t i) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  switch (dtype) {
    case DType::kFloat32: {
      float v;
      std::memcpy(&v, bytes + i * 4, 4);
      return v;
    }
    case DType::kFloat64: {
      double v;
      std::memcpy(&v, bytes + i * 8, 8);
      return v;
    }
    case DType::kFloat16: {
      uint16_t v;
      std::memcpy(&v, bytes + i * 2, 2);
      return half_to_float(v);
    }
    case DType::kBFloat16: {
      uint16_t v;
      std::memcpy(&v, bytes + i * 2, 2);
      return bfloat16_to_float(v);
    }
    case DType::kInt64: {
      int64_t v;
      std::memcpy(&v, bytes + i * 8, 8);
      return static_cast<double>(v);
    }
    case DType::kInt32: {
      int32_t v;
      std::memcpy(&v, bytes + i * 4, 4);
      return v;
    }
    case DType::kInt16: {
      int16_t v;
      std::memcpy(&v, bytes + i * 2, 2);
      return v;
    }
    case DType::kInt8:
      return static_cast<int8_t>(bytes[i]);
    case DType::kUInt8:
      return bytes[i];
    case DType::kBool:
      return bytes[i] != 0 ? 1.0 : 0.0;
  }
  return 0;
}

}  // namespace kloop
