// The child's confinement of sandbox_confine.h.
#include "evaluator/isolation/sandbox_confine.h"

#include <fcntl.h>
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <initializer_list>

namespace kloop::confine {
namespace {

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
    SYS_ptrace,
    SYS_process_vm_readv,
    SYS_process_vm_writev,
    SYS_kcmp,
#ifdef SYS_pidfd_getfd
    SYS_pidfd_getfd,
#endif
    SYS_mount,
    SYS_umount2,
    SYS_pivot_root,
    SYS_unshare,
    SYS_setns,
    SYS_chroot,
    SYS_bpf,
    SYS_keyctl,
    SYS_add_key,
    SYS_request_key,
    SYS_kexec_load,
    SYS_init_module,
    SYS_finit_module,
    SYS_delete_module,
    SYS_reboot,
    SYS_swapon,
    SYS_swapoff,
    SYS_open_by_handle_at,
    SYS_name_to_handle_at,
    SYS_userfaultfd,
#ifdef SYS_io_uring_setup
    SYS_io_uring_setup,
#endif
#ifdef SYS_fsopen
    SYS_fsopen,
    SYS_fsmount,
    SYS_move_mount,
    SYS_open_tree,
#endif
};

// Without a PID namespace (weak), signals may only go to the process
// itself or its own group, and the group cannot be left.
const long kDeniedWithoutPidNamespace[] = {
    SYS_tkill,
    SYS_setsid,
    SYS_setpgid,
#ifdef SYS_pidfd_open
    SYS_pidfd_open,
#endif
#ifdef SYS_pidfd_send_signal
    SYS_pidfd_send_signal,
#endif
};

// Landlock, by number (the build machine's headers may predate the ABI the
// kernel speaks).
constexpr uint64_t kLandlockMakeChar = 1ull << 6;
constexpr uint64_t kLandlockMakeBlock = 1ull << 11;
constexpr uint64_t kLandlockRefer = 1ull << 13;     // ABI 2
constexpr uint64_t kLandlockTruncate = 1ull << 14;  // ABI 3
constexpr uint64_t kLandlockIoctlDev = 1ull << 15;  // ABI 5
// Every filesystem right of ABI 1 (execute ... make_sym), and those that
// apply to a file rather than a folder (execute, write, read).
constexpr uint64_t kLandlockAbi1Rights = (1ull << 13) - 1;
constexpr uint64_t kLandlockFileRights = (1ull << 0) | (1ull << 1) | (1ull << 2);
constexpr uint64_t kLandlockScopeSignal = 1ull << 1;

}  // namespace

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
    for (long nr : {static_cast<long>(SYS_kill), static_cast<long>(SYS_tgkill), static_cast<long>(SYS_rt_sigqueueinfo),
                    static_cast<long>(SYS_rt_tgsigqueueinfo)}) {
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
    // Calls that change another process's limits or scheduling by pid (the
    // kernel lets a process of the same uid, which a weak candidate as
    // root without capabilities is to the driver: prlimit64 once set the
    // driver's RLIMIT_FSIZE to 0): only pid 0 or itself.
    for (long nr : {static_cast<long>(SYS_prlimit64), static_cast<long>(SYS_sched_setaffinity),
                    static_cast<long>(SYS_sched_setscheduler), static_cast<long>(SYS_sched_setparam)}) {
      b.jump(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(nr), 0, 5);
      b.stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0]));
      b.jump(BPF_JMP | BPF_JEQ | BPF_K, 0, 1, 0);
      b.jump(BPF_JMP | BPF_JEQ | BPF_K, me, 0, 1);
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
// A domain also denies every rename or link of a file into another folder
// (EXDEV) unless it handles the refer right and grants it: from ABI 2 it is
// granted beneath the root, so that what a candidate may write it may also
// move (Triton's cache, for one, renames a finished file into place).
bool enter_landlock_domain(int abi, const char* const* allowed, const unsigned char* allowed_dirs, int n_allowed) {
#ifdef SYS_landlock_create_ruleset
  const bool confine_files = n_allowed >= 0;
  uint64_t all = kLandlockAbi1Rights | (abi >= 2 ? kLandlockRefer : 0) | (abi >= 3 ? kLandlockTruncate : 0) |
                 (abi >= 5 ? kLandlockIoctlDev : 0);
  uint64_t file_rights = kLandlockFileRights | (abi >= 3 ? kLandlockTruncate : 0) | (abi >= 5 ? kLandlockIoctlDev : 0);
  struct {
    uint64_t handled_access_fs, handled_access_net, scoped;
  } attr = {confine_files ? all : (kLandlockMakeChar | kLandlockMakeBlock | (abi >= 2 ? kLandlockRefer : 0)), 0,
            abi >= 6 ? kLandlockScopeSignal : 0};
  const size_t size = abi >= 6 ? 24 : abi >= 4 ? 16 : 8;
  long ruleset = syscall(SYS_landlock_create_ruleset, &attr, size, 0u);
  if (ruleset < 0) return false;
  struct __attribute__((packed)) Beneath {
    uint64_t allowed_access;
    int32_t parent_fd;
  };
  auto add = [&](const char* path, uint64_t rights) -> bool {
    Beneath rule = {rights, open(path, O_PATH | O_CLOEXEC)};
    if (rule.parent_fd < 0) return errno == ENOENT || errno == EACCES;  // nothing there to grant
    const bool ok = syscall(SYS_landlock_add_rule, static_cast<int>(ruleset), 1 /* LANDLOCK_RULE_PATH_BENEATH */,
                            &rule, 0u) == 0;
    close(rule.parent_fd);
    return ok;
  };
  bool ok = true;
  if (abi >= 2) ok = add("/", kLandlockRefer);
  for (int i = 0; ok && confine_files && i < n_allowed; ++i) {
    ok = add(allowed[i], allowed_dirs[i] ? (all & ~(kLandlockMakeChar | kLandlockMakeBlock)) : file_rights);
  }
  ok = ok && syscall(SYS_landlock_restrict_self, static_cast<int>(ruleset), 0u) == 0;
  close(static_cast<int>(ruleset));
  return ok;
#else
  (void)abi;
  (void)allowed;
  (void)allowed_dirs;
  (void)n_allowed;
  return false;
#endif
}

}  // namespace kloop::confine
