// The build cache's entries (builder.cpp): the lock one build holds, the
// MAC over what an entry hands out, reading an entry back, and moving an
// untrusted one aside. Internal to evaluator/build.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "evaluator/build/builder.h"
#include "evaluator/build/integrity.h"

namespace kloop::build_cache {

// 3: the MAC covers a digest of the entry's files (streamed, with limits),
// and a candidate's key names the isolation level it was built under.
constexpr const char* kBuildFormat = "kloop-build-3";

// Holds an exclusive flock for its lifetime.
class FileLock {
 public:
  explicit FileLock(const std::string& path);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_;
};

void write_text(const std::string& path, const std::string& text);
// Written beside its final name (a name unique to this process and call)
// and renamed over it, so readers and other writers never see half a file.
void write_text_atomically(const std::filesystem::path& path, const std::string& text);
std::string file_or_empty(const std::filesystem::path& p);

enum class EntryState { kMissing, kTrusted, kUntrusted };

// What an entry hands out: module.so for a compiled module; for a Python
// candidate (result.json's format "python") module.py, with everything else
// in the folder it imports (candidate_host.py, extensions/).
std::string entry_product(const nlohmann::json& meta);
// A SHA-256 over what the MAC covers, streamed from the files (never one
// string of them all): the product's bytes, or for a Python entry every
// file's path, kind and bytes but the log's and result.json's. Throws
// std::runtime_error when the entry breaks `limits` or a file cannot be
// read as listed.
std::string entry_digest(const std::filesystem::path& dir, const nlohmann::json& meta, const TreeLimits& limits);

// The MAC of a build entry: which key it answers for, what it says, and a
// digest of what it hands out (entry_digest) and the log it feeds back.
std::string entry_tag(const IntegrityKey& ik, const std::string& key, const nlohmann::json& meta,
                      const std::string& log, const std::string& digest);

// Loads a finished cache entry into `r` when its MAC holds; `why` says what
// is wrong with an untrusted one.
EntryState load_entry(const std::filesystem::path& dir, const std::string& key, const IntegrityKey& ik,
                      const TreeLimits& limits, BuildResult& r, std::string& why);

// What a MAC says of a large file kloop has just made and keeps in place
// (the extension PCH) instead of its bytes: device, inode, size, mtime and
// ctime. Any write to it since changes its ctime (which no
// process can set back), a file put in its place has another inode. "" when
// it cannot be read.
std::string file_identity(const std::filesystem::path& p);
// Moves an untrusted entry out of the way (kept for inspection) and says so.
void quarantine(const std::filesystem::path& cache_dir, const std::filesystem::path& dir, const std::string& what,
                const std::string& why);

}  // namespace kloop::build_cache
