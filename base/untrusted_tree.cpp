// Descriptor-relative operations on trees model-written code could have
// changed (untrusted_tree.h).
#include "base/untrusted_tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <stdexcept>

namespace kloop {
namespace {

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = o.release();
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }
  void reset(int fd = -1) {
    if (fd_ >= 0) close(fd_);
    fd_ = fd;
  }

 private:
  int fd_;
};

std::string errno_text(int e) { return std::strerror(e); }

constexpr int kDirFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;

// Gives the owner of folder `fd` read, write and search rights on it, when
// it lacks them and the caller may change them (its own folder, or root).
void make_usable(int fd) {
  struct stat st {};
  // Where the mode cannot change, what needs it fails and says so.
  if (fstat(fd, &st) == 0 && (st.st_mode & 0700) != 0700 && fchmod(fd, (st.st_mode & 07777) | 0700) != 0) return;
}

// Opens the folder `name` in `parent`, without following a link; a folder
// the caller cannot read or enter is made so first.
int open_dir_at(int parent, const char* name) {
  int fd = openat(parent, name, kDirFlags);
  if (fd < 0 && errno == EACCES) {
    struct stat st {};
    if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
      // Where the mode cannot change, the open below fails and says so.
      if (fchmodat(parent, name, (st.st_mode & 07777) | 0700, 0) == 0) fd = openat(parent, name, kDirFlags);
    }
  }
  return fd;
}

// unlinkat, making the folder writable and trying once more when refused.
int unlink_at(int dirfd, const char* name, int flags) {
  if (unlinkat(dirfd, name, flags) == 0) return 0;
  if (errno != EACCES && errno != EPERM) return -1;
  make_usable(dirfd);
  return unlinkat(dirfd, name, flags);
}

// The names in folder `fd` but "." and "..", read through a descriptor of
// its own (so `fd`'s offset is not shared).
bool list_names(int fd, std::vector<std::string>& names, int& error) {
  names.clear();
  int copy = openat(fd, ".", kDirFlags);
  if (copy < 0) {
    error = errno;
    return false;
  }
  DIR* d = fdopendir(copy);
  if (!d) {
    error = errno;
    close(copy);
    return false;
  }
  errno = 0;
  while (dirent* e = readdir(d)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) names.emplace_back(e->d_name);
    errno = 0;
  }
  error = errno;
  closedir(d);
  return error == 0;
}

