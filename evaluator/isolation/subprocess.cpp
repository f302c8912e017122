// fork/exec with limits applied in the child before exec. Only
// async-signal-safe calls run between fork and exec.
#include "evaluator/isolation/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <stdexcept>

namespace kloop {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<char*> make_argv(const std::vector<std::string>& argv) {
  std::vector<char*> out;
  for (const auto& a : argv) out.push_back(const_cast<char*>(a.c_str()));
  out.push_back(nullptr);
  return out;
}

// In the child: limits, own process group, die with the parent.
void prepare_child(const ProcessLimits& limits, const char* cwd) {
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (limits.no_core_dumps) {
    struct rlimit rl = {0, 0};
    setrlimit(RLIMIT_CORE, &rl);
  }
  if (limits.address_space_bytes) {
    struct rlimit rl = {*limits.address_space_bytes, *limits.address_space_bytes};
    setrlimit(RLIMIT_AS, &rl);
  }
  if (limits.cpu_seconds) {
    struct rlimit rl = {*limits.cpu_seconds, *limits.cpu_seconds + 1};
    setrlimit(RLIMIT_CPU, &rl);
  }
  if (limits.isolate_network) unshare(CLONE_NEWNET);  // best effort: needs privileges
  prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
  if (cwd && *cwd && chdir(cwd) != 0) _exit(126);
}

ExitStatus decode(int wstatus) {
  ExitStatus s;
  if (WIFEXITED(wstatus)) {
    s.exited = true;
    s.code = WEXITSTATUS(wstatus);
  } else if (WIFSIGNALED(wstatus)) {
    s.signal = WTERMSIG(wstatus);
  }
  return s;
}

void kill_group(pid_t pid) {
  if (pid > 0) {
    ::kill(-pid, SIGKILL);
    ::kill(pid, SIGKILL);
  }
}

int remaining_ms(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(std::min<long long>(left, 1000 * 60 * 60));
}

}  // namespace

std::string ExitStatus::describe() const {
  if (exited) return "exit status " + std::to_string(code);
  if (signal == 0) return "unknown status";
  const char* abbrev = sigabbrev_np(signal);
  std::string name = abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(signal);
  return "killed by " + name + " (" + strsignal(signal) + ")";
}

CommandResult run_command(const std::vector<std::string>& argv, const std::string& cwd,
                          std::chrono::milliseconds timeout, const ProcessLimits& limits) {
  CommandResult result;
  int out_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + strerror(errno));
  auto start = Clock::now();
  auto args = make_argv(argv);
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + strerror(errno));
  if (pid == 0) {
    prepare_child(limits, cwd.c_str());
    int devnull = open("/dev/null", O_RDONLY);
    dup2(devnull, 0);
    dup2(out_pipe[1], 1);
    dup2(out_pipe[1], 2);
    execvp(args[0], args.data());
    const char msg[] = "kloop: cannot execute the command\n";
    (void)!write(2, msg, sizeof(msg) - 1);
    _exit(127);
  }
  close(out_pipe[1]);
  auto deadline = start + timeout;
  char buf[65536];
  for (;;) {
    struct pollfd p = {out_pipe[0], POLLIN, 0};
    int rc = poll(&p, 1, remaining_ms(deadline));
    if (rc < 0 && errno == EINTR) continue;
    if (rc == 0) {
      result.timed_out = true;
      kill_group(pid);
      break;
    }
    ssize_t n = read(out_pipe[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    result.output.append(buf, static_cast<std::size_t>(n));
  }
  close(out_pipe[0]);
  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  kill_group(pid);  // anything the command left behind in its group
  result.status = decode(wstatus);
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

WorkerProcess::WorkerProcess(const std::vector<std::string>& argv, const std::string& cwd,
                             const std::string& log_path, const ProcessLimits& limits) {
  int in_pipe[2], reply_pipe[2];
  if (pipe2(in_pipe, O_CLOEXEC) != 0 || pipe2(reply_pipe, O_CLOEXEC) != 0) {
    throw std::runtime_error(std::string("pipe: ") + strerror(errno));
  }
  int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0) throw std::runtime_error(log_path + ": cannot create: " + strerror(errno));
  auto args = make_argv(argv);
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error(std::string("fork: ") + strerror(errno));
  if (pid_ == 0) {
    prepare_child(limits, cwd.c_str());
    // fd 3 is the reply channel; dup2 clears O_CLOEXEC on the copies.
    int reply = dup(reply_pipe[1]);
    dup2(in_pipe[0], 0);
    dup2(log_fd, 1);
    dup2(log_fd, 2);
    dup2(reply, 3);
    execv(args[0], args.data());
    const char msg[] = "kloop: cannot execute the worker\n";
    (void)!write(2, msg, sizeof(msg) - 1);
    _exit(127);
  }
  close(in_pipe[0]);
  close(reply_pipe[1]);
  close(log_fd);
  to_child_ = in_pipe[1];
  from_child_ = reply_pipe[0];
  signal(SIGPIPE, SIG_IGN);  // a dead worker must not kill the driver
}

WorkerProcess::~WorkerProcess() {
  kill();
  if (to_child_ >= 0) close(to_child_);
  if (from_child_ >= 0) close(from_child_);
}

bool WorkerProcess::send_line(const std::string& line) {
  std::string data = line + "\n";
  std::size_t off = 0;
  while (off < data.size()) {
    ssize_t n = write(to_child_, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<std::size_t>(n);
  }
  return true;
}

std::optional<std::string> WorkerProcess::receive_line(std::chrono::milliseconds timeout) {
  timed_out_ = false;
  auto deadline = Clock::now() + timeout;
  for (;;) {
    auto nl = buffer_.find('\n');
    if (nl != std::string::npos) {
      std::string line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      return line;
    }
    struct pollfd p = {from_child_, POLLIN, 0};
    int rc = poll(&p, 1, remaining_ms(deadline));
    if (rc < 0 && errno == EINTR) continue;
    if (rc == 0) {
      timed_out_ = true;
      return std::nullopt;
    }
    char buf[65536];
    ssize_t n = read(from_child_, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;
    buffer_.append(buf, static_cast<std::size_t>(n));
  }
}

void WorkerProcess::kill() {
  if (pid_ <= 0 || status_) return;
  kill_group(pid_);
  int wstatus = 0;
  while (waitpid(pid_, &wstatus, 0) < 0 && errno == EINTR) {
  }
  status_ = decode(wstatus);
}

ExitStatus WorkerProcess::wait(std::chrono::milliseconds timeout) {
  if (status_) return *status_;
  auto deadline = Clock::now() + timeout;
  for (;;) {
    int wstatus = 0;
    pid_t r = waitpid(pid_, &wstatus, WNOHANG);
    if (r == pid_) {
      status_ = decode(wstatus);
      kill_group(pid_);
      return *status_;
    }
    if (Clock::now() >= deadline) {
      kill();
      return *status_;
    }
    usleep(2000);
  }
}

std::string file_tail(const std::string& path, std::size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  in.seekg(0, std::ios::end);
  auto size = static_cast<std::size_t>(in.tellg());
  std::size_t start = size > max_bytes ? size - max_bytes : 0;
  in.seekg(static_cast<std::streamoff>(start));
  std::string out(size - start, '\0');
  in.read(out.data(), static_cast<std::streamsize>(out.size()));
  return out;
}

}  // namespace kloop
