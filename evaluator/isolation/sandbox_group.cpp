// The sandbox's control group of sandbox.h: its memory and process limits,
// cgroup v2 or v1, and whether anything still runs in it.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <string>

#include "base/process.h"
#include "evaluator/isolation/sandbox.h"

namespace kloop {

namespace {

bool write_text_file(const std::string& path, const std::string& text) {
  int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  return ok;
}

std::string read_first_line(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  char buf[512];
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return "";
  buf[n] = 0;
  std::string s = buf;
  return s.substr(0, s.find('\n'));
}

constexpr const char* kGroupPrefix = "kloop-group-";

// The cgroup folders kloop makes its groups in (v2's root, v1's memory and
// pids hierarchies).
const char* const kGroupParents[] = {"/sys/fs/cgroup", "/sys/fs/cgroup/memory", "/sys/fs/cgroup/pids"};

}  // namespace

std::vector<std::string> SandboxGroup::remove_dead_owners() {
  std::vector<std::string> removed;
  if (geteuid() != 0) return removed;
  for (const char* parent : kGroupParents) {
    DIR* d = opendir(parent);
    if (!d) continue;
    std::vector<std::string> names;
    while (dirent* e = readdir(d)) names.emplace_back(e->d_name);
    closedir(d);
    for (const std::string& name : names) {
      const std::string owner = owner_tag_in(name, kGroupPrefix);
      if (owner.empty() || owner_alive(owner)) continue;
      const std::string dir = std::string(parent) + "/" + name;
      // What still runs there was a dead driver's sandbox: it goes first.
      for (int round = 0; round < 200; ++round) {
        std::ifstream procs(dir + "/cgroup.procs");
        bool any = false;
        for (long pid = 0; procs >> pid;) {
          if (pid > 0) {
            ::kill(static_cast<pid_t>(pid), SIGKILL);
            any = true;
          }
        }
        if (rmdir(dir.c_str()) == 0) {
          removed.push_back(dir);
          break;
        }
        if (errno != EBUSY) break;
        if (!any && round > 20) break;
        usleep(10000);
      }
    }
  }
  return removed;
}

SandboxGroup SandboxGroup::create(uint64_t memory_bytes, uint64_t processes) {
  SandboxGroup g;
  if (geteuid() != 0 || (memory_bytes == 0 && processes == 0)) return g;
  static std::atomic<int> counter{0};
  // The owner tag lets a later kloop remove what a killed one left.
  const std::string name = std::string(kGroupPrefix) + owner_tag() + "-" + std::to_string(counter++);
  auto make = [&](const std::string& parent, bool pids) -> std::string {
    const std::string dir = parent + "/" + name;
    if (mkdir(dir.c_str(), 0755) != 0) return "";
    g.dirs_.push_back(dir);
    g.procs_.push_back(dir + "/cgroup.procs");
    g.pids_.push_back(pids);
    return dir;
  };
  const std::string v2 = "/sys/fs/cgroup";
  const std::string controllers = read_first_line(v2 + "/cgroup.controllers");
  if (!controllers.empty()) {
    // v2: one folder; the root must hand the controllers to its children.
    const std::string subtree = read_first_line(v2 + "/cgroup.subtree_control");
    for (const char* c : {"memory", "pids"}) {
      if (controllers.find(c) != std::string::npos && subtree.find(c) == std::string::npos) {
        write_text_file(v2 + "/cgroup.subtree_control", std::string("+") + c);
      }
    }
    const std::string now = read_first_line(v2 + "/cgroup.subtree_control");
    const bool pids = processes && now.find("pids") != std::string::npos;
    const std::string dir = now.find("memory") != std::string::npos ? make(v2, pids) : "";
    if (dir.empty()) return g;
    bool ok = memory_bytes == 0 || (write_text_file(dir + "/memory.max", std::to_string(memory_bytes)) &&
                                    (write_text_file(dir + "/memory.swap.max", "0") || true));
    if (pids) ok = ok && write_text_file(dir + "/pids.max", std::to_string(processes));
    if (!ok) return SandboxGroup();  // the destructor of the partial one removes its folder
    g.kind_ = "cgroup v2";
    return g;
  }
  // v1: a folder per controller.
  bool ok = true;
  if (memory_bytes && access((v2 + "/memory/cgroup.procs").c_str(), W_OK) == 0) {
    const std::string dir = make(v2 + "/memory", false);
    ok = !dir.empty() && write_text_file(dir + "/memory.limit_in_bytes", std::to_string(memory_bytes));
    if (ok)
      write_text_file(dir + "/memory.memsw.limit_in_bytes",
                      std::to_string(memory_bytes));  // absent without swap accounting
  }
  if (ok && processes && access((v2 + "/pids/cgroup.procs").c_str(), W_OK) == 0) {
    const std::string dir = make(v2 + "/pids", true);
    ok = !dir.empty() && write_text_file(dir + "/pids.max", std::to_string(processes));
  }
  if (!ok) return SandboxGroup();
  g.kind_ = "cgroup v1";
  return g;
}

void SandboxGroup::remove() {
  // The tree is gone when this runs (the worker was reaped; its PID
  // namespace took the rest), but the kernel may need a moment.
  for (auto it = dirs_.rbegin(); it != dirs_.rend(); ++it) {
    for (int i = 0; i < 200 && rmdir(it->c_str()) != 0 && errno == EBUSY; ++i) usleep(5000);
  }
  dirs_.clear();
  procs_.clear();
  pids_.clear();
}

SandboxGroup::~SandboxGroup() { remove(); }

SandboxGroup& SandboxGroup::operator=(SandboxGroup&& o) noexcept {
  if (this != &o) {
    remove();
    dirs_ = std::move(o.dirs_);
    procs_ = std::move(o.procs_);
    pids_ = std::move(o.pids_);
    kind_ = std::move(o.kind_);
    o.dirs_.clear();
    o.procs_.clear();
    o.pids_.clear();
  }
  return *this;
}

std::string SandboxGroup::describe() const { return dirs_.empty() ? "" : kind_; }

bool SandboxGroup::has_members() const {
  for (const auto& procs : procs_) {
    if (read_first_line(procs).empty()) return false;
  }
  return !procs_.empty();
}

}  // namespace kloop
