// fork/exec through a PreparedSandbox; between fork and exec only system
// calls run.
#include "evaluator/isolation/subprocess.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

namespace kloop {
namespace {

using Clock = std::chrono::steady_clock;

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

struct CommandFds {
  int devnull, out;
};
void command_fds(void* p) {
  auto* f = static_cast<CommandFds*>(p);
  dup2(f->devnull, 0);
  dup2(f->out, 1);
  dup2(f->out, 2);
}

struct WorkerFds {
  int devnull, log, channel;
};
void worker_fds(void* p) {
  auto* f = static_cast<WorkerFds*>(p);
  // dup first: the sources may sit on 0..3 themselves.
  int channel = dup(f->channel), log = dup(f->log), devnull = dup(f->devnull);
  dup2(devnull, 0);
  dup2(log, 1);
  dup2(log, 2);
  dup2(channel, 3);
}

}  // namespace

std::string resolve_executable(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= dirs.size()) {
    std::size_t end = dirs.find(':', start);
    std::string d = dirs.substr(start, end == std::string::npos ? std::string::npos : end - start);
    std::string candidate = (d.empty() ? "." : d) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return name;
}

std::string sandbox_init_path(const std::string& worker) {
  const auto slash = worker.rfind('/');
  return (slash == std::string::npos ? std::string(".") : worker.substr(0, slash)) + "/kloop-sandbox-init";
}

std::string ExitStatus::describe() const {
  if (exited) return "exit status " + std::to_string(code);
  if (signal == 0) return "unknown status";
  const char* abbrev = sigabbrev_np(signal);
  std::string name = abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(signal);
  return "killed by " + name + " (" + strsignal(signal) + ")";
}

CommandResult run_command(const std::vector<std::string>& argv, const std::string& cwd,
                          std::chrono::milliseconds timeout, const SandboxSpec& sandbox) {
  CommandResult result;
  PreparedSandbox prepared(sandbox, cwd);
  int out_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + strerror(errno));
  int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  auto start = Clock::now();
  std::vector<std::string> args = argv;
  args[0] = resolve_executable(args[0]);
  CommandFds fds{devnull, out_pipe[1]};
  pid_t pid;
  try {
    pid = prepared.spawn(args, command_fds, &fds);
  } catch (...) {
    close(out_pipe[0]);
    close(out_pipe[1]);
    close(devnull);
    throw;
  }
  close(out_pipe[1]);
  close(devnull);
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
    const std::size_t room = kMaxCapturedOutput - std::min(kMaxCapturedOutput, result.output.size());
    result.output.append(buf, std::min(room, static_cast<std::size_t>(n)));
    result.output_truncated = result.output_truncated || static_cast<std::size_t>(n) > room;
  }
  close(out_pipe[0]);
  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  kill_group(pid);  // anything the command left behind in its group
  result.status = decode(wstatus);
  if (result.output_truncated) result.output += "\n[kloop: output cut at " + std::to_string(kMaxCapturedOutput) + " bytes]\n";
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

WorkerProcess::WorkerProcess(const std::vector<std::string>& argv, const std::string& cwd,
                             const std::string& log_path, const SandboxSpec& sandbox)
    : isolation_(sandbox.level) {
  PreparedSandbox prepared(sandbox, cwd);
  int sv[2], log_pipe[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    throw std::runtime_error(std::string("socketpair: ") + strerror(errno));
  }
  if (pipe2(log_pipe, O_CLOEXEC) != 0) {
    close(sv[0]);
    close(sv[1]);
    throw std::runtime_error(std::string("pipe: ") + strerror(errno));
  }
  log_fd_ = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  auto cleanup = [&] {
    close(sv[0]);
    close(sv[1]);
    close(log_pipe[0]);
    close(log_pipe[1]);
    if (devnull >= 0) close(devnull);
  };
  if (log_fd_ < 0) {
    cleanup();
    throw std::runtime_error(log_path + ": cannot create: " + strerror(errno));
  }
  WorkerFds fds{devnull, log_pipe[1], sv[1]};
  std::vector<std::string> args = argv;
  args[0] = resolve_executable(args[0]);
  // In a PID namespace the worker runs under an init of its own
  // (sandbox_init.cpp, beside the worker), not as PID 1 itself.
  if (sandbox.level == Isolation::kStrict) args.insert(args.begin(), sandbox_init_path(args[0]));
  try {
    pid_ = prepared.spawn(args, worker_fds, &fds);
  } catch (...) {
    cleanup();
    close(log_fd_);
    throw;
  }
  group_ = prepared.take_group();
  if (!group_.empty() && !group_.has_members()) group_ = SandboxGroup();
  close(sv[1]);
  close(log_pipe[1]);
  close(devnull);
  channel_ = std::make_unique<Channel>(sv[0]);
  log_pipe_ = log_pipe[0];
  fcntl(log_pipe_, F_SETFL, O_NONBLOCK);
  signal(SIGPIPE, SIG_IGN);  // a dead worker must not kill the driver
}

WorkerProcess::~WorkerProcess() {
  kill();
  drain_pending();
  if (log_pipe_ >= 0) close(log_pipe_);
  if (log_fd_ >= 0) close(log_fd_);
}

