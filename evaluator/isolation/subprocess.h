// Child processes with deadlines and resource limits: compilers (run to
// completion, output captured) and evaluation workers (a command pipe in, a
// reply pipe out, stdout/stderr to a log file). Every child gets its own
// process group so a timeout kills everything it started.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kloop {

struct ProcessLimits {
  std::optional<uint64_t> address_space_bytes;  // RLIMIT_AS
  std::optional<uint64_t> cpu_seconds;          // RLIMIT_CPU
  bool no_core_dumps = true;
  bool isolate_network = false;  // a new, empty network namespace where permitted
};

struct ExitStatus {
  bool exited = false;  // normal exit; `code` is valid
  int code = 0;
  int signal = 0;  // terminating signal when !exited
  std::string describe() const;  // "exit status 1", "killed by SIGSEGV (segmentation fault)"
};

struct CommandResult {
  ExitStatus status;
  bool timed_out = false;
  std::string output;  // stdout and stderr interleaved
  double seconds = 0;
};

// Runs argv[0] (searched in PATH) in `cwd` until it ends or `timeout` passes.
CommandResult run_command(const std::vector<std::string>& argv, const std::string& cwd,
                          std::chrono::milliseconds timeout, const ProcessLimits& limits = {});

// A long-lived child talking line-delimited messages: we write to its stdin,
// it answers on file descriptor 3. Its stdout and stderr go to log_path.
class WorkerProcess {
 public:
  WorkerProcess(const std::vector<std::string>& argv, const std::string& cwd,
                const std::string& log_path, const ProcessLimits& limits);
  ~WorkerProcess();
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  // False when the child is gone (the write would fail).
  bool send_line(const std::string& line);
  // The next line, or nullopt when the deadline passes or the child closes
  // the pipe (check timed_out()).
  std::optional<std::string> receive_line(std::chrono::milliseconds timeout);
  bool timed_out() const { return timed_out_; }

  // Kills the whole process group and reaps the child.
  void kill();
  // Waits up to `timeout` for the child to exit, then kills it.
  ExitStatus wait(std::chrono::milliseconds timeout);
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int to_child_ = -1;
  int from_child_ = -1;
  std::string buffer_;
  bool timed_out_ = false;
  std::optional<ExitStatus> status_;
};

// The last `max_bytes` of a file (logs for diagnostics); "" when unreadable.
std::string file_tail(const std::string& path, std::size_t max_bytes);

}  // namespace kloop
