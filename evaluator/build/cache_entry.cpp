// The build cache's entries: see cache_entry.h and builder.cpp's layout.
#include "evaluator/build/cache_entry.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <stdexcept>
#include <vector>

#include "evaluator/build/content_hash.h"

namespace kloop::build_cache {

namespace fs = std::filesystem;

FileLock::FileLock(const std::string& path) : fd_(open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644)) {
  if (fd_ < 0) throw std::runtime_error(path + ": cannot open the build lock");
  while (flock(fd_, LOCK_EX) != 0) {
    if (errno != EINTR) throw std::runtime_error(path + ": cannot take the build lock");
  }
}

FileLock::~FileLock() {
  flock(fd_, LOCK_UN);
  close(fd_);
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw std::runtime_error(path + ": cannot write");
}

void write_text_atomically(const fs::path& path, const std::string& text) {
  static std::atomic<int> counter{0};
  const fs::path tmp = path.string() + ".tmp-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
  write_text(tmp.string(), text);
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw std::runtime_error(path.string() + ": cannot write");
  }
}

std::string entry_product(const nlohmann::json& meta) {
  return meta.value("format", std::string()) == "python" ? "module.py" : "module.so";
}

std::string entry_digest(const fs::path& dir, const nlohmann::json& meta, const TreeLimits& limits) {
  ContentHash h;
  auto add_file = [&](const std::string& rel, uint64_t size) {
    const int fd = open_beneath(dir.string(), rel, O_RDONLY | O_NONBLOCK);
    if (fd < 0) throw std::runtime_error((dir / rel).string() + ": cannot open (" + std::strerror(errno) + ")");
    struct stat st {};
    const bool regular = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) == size;
    const bool read = regular && h.add_fd(fd, size);
    close(fd);
    if (!read) throw std::runtime_error((dir / rel).string() + ": changed or unreadable while it was hashed");
  };
  if (entry_product(meta) != "module.py") {
    struct stat st {};
    if (lstat((dir / "module.so").c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
      throw std::runtime_error((dir / "module.so").string() + ": missing or not a regular file");
    }
    if (static_cast<uint64_t>(st.st_size) > limits.max_bytes) {
      throw std::runtime_error((dir / "module.so").string() + ": larger than an entry may be");
    }
    h.add("module.so");
    add_file("module.so", static_cast<uint64_t>(st.st_size));
    return h.hex();
  }
  // Every file the worker may import, in a fixed order; the builder leaves
  // only folders and regular files in a Python entry (a link or special
  // file is named, never followed: the digest then differs from the one
  // signed).
  for (const TreeFile& f : list_tree(dir.string(), limits)) {
    if (f.regular && (f.path == "build.log" || f.path == "result.json")) continue;
    h.add(f.path).add(f.regular ? "file" : "other");
    if (f.regular) add_file(f.path, f.size);
  }
  return h.hex();
}

std::string file_or_empty(const fs::path& p) {
  std::error_code ec;
  if (!fs::exists(p, ec)) return "";
  return read_file(p.string());
}

std::string entry_tag(const IntegrityKey& ik, const std::string& key, const nlohmann::json& meta,
                      const std::string& log, const std::string& digest) {
  return ik.tag({kBuildFormat, "build-entry", key, meta.dump(), log, digest});
}

EntryState load_entry(const fs::path& dir, const std::string& key, const IntegrityKey& ik, const TreeLimits& limits,
                      BuildResult& r, std::string& why) {
  std::ifstream in(dir / "result.json");
  if (!in) {
    std::error_code ec;
    if (!fs::exists(dir, ec)) return EntryState::kMissing;
    why = "no result.json";
    return EntryState::kUntrusted;
  }
  nlohmann::json j;
  try {
    in >> j;
  } catch (const nlohmann::json::exception&) {
    why = "result.json is not JSON";
    return EntryState::kUntrusted;
  }
  if (!j.is_object() || !j.contains("mac") || !j["mac"].is_string()) {
    why = "result.json has no MAC (made before kloop signed its cache, or not by kloop)";
    return EntryState::kUntrusted;
  }
  const std::string mac = j["mac"].get<std::string>();
  j.erase("mac");
  const bool ok = j.value("ok", false);
  const std::string log = file_or_empty(dir / "build.log");
  std::string digest;
  try {
    digest = ok ? entry_digest(dir, j, limits) : "";
  } catch (const std::exception& e) {
    why = e.what();
    return EntryState::kUntrusted;
  }
  if (!ik.verify(mac, {kBuildFormat, "build-entry", key, j.dump(), log, digest})) {
    why = "its MAC does not match its files, build.log and result.json";
    return EntryState::kUntrusted;
  }
  r.ok = ok;
  r.command = j.value("command", "");
  r.compile_seconds = j.value("compile_seconds", 0.0);
  r.log = log;
  r.diagnostics = parse_compiler_output(r.log);
  r.library_path = ok ? (dir / entry_product(j)).string() : "";
  return EntryState::kTrusted;
}

std::string file_identity(const fs::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) return "";
  std::string id;
  for (long long v : {static_cast<long long>(st.st_dev), static_cast<long long>(st.st_ino),
                      static_cast<long long>(st.st_size), static_cast<long long>(st.st_mtim.tv_sec),
                      static_cast<long long>(st.st_mtim.tv_nsec), static_cast<long long>(st.st_ctim.tv_sec),
                      static_cast<long long>(st.st_ctim.tv_nsec)}) {
    id += std::to_string(v) + " ";
  }
  return id;
}

void quarantine(const fs::path& cache_dir, const fs::path& dir, const std::string& what, const std::string& why) {
  static std::atomic<int> counter{0};
  const fs::path aside = cache_dir / "untrusted";
  const fs::path target =
      aside / (dir.filename().string() + "-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
  std::error_code ec;
  fs::create_directories(aside, ec);
  fs::rename(dir, target, ec);
  if (ec) remove_tree(dir.string());
  warn_untrusted(what + " " + dir.string() + " is not trusted (" + why + "); moved to " + target.string() +
                 " and built again");
}
}  // namespace kloop::build_cache
