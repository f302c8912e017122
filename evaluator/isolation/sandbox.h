// The sandbox model-written code runs in: the candidate worker and the
// compiler that reads a candidate's source. The threat model is native code
// with kloop's privileges (docs/isolation.md): it must not see or touch
// another process, a file outside its own folder and a private tmp, a
// secret in its environment, or a descriptor beyond its channel.
//
// Levels (the verdict records which one ran):
//   strict  new PID, mount, network, IPC and UTS namespaces; a root made of
//           read-only system folders, the module and the evaluation's own
//           folder, a private tmpfs /tmp and a new /proc; its own
//           unprivileged uid (as root: nobody; else a user namespace);
//           a seccomp filter; limits; an empty environment plus an
//           allow-list; no inherited descriptors.
//   weak    what needs no namespace: the environment allow-list, no
//           inherited descriptors, the seccomp filter (which then also
//           confines signals to the process's own group), limits.
//   none    trusted children (references, kloop's own tools).
// A strict sandbox that cannot be set up is an IsolationError naming what is
// missing, never a silent downgrade.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace kloop {

enum class Isolation { kNone, kWeak, kStrict };

const char* isolation_name(Isolation level);
// "strict", "weak" or "none"; nullopt for anything else.
std::optional<Isolation> parse_isolation(const std::string& name);

class IsolationError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct SandboxSpec {
  Isolation level = Isolation::kNone;
  // Visible at the same path inside a strict sandbox (files or folders).
  std::vector<std::string> read_only;
  std::vector<std::string> writable;
  // Keep the host's network namespace (only to run under ncu/nsys).
  bool host_network = false;
  // Weak, as root: run as the sandbox uid (nobody) rather than as a root
  // without capabilities, which could still write every root-owned file.
  // Only for children whose files are reachable by that uid (the worker:
  // its module and weights sit in the evaluation's folder); a compiler
  // writing into root's cache keeps uid 0.
  bool weak_as_sandbox_uid = false;
  // Strict: bind the host's GPU device nodes (/dev/nvidia*) into the
  // sandbox's /dev. Off for a CPU evaluation, which has no use for them
  // (and whose work done on a GPU would be neither a CPU kernel nor CPU
  // time the timing check sees).
  bool gpu_devices = true;
  // Weak, as a user other than root (the candidate then has that user's
  // uid): folders it must not open at all, where the kernel has Landlock
  // (the build cache with its integrity key, and the run key's folder,
  // which is added from $KLOOP_RUN_KEY). The Landlock domain then grants
  // the filesystem only beneath everything else: the siblings of those
  // folders and of their parents, the system paths, `read_only`,
  // `writable` and the working folder (which may lie inside them).
  std::vector<std::string> hidden;
  // NAME=VALUE added to the child's environment (all levels).
  std::vector<std::string> environment;
  // The limits (all levels).
  std::optional<uint64_t> address_space_bytes;  // RLIMIT_AS
  std::optional<uint64_t> cpu_seconds;          // RLIMIT_CPU
  uint64_t data_bytes = 0;                      // RLIMIT_DATA (heap and private writable mappings); 0 = none
  uint64_t file_size_bytes = 0;                 // RLIMIT_FSIZE; 0 = none
  // Processes and threads allowed. RLIMIT_NPROC counts every process of a
  // uid, so it is set only where the child did not join a pids cgroup of
  // its own (group_processes): concurrent sandboxes of one uid would
  // otherwise share one budget (as root all run as the sandbox uid). A
  // strict sandbox of an unprivileged kloop has a user namespace of its own,
  // where the kernel counts RLIMIT_NPROC per namespace. 0 = none.
  uint64_t processes = 0;
  // Limits for the whole process tree, where kloop runs as root and the
  // machine has a cgroup memory / pids controller (v2, or v1): a forked
  // child's memory counts with its parent's. 0 = none.
  uint64_t group_memory_bytes = 0;
  uint64_t group_processes = 0;
  // How long the child may take from clone to exec (mounts, credentials,
  // filters) before it is killed and the sandbox refused.
  std::chrono::milliseconds setup_timeout{60000};
  // Tests only: called in the child right after its credentials changed
  // (before the parent-death signal is armed again), to widen the window
  // in which the driver may die unseen. System calls only.
  void (*after_credentials_for_test)() = nullptr;
};

