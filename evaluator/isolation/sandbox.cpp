// Namespaces, a minimal root, a dropped uid and a seccomp filter for the
// children that run model-written code. Everything the child needs is
// computed in PreparedSandbox's constructor; between clone and exec the
// child makes system calls only.
#include "evaluator/isolation/sandbox.h"

#include <fcntl.h>
#include <grp.h>
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

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "evaluator/build/build_config.h"

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

// The seccomp program: fixed size, filled in the child (the weak level
// needs the child's own pid). Denied calls fail with EPERM rather than kill,
// so a library probing for them keeps working.
constexpr int kMaxFilter = 160;

struct FilterBuilder {
  struct sock_filter* f;
  int n = 0;
  void add(struct sock_filter s) {
    if (n < kMaxFilter) f[n++] = s;
  }
  void stmt(uint16_t code, uint32_t k) { add(BPF_STMT(code, k)); }
  void jump(uint16_t code, uint32_t k, uint8_t jt, uint8_t jf) { add(BPF_JUMP(code, k, jt, jf)); }
};

#if defined(__x86_64__)
constexpr uint32_t kAuditArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
constexpr uint32_t kAuditArch = AUDIT_ARCH_AARCH64;
#else
#error "the sandbox's seccomp filter knows x86_64 and aarch64"
#endif

// Calls that reach other processes' memory or leave the sandbox's
// namespaces and mounts; none is needed to run a kernel.
const long kDenied[] = {
    SYS_ptrace,         SYS_process_vm_readv, SYS_process_vm_writev, SYS_kcmp,
#ifdef SYS_pidfd_getfd
    SYS_pidfd_getfd,
#endif
    SYS_mount,          SYS_umount2,          SYS_pivot_root,        SYS_unshare,
    SYS_setns,          SYS_chroot,           SYS_bpf,               SYS_keyctl,
    SYS_add_key,        SYS_request_key,      SYS_kexec_load,        SYS_init_module,
    SYS_finit_module,   SYS_delete_module,    SYS_reboot,            SYS_swapon,
    SYS_swapoff,        SYS_open_by_handle_at, SYS_name_to_handle_at, SYS_userfaultfd,
#ifdef SYS_io_uring_setup
    SYS_io_uring_setup,
#endif
#ifdef SYS_fsopen
    SYS_fsopen,         SYS_fsmount,          SYS_move_mount,        SYS_open_tree,
#endif
};

// Without a PID namespace (weak), signals may only go to the process
// itself or its own group, and the group cannot be left.
const long kDeniedWithoutPidNamespace[] = {
    SYS_tkill, SYS_setsid, SYS_setpgid,
#ifdef SYS_pidfd_open
    SYS_pidfd_open,
#endif
#ifdef SYS_pidfd_send_signal
    SYS_pidfd_send_signal,
#endif
};

int build_filter(struct sock_filter* out, bool confine_signals, pid_t self) {
  FilterBuilder b{out};
  const uint32_t deny = SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA);
  b.stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
  b.jump(BPF_JMP | BPF_JEQ | BPF_K, kAuditArch, 1, 0);
  b.stmt(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
  b.stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
#if defined(__x86_64__)
  b.jump(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, 0, 1);  // the x32 ABI
  b.stmt(BPF_RET | BPF_K, deny);
#endif
  for (long nr : kDenied) {
    b.jump(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(nr), 0, 1);
    b.stmt(BPF_RET | BPF_K, deny);
  }
  if (confine_signals) {
    for (long nr : kDeniedWithoutPidNamespace) {
      b.jump(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(nr), 0, 1);
      b.stmt(BPF_RET | BPF_K, deny);
    }
    // kill(pid): pid 0, our pid or our group (-pid); the others take a
    // thread group id first, which must be ours.
    const uint32_t me = static_cast<uint32_t>(self), group = static_cast<uint32_t>(-self);
    b.jump(BPF_JMP | BPF_JEQ | BPF_K, SYS_kill, 0, 5);
    b.stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0]));
    b.jump(BPF_JMP | BPF_JEQ | BPF_K, 0, 2, 0);
    b.jump(BPF_JMP | BPF_JEQ | BPF_K, me, 1, 0);
    b.jump(BPF_JMP | BPF_JEQ | BPF_K, group, 0, 1);
    b.stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    for (long nr : {static_cast<long>(SYS_tgkill), static_cast<long>(SYS_rt_sigqueueinfo),
                    static_cast<long>(SYS_rt_tgsigqueueinfo)}) {
      b.stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
      b.jump(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(nr), 0, 3);
      b.stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0]));
      b.jump(BPF_JMP | BPF_JEQ | BPF_K, me, 0, 1);
      b.stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    }
    // Anything that reached here is a signal call aimed elsewhere, or
    // another call: decide by number once more.
    b.stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
    for (long nr : {static_cast<long>(SYS_kill), static_cast<long>(SYS_tgkill),
                    static_cast<long>(SYS_rt_sigqueueinfo), static_cast<long>(SYS_rt_tgsigqueueinfo)}) {
      b.jump(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(nr), 0, 1);
      b.stmt(BPF_RET | BPF_K, deny);
    }
    // A file's owner (fcntl F_SETOWN/F_SETOWN_EX, ioctl FIOSETOWN/SIOCSPGRP)
    // is signalled by the kernel on I/O (F_SETSIG picks any signal), checked
    // only against the caller's euid, where root passes for every process:
    // a candidate sets no owner at all (tests/fixtures/attacks/attack_signal_reference.cpp).
    for (auto [nr, cmd_a, cmd_b] : {std::array<uint32_t, 3>{SYS_fcntl, F_SETOWN, F_SETOWN_EX},
                                    std::array<uint32_t, 3>{SYS_ioctl, FIOSETOWN, SIOCSPGRP}}) {
      b.jump(BPF_JMP | BPF_JEQ | BPF_K, nr, 0, 5);
      b.stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[1]));
      b.jump(BPF_JMP | BPF_JEQ | BPF_K, cmd_a, 2, 0);
      b.jump(BPF_JMP | BPF_JEQ | BPF_K, cmd_b, 1, 0);
      b.stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
      b.stmt(BPF_RET | BPF_K, deny);
    }
  }
  b.stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  return b.n < kMaxFilter ? b.n : -1;
}

