// Namespaces, a minimal root, a dropped uid and a seccomp filter for the
// children that run model-written code. Everything the child needs is
// computed in PreparedSandbox's constructor; between clone and exec the
// child makes system calls only.
#include "evaluator/isolation/sandbox.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>

#include "base/process.h"
#include "evaluator/build/build_config.h"
#include "evaluator/isolation/sandbox_confine.h"

namespace kloop {
namespace {

namespace fs = std::filesystem;

// Where the child reports a failed step: the step's name and errno.
struct SetupFailure {
  char step[96];
  int error;
};

[[noreturn]] void fail(int fd, const char* step) {
  SetupFailure f;
  memset(&f, 0, sizeof(f));
  strncpy(f.step, step, sizeof(f.step) - 1);
  f.error = errno;
  (void)!write(fd, &f, sizeof(f));
  _exit(125);
}

bool secret_name(const std::string& name) {
  std::string upper;
  for (char c : name) upper += static_cast<char>(toupper(static_cast<unsigned char>(c)));
  for (const char* word : {"KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH"}) {
    if (upper.find(word) != std::string::npos) return true;
  }
  return false;
}

bool allowed_name(const std::string& name) {
  static const char* exact[] = {"PATH", "LANG", "LANGUAGE", "TZ", "LD_LIBRARY_PATH", "LD_PRELOAD"};
  static const char* prefixes[] = {"LC_",   "CUDA_",  "NVIDIA_", "NV_",      "CUBLAS_", "CUDNN_", "NCCL_",
                                   "TORCH_", "PYTORCH_", "OMP_",  "GOMP_",   "KMP_",    "MKL_",   "OPENBLAS_"};
  for (const char* e : exact) {
    if (name == e) return true;
  }
  for (const char* p : prefixes) {
    if (name.rfind(p, 0) == 0) return true;
  }
  return false;
}

bool exists(const std::string& p) {
  std::error_code ec;
  return fs::exists(p, ec);
}

constexpr const char* kRootPrefix = "kloop-root-";

// A mount of this process's namespace: where, and the flags a remount
// must keep (a user namespace may not drop a locked one).
struct HostMount {
  std::string point;
  unsigned long flags = 0;
};

// /proc/self/mountinfo's mount points (octal escapes undone) and their
// per-mount flags, in mount order.
std::vector<HostMount> host_mounts() {
  std::vector<HostMount> out;
  std::ifstream in("/proc/self/mountinfo");
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string id, parent, devno, root, point, options;
    if (!(fields >> id >> parent >> devno >> root >> point >> options)) continue;
    std::string unescaped;
    for (std::size_t i = 0; i < point.size(); ++i) {
      if (point[i] == '\\' && i + 3 < point.size() && std::isdigit(static_cast<unsigned char>(point[i + 1]))) {
        unescaped += static_cast<char>(std::stoi(point.substr(i + 1, 3), nullptr, 8));
        i += 3;
      } else {
        unescaped += point[i];
      }
    }
    HostMount m{unescaped, 0};
    std::istringstream opts(options);
    for (std::string o; std::getline(opts, o, ',');) {
      if (o == "nosuid") m.flags |= MS_NOSUID;
      if (o == "nodev") m.flags |= MS_NODEV;
      if (o == "noexec") m.flags |= MS_NOEXEC;
      if (o == "noatime") m.flags |= MS_NOATIME;
      if (o == "nodiratime") m.flags |= MS_NODIRATIME;
      if (o == "relatime") m.flags |= MS_RELATIME;
      if (o == "strictatime") m.flags |= MS_STRICTATIME;
    }
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace

std::vector<std::string> remove_dead_kloops_sandbox_leftovers() {
  static std::mutex mutex;
  static bool done = false;
  std::lock_guard<std::mutex> lock(mutex);
  if (done) return {};
  done = true;
  std::vector<std::string> removed = SandboxGroup::remove_dead_owners();
  // A sandbox's mount point lives from its preparation to its spawn: one
  // is left only by a kloop killed in between. It is empty (the mounts on
  // it were the child's, in its own namespace).
  const std::string tmp = fs::temp_directory_path().string();
  if (DIR* d = opendir(tmp.c_str())) {
    std::vector<std::string> names;
    while (dirent* e = readdir(d)) names.emplace_back(e->d_name);
    closedir(d);
    for (const std::string& name : names) {
      const std::string owner = owner_tag_in(name, kRootPrefix);
      if (owner.empty() || owner_alive(owner)) continue;
      const std::string dir = tmp + "/" + name;
      if (rmdir(dir.c_str()) == 0) removed.push_back(dir);
    }
  }
  return removed;
}

struct PreparedSandbox::Plan {
  struct Mount {
    std::string source, target;  // target: inside the new root, before pivot
    bool read_only = true;
    unsigned long locked_flags = 0;  // the source mount's nosuid/nodev/noexec, kept on remount
  };
  bool keep_environment = false;  // level none: the parent's environment as it is
  bool weak_drop_uid = false;     // weak as root: become the sandbox uid
  SandboxGroup group;             // the cgroup the child joins, if any
  bool strict = false;
  bool as_root = false;
  bool new_network = true;
  std::string root;  // the empty folder the new root is mounted on
  std::vector<std::string> dirs;   // to create inside the new root, parents first
  std::vector<std::string> files;  // empty files to bind a file onto
  std::vector<Mount> binds;
  // Mounts of the host beneath a read-only bind (MS_REC brings them along
  // as they are: /sys/fs/cgroup under /sys, writable): made read-only too.
  std::vector<Mount> submounts;
  std::string proc, tmp, dev, dev_shm, put_old;
  std::vector<std::pair<std::string, std::string>> symlinks;  // target, link path
  std::string uid_map, gid_map;
  uid_t uid = 0;
  gid_t gid = 0;
  std::string cwd;
  std::vector<std::string> env;
  std::vector<char*> envp;
  int landlock_abi = 0;  // 0: the kernel has no Landlock
  // Weak with hidden folders: the paths the Landlock domain grants.
  std::vector<std::string> landlock_paths;
  std::vector<const char*> landlock_path_ptrs;
  std::vector<unsigned char> landlock_path_dirs;
  bool landlock_confines_files = false;
};

namespace {

// Whether `a` is `b` or one of its folders.
bool contains(const std::string& a, const std::string& b) {
  return a == b || a == "/" || (b.size() > a.size() && b.compare(0, a.size(), a) == 0 && b[a.size()] == '/');
}

// What a Landlock domain grants so that `hidden` stays out of reach and
// everything else of the filesystem stays as it was: every entry beside
// each hidden folder and beside each of its parents (links by their
// target, dropped when that leads into or above a hidden folder), then
// `explicit_paths` whatever they lie in. Folders and files apart.
std::vector<std::pair<std::string, bool>> landlock_grants(const std::vector<std::string>& hidden_in,
                                                          const std::vector<std::string>& explicit_paths) {
  std::vector<std::string> hidden;
  for (const auto& h : hidden_in) {
    std::error_code ec;
    const std::string c = fs::weakly_canonical(h, ec).string();
    if (!ec && !c.empty() && c != "/") hidden.push_back(c);
  }
  auto touches_hidden = [&](const std::string& p) {
    for (const auto& h : hidden) {
      if (contains(p, h) || contains(h, p)) return true;
    }
    return false;
  };
  std::set<std::string> seen;
  std::vector<std::pair<std::string, bool>> out;
  auto grant = [&](const std::string& p) {
    std::error_code ec;
    const fs::path c = fs::weakly_canonical(p, ec);
    if (ec || !fs::exists(c, ec) || !seen.insert(c.string()).second) return;
    out.push_back({c.string(), fs::is_directory(c, ec)});
  };
  for (const auto& h : hidden) {
    fs::path cur = "/";
    for (const auto& part : fs::path(h).relative_path()) {
      std::error_code ec;
      for (const auto& e : fs::directory_iterator(cur, ec)) {
        std::error_code ec2;
        const std::string target = fs::weakly_canonical(e.path(), ec2).string();
        if (ec2 || touches_hidden(e.path().string()) || touches_hidden(target)) continue;
        grant(target);
      }
      cur /= part;
    }
  }
  for (const auto& p : explicit_paths) {
    if (!p.empty()) grant(p);
  }
  return out;
}

}  // namespace

const char* isolation_name(Isolation level) {
  switch (level) {
    case Isolation::kStrict: return "strict";
    case Isolation::kWeak: return "weak";
    case Isolation::kNone: return "none";
  }
  return "?";
}

std::optional<Isolation> parse_isolation(const std::string& name) {
  if (name == "strict") return Isolation::kStrict;
  if (name == "weak") return Isolation::kWeak;
  if (name == "none") return Isolation::kNone;
  return std::nullopt;
}

uint32_t sandbox_uid() {
  if (const char* v = std::getenv("KLOOP_SANDBOX_UID"); v && *v) return static_cast<uint32_t>(std::strtoul(v, nullptr, 10));
  return 65534;
}

std::vector<std::string> sandbox_system_paths() {
  std::vector<std::string> out;
  auto add = [&](const std::string& p) {
    if (!p.empty() && exists(p)) out.push_back(p);
  };
  for (const char* p : {"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"}) add(p);
  // LibTorch installed by pip lives in site-packages beside the NVIDIA
  // libraries its RPATH points at: the whole site-packages folder then.
  std::string dirs = KLOOP_TORCH_LIBRARY_DIRS;
  std::size_t start = 0;
  while (start <= dirs.size()) {
    std::size_t end = dirs.find(';', start);
    std::string d = dirs.substr(start, end == std::string::npos ? std::string::npos : end - start);
    for (const char* marker : {"/site-packages/", "/dist-packages/"}) {
      auto at = d.find(marker);
      if (at != std::string::npos) d = d.substr(0, at + std::string(marker).size() - 1);
    }
    add(d);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  add("/opt/nvidia");  // ncu and nsys injection libraries
  if (const char* extra = std::getenv("KLOOP_SANDBOX_BINDS"); extra && *extra) {
    std::string s = extra;
    std::size_t b = 0;
    while (b <= s.size()) {
      std::size_t e = s.find(':', b);
      add(s.substr(b, e == std::string::npos ? std::string::npos : e - b));
      if (e == std::string::npos) break;
      b = e + 1;
    }
  }
  return out;
}

std::vector<std::string> sandbox_environment(Isolation level, const std::string& tmp_dir) {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string entry = *e;
    auto eq = entry.find('=');
    if (eq == std::string::npos) continue;
    const std::string name = entry.substr(0, eq);
    if (level != Isolation::kNone && (!allowed_name(name) || secret_name(name))) continue;
    if (name == "HOME" || name == "TMPDIR") continue;
    env.push_back(entry);
  }
  env.push_back("HOME=" + tmp_dir);
  env.push_back("TMPDIR=" + tmp_dir);
  return env;
}

PreparedSandbox::PreparedSandbox(const SandboxSpec& spec, const std::string& cwd) : spec_(spec), plan_(new Plan) {
  Plan& p = *plan_;
  // The process that runs a sandbox (kloop's driver) is undumpable from then
  // on: under weak isolation by a non-root user the candidate has the
  // driver's uid, and /proc/DRIVER/{mem,environ,fd} would be open to it
  // (tests/fixtures/attacks, weak as uid 65534). Children get it back at exec.
  if (spec.level != Isolation::kNone) prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  if (spec.level != Isolation::kNone) remove_dead_kloops_sandbox_leftovers();
  p.strict = spec.level == Isolation::kStrict;
  p.as_root = geteuid() == 0;
  p.new_network = !spec.host_network;
  p.cwd = cwd;
  p.uid = p.as_root ? sandbox_uid() : geteuid();
  p.gid = p.as_root ? sandbox_uid() : getegid();
  p.uid_map = std::to_string(geteuid()) + " " + std::to_string(geteuid()) + " 1\n";
  p.gid_map = std::to_string(getegid()) + " " + std::to_string(getegid()) + " 1\n";
  const std::string tmp_inside = p.strict ? "/tmp" : (cwd.empty() ? fs::temp_directory_path().string() : cwd);
  p.keep_environment = spec.level == Isolation::kNone && spec.environment.empty();
  static const int abi = confine::landlock_abi();
  if (spec.level != Isolation::kNone) p.landlock_abi = abi;
  if (abi == 0 && spec.level == Isolation::kWeak && !p.as_root) {
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true)) {
      std::fprintf(stderr,
                   "kloop: warning: this kernel has no Landlock; under --isolation weak the candidate has your uid "
                   "and only kloop's undumpable processes are out of its reach\n");
    }
  }
  if (spec.level == Isolation::kWeak && !p.as_root) {
    // The candidate has this user's uid: the folders it must not open at
    // all are closed by the Landlock domain (the keys kloop signs with).
    std::vector<std::string> hidden = spec.hidden;
    if (const char* run_key = std::getenv("KLOOP_RUN_KEY"); run_key && *run_key) {
      hidden.push_back(fs::path(run_key).parent_path().string());
    }
    if (!hidden.empty() && abi > 0) {
      std::vector<std::string> explicit_paths = sandbox_system_paths();
      explicit_paths.insert(explicit_paths.end(), spec.read_only.begin(), spec.read_only.end());
      explicit_paths.insert(explicit_paths.end(), spec.writable.begin(), spec.writable.end());
      explicit_paths.push_back(cwd);
      explicit_paths.push_back(tmp_inside);
      for (auto& [path, dir] : landlock_grants(hidden, explicit_paths)) {
        p.landlock_paths.push_back(path);
        p.landlock_path_dirs.push_back(dir ? 1 : 0);
      }
      for (const auto& path : p.landlock_paths) p.landlock_path_ptrs.push_back(path.c_str());
      p.landlock_confines_files = true;
    } else if (!hidden.empty()) {
      static std::atomic<bool> warned_keys{false};
      if (!warned_keys.exchange(true)) {
        std::fprintf(stderr,
                     "kloop: warning: this kernel has no Landlock: under --isolation weak the candidate can read "
                     "the build cache's and the run's keys (docs/isolation.md: What weak gives up)\n");
      }
    }
  }
  if (!p.keep_environment) p.env = sandbox_environment(spec.level, tmp_inside);
  p.env.insert(p.env.end(), spec.environment.begin(), spec.environment.end());  // none when keep_environment
  p.weak_drop_uid = spec.level == Isolation::kWeak && p.as_root && spec.weak_as_sandbox_uid;
  if (spec.level != Isolation::kNone) p.group = SandboxGroup::create(spec.group_memory_bytes, spec.group_processes);
  if (p.as_root && (p.strict || p.weak_drop_uid)) {
    // Writable folders belong to the sandbox's uid while it runs.
    for (const auto& w : spec.writable) {
      if (chown(w.c_str(), p.uid, p.gid) != 0) {
        throw IsolationError("cannot hand " + w + " to uid " + std::to_string(p.uid) + ": " + strerror(errno));
      }
    }
  }
  for (auto& e : p.env) p.envp.push_back(e.data());
  p.envp.push_back(nullptr);
  if (!p.strict) return;

