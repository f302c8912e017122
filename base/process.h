// Child processes, below every layer of kloop: run a program to completion
// under a deadline, feed its stdin and capture its output, then kill what
// it left running in its process group. How the child is started is the
// caller's: the plain spawn here (a process group of its own, the caller's
// environment), or the evaluator's sandbox (evaluator/isolation), which
// hands its own spawn to run_process.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace kloop {

struct ExitStatus {
  bool exited = false;  // normal exit; `code` is valid
  int code = 0;
  int signal = 0;  // terminating signal when !exited
  std::string describe() const;  // "exit status 1", "killed by SIGSEGV (segmentation fault)"
};

// A waitpid status as an ExitStatus.
ExitStatus exit_status_of(int wait_status);

// What is kept of each of a child's output streams; the rest is read and
// dropped, so a flood fills neither memory nor disk.
constexpr std::size_t kMaxCapturedOutput = 8u << 20;

struct CommandResult {
  ExitStatus status;
  bool timed_out = false;
  // stdout, with stderr interleaved unless CommandIo::separate_stderr; at
  // most kMaxCapturedOutput bytes, then a line saying it was cut.
  std::string output;
  bool output_truncated = false;
  std::string error;  // stderr, when CommandIo::separate_stderr
  double seconds = 0;
};

// How the child's standard streams are wired.
struct CommandIo {
  // Written to stdin, which is then closed; none: stdin is /dev/null. A
  // child that exits without reading it all is no error of the caller's
  // (SIGPIPE is ignored in this process from the first such call on).
  std::optional<std::string> input;
  bool separate_stderr = false;  // stderr into CommandResult::error, not into output
};

// Starts argv in a child: runs setup_fds(context) there (dup2 of the
// caller's pipes onto 0, 1 and 2; only async-signal-safe calls) and execs.
// Returns the child's pid; throws when no child could be started.
using Spawn = std::function<pid_t(const std::vector<std::string>& argv, void (*setup_fds)(void*), void* context)>;

// The plain spawn: the child leads a process group of its own (so a
// deadline kills all it started), is killed when the caller dies, runs in
// `cwd` ("" = the caller's) with the caller's environment and no other
// descriptor of the caller's, and finds argv[0] in PATH. A program that
// cannot be executed exits 127 after "kloop: cannot execute NAME: why" on
// stderr, as a shell's would.
Spawn plain_spawn(std::string cwd = "");

// Runs argv until it ends or `timeout` passes (then its group is killed
// and timed_out set). Throws std::runtime_error when no pipe can be made,
// and whatever `spawn` throws.
CommandResult run_process(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                          const CommandIo& io = {}, const Spawn& spawn = plain_spawn());

// The path execve gets for a command name: `name` itself when it has a
// slash, else the first executable of that name in PATH (`name` when none).
std::string resolve_executable(const std::string& name);

// SIGKILL to `pid` and its process group.
void kill_group(pid_t pid);

// SIGKILL to process group `pgid` until no live process is left in it
// (zombies are not: a killed process gives back its memory, the GPU's
// included, only once it has exited, which can take a while after the
// signal), or until `timeout` passes: false then.
bool kill_group_until_gone(pid_t pgid, std::chrono::milliseconds timeout);

// The CPU time the kernel has accounted to process `pid` and everything
// below it: its threads' user and system time, its reaped children's, and
// those of its live descendants (found through /proc/PID/task/TID/children,
// so a strict sandbox's whole namespace, whose orphans its init adopts).
// Kept by the kernel, so nothing in the tree can forge it; clock-tick
// resolution (10 ms at the usual 100 Hz), or with `precise` the threads'
// schedstat run times (ns; what a child reaped already spent still in
// ticks). nullopt when /proc cannot say, or cannot say all of it (a
// children list unreadable, more than 4096 processes): never a count that
// is too low.
std::optional<double> process_tree_cpu_seconds(pid_t pid, bool precise = false);

// "PID-START": this process's pid and start time (clock ticks after boot),
// which no later process with the same pid shares. kloop puts it in the
// names of what it makes outside its own folders (work folders, cgroups,
// build folders), so a later kloop can tell what a dead one left behind.
std::string owner_tag();
// Whether the process `tag` (owner_tag's form) still lives: false when its
// pid is gone, belongs to a later process, or the tag is not one.
bool owner_alive(const std::string& tag);
// The owner tag inside `name` after `prefix` ("kloop-work-" + TAG + "-..."):
// its first two dash-separated fields; "" when there are none.
std::string owner_tag_in(const std::string& name, const std::string& prefix);

}  // namespace kloop