void set_limit(int resource, uint64_t value) {
  struct rlimit rl = {value, value};
  setrlimit(resource, &rl);
}

// Landlock, by number (the build machine's headers may predate the ABI the
// kernel speaks).
constexpr uint64_t kLandlockMakeChar = 1ull << 6;
constexpr uint64_t kLandlockMakeBlock = 1ull << 11;
constexpr uint64_t kLandlockScopeSignal = 1ull << 1;

int landlock_abi() {
#ifdef SYS_landlock_create_ruleset
  long v = syscall(SYS_landlock_create_ruleset, nullptr, 0, 1u /* LANDLOCK_CREATE_RULESET_VERSION */);
  return v > 0 ? static_cast<int>(v) : 0;
#else
  return 0;
#endif
}

// A Landlock domain of the sandbox's own: the kernel then refuses every
// ptrace access from inside it to a process outside it (ptrace,
// process_vm_*, /proc/PID/{mem,environ,fd,root,...}), whatever the uids and
// dumpable flags, and from ABI 6 on every signal to outside. It guards the
// windows undumpability leaves open: a kloop process between its exec and
// its prctl, and a strict sandbox's child while it writes its user
// namespace's maps (dumpable, with a copy of the driver's memory), both of
// which a weak candidate with the same uid could otherwise open. The only
// file rights it handles (device nodes) are denied everywhere anyway.
bool enter_landlock_domain(int abi) {
#ifdef SYS_landlock_create_ruleset
  struct {
    uint64_t handled_access_fs, handled_access_net, scoped;
  } attr = {kLandlockMakeChar | kLandlockMakeBlock, 0, abi >= 6 ? kLandlockScopeSignal : 0};
  const size_t size = abi >= 6 ? 24 : abi >= 4 ? 16 : 8;
  long ruleset = syscall(SYS_landlock_create_ruleset, &attr, size, 0u);
  if (ruleset < 0) return false;
  const bool ok = syscall(SYS_landlock_restrict_self, static_cast<int>(ruleset), 0u) == 0;
  close(static_cast<int>(ruleset));
  return ok;
#else
  (void)abi;
  return false;
#endif
}

bool exists(const std::string& p) {
  std::error_code ec;
  return fs::exists(p, ec);
}

}  // namespace

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

}  // namespace

