// A provider that runs a user command: the conversation goes to its stdin,
// its stdout is the answer. For wrapping a local model, a CLI agent or a
// script that fakes answers.
//
// stdin format (plain text, written verbatim, UTF-8):
//
//   === SYSTEM ===
//   <system prompt>
//   === USER ===
//   <first user message>
//   === ASSISTANT ===
//   <earlier answer>
//   === USER ===
//   <latest user message>
//
// Each header is a line of its own; each text is followed by a newline when
// it does not end with one. The SYSTEM block is left out when empty.
//
// The command runs in its own process group with the driver's environment
// and working directory; provider.timeout_s kills the whole group.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <mutex>

#include "agent/llm/provider_factories.h"
#include "evaluator/isolation/subprocess.h"

namespace kloop {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kStderrTail = 2000;

void append_block(std::string& out, const char* role, const std::string& text) {
  out += "=== ";
  out += role;
  out += " ===\n";
  out += text;
  if (text.empty() || text.back() != '\n') out += '\n';
}

struct ChildOutput {
  ExitStatus status;
  bool timed_out = false;
  std::string out;
  std::string err;
  double seconds = 0;
};

void close_fd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

// run_command from the evaluator closes stdin and merges the two streams;
// here stdin carries the conversation and stdout must stay clean.
ChildOutput run_with_stdin(const std::vector<std::string>& argv, const std::string& input,
                           std::chrono::milliseconds timeout) {
  static std::once_flag ignore_sigpipe;
  // A command that exits without reading all its stdin must not kill the driver.
  std::call_once(ignore_sigpipe, [] { signal(SIGPIPE, SIG_IGN); });

  int in_pipe[2], out_pipe[2], err_pipe[2];
  if (pipe2(in_pipe, O_CLOEXEC) != 0) throw ProviderError(std::string("pipe: ") + strerror(errno));
  if (pipe2(out_pipe, O_CLOEXEC) != 0) throw ProviderError(std::string("pipe: ") + strerror(errno));
  if (pipe2(err_pipe, O_CLOEXEC) != 0) throw ProviderError(std::string("pipe: ") + strerror(errno));
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);

  auto start = Clock::now();
  pid_t pid = fork();
  if (pid < 0) throw ProviderError(std::string("fork: ") + strerror(errno));
  if (pid == 0) {
    // Only async-signal-safe calls until exec.
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    dup2(in_pipe[0], 0);
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    signal(SIGPIPE, SIG_DFL);
    execvp(args[0], args.data());
    const char msg[] = "kloop: cannot execute the provider command\n";
    (void)!write(2, msg, sizeof(msg) - 1);
    _exit(127);
  }
  close(in_pipe[0]);
  close(out_pipe[1]);
  close(err_pipe[1]);
  int to_child = in_pipe[1], from_out = out_pipe[0], from_err = err_pipe[0];
  fcntl(to_child, F_SETFL, O_NONBLOCK);

  ChildOutput result;
  std::size_t written = 0;
  if (input.empty()) close_fd(to_child);
  auto deadline = start + timeout;
  char buffer[65536];
  while (from_out >= 0 || from_err >= 0) {
    struct pollfd fds[3];
    int n = 0;
    int out_index = -1, err_index = -1, in_index = -1;
    if (from_out >= 0) fds[out_index = n++] = {from_out, POLLIN, 0};
    if (from_err >= 0) fds[err_index = n++] = {from_err, POLLIN, 0};
    if (to_child >= 0) fds[in_index = n++] = {to_child, POLLOUT, 0};
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      result.timed_out = true;
      break;
    }
    int rc = poll(fds, static_cast<nfds_t>(n), static_cast<int>(std::min<long long>(left, 60 * 60 * 1000)));
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) break;
    if (rc == 0) continue;  // the deadline check above ends the loop
    if (in_index >= 0 && fds[in_index].revents) {
      ssize_t w = write(to_child, input.data() + written, input.size() - written);
      if (w > 0) written += static_cast<std::size_t>(w);
      // EPIPE: the command stopped reading; its output still counts.
      if ((w < 0 && errno != EAGAIN && errno != EINTR) || written == input.size()) close_fd(to_child);
    }
    for (auto [index, fd, sink] : {std::tuple<int, int*, std::string*>{out_index, &from_out, &result.out},
                                   std::tuple<int, int*, std::string*>{err_index, &from_err, &result.err}}) {
      if (index < 0 || !fds[index].revents) continue;
      ssize_t r = read(*fd, buffer, sizeof(buffer));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        close_fd(*fd);
      } else {
        sink->append(buffer, static_cast<std::size_t>(r));
      }
    }
  }
  close_fd(to_child);
  close_fd(from_out);
  close_fd(from_err);
  if (result.timed_out) {
    kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
  }
  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  kill(-pid, SIGKILL);  // whatever the command left running in its group
  if (WIFEXITED(wstatus)) {
    result.status.exited = true;
    result.status.code = WEXITSTATUS(wstatus);
  } else if (WIFSIGNALED(wstatus)) {
    result.status.signal = WTERMSIG(wstatus);
  }
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

std::string tail(const std::string& text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  return "..." + text.substr(text.size() - max_bytes);
}

std::string join(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

class CommandProvider : public LlmProvider {
 public:
  explicit CommandProvider(const ProviderConfig& config) : config_(config), limit_(config.concurrency) {
    if (config.command.empty() || config.command[0].empty()) {
      throw std::invalid_argument("provider.command: the command provider needs a command (a list: program, args)");
    }
  }

  GenerationResult generate(const GenerationRequest& request) override {
    std::string input = render_conversation(request);
    ChildOutput child;
    limit_.acquire();
    try {
      child = run_with_stdin(config_.command, input, config_.total_timeout);
    } catch (...) {
      limit_.release();
      throw;
    }
    limit_.release();
    if (child.timed_out) {
      throw ProviderError(describe() + ": no answer within " + std::to_string(config_.total_timeout.count()) +
                          " ms (provider.timeout_s); the command was killed");
    }
    if (!child.status.exited || child.status.code != 0) {
      std::string err = tail(child.err, kStderrTail);
      throw ProviderError(describe() + ": " + child.status.describe() +
                          (err.empty() ? " (no stderr)" : "; stderr:\n" + err));
    }
    GenerationResult result;
    result.text = child.out;
    result.finish_reason = "stop";
    result.latency_seconds = child.seconds;
    result.total_seconds = child.seconds;
    result.raw_response = {{"exit_status", child.status.describe()}, {"stderr", tail(child.err, kStderrTail)}};
    return result;
  }

  std::string describe() const override { return "command " + join(config_.command); }

 private:
  ProviderConfig config_;
  ConcurrencyLimit limit_;
};

}  // namespace

std::string render_conversation(const GenerationRequest& request) {
  std::string out;
  if (!request.system.empty()) append_block(out, "SYSTEM", request.system);
  for (const auto& m : request.messages) append_block(out, m.role == "assistant" ? "ASSISTANT" : "USER", m.content);
  return out;
}

std::unique_ptr<LlmProvider> make_command_provider(const ProviderConfig& config) {
  return std::make_unique<CommandProvider>(config);
}

}  // namespace kloop