ExitStatus WorkerProcess::worker_status(int wstatus) const {
  ExitStatus s = decode(wstatus);
  // The sandbox's init mirrors a worker killed by signal N as exit 128 + N.
  if (isolation_ == Isolation::kStrict && s.exited && s.code > 128 && s.code <= 128 + 64) {
    s.exited = false;
    s.signal = s.code - 128;
    s.code = 0;
  }
  return s;
}

void WorkerProcess::drain_log(const char* data, std::size_t n) {
  const std::size_t room = kMaxCapturedOutput - std::min(kMaxCapturedOutput, logged_);
  const std::size_t keep = std::min(room, n);
  if (keep > 0) (void)!write(log_fd_, data, keep);
  if (keep < n && room > 0) {
    const char note[] = "\n[kloop: log cut here; the rest was dropped]\n";
    (void)!write(log_fd_, note, sizeof(note) - 1);
  }
  logged_ += n;
}

void WorkerProcess::drain_pending() {
  if (log_pipe_ < 0) return;
  char buf[65536];
  for (int i = 0; i < 4096; ++i) {
    ssize_t n = read(log_pipe_, buf, sizeof(buf));
    if (n <= 0) break;
    drain_log(buf, static_cast<std::size_t>(n));
  }
}

bool WorkerProcess::send(const std::string& line, const std::vector<int>& fds) { return channel_->send(line, fds); }

std::optional<ChannelMessage> WorkerProcess::receive(std::chrono::milliseconds timeout) {
  auto m = channel_->receive(
      timeout, log_pipe_,
      [](void* self, const char* data, std::size_t n) { static_cast<WorkerProcess*>(self)->drain_log(data, n); }, this);
  drain_pending();
  return m;
}

void WorkerProcess::kill() {
  if (pid_ <= 0 || status_) return;
  kill_group(pid_);
  int wstatus = 0;
  while (waitpid(pid_, &wstatus, 0) < 0 && errno == EINTR) {
  }
  status_ = worker_status(wstatus);
  drain_pending();
}

ExitStatus WorkerProcess::wait(std::chrono::milliseconds timeout) {
  if (status_) return *status_;
  auto deadline = Clock::now() + timeout;
  for (;;) {
    drain_pending();
    int wstatus = 0;
    pid_t r = waitpid(pid_, &wstatus, WNOHANG);
    if (r == pid_) {
      status_ = worker_status(wstatus);
      kill_group(pid_);
      drain_pending();
      return *status_;
    }
    if (Clock::now() >= deadline) {
      kill();
      return *status_;
    }
    usleep(2000);
  }
}

namespace {

// Fields 14-17 of /proc/PID/stat (utime, stime, cutime, cstime), in ticks.
std::optional<long long> stat_ticks(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  // The name (field 2) is in parentheses and may hold anything: read after the last ')'.
  const auto close = line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream rest(line.substr(close + 1));
  std::string field;
  long long sum = 0;
  for (int i = 3; i <= 17 && rest >> field; ++i) {
    if (i < 14) continue;
    try {
      sum += std::stoll(field);
    } catch (const std::exception&) {
      return std::nullopt;
    }
    if (i == 17) return sum;
  }
  return std::nullopt;
}

}  // namespace

std::optional<double> process_tree_cpu_seconds(pid_t root) {
  const long hz = sysconf(_SC_CLK_TCK);
  if (root <= 0 || hz <= 0) return std::nullopt;
  constexpr std::size_t kMaxProcesses = 4096;
  std::vector<pid_t> todo{root};
  std::set<pid_t> seen{root};
  long long ticks = 0;
  while (!todo.empty()) {
    const pid_t pid = todo.back();
    todo.pop_back();
    const auto own = stat_ticks(pid);
    if (!own) {
      if (pid == root) return std::nullopt;
      continue;  // a descendant that ended meanwhile: its time is in its parent's cutime once reaped
    }
    ticks += *own;
    const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
    DIR* dir = opendir(tasks.c_str());
    if (!dir) {
      if (pid == root) return std::nullopt;
      continue;
    }
    bool unreadable = false;
    while (const dirent* e = readdir(dir)) {
      if (e->d_name[0] == '.') continue;
      const std::string path = tasks + "/" + e->d_name + "/children";
      std::ifstream children(path);
      if (!children) {
        // A thread that ended meanwhile has no folder; a file that cannot be
        // read (or a kernel without it) hides children: the count would be
        // too low, so it is unknown.
        if (access((tasks + "/" + e->d_name).c_str(), F_OK) == 0) unreadable = true;
        continue;
      }
      long long child = 0;
      while (children >> child) {
        if (seen.size() >= kMaxProcesses) unreadable = true;  // too many to count: unknown, not too few
        if (!unreadable && seen.insert(static_cast<pid_t>(child)).second) todo.push_back(static_cast<pid_t>(child));
      }
    }
    closedir(dir);
    if (unreadable) return std::nullopt;
  }
  return static_cast<double>(ticks) / static_cast<double>(hz);
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
