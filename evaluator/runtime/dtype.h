// Tensor element types as kloop names them in specs and files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace kloop {

enum class DType { kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kInt16, kInt8, kUInt8, kBool };

const char* dtype_name(DType dtype);
std::optional<DType> parse_dtype(const std::string& name);
std::size_t dtype_size(DType dtype);
bool dtype_is_floating(DType dtype);
// The 16-bit floats from their bits, exactly.
float half_to_float(uint16_t bits);
float bfloat16_to_float(uint16_t bits);
// Reads element `i` of a buffer of this dtype as a double.
double dtype_load(DType dtype, const void* data, std::size_t i);
// Names accepted by parse_dtype, for error messages.
const char* dtype_choices();

}  // namespace kloop
