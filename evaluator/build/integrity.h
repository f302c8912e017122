// Integrity tags for the state kloop trusts between runs: build cache
// entries, baselines, calibrations and run records. A tag is an
// HMAC-SHA256 under a secret key that only kloop's trusted processes read
// (a per-user key in the cache folder, a per-run key in the run folder), so
// a file that model-written code changed or wrote itself fails its check
// and is not believed.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kloop {

// The file name of the per-user key, in the build cache folder.
constexpr const char* kIntegrityKeyFile = "integrity.key";

class IntegrityKey {
 public:
  // The key in `path`, created (32 random bytes, mode 0600) when missing;
  // safe when several processes create it at once. Throws
  // std::runtime_error naming the file and the fix when it cannot be made or
  // read, is not a key, or other users can read it.
  static IntegrityKey open_or_create(const std::string& path);
  // <cache_dir>/integrity.key.
  static IntegrityKey for_cache(const std::string& cache_dir);
  // True when `path` holds a key (no check of its contents).
  static bool exists(const std::string& path);

  // HMAC-SHA256 over the parts, each length-prefixed so that ("ab", "c")
  // and ("a", "bc") differ, as lower-case hex.
  std::string tag(const std::vector<std::string_view>& parts) const;
  // Whether `expected` is the tag of the parts (constant-time comparison).
  bool verify(const std::string& expected, const std::vector<std::string_view>& parts) const;

 private:
  explicit IntegrityKey(std::string bytes) : bytes_(std::move(bytes)) {}
  std::string bytes_;
};

// "kloop: warning: <message>" on stderr, at most once per message per
// process: a poisoned file read on every evaluation warns once, not a
// thousand times.
void warn_untrusted(const std::string& message);

}  // namespace kloop
