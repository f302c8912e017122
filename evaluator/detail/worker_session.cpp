// The work folder and the log helpers of worker_session.h.
#include "evaluator/detail/worker_session.h"

#include <algorithm>
#include <fstream>

#include "evaluator/build/python_env.h"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <set>

#include "base/process.h"
#include "base/untrusted_tree.h"

namespace kloop::detail {

namespace fs = std::filesystem;

bool noexec(const std::string& path) {
  struct statvfs sv;
  return statvfs(path.c_str(), &sv) == 0 && (sv.f_flag & ST_NOEXEC) != 0;
}

std::vector<std::string> remove_dead_kloops_work_folders(const std::string& base) {
  std::vector<std::string> removed;
  DIR* d = opendir(base.c_str());
  if (!d) return removed;
  std::vector<std::string> names;
  while (dirent* e = readdir(d)) names.emplace_back(e->d_name);
  closedir(d);
  for (const std::string& name : names) {
    const std::string owner = owner_tag_in(name, kWorkFolderPrefix);
    if (owner.empty() || owner_alive(owner)) continue;
    const std::string dir = base + "/" + name;
    struct stat st {};
    if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    if (geteuid() != 0 && st.st_uid != geteuid()) continue;  // another user's, for them to remove
    const std::string left = remove_tree(dir);
    if (left.empty()) {
      removed.push_back(dir);
    } else {
      std::fprintf(stderr, "kloop: warning: cannot remove %s, left by a kloop that is gone: %s\n", dir.c_str(), left.c_str());
    }
  }
  return removed;
}

WorkDir::WorkDir(const std::string& root, bool keep) : keep_(keep) {
  std::string base = root;
  if (base.empty()) {
    // /dev/shm when it can hold the staged module (containers often mount it noexec).
    base = (access("/dev/shm", W_OK) == 0 && !noexec("/dev/shm")) ? "/dev/shm" : fs::temp_directory_path().string();
  }
  {
    // What killed kloops left here goes before this one adds its own (a
    // candidate's folder there may hold gigabytes of /dev/shm).
    static std::mutex mutex;
    static std::set<std::string> swept;
    std::lock_guard<std::mutex> lock(mutex);
    if (swept.insert(base).second) remove_dead_kloops_work_folders(base);
  }
  std::string tmpl = base + "/" + kWorkFolderPrefix + owner_tag() + "-XXXXXX";
  if (!mkdtemp(tmpl.data())) throw EvaluationError("cannot create a work folder under " + base);
  path_ = tmpl;
  // Traversable (the sandbox's uid needs the two folders), not listable.
  fs::permissions(path_, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  fs::create_directories(shared());
  fs::create_directories(sandbox());
  fs::permissions(shared(), fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                fs::perms::others_read | fs::perms::others_exec);
}

WorkDir::~WorkDir() {
  if (keep_) return;
  // The candidate's folder is its own: whatever it made there (links,
  // chains deeper than PATH_MAX, a folder made read-only) goes too.
  const std::string left = remove_tree(path_);
  if (!left.empty()) {
    std::fprintf(stderr, "kloop: warning: cannot remove the work folder %s: %s (the next kloop to start removes it)\n",
                 path_.c_str(), left.c_str());
  }
}

std::string last_phase(const std::string& log) {
  const std::string tag = "kloop-worker: ";
  auto pos = log.rfind(tag);
  if (pos == std::string::npos) return "start-up";
  auto end = log.find('\n', pos);
  return log.substr(pos + tag.size(), end == std::string::npos ? std::string::npos : end - pos - tag.size());
}

void passive_thread_pools() { setenv("OMP_WAIT_POLICY", "PASSIVE", /*overwrite=*/0); }

bool announced_a_phase(const std::string& log_path) {
  std::ifstream in(log_path, std::ios::binary);
  std::string head(65536, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<std::size_t>(std::max<std::streamsize>(0, in.gcount())));
  return head.find("kloop-worker: ") != std::string::npos;
}

std::string last_lines(const std::string& text, int n) {
  // Back to the (n + 1)-th newline from the end (a final newline counts);
  // fewer of them: the whole text, an empty one included (a worker that
  // wrote nothing before it died).
  int count = 0;
  for (std::size_t pos = text.size(); pos > 0;) {
    const std::size_t newline = text.rfind('\n', pos - 1);
    if (newline == std::string::npos) break;
    if (++count > n) return text.substr(newline + 1);
    pos = newline;
  }
  return text;
}

std::string stage_module(const WorkDir& work, const std::string& library) {
  if (noexec(work.shared())) return library;  // a module cannot be mapped from there: load it where it is
  std::error_code ec;
  if (is_python_module(library)) {  // the whole entry: module.py, candidate_host.py, extensions/
    const fs::path staged = fs::path(work.shared()) / "candidate-python";
    fs::copy(fs::path(library).parent_path(), staged, fs::copy_options::recursive | fs::copy_options::overwrite_existing,
             ec);
    if (ec) throw EvaluationError("cannot stage the candidate's module " + library + ": " + ec.message());
    for (const auto& f : fs::recursive_directory_iterator(staged, ec)) {
      fs::permissions(f.path(), fs::perms::group_read | fs::perms::others_read, fs::perm_options::add, ec);
      if (f.is_directory(ec)) {
        fs::permissions(f.path(), fs::perms::group_exec | fs::perms::others_exec, fs::perm_options::add, ec);
      }
    }
    return (staged / "module.py").string();
  }
  const std::string staged = work.shared() + "/candidate.so";
  fs::copy_file(library, staged, fs::copy_options::overwrite_existing, ec);
  if (ec) throw EvaluationError("cannot stage the candidate's module " + library + ": " + ec.message());
  fs::permissions(staged, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::others_read,
                  ec);
  return staged;
}

}  // namespace kloop::detail
