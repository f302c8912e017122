// The tensor file format shared by the driver and its workers: safetensors.
#include "evaluator/runtime/host_tensor.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace kloop {
namespace {

// safetensors' names for kloop's dtypes, in the order of DType.
constexpr const char* kDTypeNames[] = {"F32", "F64", "F16", "BF16", "I64", "I32", "I16", "I8", "U8", "BOOL"};
constexpr uint64_t kMaxHeaderBytes = 100u << 20;  // as safetensors itself allows

// All of `n` bytes, however many calls write() takes (one moves at most
// about 2 GB on Linux).
void put_bytes(int fd, const void* p, uint64_t n, const std::string& path) {
  const auto* at = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t w = write(fd, at, std::min<uint64_t>(n, uint64_t{1} << 30));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) throw std::runtime_error(path + ": write failed: " + std::strerror(w < 0 ? errno : EIO));
    at += w;
    n -= static_cast<uint64_t>(w);
  }
}

// All of `n` bytes from `offset`, or false when the file ends first.
bool get_bytes(int fd, void* p, uint64_t n, uint64_t offset) {
  auto* at = static_cast<char*>(p);
  while (n > 0) {
    const ssize_t r = pread(fd, at, std::min<uint64_t>(n, uint64_t{1} << 30), static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    at += r;
    offset += static_cast<uint64_t>(r);
    n -= static_cast<uint64_t>(r);
  }
  return true;
}

uint64_t little_endian_u64(const unsigned char* b) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | b[i];
  return v;
}

}  // namespace

int64_t shape_numel(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

int64_t HostTensor::numel() const { return shape_numel(shape); }

std::string shape_string(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

std::string HostTensor::shape_string() const { return kloop::shape_string(shape); }

void write_tensor_file(const std::string& path, const std::vector<TensorFileSource>& tensors) {
  // The header: one entry per tensor in order, its data right after the
  // previous one's; names must be unique (an empty one is written "#i").
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  uint64_t offset = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const TensorFileSource& t = tensors[i];
    const std::string key = t.name.empty() ? "#" + std::to_string(i) : t.name;
    if (key == "__metadata__" || header.contains(key)) {
      throw std::runtime_error(path + ": tensor name '" + key + "' is reserved or used twice");
    }
    if (t.bytes != static_cast<uint64_t>(shape_numel(t.shape)) * dtype_size(t.dtype) || (t.bytes && !t.data)) {
      throw std::runtime_error(path + ": tensor '" + key + "' holds " + std::to_string(t.bytes) + " bytes for shape " +
                               shape_string(t.shape));
    }
    header[key] = {{"dtype", kDTypeNames[static_cast<int>(t.dtype)]},
                   {"shape", t.shape},
                   {"data_offsets", {offset, offset + t.bytes}}};
    offset += t.bytes;
  }
  header["__metadata__"] = {{"format", "pt"}, {"writer", "kloop"}};
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned

  // A fresh file, never through a link someone planted at the path (a
  // trusted writer must not truncate a file the link points at).
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    throw std::runtime_error(path + ": cannot replace: " + std::strerror(errno));
  }
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error(path + ": cannot create: " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  unsigned char length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(static_cast<uint64_t>(text.size()) >> (8 * i));
  put_bytes(fd, length, 8, path);
  put_bytes(fd, text.data(), text.size(), path);
  // Straight from the caller's memory: a tensor of several GB is not copied
  // into a buffer first.
  for (const auto& t : tensors) put_bytes(fd, t.data, t.bytes, path);
}

void write_tensor_file(const std::string& path, const std::vector<HostTensor>& tensors) {
  std::vector<TensorFileSource> sources;
  for (const auto& t : tensors) sources.push_back({t.name, t.dtype, t.shape, t.bytes.data(), t.bytes.size()});
  write_tensor_file(path, sources);
}

// The reader is also the judge's: the file may come from a candidate, so
// nothing in it is believed before it is checked against the file's size
// (no allocation larger than the file, no link, no FIFO to hang on), and
// the entries must tile the data exactly, as safetensors requires.
TensorFileReader::TensorFileReader(const std::string& path) : path_(path) {
  fd_ = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0) throw std::runtime_error(path + ": cannot open: " + std::strerror(errno));
  try {
    check();
  } catch (...) {
    close(fd_);
    throw;
  }
}

TensorFileReader::~TensorFileReader() {
  if (fd_ >= 0) close(fd_);
}