SandboxGroup SandboxGroup::create(uint64_t memory_bytes, uint64_t processes) {
  SandboxGroup g;
  if (geteuid() != 0 || (memory_bytes == 0 && processes == 0)) return g;
  static std::atomic<int> counter{0};
  const std::string name = "kloop-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
  auto make = [&](const std::string& parent) -> std::string {
    const std::string dir = parent + "/" + name;
    if (mkdir(dir.c_str(), 0755) != 0) return "";
    g.dirs_.push_back(dir);
    g.procs_.push_back(dir + "/cgroup.procs");
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
    const std::string dir = now.find("memory") != std::string::npos ? make(v2) : "";
    if (dir.empty()) return g;
    bool ok = memory_bytes == 0 || (write_text_file(dir + "/memory.max", std::to_string(memory_bytes)) &&
                                    (write_text_file(dir + "/memory.swap.max", "0") || true));
    if (processes && now.find("pids") != std::string::npos) {
      ok = ok && write_text_file(dir + "/pids.max", std::to_string(processes));
    }
    if (!ok) return SandboxGroup();  // the destructor of the partial one removes its folder
    g.kind_ = "cgroup v2";
    return g;
  }
  // v1: a folder per controller.
  bool ok = true;
  if (memory_bytes && access((v2 + "/memory/cgroup.procs").c_str(), W_OK) == 0) {
    const std::string dir = make(v2 + "/memory");
    ok = !dir.empty() && write_text_file(dir + "/memory.limit_in_bytes", std::to_string(memory_bytes));
    if (ok) write_text_file(dir + "/memory.memsw.limit_in_bytes", std::to_string(memory_bytes));  // absent without swap accounting
  }
  if (ok && processes && access((v2 + "/pids/cgroup.procs").c_str(), W_OK) == 0) {
    const std::string dir = make(v2 + "/pids");
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
}

SandboxGroup::~SandboxGroup() { remove(); }

SandboxGroup& SandboxGroup::operator=(SandboxGroup&& o) noexcept {
  if (this != &o) {
    remove();
    dirs_ = std::move(o.dirs_);
    procs_ = std::move(o.procs_);
    kind_ = std::move(o.kind_);
    o.dirs_.clear();
    o.procs_.clear();
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
  std::string proc, tmp, dev, dev_shm, put_old;
  std::vector<std::pair<std::string, std::string>> symlinks;  // target, link path
  std::string uid_map, gid_map;
  uid_t uid = 0;
  gid_t gid = 0;
  std::string cwd;
  std::vector<std::string> env;
  std::vector<char*> envp;
  int landlock_abi = 0;  // 0: the kernel has no Landlock
};

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
  p.strict = spec.level == Isolation::kStrict;
  p.as_root = geteuid() == 0;
  p.new_network = !spec.host_network;
  p.cwd = cwd;
  p.uid = p.as_root ? sandbox_uid() : geteuid();
  p.gid = p.as_root ? sandbox_uid() : getegid();
  p.uid_map = std::to_string(geteuid()) + " " + std::to_string(geteuid()) + " 1\n";
  p.gid_map = std::to_string(getegid()) + " " + std::to_string(getegid()) + " 1\n";
  const std::string tmp_inside = p.strict ? "/tmp" : (cwd.empty() ? fs::temp_directory_path().string() : cwd);
  p.keep_environment = spec.level == Isolation::kNone;
  static const int abi = landlock_abi();
  if (spec.level != Isolation::kNone) p.landlock_abi = abi;
  if (abi == 0 && spec.level == Isolation::kWeak && !p.as_root) {
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true)) {
      std::fprintf(stderr,
                   "kloop: warning: this kernel has no Landlock; under --isolation weak the candidate has your uid "
                   "and only kloop's undumpable processes are out of its reach\n");
    }
  }
  if (!p.keep_environment) p.env = sandbox_environment(spec.level, tmp_inside);
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

  char tmpl[] = "/tmp/kloop-root-XXXXXX";
  if (!mkdtemp(tmpl)) throw IsolationError(std::string("cannot create the sandbox's mount point: ") + strerror(errno));
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
    for (const auto& procs : p.group.procs_files()) {
      int g = open(procs.c_str(), O_WRONLY | O_CLOEXEC);
      if (g >= 0) {
        (void)!write(g, "0", 1);
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
        if (setgroups(0, nullptr) != 0) fail(fd, "setgroups");
        if (setresgid(p.gid, p.gid, p.gid) != 0) fail(fd, "setresgid");
        if (setresuid(p.uid, p.uid, p.uid) != 0) fail(fd, "setresuid");
      }
    }
    if (p.weak_drop_uid) {
      if (setgroups(0, nullptr) != 0) fail(fd, "setgroups");
      if (setresgid(p.gid, p.gid, p.gid) != 0) fail(fd, "setresgid");
      if (setresuid(p.uid, p.uid, p.uid) != 0) fail(fd, "setresuid");
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
      if (spec_.address_space_bytes) set_limit(RLIMIT_AS, *spec_.address_space_bytes);
      if (spec_.cpu_seconds) set_limit(RLIMIT_CPU, *spec_.cpu_seconds);
      if (spec_.file_size_bytes) set_limit(RLIMIT_FSIZE, spec_.file_size_bytes);
      if (spec_.processes) set_limit(RLIMIT_NPROC, spec_.processes);
    }
    set_limit(RLIMIT_CORE, 0);
    if (!p.cwd.empty() && chdir(p.cwd.c_str()) != 0) fail(fd, "entering the working folder");
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) fail(fd, "PR_SET_NO_NEW_PRIVS");
    if (p.landlock_abi > 0 && !enter_landlock_domain(p.landlock_abi)) fail(fd, "entering a Landlock domain");
    if (spec_.level != Isolation::kNone) {
      struct sock_filter filter[kMaxFilter];
      const int n = build_filter(filter, !p.strict, getpid());
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
  SetupFailure f;
  ssize_t n;
  do {
    n = read(report[0], &f, sizeof(f));
  } while (n < 0 && errno == EINTR);
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
