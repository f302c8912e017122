// The tensor file format shared by the driver and its workers.
#include "evaluator/runtime/host_tensor.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>

namespace kloop {
namespace {

constexpr char kMagic[8] = {'K', 'L', 'O', 'O', 'P', 'T', 'N', 'S'};
constexpr uint32_t kVersion = 1;

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

template <typename T>
void put(std::FILE* f, const T& v, const std::string& path) {
  if (std::fwrite(&v, sizeof(T), 1, f) != 1) throw std::runtime_error(path + ": write failed");
}
void put_bytes(std::FILE* f, const void* p, std::size_t n, const std::string& path) {
  if (n && std::fwrite(p, 1, n, f) != n) throw std::runtime_error(path + ": write failed");
}
template <typename T>
T get(std::FILE* f, const std::string& path) {
  T v;
  if (std::fread(&v, sizeof(T), 1, f) != 1) throw std::runtime_error(path + ": truncated tensor file");
  return v;
}

}  // namespace

int64_t HostTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_string(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

std::string HostTensor::shape_string() const { return kloop::shape_string(shape); }

void write_tensor_file(const std::string& path, const std::vector<HostTensor>& tensors) {
  // A fresh file, never through a link someone planted at the path (a
  // trusted writer must not truncate a file the link points at).
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    throw std::runtime_error(path + ": cannot replace: " + std::strerror(errno));
  }
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  File f(fd >= 0 ? fdopen(fd, "wb") : nullptr);
  if (!f) {
    if (fd >= 0) close(fd);
    throw std::runtime_error(path + ": cannot create: " + std::strerror(errno));
  }
  put_bytes(f.get(), kMagic, sizeof(kMagic), path);
  put(f.get(), kVersion, path);
  put(f.get(), static_cast<uint32_t>(tensors.size()), path);
  for (const auto& t : tensors) {
    put(f.get(), static_cast<uint32_t>(t.name.size()), path);
    put_bytes(f.get(), t.name.data(), t.name.size(), path);
    put(f.get(), static_cast<uint32_t>(t.dtype), path);
    put(f.get(), static_cast<uint32_t>(t.shape.size()), path);
    for (int64_t d : t.shape) put(f.get(), d, path);
    put(f.get(), static_cast<uint64_t>(t.bytes.size()), path);
    put_bytes(f.get(), t.bytes.data(), t.bytes.size(), path);
  }
  if (std::fflush(f.get()) != 0) throw std::runtime_error(path + ": write failed");
}

// The reader is also the judge's: the file may come from a candidate, so
// nothing in it is believed before it is checked against the file's size
// (no allocation larger than the file, no link, no FIFO to hang on).
std::vector<HostTensor> read_tensor_file(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(path + ": cannot open: " + std::strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    throw std::runtime_error(path + ": not a regular file");
  }
  File f(fdopen(fd, "rb"));
  if (!f) {
    close(fd);
    throw std::runtime_error(path + ": cannot open: " + std::strerror(errno));
  }
  uint64_t left = static_cast<uint64_t>(st.st_size);
  auto need = [&](uint64_t n) {
    if (n > left) throw std::runtime_error(path + ": truncated or corrupt tensor file (a field claims more bytes than remain)");
    left -= n;
  };
  char magic[8];
  need(8);
  if (std::fread(magic, 1, 8, f.get()) != 8 || std::memcmp(magic, kMagic, 8) != 0) {
    throw std::runtime_error(path + ": not a kloop tensor file");
  }
  need(8);
  if (get<uint32_t>(f.get(), path) != kVersion) throw std::runtime_error(path + ": unknown tensor file version");
  uint32_t count = get<uint32_t>(f.get(), path);
  if (count > left / 20) throw std::runtime_error(path + ": corrupt tensor count");  // 20: the smallest entry
  std::vector<HostTensor> out(count);
  for (auto& t : out) {
    need(4);
    uint32_t name_len = get<uint32_t>(f.get(), path);
    if (name_len > 4096) throw std::runtime_error(path + ": corrupt tensor name");
    need(name_len);
    t.name.resize(name_len);
    if (name_len && std::fread(t.name.data(), 1, name_len, f.get()) != name_len) {
      throw std::runtime_error(path + ": truncated tensor file");
    }
    need(8);
    uint32_t dtype = get<uint32_t>(f.get(), path);
    if (dtype > static_cast<uint32_t>(DType::kBool)) throw std::runtime_error(path + ": corrupt dtype");
    t.dtype = static_cast<DType>(dtype);
    uint32_t ndim = get<uint32_t>(f.get(), path);
    if (ndim > 64) throw std::runtime_error(path + ": corrupt rank");
    need(8ull * ndim + 8);
    t.shape.resize(ndim);
    uint64_t numel = 1;
    for (auto& d : t.shape) {
      d = get<int64_t>(f.get(), path);
      if (d < 0 || (d > 0 && numel > left / static_cast<uint64_t>(d))) {
        throw std::runtime_error(path + ": corrupt shape for '" + t.name + "'");
      }
      numel *= static_cast<uint64_t>(d);
    }
    uint64_t nbytes = get<uint64_t>(f.get(), path);
    if (nbytes != numel * dtype_size(t.dtype)) {
      throw std::runtime_error(path + ": size of '" + t.name + "' does not match its shape");
    }
    need(nbytes);
    t.bytes.resize(nbytes);
    if (nbytes && std::fread(t.bytes.data(), 1, nbytes, f.get()) != nbytes) {
      throw std::runtime_error(path + ": truncated tensor file");
    }
  }
  return out;
}

}  // namespace kloop
