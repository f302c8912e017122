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
// and working directory (base/process.h); provider.timeout_s kills the whole
// group. Of its stdout the first 8 MiB are kept.
#include <memory>

#include "agent/llm/provider_factories.h"
#include "base/process.h"
#include "base/settings.h"

namespace kloop {
namespace {

constexpr std::size_t kStderrTail = 2000;

void append_block(std::string& out, const char* role, const std::string& text) {
  out += "=== ";
  out += role;
  out += " ===\n";
  out += text;
  if (text.empty() || text.back() != '\n') out += '\n';
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
      throw std::invalid_argument(
          settings_error("", 0, "provider.command", "the command provider needs a command (a list: program, args)"));
    }
  }

  GenerationResult generate(const GenerationRequest& request) override {
    CommandIo io;
    io.input = render_conversation(request);
    io.separate_stderr = true;  // stdout is the answer, and only it
    CommandResult child;
    limit_.acquire();
    try {
      child = run_process(config_.command, config_.total_timeout, io);
    } catch (const std::exception& e) {
      limit_.release();
      throw ProviderError(describe() + ": " + e.what());
    }
    limit_.release();
    if (child.timed_out) {
      throw ProviderError(describe() + ": no answer within " + std::to_string(config_.total_timeout.count()) +
                          " ms (provider.timeout_s); the command was killed");
    }
    if (!child.status.exited || child.status.code != 0) {
      std::string err = tail(child.error, kStderrTail);
      throw ProviderError(describe() + ": " + child.status.describe() +
                          (err.empty() ? " (no stderr)" : "; stderr:\n" + err));
    }
    GenerationResult result;
    result.text = child.output;
    result.finish_reason = "stop";
    result.latency_seconds = child.seconds;
    result.total_seconds = child.seconds;
    result.raw_response = {{"exit_status", child.status.describe()}, {"stderr", tail(child.error, kStderrTail)}};
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
