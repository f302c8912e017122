// ContentHash over OpenSSL's EVP SHA-256.
#include "evaluator/build/content_hash.h"

#include <openssl/evp.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <fstream>
#include <vector>
#include <sstream>
#include <stdexcept>

namespace kloop {

ContentHash::ContentHash() : ctx_(EVP_MD_CTX_new()) {
  EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), EVP_sha256(), nullptr);
}

ContentHash::~ContentHash() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_)); }

ContentHash& ContentHash::add(std::string_view part) {
  uint64_t n = part.size();
  EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), &n, sizeof(n));
  EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), part.data(), part.size());
  return *this;
}

ContentHash& ContentHash::add_file(const std::string& path) { return add(read_file(path)); }

bool ContentHash::add_fd(int fd, uint64_t size) {
  auto* ctx = static_cast<EVP_MD_CTX*>(ctx_);
  EVP_DigestUpdate(ctx, &size, sizeof(size));
  std::vector<char> buf(1 << 20);
  uint64_t done = 0;
  while (done < size) {
    const ssize_t n = pread(fd, buf.data(), static_cast<std::size_t>(std::min<uint64_t>(buf.size(), size - done)),
                            static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    EVP_DigestUpdate(ctx, buf.data(), static_cast<std::size_t>(n));
    done += static_cast<uint64_t>(n);
  }
  return true;
}

std::string ContentHash::hex() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), digest, &len);
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) {
    out += kHex[digest[i] >> 4];
    out += kHex[digest[i] & 15];
  }
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot read the file");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace kloop
