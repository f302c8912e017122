#include "base/process.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace kloop {
namespace {

using Clock = std::chrono::steady_clock;

int remaining_ms(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(std::min<long long>(left, 1000 * 60 * 60));
}

void close_fd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

// The parent's ends and the child's ends of the three streams.
struct Pipes {
  int child_in = -1, child_out = -1, child_err = -1;
  int to_child = -1, from_out = -1, from_err = -1;
  ~Pipes() {
    for (int* fd : {&child_in, &child_out, &child_err, &to_child, &from_out, &from_err}) close_fd(*fd);
  }
  void close_child_ends() {
    close_fd(child_in);
    close_fd(child_out);
    close_fd(child_err);
  }
};

void make_pipe(int& read_end, int& write_end) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + strerror(errno));
  read_end = p[0];
  write_end = p[1];
}

void child_fds(void* p) {
  const auto* f = static_cast<const Pipes*>(p);
  // dup first: a source may sit on 0..2 itself.
  const int in = dup(f->child_in), out = dup(f->child_out), err = dup(f->child_err);
  dup2(in, 0);
  dup2(out, 1);
  dup2(err, 2);
  for (int fd : {in, out, err}) {
    if (fd > 2) close(fd);
  }
}

// Keeps at most kMaxCapturedOutput bytes of a stream.
struct Capture {
  std::string* text;
  bool truncated = false;
  void add(const char* data, std::size_t n) {
    const std::size_t room = kMaxCapturedOutput - std::min(kMaxCapturedOutput, text->size());
    text->append(data, std::min(room, n));
    truncated = truncated || n > room;
  }
  void finish() const {
    if (truncated) *text += "\n[kloop: output cut at " + std::to_string(kMaxCapturedOutput) + " bytes]\n";
  }
};

// Reaps the child by the deadline (killing its group when it passes); a
// child that closed its output can still run on.
int reap(pid_t pid, Clock::time_point deadline, bool& timed_out) {
  int wstatus = 0;
  auto nap = std::chrono::milliseconds(1);
  for (;;) {
    const pid_t r = waitpid(pid, &wstatus, timed_out ? 0 : WNOHANG);
    if (r == pid) return wstatus;
    if (r < 0 && errno != EINTR) return wstatus;
    if (r == 0 && Clock::now() >= deadline) {
      timed_out = true;
      kill_group(pid);
    } else if (r == 0) {
      std::this_thread::sleep_for(nap);
      nap = std::min(nap * 2, std::chrono::milliseconds(20));
    }
  }
}

}  // namespace

std::string ExitStatus::describe() const {
  if (exited) return "exit status " + std::to_string(code);
  if (signal == 0) return "unknown status";
  const char* abbrev = sigabbrev_np(signal);
  std::string name = abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(signal);
  return "killed by " + name + " (" + strsignal(signal) + ")";
}

ExitStatus exit_status_of(int wait_status) {
  ExitStatus s;
  if (WIFEXITED(wait_status)) {
    s.exited = true;
    s.code = WEXITSTATUS(wait_status);
  } else if (WIFSIGNALED(wait_status)) {
    s.signal = WTERMSIG(wait_status);
  }
  return s;
}

void kill_group(pid_t pid) {
  if (pid > 0) {
    ::kill(-pid, SIGKILL);
    ::kill(pid, SIGKILL);
  }
}

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