  std::string tmpl = fs::temp_directory_path().string() + "/" + kRootPrefix + owner_tag() + "-XXXXXX";
  if (!mkdtemp(tmpl.data())) throw IsolationError(std::string("cannot create the sandbox's mount point: ") + strerror(errno));
  p.root = tmpl;
  std::set<std::string> made;
  auto make_parents = [&](const std::string& inside, bool self_too) {
    fs::path rel = fs::path(inside).relative_path();
    fs::path cur = p.root;
    std::vector<fs::path> parts(rel.begin(), rel.end());
    for (std::size_t i = 0; i + (self_too ? 0 : 1) < parts.size(); ++i) {
      cur /= parts[i];
      if (made.insert(cur.string()).second) p.dirs.push_back(cur.string());
    }
  };
  auto bind = [&](const std::string& source, bool read_only) {
    std::error_code ec;
    // A link such as /lib -> usr/lib (merged /usr) stays a link inside,
    // pointing at its target, which is bound in its own right.
    if (fs::is_symlink(source, ec)) {
      const fs::path target = fs::read_symlink(source, ec);
      if (!ec) {
        make_parents(source, false);
        p.symlinks.push_back({target.string(), p.root + source});
      }
    }
    const std::string src = fs::weakly_canonical(source, ec).string();
    if (ec || !exists(src)) return;
    struct statvfs sv;
    unsigned long locked = 0;
    if (statvfs(src.c_str(), &sv) == 0) {
      if (sv.f_flag & ST_NOSUID) locked |= MS_NOSUID;
      if (sv.f_flag & ST_NODEV) locked |= MS_NODEV;
      if (sv.f_flag & ST_NOEXEC) locked |= MS_NOEXEC;
      if (sv.f_flag & ST_RDONLY) locked |= MS_RDONLY;
    }
    const bool dir = fs::is_directory(src, ec);
    make_parents(src, dir);
    const std::string target = p.root + src;
    if (!dir && made.insert(target).second) p.files.push_back(target);
    p.binds.push_back({src, target, read_only, locked | MS_NOSUID});
  };
  for (const auto& s : sandbox_system_paths()) bind(s, true);
  for (const auto& s : spec.read_only) bind(s, true);
  for (const auto& s : spec.writable) bind(s, false);
  bind("/sys", true);
  {
    std::vector<std::string> read_only_sources;
    for (const auto& b : p.binds) {
      if (b.read_only) read_only_sources.push_back(b.source);
    }
    for (const HostMount& m : host_mounts()) {
      for (const auto& src : read_only_sources) {
        if (m.point.size() > src.size() + 1 && m.point.compare(0, src.size(), src) == 0 && m.point[src.size()] == '/') {
          p.submounts.push_back({m.point, p.root + m.point, true, m.flags});
          break;
        }
      }
    }
  }
  p.proc = p.root + "/proc";
  p.tmp = p.root + "/tmp";
  p.dev = p.root + "/dev";
  p.dev_shm = p.root + "/dev/shm";
  p.put_old = p.root + "/.old";
  for (const auto& d : {p.proc, p.tmp}) {
    if (made.insert(d).second) p.dirs.push_back(d);
  }
  // /dev: a tmpfs with the harmless nodes and (unless told not to) the
  // GPU's, bound from the host.
  std::vector<std::string> devices = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"};
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/dev", ec)) {
    const std::string name = entry.path().filename().string();
    if (spec.gpu_devices && name.rfind("nvidia", 0) == 0 && !entry.is_directory(ec)) {
      devices.push_back(entry.path().string());
    }
  }
  for (const auto& d : devices) {
    if (!exists(d)) continue;
    p.files.push_back(p.dev + d.substr(4));
    p.binds.push_back({d, p.dev + d.substr(4), false, MS_NOSUID | MS_NOEXEC});
  }
  for (const auto& [target, link] : std::vector<std::pair<std::string, std::string>>{
           {"/proc/self/fd", "/fd"}, {"/proc/self/fd/0", "/stdin"}, {"/proc/self/fd/1", "/stdout"},
           {"/proc/self/fd/2", "/stderr"}}) {
    p.symlinks.push_back({target, p.dev + link});
  }
}

