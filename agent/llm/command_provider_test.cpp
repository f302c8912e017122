// The command provider: conversation in on stdin, answer out on stdout,
// failures and hangs reported with what the command said.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>

#include "agent/llm/provider_factories.h"

namespace kloop {
namespace {

using namespace std::chrono_literals;

ProviderConfig command(std::vector<std::string> argv) {
  ProviderConfig c;
  c.kind = "command";
  c.command = std::move(argv);
  c.total_timeout = 5000ms;
  return c;
}

GenerationRequest conversation() {
  GenerationRequest r;
  r.system = "You write kernels.";
  r.messages = {{"user", "Write a ReLU."}, {"assistant", "done"}, {"user", "Faster.\n"}};
  return r;
}

TEST(CommandProviderTest, ConversationGoesToStdinAndStdoutIsTheAnswer) {
  GenerationResult r = make_provider(command({"sh", "-c", "cat"}))->generate(conversation());
  EXPECT_EQ(r.text,
            "=== SYSTEM ===\nYou write kernels.\n"
            "=== USER ===\nWrite a ReLU.\n"
            "=== ASSISTANT ===\ndone\n"
            "=== USER ===\nFaster.\n");
  EXPECT_EQ(r.finish_reason, "stop");
  EXPECT_EQ(r.cost_usd, 0);
  EXPECT_EQ(r.attempts, 1);
}

TEST(CommandProviderTest, StderrIsNotPartOfTheAnswer) {
  auto r = make_provider(command({"sh", "-c", "echo progress >&2; echo answer"}))->generate(conversation());
  EXPECT_EQ(r.text, "answer\n");
}

TEST(CommandProviderTest, LargeConversationDoesNotDeadlock) {
  GenerationRequest big;
  big.messages = {{"user", std::string(2 * 1024 * 1024, 'k')}};
  auto r = make_provider(command({"cat"}))->generate(big);
  EXPECT_EQ(r.text.size(), render_conversation(big).size());
}

TEST(CommandProviderTest, CommandThatIgnoresStdinStillAnswers) {
  GenerationRequest big;
  big.messages = {{"user", std::string(1024 * 1024, 'k')}};
  auto r = make_provider(command({"sh", "-c", "echo early"}))->generate(big);
  EXPECT_EQ(r.text, "early\n");
}

TEST(CommandProviderTest, FailingCommandReportsExitStatusAndStderr) {
  try {
    make_provider(command({"sh", "-c", "cat >/dev/null; echo 'model not loaded' >&2; exit 3"}))
        ->generate(conversation());
    FAIL() << "expected ProviderError";
  } catch (const ProviderError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("exit status 3"), std::string::npos) << m;
    EXPECT_NE(m.find("model not loaded"), std::string::npos) << m;
  }
}

TEST(CommandProviderTest, MissingProgramIsAProviderError) {
  try {
    make_provider(command({"/nonexistent/kloop-model"}))->generate(conversation());
    FAIL() << "expected ProviderError";
  } catch (const ProviderError& e) {
    EXPECT_NE(std::string(e.what()).find("exit status 127"), std::string::npos) << e.what();
  }
}

// Running: the process exists and is not a zombie waiting to be reaped.
bool running(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const auto paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] != 'Z' && line[paren + 2] != 'X';
}

// The command and what it started are killed with their process group, not
// waited out: both are gone long before the 30 s they would have slept.
TEST(CommandProviderTest, HangingCommandIsKilledAtTheTimeout) {
  const std::string pids = ::testing::TempDir() + "kloop-hanging-" + std::to_string(getpid());
  ProviderConfig c = command({"sh", "-c", "sleep 30 & echo $! > " + pids + "; echo $$ >> " + pids + "; wait"});
  c.total_timeout = 200ms;
  try {
    make_provider(c)->generate(conversation());
    FAIL() << "expected ProviderError";
  } catch (const ProviderError& e) {
    EXPECT_NE(std::string(e.what()).find("provider.timeout_s"), std::string::npos) << e.what();
  }
  std::vector<pid_t> started;
  std::ifstream in(pids);
  for (pid_t pid; in >> pid;) started.push_back(pid);
  ASSERT_EQ(started.size(), 2u) << "the shell wrote its pid and its sleep's";
  // SIGKILL lands asynchronously: wait for it, but never as long as the
  // sleep itself would have run.
  const auto sleep_end = std::chrono::steady_clock::now() + 29s;
  auto any_running = [&] {
    return std::any_of(started.begin(), started.end(), [](pid_t pid) { return running(pid); });
  };
  while (any_running() && std::chrono::steady_clock::now() < sleep_end) std::this_thread::sleep_for(10ms);
  EXPECT_FALSE(any_running()) << "the command's group outlived the timeout";
  std::remove(pids.c_str());
}

TEST(CommandProviderTest, EmptyCommandIsAConfigError) {
  EXPECT_THROW(make_provider(command({})), std::invalid_argument);
}

}  // namespace
}  // namespace kloop