Spawn plain_spawn(std::string cwd) {
  return [cwd = std::move(cwd)](const std::vector<std::string>& argv, void (*setup_fds)(void*),
                                void* context) -> pid_t {
    if (argv.empty() || argv[0].empty()) throw std::invalid_argument("run_process: no program to run");
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    // Built before the fork: the child may only make system calls.
    const std::string cannot_execute = "kloop: cannot execute " + argv[0] + ": ";
    const std::string cannot_enter = "kloop: cannot enter " + cwd + ": ";
    const pid_t pid = fork();
    if (pid < 0) throw std::runtime_error(std::string("fork: ") + strerror(errno));
    if (pid == 0) {
      setpgid(0, 0);
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (setup_fds) setup_fds(context);
      signal(SIGPIPE, SIG_DFL);  // an ignored signal would stay ignored across exec
      if (close_range(3, ~0U, 0) != 0) {  // a kernel or seccomp profile without it
        struct rlimit limit {};
        const rlim_t most = getrlimit(RLIMIT_NOFILE, &limit) == 0 ? std::min<rlim_t>(limit.rlim_cur, 65536) : 65536;
        for (rlim_t fd = 3; fd < most; ++fd) close(static_cast<int>(fd));
      }
      auto fail = [](const std::string& what) {
        const char* why = strerrordesc_np(errno);
        (void)!write(2, what.data(), what.size());
        (void)!write(2, why, strlen(why));
        (void)!write(2, "\n", 1);
        _exit(127);
      };
      if (!cwd.empty() && chdir(cwd.c_str()) != 0) fail(cannot_enter);
      execvp(args[0], args.data());
      fail(cannot_execute);
    }
    setpgid(pid, pid);  // also here: a deadline may kill the group before the child has made it
    return pid;
  };
}

CommandResult run_process(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                          const CommandIo& io, const Spawn& spawn) {
  if (io.input) {
    static std::once_flag ignore_sigpipe;
    std::call_once(ignore_sigpipe, [] { signal(SIGPIPE, SIG_IGN); });
  }
  CommandResult result;
  Pipes p;
  if (io.input) {
    make_pipe(p.child_in, p.to_child);
  } else {
    p.child_in = open("/dev/null", O_RDONLY | O_CLOEXEC);
  }
  make_pipe(p.from_out, p.child_out);
  if (io.separate_stderr) {
    make_pipe(p.from_err, p.child_err);
  } else {
    // Close-on-exec like every end held here: another thread's exec must
    // not keep this command's output open.
    p.child_err = fcntl(p.child_out, F_DUPFD_CLOEXEC, 0);
  }
  const auto start = Clock::now();
  const pid_t pid = spawn(argv, child_fds, &p);
  p.close_child_ends();
  if (p.to_child >= 0) fcntl(p.to_child, F_SETFL, O_NONBLOCK);
  if (io.input && io.input->empty()) close_fd(p.to_child);

  const auto deadline = start + timeout;
  Capture out{&result.output}, err{&result.error};
  std::size_t written = 0;
  char buffer[65536];
  // The command ends when the child does, not when its output pipes close:
  // a descendant that left the group, or a process that inherited a copy
  // of the pipe elsewhere, must not hold run_process to the deadline. A
  // pidfd says when the child ends; without one (kernels before 5.3) the
  // loop looks every 50 ms.
#ifdef SYS_pidfd_open
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
#else
  const int pidfd = -1;
#endif
  // Whether the child has ended, leaving it unreaped (its pid, and so its
  // group's id, stays taken until the group is killed).
  auto ended = [&] {
    siginfo_t info{};
    return waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid;
  };
  bool child_ended = false;
  auto read_some = [&](int& fd, Capture& sink, bool drain) {
    for (;;) {
      const ssize_t r = read(fd, buffer, sizeof(buffer));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0 && errno == EAGAIN) return;  // all there is for now
      if (r <= 0) {
        close_fd(fd);
        return;
      }
      sink.add(buffer, static_cast<std::size_t>(r));
      if (!drain) return;
    }
  };
  while (p.from_out >= 0 || p.from_err >= 0) {
    struct pollfd fds[4];
    nfds_t n = 0;
    int out_index = -1, err_index = -1, in_index = -1, pid_index = -1;
    if (p.from_out >= 0) fds[out_index = static_cast<int>(n++)] = {p.from_out, POLLIN, 0};
    if (p.from_err >= 0) fds[err_index = static_cast<int>(n++)] = {p.from_err, POLLIN, 0};
    if (p.to_child >= 0) fds[in_index = static_cast<int>(n++)] = {p.to_child, POLLOUT, 0};
    if (pidfd >= 0) fds[pid_index = static_cast<int>(n++)] = {pidfd, POLLIN, 0};
    const int wait_ms = pidfd >= 0 ? remaining_ms(deadline) : std::min(remaining_ms(deadline), 50);
    const int rc = poll(fds, n, wait_ms);
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) break;
    if (rc == 0 && Clock::now() >= deadline) {
      result.timed_out = true;
      kill_group(pid);
      break;
    }
    if (in_index >= 0 && fds[in_index].revents) {
      const ssize_t w = write(p.to_child, io.input->data() + written, io.input->size() - written);
      if (w > 0) written += static_cast<std::size_t>(w);
      // EPIPE: the child stopped reading; what it wrote still counts.
      if ((w < 0 && errno != EAGAIN && errno != EINTR) || written == io.input->size()) close_fd(p.to_child);
    }
    if (out_index >= 0 && fds[out_index].revents) read_some(p.from_out, out, false);
    if (err_index >= 0 && fds[err_index].revents) read_some(p.from_err, err, false);
    if ((pid_index >= 0 && fds[pid_index].revents) || (pid_index < 0 && rc == 0)) {
      if (ended()) {
        // Gone: what it wrote is in the pipes. Take it, and stop there.
        child_ended = true;
        kill_group(pid);
        for (int* fd : {&p.from_out, &p.from_err}) {
          if (*fd >= 0) fcntl(*fd, F_SETFL, fcntl(*fd, F_GETFL) | O_NONBLOCK);
        }
        if (p.from_out >= 0) read_some(p.from_out, out, true);
        if (p.from_err >= 0) read_some(p.from_err, err, true);
        break;
      }
    }
  }
  if (pidfd >= 0) close(pidfd);
  close_fd(p.to_child);
  close_fd(p.from_out);
  close_fd(p.from_err);
  // Its output closed but it may run on, to its end or the deadline.
  const int wstatus = reap(pid, deadline, result.timed_out);
  if (!child_ended) kill_group(pid);  // whatever the command left running in its group
  result.status = exit_status_of(wstatus);
  result.output_truncated = out.truncated;
  out.finish();
  err.finish();
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

