// Child processes with deadlines, limits and a sandbox (sandbox.h), on
// base/process.h: compilers (run to completion, output captured up to a
// cap) and evaluation
// workers (a socket channel on fd 3 for commands and replies, stdout and
// stderr drained by the parent into a capped log file the child cannot
// see). Every child gets its own process group (a strict sandbox its own
// PID namespace) so a timeout kills everything it started.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/process.h"
#include "evaluator/isolation/channel.h"
#include "evaluator/isolation/sandbox.h"

namespace kloop {

// Runs argv[0] (searched in PATH) in `cwd` under `sandbox` until it ends or
// `timeout` passes (base/process.h's run_process, started by the sandbox).
// Throws IsolationError when the sandbox cannot be set up.
CommandResult run_command(const std::vector<std::string>& argv, const std::string& cwd,
                          std::chrono::milliseconds timeout, const SandboxSpec& sandbox = {});

// A long-lived child talking line-delimited messages over fd 3. Its stdout
// and stderr go, through a pipe the parent drains, to log_path.
class WorkerProcess {
 public:
  WorkerProcess(const std::vector<std::string>& argv, const std::string& cwd, const std::string& log_path,
                const SandboxSpec& sandbox);
  ~WorkerProcess();
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  // False when the child is gone (the write would fail).
  bool send(const std::string& line, const std::vector<int>& fds = {});
  // The next message, or nullopt when the deadline passes, the child closes
  // the channel or sends an over-long line (check timed_out(), overflowed()).
  std::optional<ChannelMessage> receive(std::chrono::milliseconds timeout);
  bool timed_out() const { return channel_->timed_out(); }
  bool overflowed() const { return channel_->overflowed(); }

  // Kills the whole process group and reaps the child; returns once no
  // process of the group is alive (at most 10 s later).
  void kill();
  // Waits up to `timeout` for the child to exit, then kills it.
  ExitStatus wait(std::chrono::milliseconds timeout);
  pid_t pid() const { return pid_; }
  Isolation isolation() const { return isolation_; }
  // The cgroup limiting the worker's whole tree ("" when none was usable).
  std::string group() const { return group_.describe(); }

 private:
  void drain_log(const char* data, std::size_t n);
  ExitStatus worker_status(int wstatus) const;
  void drain_pending();
  void end_group();

  pid_t pid_ = -1;
  std::unique_ptr<Channel> channel_;
  int log_pipe_ = -1;  // read end of the child's stdout/stderr
  int log_fd_ = -1;
  std::size_t logged_ = 0;
  Isolation isolation_ = Isolation::kNone;
  SandboxGroup group_;
  std::optional<ExitStatus> status_;
};

// kloop-sandbox-init, the init of a strict sandbox: beside the worker.
std::string sandbox_init_path(const std::string& worker);

// The last `max_bytes` of a file (logs for diagnostics); "" when unreadable.
std::string file_tail(const std::string& path, std::size_t max_bytes);

}  // namespace kloop
