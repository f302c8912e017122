// IntegrityKey over OpenSSL: RAND_bytes for the key, HMAC-SHA256 through the
// EVP signing interface (not deprecated in OpenSSL 1.1.1 nor 3.x).
#include "evaluator/build/integrity.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>

namespace kloop {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kKeyBytes = 32;

std::string errno_text() { return std::strerror(errno); }

// Reads the key file; empty when it does not exist.
std::string read_key_file(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return "";
    throw std::runtime_error(path + ": cannot read the integrity key (" + errno_text() + ")");
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size != static_cast<off_t>(kKeyBytes)) {
    close(fd);
    throw std::runtime_error(path + ": not an integrity key (expected a file of " + std::to_string(kKeyBytes) +
                             " bytes); delete it and kloop makes a new one (what it signed is then re-made)");
  }
  if ((st.st_mode & 077) != 0) {
    close(fd);
    throw std::runtime_error(path + ": the integrity key is readable by other users; chmod 600 " + path);
  }
  std::string bytes(kKeyBytes, '\0');
  ssize_t n = read(fd, bytes.data(), bytes.size());
  close(fd);
  if (n != static_cast<ssize_t>(kKeyBytes)) throw std::runtime_error(path + ": cannot read the integrity key");
  return bytes;
}

// Writes a fresh key under a private name and links it into place, so that
// a reader never sees half a key and two creators agree on one.
void create_key_file(const std::string& path) {
  fs::create_directories(fs::path(path).parent_path());
  static std::atomic<int> counter{0};
  const std::string tmp = path + ".tmp-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
  unsigned char bytes[kKeyBytes];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) throw std::runtime_error("cannot draw random bytes for " + path);
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error(tmp + ": cannot create the integrity key (" + errno_text() + ")");
  const bool written = fchmod(fd, 0600) == 0 && write(fd, bytes, sizeof(bytes)) == static_cast<ssize_t>(sizeof(bytes)) &&
                       fsync(fd) == 0;
  close(fd);
  OPENSSL_cleanse(bytes, sizeof(bytes));
  if (!written) {
    unlink(tmp.c_str());
    throw std::runtime_error(tmp + ": cannot write the integrity key");
  }
  const int linked = link(tmp.c_str(), path.c_str());
  const int link_errno = errno;
  unlink(tmp.c_str());
  if (linked != 0 && link_errno != EEXIST) {
    throw std::runtime_error(path + ": cannot create the integrity key (" + std::strerror(link_errno) + ")");
  }
}

struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct MdCtxFree {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};

}  // namespace

IntegrityKey IntegrityKey::open_or_create(const std::string& path) {
  std::string bytes = read_key_file(path);
  if (bytes.empty()) {
    create_key_file(path);
    bytes = read_key_file(path);
    if (bytes.empty()) throw std::runtime_error(path + ": the integrity key vanished after it was made");
  }
  return IntegrityKey(std::move(bytes));
}

IntegrityKey IntegrityKey::for_cache(const std::string& cache_dir) {
  return open_or_create((fs::path(cache_dir) / kIntegrityKeyFile).string());
}

bool IntegrityKey::exists(const std::string& path) {
  struct stat st {};
  return lstat(path.c_str(), &st) == 0;
}

std::string IntegrityKey::tag(const std::vector<std::string_view>& parts) const {
  std::unique_ptr<EVP_PKEY, PkeyFree> pkey(EVP_PKEY_new_raw_private_key(
      EVP_PKEY_HMAC, nullptr, reinterpret_cast<const unsigned char*>(bytes_.data()), bytes_.size()));
  std::unique_ptr<EVP_MD_CTX, MdCtxFree> ctx(EVP_MD_CTX_new());
  if (!pkey || !ctx || EVP_DigestSignInit(ctx.get(), nullptr, EVP_sha256(), nullptr, pkey.get()) != 1) {
    throw std::runtime_error("HMAC-SHA256 is unavailable in this OpenSSL");
  }
  for (std::string_view part : parts) {
    uint64_t n = part.size();
    EVP_DigestSignUpdate(ctx.get(), &n, sizeof(n));
    EVP_DigestSignUpdate(ctx.get(), part.data(), part.size());
  }
  unsigned char mac[EVP_MAX_MD_SIZE];
  std::size_t len = sizeof(mac);
  if (EVP_DigestSignFinal(ctx.get(), mac, &len) != 1) throw std::runtime_error("HMAC-SHA256 failed");
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < len; ++i) {
    out += kHex[mac[i] >> 4];
    out += kHex[mac[i] & 15];
  }
  return out;
}

bool IntegrityKey::verify(const std::string& expected, const std::vector<std::string_view>& parts) const {
  const std::string actual = tag(parts);
  return expected.size() == actual.size() && CRYPTO_memcmp(expected.data(), actual.data(), actual.size()) == 0;
}

void warn_untrusted(const std::string& message) {
  static std::mutex mutex;
  static std::set<std::string> shown;
  std::lock_guard<std::mutex> lock(mutex);
  if (!shown.insert(message).second) return;
  std::fprintf(stderr, "kloop: warning: %s\n", message.c_str());
  std::fflush(stderr);
}

}  // namespace kloop