namespace {

// The fields of /proc/PID/stat from the third (state) on; empty when the
// process is gone or the file cannot be read.
std::vector<std::string> stat_fields(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!in || !std::getline(in, line)) return {};
  // The name (field 2) is in parentheses and may hold anything: read after the last ')'.
  const auto close = line.rfind(')');
  if (close == std::string::npos) return {};
  std::istringstream rest(line.substr(close + 1));
  std::vector<std::string> fields;
  for (std::string field; rest >> field;) fields.push_back(field);
  return fields;
}

// Fields 14-17 of /proc/PID/stat (utime, stime, cutime, cstime), in ticks.
std::optional<long long> stat_ticks(pid_t pid) {
  const std::vector<std::string> fields = stat_fields(pid);
  if (fields.size() < 15) return std::nullopt;
  long long sum = 0;
  for (std::size_t i = 11; i <= 14; ++i) {  // fields[0] is field 3
    try {
      sum += std::stoll(fields[i]);
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }
  return sum;
}

// Whether a process of group `pgid` is still alive (a zombie is not: it
// holds no memory and waits only for its parent).
bool group_has_live_member(pid_t pgid) {
  DIR* dir = opendir("/proc");
  if (!dir) return false;
  const std::string group = std::to_string(pgid);
  bool live = false;
  while (const dirent* e = readdir(dir)) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    const std::vector<std::string> fields = stat_fields(static_cast<pid_t>(std::atol(e->d_name)));
    if (fields.size() < 3 || fields[2] != group) continue;  // fields[2] is field 5, pgrp
    if (fields[0] != "Z" && fields[0] != "X") {
      live = true;
      break;
    }
  }
  closedir(dir);
  return live;
}

}  // namespace

