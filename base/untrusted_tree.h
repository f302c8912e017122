// Files in folders that model-written code could have changed (a build's
// folder after its compile, an evaluation's work folder): every operation
// here goes through directory descriptors one name at a time, so it never
// follows a link, never meets a path longer than PATH_MAX however deep the
// tree, and never writes through what a candidate planted. std::filesystem
// and std::ofstream do neither (a candidate's chain of folders deeper than
// PATH_MAX once ended a clean-up loop early, and the driver then wrote its
// build.log, as root, through the candidate's link).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kloop {

// What a tree model-written code left may hold before kloop trusts it.
struct TreeLimits {
  int max_depth = 32;              // folders below the top
  uint64_t max_entries = 20000;    // files and folders
  uint64_t max_bytes = 2ull << 30;  // the regular files' apparent sizes, summed (a sparse file counts in full)
};

// Removes `path` and everything beneath it, however deep, holding one
// descriptor at a time and following no link. A folder the caller owns but
// cannot write or enter (a candidate may chmod its own folder 0500) is made
// so first. "" when done (or nothing was there), else what stopped it.
std::string remove_tree(const std::string& path);

// Makes the tree at `path` fit to be trusted: removes every entry that is
// neither a regular file nor a folder (links, FIFOs, sockets, device
// nodes), hands what stays to `owner` when given (as root: back from the
// sandbox's uid) and checks `limits`. "" when done; else what was wrong,
// and the tree must not be used (remove it).
std::string sanitize_tree(const std::string& path, std::optional<uid_t> owner, const TreeLimits& limits);

// A file of a sanitized tree, by its path relative to the top.
struct TreeFile {
  std::string path;
  uint64_t size = 0;
  bool regular = true;  // false: anything but a regular file or a folder (listed, never opened)
};

// Every entry beneath `path` that is not a folder, sorted by relative path;
// throws std::runtime_error when the tree breaks `limits` or cannot be read.
std::vector<TreeFile> list_tree(const std::string& path, const TreeLimits& limits);

// Opens `relative` (a/b/c) beneath the folder `root`, each component with
// O_NOFOLLOW: -1 with errno set when a component is a link or missing.
int open_beneath(const std::string& root, const std::string& relative, int flags);

// The bytes of the regular file `path`, opened without following a link
// (nor hanging on a FIFO); throws std::runtime_error naming the file when
// it is a link or not a regular file, or holds more than `max_bytes` (the
// message gives the limit). `single_name`: also when it has other names (a
// hard link the writer made to a file it could not otherwise have named).
std::string read_file_nofollow(const std::string& path, uint64_t max_bytes, bool single_name = false);

// Writes `text` as `name` in folder `dirfd`, first removing whatever entry
// has that name (a link is removed, never followed; a planted folder is
// removed as a tree), then creating the file exclusively. Throws
// std::runtime_error naming `what` when it cannot.
void replace_file_at(int dirfd, const std::string& name, std::string_view text, const std::string& what,
                     mode_t mode = 0644);
// The same in the folder `dir` (opened without following a link).
void replace_file(const std::string& dir, const std::string& name, std::string_view text, mode_t mode = 0644);

}  // namespace kloop