void TensorFileReader::check() {
  const std::string& path = path_;
  struct stat st;
  if (fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) throw std::runtime_error(path + ": not a regular file");
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  auto corrupt = [&](const std::string& why) { return std::runtime_error(path + ": not a valid tensor file (" + why + ")"); };
  unsigned char length[8];
  if (size < 8 || !get_bytes(fd_, length, 8, 0)) throw corrupt("shorter than its header length");
  const uint64_t header_bytes = little_endian_u64(length);
  if (header_bytes > size - 8 || header_bytes > kMaxHeaderBytes) throw corrupt("the header claims more bytes than the file has");
  std::string text(header_bytes, '\0');
  if (header_bytes && !get_bytes(fd_, text.data(), header_bytes, 8)) throw corrupt("truncated header");
  const uint64_t data_bytes = size - 8 - header_bytes;
  nlohmann::ordered_json header;
  try {
    header = nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception&) {
    throw corrupt("its header is not JSON");
  }
  if (!header.is_object()) throw corrupt("its header is not a JSON object");

  for (const auto& [key, e] : header.items()) {
    if (key == "__metadata__") continue;
    if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets")) {
      throw corrupt("entry '" + key + "' lacks dtype, shape or data_offsets");
    }
    TensorFileEntry t;
    t.name = key;
    const auto& d = e["dtype"];
    const auto* known = d.is_string() ? std::find(std::begin(kDTypeNames), std::end(kDTypeNames), d.get<std::string>())
                                      : std::end(kDTypeNames);
    if (known == std::end(kDTypeNames)) throw corrupt("entry '" + key + "' has an unknown dtype");
    t.dtype = static_cast<DType>(known - std::begin(kDTypeNames));
    const auto& shape = e["shape"];
    const auto& offsets = e["data_offsets"];
    if (!shape.is_array() || shape.size() > 64) throw corrupt("entry '" + key + "' has a bad shape");
    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned()) {
      throw corrupt("entry '" + key + "' has bad data_offsets");
    }
    const uint64_t element = dtype_size(t.dtype);
    uint64_t numel = 1;
    for (const auto& dim : shape) {
      if (!dim.is_number_unsigned()) throw corrupt("entry '" + key + "' has a bad shape");
      const uint64_t n = dim.get<uint64_t>();
      if (n > 0 && numel > data_bytes / element / n) throw corrupt("entry '" + key + "' is larger than the file");
      numel *= n;
      t.shape.push_back(static_cast<int64_t>(n));
    }
    const uint64_t begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
    if (begin > end || end > data_bytes || end - begin != numel * element) {
      throw corrupt("entry '" + key + "' has data_offsets that do not fit its shape or the file");
    }
    t.offset = 8 + header_bytes + begin;
    t.bytes = end - begin;
    entries_.push_back(std::move(t));
  }
  // The entries tile the data: sorted by offset, each starts where the last ended.
  std::vector<const TensorFileEntry*> order;
  for (const auto& e : entries_) order.push_back(&e);
  std::sort(order.begin(), order.end(), [](const TensorFileEntry* a, const TensorFileEntry* b) {
    return a->offset != b->offset ? a->offset < b->offset : a->bytes < b->bytes;
  });
  uint64_t at = 8 + header_bytes;
  for (const TensorFileEntry* e : order) {
    if (e->offset != at) throw corrupt("its tensors overlap or leave gaps");
    at = e->offset + e->bytes;
  }
  if (at != size) throw corrupt("its data is longer or shorter than its tensors");
}

void TensorFileReader::read(std::size_t i, void* into) const {
  const TensorFileEntry& e = entries_.at(i);
  // The file may have shrunk since it was checked (a candidate's own).
  if (e.bytes && !get_bytes(fd_, into, e.bytes, e.offset)) {
    throw std::runtime_error(path_ + ": not a valid tensor file (truncated data)");
  }
}

std::vector<HostTensor> read_tensor_file(const std::string& path) {
  const TensorFileReader file(path);
  std::vector<HostTensor> out;
  for (std::size_t i = 0; i < file.entries().size(); ++i) {
    const TensorFileEntry& e = file.entries()[i];
    HostTensor t;
    t.name = e.name;
    t.dtype = e.dtype;
    t.shape = e.shape;
    t.bytes.resize(e.bytes);
    file.read(i, t.bytes.data());
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace kloop