bool kill_group_until_gone(pid_t pgid, std::chrono::milliseconds timeout) {
  if (pgid <= 0) return true;
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    if (::kill(-pgid, SIGKILL) != 0 && errno == ESRCH) return true;
    if (!group_has_live_member(pgid)) return true;
    if (Clock::now() >= deadline) return false;
    usleep(1000);
  }
}

namespace {

// One process's CPU time in ns from its threads' schedstat (the kernel's
// own run time, ns resolution) plus its reaped children's (cutime and
// cstime, clock ticks); nullopt when a file cannot be read.
std::optional<long long> precise_ns(pid_t pid, long hz) {
  const std::vector<std::string> fields = stat_fields(pid);
  if (fields.size() < 15) return std::nullopt;
  long long total = 0;
  try {
    total = (std::stoll(fields[13]) + std::stoll(fields[14])) * (1'000'000'000LL / hz);  // cutime, cstime
  } catch (const std::exception&) {
    return std::nullopt;
  }
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  DIR* dir = opendir(tasks.c_str());
  if (!dir) return std::nullopt;
  bool ok = true;
  while (const dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream schedstat(tasks + "/" + e->d_name + "/schedstat");
    long long ns = 0;
    if (schedstat >> ns) {
      total += ns;
    } else if (access((tasks + "/" + e->d_name).c_str(), F_OK) == 0) {
      ok = false;  // there but unreadable (a kernel without schedstat)
    }
  }
  closedir(dir);
  if (!ok) return std::nullopt;
  return total;
}

}  // namespace

std::optional<double> process_tree_cpu_seconds(pid_t root, bool precise) {
  const long hz = sysconf(_SC_CLK_TCK);
  if (root <= 0 || hz <= 0) return std::nullopt;
  constexpr std::size_t kMaxProcesses = 4096;
  std::vector<pid_t> todo{root};
  std::set<pid_t> seen{root};
  long long ticks = 0, ns = 0;
  while (!todo.empty()) {
    const pid_t pid = todo.back();
    todo.pop_back();
    const auto own = stat_ticks(pid);
    if (!own) {
      if (pid == root) return std::nullopt;
      continue;  // a descendant that ended meanwhile: its time is in its parent's cutime once reaped
    }
    if (precise) {
      const auto exact = precise_ns(pid, hz);
      if (!exact) return std::nullopt;
      ns += *exact;
    } else {
      ticks += *own;
    }
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
  return precise ? static_cast<double>(ns) * 1e-9 : static_cast<double>(ticks) / static_cast<double>(hz);
}

namespace {

// Field 22 of /proc/PID/stat (the start time, in ticks after boot).
std::string start_ticks(pid_t pid) {
  const std::vector<std::string> fields = stat_fields(pid);
  return fields.size() > 19 ? fields[19] : "";  // fields[0] is field 3
}

}  // namespace

std::string owner_tag() {
  static const std::string tag = std::to_string(getpid()) + "-" + start_ticks(getpid());
  return tag;
}

bool owner_alive(const std::string& tag) {
  const auto dash = tag.find('-');
  if (dash == std::string::npos || dash == 0 || tag.find_first_not_of("0123456789-") != std::string::npos) return false;
  long long pid = 0;
  try {
    pid = std::stoll(tag.substr(0, dash));
  } catch (const std::exception&) {
    return false;
  }
  if (pid <= 0 || pid > (1ll << 30)) return false;
  const std::string start = start_ticks(static_cast<pid_t>(pid));
  return !start.empty() && start == tag.substr(dash + 1);
}

std::string owner_tag_in(const std::string& name, const std::string& prefix) {
  if (name.rfind(prefix, 0) != 0) return "";
  const std::string rest = name.substr(prefix.size());
  const auto first = rest.find('-');
  if (first == std::string::npos) return "";
  const auto second = rest.find('-', first + 1);
  return rest.substr(0, second);
}

}  // namespace kloop
