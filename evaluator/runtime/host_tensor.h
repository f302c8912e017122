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

// Files are safetensors (https://huggingface.co/docs/safetensors): an
// 8-byte little-endian header length, a JSON header naming each tensor's
// dtype, shape and data offsets, then the raw little-endian data, so
// `safetensors.torch.load_file` opens a kept work folder's files. Tensors
// keep their order (the header's); a tensor without a name is written
// "#i". Throws std::runtime_error naming the file.
void write_tensor_file(const std::string& path, const std::vector<HostTensor>& tensors);
std::vector<HostTensor> read_tensor_file(const std::string& path);

}  // namespace kloop
