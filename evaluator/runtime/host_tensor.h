// HostTensor: a named, contiguous tensor in host memory, and the file format
// that carries tensors between kloop's processes (weights, inputs, outputs).
// The driver works on HostTensors only, so it never needs LibTorch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "evaluator/runtime/dtype.h"

namespace kloop {

struct HostTensor {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  std::vector<unsigned char> bytes;

  int64_t numel() const;
  double at(std::size_t i) const { return dtype_load(dtype, bytes.data(), i); }
  std::string shape_string() const;  // "[16, 4096]"
};

// "[16, 4096]": a shape, or an index into one.
std::string shape_string(const std::vector<int64_t>& dims);

// Files are "KLOOPTNS", a version, then per tensor: name, dtype, shape and
// raw little-endian data. Throws std::runtime_error naming the file.
void write_tensor_file(const std::string& path, const std::vector<HostTensor>& tensors);
std::vector<HostTensor> read_tensor_file(const std::string& path);

}  // namespace kloop
