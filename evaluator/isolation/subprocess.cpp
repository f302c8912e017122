// fork/exec through a PreparedSandbox; between fork and exec only system
// calls run.
#include "evaluator/isolation/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <stdexcept>

namespace kloop {
namespace {

using Clock = std::chrono::steady_clock;

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
  for (int fd : {channel, log, devnull}) {
    if (fd > 3) close(fd);
  }
}

}  // namespace

std::string sandbox_init_path(const std::string& worker) {
  const auto slash = worker.rfind('/');
  return (slash == std::string::npos ? std::string(".") : worker.substr(0, slash)) + "/kloop-sandbox-init";
}

CommandResult run_command(const std::vector<std::string>& argv, const std::string& cwd,
                          std::chrono::milliseconds timeout, const SandboxSpec& sandbox) {
  PreparedSandbox prepared(sandbox, cwd);
  std::vector<std::string> args = argv;
  args[0] = resolve_executable(args[0]);
  return run_process(args, timeout, {}, [&prepared](const std::vector<std::string>& a, void (*setup)(void*), void* c) {
    return prepared.spawn(a, setup, c);
  });
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
  log_fd_ = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
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
  ExitStatus s = exit_status_of(wstatus);
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
  end_group();
  drain_pending();
}

// A strict sandbox's init ends only once every process of its PID namespace
// has (the kernel's doing), so reaping it was enough. Elsewhere the worker's
// group is signalled, but its members are not our children: wait until they
// have exited, so what comes next (the deferred fp64 analysis, the next
// evaluation's timing) has the memory, the GPU's included, they held.
void WorkerProcess::end_group() {
  if (isolation_ == Isolation::kStrict) return;
  if (kill_group_until_gone(pid_, std::chrono::seconds(10))) return;
  const char note[] = "\n[kloop: processes of the worker's group were still alive 10 s after SIGKILL]\n";
  if (log_fd_ >= 0) (void)!write(log_fd_, note, sizeof(note) - 1);
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
      end_group();
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