// A cgroup (one folder per controller) holding one sandboxed tree; removed
// when destroyed (once the tree is gone).
class SandboxGroup {
 public:
  SandboxGroup() = default;
  ~SandboxGroup();
  SandboxGroup(SandboxGroup&& o) noexcept { *this = std::move(o); }
  SandboxGroup& operator=(SandboxGroup&& o) noexcept;
  SandboxGroup(const SandboxGroup&) = delete;
  SandboxGroup& operator=(const SandboxGroup&) = delete;

  // A new group with these limits, or an empty one when the machine has no
  // usable controller (not root, no cgroup fs): the per-process limits remain.
  static SandboxGroup create(uint64_t memory_bytes, uint64_t processes);
  bool empty() const { return dirs_.empty(); }
  // True when every folder holds a process (the child did join).
  bool has_members() const;
  // cgroup.procs of each folder: the child writes "0" to them to enter.
  const std::vector<std::string>& procs_files() const { return procs_; }
  // Whether procs_files()[i] belongs to a folder that limits processes.
  bool limits_processes(std::size_t i) const { return i < pids_.size() && pids_[i]; }
  // "cgroup v2 (memory, pids)" and the like, for the record.
  std::string describe() const;
  // Removes the groups of kloop processes that are gone (killed before
  // they could), ending whatever still runs in them; returns their folders.
  static std::vector<std::string> remove_dead_owners();

 private:
  void remove();
  std::vector<std::string> dirs_;
  std::vector<std::string> procs_;
  std::vector<bool> pids_;
  std::string kind_;
};

// Removes what kloop processes that died without cleaning up (kill -9)
// left outside their own folders: their cgroups (SIGKILL to any process
// still in one first) and their sandboxes' empty mount points. Their owner
// tag (base/process.h) names them; a live owner's are left alone. Runs
// once per process (the first sandbox prepared calls it); returns what it
// removed, for the record.
std::vector<std::string> remove_dead_kloops_sandbox_leftovers();

// The system folders every sandbox sees read-only, plus the LibTorch and
// CUDA folders kloop was built against and $KLOOP_SANDBOX_BINDS
// (colon-separated, for installs elsewhere).
std::vector<std::string> sandbox_system_paths();

// The environment a sandboxed child starts with: the allow-listed variables
// of this process (PATH, locale, CUDA/NVIDIA/LibTorch/OpenMP/BLAS tuning,
// LD_LIBRARY_PATH), never one whose name says it is a secret, with HOME and
// TMPDIR pointing at the private tmp.
std::vector<std::string> sandbox_environment(Isolation level, const std::string& tmp_dir);

// The uid a strict sandbox runs as when kloop runs as root ($KLOOP_SANDBOX_UID,
// default 65534, "nobody"); writable folders are handed to it.
uint32_t sandbox_uid();

// Everything the child does between fork and exec, prepared beforehand so
// the child only makes system calls (no allocation after fork).
class PreparedSandbox {
 public:
  PreparedSandbox(const SandboxSpec& spec, const std::string& cwd);
  ~PreparedSandbox();
  PreparedSandbox(const PreparedSandbox&) = delete;
  PreparedSandbox& operator=(const PreparedSandbox&) = delete;

  // Forks the child (in its namespaces when strict), runs `setup_fds` in it
  // (dup2 of the channel descriptors onto 0..3), applies the sandbox, closes
  // every other descriptor and execs argv with the sandbox's environment.
  // Returns the child's pid once it has exec'd; throws IsolationError when
  // a step of the setup failed (the child is reaped), with the step.
  pid_t spawn(const std::vector<std::string>& argv, void (*setup_fds)(void*), void* context);

  const SandboxSpec& spec() const { return spec_; }
  // The group the child joins (it must outlive the child: take it).
  SandboxGroup take_group();

 private:
  struct Plan;
  SandboxSpec spec_;
  Plan* plan_;
};

}  // namespace kloop
