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
// The number of elements of a shape (1 for a scalar's []).
int64_t shape_numel(const std::vector<int64_t>& dims);

// Files are safetensors (https://huggingface.co/docs/safetensors): an
// 8-byte little-endian header length, a JSON header naming each tensor's
// dtype, shape and data offsets, then the raw little-endian data, so
// `safetensors.torch.load_file` opens a kept work folder's files. Tensors
// keep their order (the header's); a tensor without a name is written
// "#i". Throws std::runtime_error naming the file.
void write_tensor_file(const std::string& path, const std::vector<HostTensor>& tensors);
std::vector<HostTensor> read_tensor_file(const std::string& path);

// A tensor to write from memory the caller keeps (a worker writes a tensor
// of several GB from its own storage, with no copy between).
struct TensorFileSource {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  uint64_t bytes = 0;
};
void write_tensor_file(const std::string& path, const std::vector<TensorFileSource>& tensors);

// One tensor of a checked file: what it is and where its bytes are.
struct TensorFileEntry {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  uint64_t offset = 0;  // in the file
  uint64_t bytes = 0;
};

// A tensor file opened and checked as read_tensor_file checks it (the file
// may be a candidate's: nothing in it is believed before it is checked
// against the file's size), whose tensors the caller reads into memory of
// its own: a worker reads a multi-GB tensor straight into a tensor's
// storage. Throws std::runtime_error naming the file.
class TensorFileReader {
 public:
  explicit TensorFileReader(const std::string& path);
  ~TensorFileReader();
  TensorFileReader(const TensorFileReader&) = delete;
  TensorFileReader& operator=(const TensorFileReader&) = delete;

  const std::vector<TensorFileEntry>& entries() const { return entries_; }
  // Entry i's bytes (entries()[i].bytes of them) into `into`; throws when
  // the file has shrunk since it was checked.
  void read(std::size_t i, void* into) const;

 private:
  void check();
  std::string path_;
  int fd_ = -1;
  std::vector<TensorFileEntry> entries_;
};

}  // namespace kloop