// Removes the entry `name` of folder `parent` (a whole tree when it is a
// folder), however deep: the current folder's descriptor is the only one
// held below `parent`, the way back up is "..", checked against the device
// and inode seen on the way down.
std::string remove_entry_at(int parent, const std::string& name, const std::string& shown) {
  struct stat st {};
  if (fstatat(parent, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return errno == ENOENT ? "" : "cannot inspect " + shown + ": " + errno_text(errno);
  }
  if (!S_ISDIR(st.st_mode)) {
    if (unlink_at(parent, name.c_str(), 0) != 0 && errno != ENOENT) {
      return "cannot remove " + shown + ": " + errno_text(errno);
    }
    return "";
  }
  struct Level {
    std::string name;
    dev_t dev;
    ino_t ino;
  };
  std::vector<Level> levels = {{name, st.st_dev, st.st_ino}};
  auto where = [&](const std::string& leaf) {
    return shown + (levels.size() > 1 ? "/…(" + std::to_string(levels.size() - 1) + " folders down)" : "") +
           (leaf.empty() ? "" : "/" + leaf);
  };
  Fd cur(open_dir_at(parent, name.c_str()));
  if (cur.get() < 0) return "cannot open " + shown + ": " + errno_text(errno);
  make_usable(cur.get());
  std::vector<std::string> names;
  for (;;) {
    int error = 0;
    if (!list_names(cur.get(), names, error)) return "cannot list " + where("") + ": " + errno_text(error);
    bool descended = false;
    for (const std::string& n : names) {
      struct stat cst {};
      if (fstatat(cur.get(), n.c_str(), &cst, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT) continue;
        return "cannot inspect " + where(n) + ": " + errno_text(errno);
      }
      if (!S_ISDIR(cst.st_mode)) {
        if (unlink_at(cur.get(), n.c_str(), 0) != 0 && errno != ENOENT) {
          return "cannot remove " + where(n) + ": " + errno_text(errno);
        }
        continue;
      }
      if (unlink_at(cur.get(), n.c_str(), AT_REMOVEDIR) == 0) continue;
      if (errno != ENOTEMPTY && errno != EEXIST) return "cannot remove " + where(n) + ": " + errno_text(errno);
      Fd child(open_dir_at(cur.get(), n.c_str()));
      if (child.get() < 0) return "cannot open " + where(n) + ": " + errno_text(errno);
      make_usable(child.get());
      levels.push_back({n, cst.st_dev, cst.st_ino});
      cur = std::move(child);
      descended = true;
      break;
    }
    if (descended) continue;
    // The current folder is empty: remove it from its parent.
    if (levels.size() == 1) {
      cur.reset();
      if (unlink_at(parent, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
        return "cannot remove " + shown + ": " + errno_text(errno);
      }
      return "";
    }
    Fd up(openat(cur.get(), "..", kDirFlags & ~O_NOFOLLOW));
    struct stat ust {};
    const Level& above = levels[levels.size() - 2];
    if (up.get() < 0 || fstat(up.get(), &ust) != 0 || ust.st_dev != above.dev || ust.st_ino != above.ino) {
      return "the tree under " + shown + " changed while it was being removed";
    }
    cur = std::move(up);
    const std::string done = levels.back().name;
    levels.pop_back();
    if (unlink_at(cur.get(), done.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
      return "cannot remove " + where(done) + ": " + errno_text(errno);
    }
  }
}

std::pair<std::string, std::string> split_parent(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const auto slash = p.rfind('/');
  if (slash == std::string::npos) return {".", p};
  return {slash == 0 ? "/" : p.substr(0, slash), p.substr(slash + 1)};
}

// Walks the tree below folder `top` (descriptors of the folders on the
// current path only: at most max_depth + 1), calling `visit` for every
// entry with its parent's descriptor, its relative path and its stat.
// `visit` returns false to stop; the walk then returns its message.
using Visit = std::function<bool(int parent, const std::string& name, const std::string& rel, const struct stat& st,
                                 int depth, std::string& why)>;

bool walk(int top, const std::string& rel, int depth, const TreeLimits& limits, const Visit& visit, std::string& why) {
  std::vector<std::string> names;
  int error = 0;
  if (!list_names(top, names, error)) {
    why = "cannot list " + (rel.empty() ? std::string(".") : rel) + ": " + errno_text(error);
    return false;
  }
  std::sort(names.begin(), names.end());
  for (const std::string& n : names) {
    struct stat st {};
    if (fstatat(top, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) continue;
      why = "cannot inspect " + rel + n + ": " + errno_text(errno);
      return false;
    }
    const std::string path = rel + n;
    if (!visit(top, n, path, st, depth, why)) return false;
    if (!S_ISDIR(st.st_mode)) continue;
    if (depth + 1 > limits.max_depth) {
      why = "folders nested deeper than " + std::to_string(limits.max_depth) + " (at " + path.substr(0, 200) + "…)";
      return false;
    }
    Fd child(openat(top, n.c_str(), kDirFlags));
    if (child.get() < 0) {
      why = "cannot open " + path + ": " + errno_text(errno);
      return false;
    }
    if (!walk(child.get(), path + "/", depth + 1, limits, visit, why)) return false;
  }
  return true;
}

// Counts entries and bytes against `limits` (for visit functions).
struct Budget {
  const TreeLimits& limits;
  uint64_t entries = 0, bytes = 0;
  bool take(const struct stat& st, std::string& why) {
    if (++entries > limits.max_entries) {
      why = "more than " + std::to_string(limits.max_entries) + " files and folders";
      return false;
    }
    if (S_ISREG(st.st_mode)) bytes += static_cast<uint64_t>(st.st_size);
    if (bytes > limits.max_bytes) {
      why = "more than " + std::to_string(limits.max_bytes >> 20) + " MiB of files (sparse files count in full)";
      return false;
    }
    return true;
  }
};

}  // namespace

std::string remove_tree(const std::string& path) {
  const auto [parent, name] = split_parent(path);
  Fd dir(open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() < 0) return errno == ENOENT ? "" : "cannot open " + parent + ": " + errno_text(errno);
  return remove_entry_at(dir.get(), name, path);
}

std::string sanitize_tree(const std::string& path, std::optional<uid_t> owner, const TreeLimits& limits) {
  Fd top(open(path.c_str(), kDirFlags));
  if (top.get() < 0) return "cannot open " + path + ": " + errno_text(errno);
  if (owner && fchown(top.get(), *owner, static_cast<gid_t>(*owner)) != 0) {
    return "cannot hand " + path + " back to uid " + std::to_string(*owner) + ": " + errno_text(errno);
  }
  Budget budget{limits};
  std::string why;
  const bool ok = walk(top.get(), "", 0, limits,
                       [&](int parent, const std::string& name, const std::string& rel, const struct stat& st, int,
                           std::string& w) {
                         if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
                           if (unlinkat(parent, name.c_str(), 0) != 0 && errno != ENOENT) {
                             w = "cannot remove " + rel + ": " + errno_text(errno);
                             return false;
                           }
                           return true;
                         }
                         if (!budget.take(st, w)) return false;
                         if (owner && fchownat(parent, name.c_str(), *owner, static_cast<gid_t>(*owner),
                                               AT_SYMLINK_NOFOLLOW) != 0) {
                           w = "cannot hand " + rel + " back: " + errno_text(errno);
                           return false;
                         }
                         // No set-id bit survives into what kloop hands out;
                         // folders stay enterable by their owner.
                         const mode_t keep = (st.st_mode & 0777) | (S_ISDIR(st.st_mode) ? 0700 : 0600);
                         if ((st.st_mode & 07777) != keep && fchmodat(parent, name.c_str(), keep, 0) != 0) {
                           w = "cannot clear the mode bits of " + rel + ": " + errno_text(errno);
                           return false;
                         }
                         return true;
                       },
                       why);
  return ok ? "" : why;
}

std::vector<TreeFile> list_tree(const std::string& path, const TreeLimits& limits) {
  Fd top(open(path.c_str(), kDirFlags));
  if (top.get() < 0) throw std::runtime_error(path + ": cannot open: " + errno_text(errno));
  std::vector<TreeFile> files;
  Budget budget{limits};
  std::string why;
  const bool ok = walk(top.get(), "", 0, limits,
                       [&](int, const std::string&, const std::string& rel, const struct stat& st, int, std::string& w) {
                         if (!budget.take(st, w)) return false;
                         if (!S_ISDIR(st.st_mode)) {
                           files.push_back({rel, S_ISREG(st.st_mode) ? static_cast<uint64_t>(st.st_size) : 0,
                                            S_ISREG(st.st_mode) != 0});
                         }
                         return true;
                       },
                       why);
  if (!ok) throw std::runtime_error(path + ": " + why);
  std::sort(files.begin(), files.end(), [](const TreeFile& a, const TreeFile& b) { return a.path < b.path; });
  return files;
}

int open_beneath(const std::string& root, const std::string& relative, int flags) {
  Fd dir(open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() < 0) return -1;
  std::size_t start = 0;
  for (;;) {
    const std::size_t slash = relative.find('/', start);
    const std::string part = relative.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (part.empty() || part == "." || part == "..") {
      errno = EINVAL;
      return -1;
    }
    if (slash == std::string::npos) return openat(dir.get(), part.c_str(), flags | O_NOFOLLOW | O_CLOEXEC);
    Fd next(openat(dir.get(), part.c_str(), kDirFlags));
    if (next.get() < 0) return -1;
    dir = std::move(next);
    start = slash + 1;
  }
}

std::string read_file_nofollow(const std::string& path, uint64_t max_bytes, bool single_name) {
  Fd fd(open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (fd.get() < 0) {
    throw std::runtime_error(path + ": cannot open (" + errno_text(errno) +
                             (errno == ELOOP ? "; it is a link, and kloop reads no link here" : "") + ")");
  }
  struct stat st {};
  if (fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) throw std::runtime_error(path + ": not a regular file");
  if (single_name && st.st_nlink != 1) {
    throw std::runtime_error(path + ": has " + std::to_string(st.st_nlink) +
                             " names (a hard link to another file), and kloop reads it only as its own file");
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    throw std::runtime_error(path + ": " + std::to_string(st.st_size) + " bytes, more than the " +
                             std::to_string(max_bytes) + " kloop reads from such a file");
  }
  std::string out(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = read(fd.get(), out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::runtime_error(path + ": cannot read (" + errno_text(errno) + ")");
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  out.resize(done);
  return out;
}

void replace_file_at(int dirfd, const std::string& name, std::string_view text, const std::string& what, mode_t mode) {
  const std::string gone = remove_entry_at(dirfd, name, what);
  if (!gone.empty()) throw std::runtime_error(what + ": cannot replace what is there (" + gone + ")");
  Fd fd(openat(dirfd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode));
  if (fd.get() < 0) throw std::runtime_error(what + ": cannot create (" + errno_text(errno) + ")");
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd.get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error(what + ": cannot write (" + errno_text(errno) + ")");
    done += static_cast<std::size_t>(n);
  }
}

void replace_file(const std::string& dir, const std::string& name, std::string_view text, mode_t mode) {
  Fd d(open(dir.c_str(), kDirFlags));
  if (d.get() < 0) throw std::runtime_error(dir + ": cannot open the folder (" + errno_text(errno) + ")");
  replace_file_at(d.get(), name, text, dir + "/" + name, mode);
}

}  // namespace kloop
