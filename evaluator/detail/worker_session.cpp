// The work folder and the log helpers of worker_session.h.
#include "evaluator/detail/worker_session.h"

#include <algorithm>
#include <fstream>

#include "evaluator/build/python_env.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

namespace kloop::detail {

namespace fs = std::filesystem;

bool noexec(const std::string& path) {
  struct statvfs sv;
  return statvfs(path.c_str(), &sv) == 0 && (sv.f_flag & ST_NOEXEC) != 0;
}

WorkDir::WorkDir(const std::string& root, bool keep) : keep_(keep) {
  std::string base = root;
  if (base.empty()) {
    // /dev/shm when it can hold the staged module (containers often mount it noexec).
    base = (access("/dev/shm", W_OK) == 0 && !noexec("/dev/shm")) ? "/dev/shm" : fs::temp_directory_path().string();
  }
  std::string tmpl = base + "/kloop-eval-XXXXXX";
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
  if (!keep_) {
    std::error_code ec;
    fs::remove_all(path_, ec);
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