SandboxGroup PreparedSandbox::take_group() { return std::move(plan_->group); }

PreparedSandbox::~PreparedSandbox() {
  if (!plan_->root.empty()) rmdir(plan_->root.c_str());
  delete plan_;
}

pid_t PreparedSandbox::spawn(const std::vector<std::string>& argv, void (*setup_fds)(void*), void* context) {
  Plan& p = *plan_;
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) throw IsolationError(std::string("pipe: ") + strerror(errno));

  long flags = SIGCHLD;
  if (p.strict) {
    flags |= CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS;
    if (p.new_network) flags |= CLONE_NEWNET;
    if (!p.as_root) flags |= CLONE_NEWUSER;
  }
  // A raw clone: with CLONE_NEWPID the child is PID 1 of its namespace, so
  // when it ends the kernel ends everything it started, setsid or not.
  // The child then calls no glibc function that takes a lock or talks to
  // other threads (its credentials change by raw syscalls: glibc's
  // setresuid signals every thread the driver had, which the child lacks,
  // and waits for them forever).
  // Without namespaces, glibc's fork: a profiler injected into kloop (ncu)
  // hooks it to follow the children.
  pid_t pid = p.strict ? static_cast<pid_t>(syscall(SYS_clone, flags, nullptr, nullptr, nullptr, nullptr)) : fork();
  if (pid < 0) {
    const int err = errno;
    close(report[0]);
    close(report[1]);
    throw IsolationError(std::string("cannot create the sandbox's namespaces (clone: ") + strerror(err) +
                         (p.as_root ? ")" : "; unprivileged user namespaces may be disabled)") +
                         "; --isolation weak runs without them");
  }
  if (pid == 0) {
    const int fd = report[1];
    close(report[0]);
    if (setpgid(0, 0) != 0 && !p.strict) fail(fd, "setpgid");
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) fail(fd, "PR_SET_PDEATHSIG");
    // Into the group first: everything it forks is counted with it. A
    // group that will not take it (a container's cgroup rules) is dropped
    // by the parent, which finds it empty; the per-process limits remain.
    bool in_pids_group = false;
    for (std::size_t i = 0; i < p.group.procs_files().size(); ++i) {
      int g = open(p.group.procs_files()[i].c_str(), O_WRONLY | O_CLOEXEC);
      if (g >= 0) {
        if (write(g, "0", 1) == 1 && p.group.limits_processes(i)) in_pids_group = true;
        close(g);
      }
    }
    if (setup_fds) setup_fds(context);
    if (p.strict) {
      if (!p.as_root) {
        auto write_file = [&](const char* path, const std::string& text) {
          int f = open(path, O_WRONLY | O_CLOEXEC);
          if (f < 0 || write(f, text.data(), text.size()) != static_cast<ssize_t>(text.size())) fail(fd, path);
          close(f);
        };
        // Our own /proc/self files belong to root while we are undumpable
        // (as the driver is): dumpable just long enough to write the maps.
        prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
        write_file("/proc/self/setgroups", "deny");
        write_file("/proc/self/uid_map", p.uid_map);
        write_file("/proc/self/gid_map", p.gid_map);
        prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
      }
      if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) fail(fd, "making / private");
      if (mount("tmpfs", p.root.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=16m") != 0) {
        fail(fd, "mounting the sandbox root");
      }
      // /tmp, /dev and /dev/shm first: the evaluation's folder may live under
      // /dev/shm or /tmp, and is bound onto those new mounts.
      if (mkdir(p.tmp.c_str(), 01777) != 0 && errno != EEXIST) fail(fd, "creating /tmp");
      if (mount("tmpfs", p.tmp.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=1g") != 0) {
        fail(fd, "mounting /tmp");
      }
      if (mkdir(p.dev.c_str(), 0755) != 0 && errno != EEXIST) fail(fd, "creating /dev");
      if (mount("tmpfs", p.dev.c_str(), "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k") != 0) {
        fail(fd, "mounting /dev");
      }
      if (mkdir(p.dev_shm.c_str(), 01777) != 0 && errno != EEXIST) fail(fd, "creating /dev/shm");
      if (mount("tmpfs", p.dev_shm.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=256m") != 0) {
        fail(fd, "mounting /dev/shm");
      }
      for (const auto& d : p.dirs) {
        if (mkdir(d.c_str(), 0755) != 0 && errno != EEXIST) fail(fd, "creating a folder in the sandbox root");
      }
      for (const auto& f : p.files) {
        int h = open(f.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
        if (h < 0) fail(fd, "creating a file in the sandbox root");
        close(h);
      }
      for (const auto& m : p.binds) {
        if (mount(m.source.c_str(), m.target.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
          fail(fd, "binding a path into the sandbox");
        }
        unsigned long remount = MS_BIND | MS_REMOUNT | m.locked_flags | (m.read_only ? MS_RDONLY : 0);
        if (mount(nullptr, m.target.c_str(), nullptr, remount, nullptr) != 0) {
          fail(fd, m.read_only ? "making a bound path read-only" : "remounting a writable path");
        }
      }
      // What lies mounted beneath a read-only path: read-only as well. One
      // the child cannot reach (a root-only folder in a user namespace) the
      // candidate cannot reach either.
      for (const auto& m : p.submounts) {
        if (mount(nullptr, m.target.c_str(), nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY | m.locked_flags, nullptr) != 0 &&
            errno != EACCES && errno != ENOENT) {
          fail(fd, "making a mount beneath a read-only path read-only");
        }
      }
      for (const auto& [target, link] : p.symlinks) {
        if (symlink(target.c_str(), link.c_str()) != 0 && errno != EEXIST) fail(fd, "creating a link in the sandbox root");
      }
      if (mount("proc", p.proc.c_str(), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) {
        fail(fd, "mounting a new /proc");
      }
      if (chdir(p.root.c_str()) != 0) fail(fd, "entering the sandbox root");
      if (syscall(SYS_pivot_root, ".", ".") != 0) fail(fd, "pivot_root");
      if (umount2(".", MNT_DETACH) != 0) fail(fd, "detaching the old root");
      if (chdir("/") != 0) fail(fd, "chdir /");
      if (mount(nullptr, "/", nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, nullptr) != 0) {
        fail(fd, "making the sandbox root read-only");
      }
      if (p.as_root) {
        if (syscall(SYS_setgroups, 0, nullptr) != 0) fail(fd, "setgroups");
        if (syscall(SYS_setresgid, p.gid, p.gid, p.gid) != 0) fail(fd, "setresgid");
        if (syscall(SYS_setresuid, p.uid, p.uid, p.uid) != 0) fail(fd, "setresuid");
      }
    }
    if (p.weak_drop_uid) {
      if (syscall(SYS_setgroups, 0, nullptr) != 0) fail(fd, "setgroups");
      if (syscall(SYS_setresgid, p.gid, p.gid, p.gid) != 0) fail(fd, "setresgid");
      if (syscall(SYS_setresuid, p.uid, p.uid, p.uid) != 0) fail(fd, "setresuid");
    } else if (spec_.level == Isolation::kWeak && p.as_root) {
      // Root without namespaces keeps uid 0 (its files stay readable), but
      // loses every capability for good: no ptrace of the undumpable
      // reference, no reading other users' memory, no regaining at exec.
      for (int c = 0; c <= 63; ++c) prctl(PR_CAPBSET_DROP, c, 0, 0, 0);
      if (prctl(PR_SET_SECUREBITS, 0x2f /* NOROOT, NO_SETUID_FIXUP, their locks, KEEP_CAPS_LOCKED */, 0, 0, 0) != 0) {
        fail(fd, "PR_SET_SECUREBITS");
      }
      struct {
        uint32_t version;
        int pid;
      } header = {0x20080522 /* _LINUX_CAPABILITY_VERSION_3 */, 0};
      struct {
        uint32_t effective, permitted, inheritable;
      } data[2] = {};
      if (syscall(SYS_capset, &header, data) != 0) fail(fd, "dropping capabilities");
    }
    if (spec_.level != Isolation::kNone) {
      if (spec_.address_space_bytes) confine::set_limit(RLIMIT_AS, *spec_.address_space_bytes);
      if (spec_.cpu_seconds) confine::set_limit(RLIMIT_CPU, *spec_.cpu_seconds);
      if (spec_.data_bytes) confine::set_limit(RLIMIT_DATA, spec_.data_bytes);
      if (spec_.file_size_bytes) confine::set_limit(RLIMIT_FSIZE, spec_.file_size_bytes);
      // Per uid: only where no pids cgroup of its own counts the tree.
      if (spec_.processes && !in_pids_group) confine::set_limit(RLIMIT_NPROC, spec_.processes);
    }
    confine::set_limit(RLIMIT_CORE, 0);
    if (spec_.after_credentials_for_test) spec_.after_credentials_for_test();
    // A change of uid clears the parent-death signal: armed again, so a
    // driver killed with SIGKILL takes the sandbox with it. A driver that
    // died before this line sent nothing, and inside a PID namespace
    // getppid() says 0 whoever lives: the report pipe tells instead, whose
    // only reader is the driver (gone: the write end polls POLLERR).
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) fail(fd, "PR_SET_PDEATHSIG");
    {
      struct pollfd reader = {fd, POLLOUT, 0};
      struct timespec now = {0, 0};
      if (syscall(SYS_ppoll, &reader, 1, &now, nullptr, 0) < 0 || (reader.revents & (POLLERR | POLLHUP))) _exit(125);
    }
    if (!p.cwd.empty() && chdir(p.cwd.c_str()) != 0) fail(fd, "entering the working folder");
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) fail(fd, "PR_SET_NO_NEW_PRIVS");
    if (p.landlock_abi > 0 &&
        !confine::enter_landlock_domain(p.landlock_abi, p.landlock_path_ptrs.data(), p.landlock_path_dirs.data(),
                                        p.landlock_confines_files ? static_cast<int>(p.landlock_path_ptrs.size()) : -1)) {
      fail(fd, "entering a Landlock domain");
    }
    if (spec_.level != Isolation::kNone) {
      struct sock_filter filter[confine::kMaxFilter];
      const int n = confine::build_filter(filter, !p.strict, getpid());
      if (n < 0) {
        errno = E2BIG;
        fail(fd, "building the seccomp filter");
      }
      struct sock_fprog prog = {static_cast<unsigned short>(n), filter};
      if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) fail(fd, "installing the seccomp filter");
    }
    // Nothing but 0-3 crosses exec into a sandbox (the report pipe is
    // close-on-exec). Trusted children keep what a profiler (ncu) handed
    // kloop for its descendants.
#ifdef SYS_close_range
    if (spec_.level != Isolation::kNone && syscall(SYS_close_range, 4u, ~0u, 4u /* CLOSE_RANGE_CLOEXEC */) != 0)
#else
    if (spec_.level != Isolation::kNone)
#endif
    {
      for (int i = 4; i < 65536; ++i) {
        if (i != fd) fcntl(i, F_SETFD, FD_CLOEXEC);
      }
    }
    execve(args[0], args.data(), p.keep_environment ? environ : p.envp.data());
    fail(fd, "exec");
  }
  close(report[1]);
  // The child's report, or the pipe closing at its exec, within the set-up
  // deadline: a child stuck before exec is killed, never waited for.
  SetupFailure f;
  ssize_t n = -1;
  const auto deadline = std::chrono::steady_clock::now() + spec_.setup_timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    struct pollfd pf = {report[0], POLLIN, 0};
    const int ready = left.count() > 0 ? poll(&pf, 1, static_cast<int>(std::min<long long>(left.count(), 1000))) : 0;
    if (ready < 0 && errno == EINTR) continue;
    if (ready > 0) {
      do {
        n = read(report[0], &f, sizeof(f));
      } while (n < 0 && errno == EINTR);
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      close(report[0]);
      ::kill(pid, SIGKILL);
      while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
      }
      throw IsolationError("the " + std::string(isolation_name(spec_.level)) + " sandbox's set-up did not finish within " +
                           std::to_string(spec_.setup_timeout.count() / 1000.0).substr(0, 5) +
                           " s (the child was killed before it ran " + argv[0] + ")");
    }
  }
  close(report[0]);
  if (n == static_cast<ssize_t>(sizeof(f))) {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    f.step[sizeof(f.step) - 1] = 0;
    std::string what = std::string(f.step) + ": " + strerror(f.error);
    if (std::string(f.step) == "exec") throw IsolationError("cannot execute " + argv[0] + " in the sandbox (" + what + ")");
    throw IsolationError("the " + std::string(isolation_name(spec_.level)) + " sandbox cannot be set up on this machine (" +
                         what + ")" + (p.strict ? "; --isolation weak runs without namespaces" : ""));
  }
  return pid;
}

}  // namespace kloop
