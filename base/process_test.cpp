// run_process with the plain spawn: the stream wiring, the deadline over
// the whole group, the output cap, and a program that cannot run. The
// evaluator's sandboxed run_command is tested in tests/integration.
#include "base/process.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace kloop {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

TEST(ProcessTest, StdinIsFedAndStreamsStayApartWhenAsked) {
  CommandIo io;
  io.input = std::string(300000, 'x') + "\nend\n";  // more than a pipe holds: written while read
  io.separate_stderr = true;
  const CommandResult r = run_process({"sh", "-c", "tail -n 1; echo oops >&2; exit 3"}, 60s, io);
  EXPECT_FALSE(r.timed_out);
  EXPECT_TRUE(r.status.exited);
  EXPECT_EQ(r.status.code, 3);
  EXPECT_EQ(r.output, "end\n");
  EXPECT_EQ(r.error, "oops\n");

  const CommandResult merged = run_process({"sh", "-c", "echo a; echo b >&2"}, 60s);
  EXPECT_EQ(merged.output, "a\nb\n");
  EXPECT_EQ(merged.error, "");
}

// A command that leaves without reading its input is the command's affair:
// no SIGPIPE for the caller, and its answer still counts.
TEST(ProcessTest, ACommandThatIgnoresItsInputStillAnswers) {
  CommandIo io;
  io.input = std::string(4 << 20, 'y');
  const CommandResult r = run_process({"sh", "-c", "echo done"}, 60s, io);
  EXPECT_TRUE(r.status.exited);
  EXPECT_EQ(r.status.code, 0);
  EXPECT_EQ(r.output, "done\n");
}

TEST(ProcessTest, AMissingProgramExits127SayingWhy) {
  CommandIo io;
  io.separate_stderr = true;
  const CommandResult r = run_process({"/nonexistent/kloop-no-such-program"}, 60s, io);
  EXPECT_TRUE(r.status.exited);
  EXPECT_EQ(r.status.code, 127);
  EXPECT_EQ(r.status.describe(), "exit status 127");
  EXPECT_NE(r.error.find("kloop: cannot execute /nonexistent/kloop-no-such-program: No such file"), std::string::npos)
      << r.error;
}

TEST(ProcessTest, RunsInTheFolderItIsGiven) {
  const fs::path dir = fs::temp_directory_path() / ("kloop-process-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const CommandResult r = run_process({"pwd"}, 60s, {}, plain_spawn(dir.string()));
  EXPECT_EQ(r.output, fs::canonical(dir).string() + "\n");
  const CommandResult missing = run_process({"pwd"}, 60s, {}, plain_spawn((dir / "gone").string()));
  EXPECT_EQ(missing.status.code, 127);
  EXPECT_NE(missing.output.find("kloop: cannot enter"), std::string::npos) << missing.output;
  fs::remove_all(dir);
}

// The deadline ends the whole group: a grandchild holding the output pipe
// does not keep run_process waiting, nor does a child that closed its
// output and runs on.
TEST(ProcessTest, TheDeadlineKillsTheGroupWhoeverHoldsThePipe) {
  const CommandResult held = run_process({"sh", "-c", "sleep 30 & echo started; wait"}, 500ms);
  EXPECT_TRUE(held.timed_out);
  EXPECT_EQ(held.output, "started\n");
  EXPECT_FALSE(held.status.exited);
  EXPECT_EQ(held.status.signal, SIGKILL);

  const CommandResult closed = run_process({"sh", "-c", "exec >&- 2>&-; sleep 30"}, 500ms);
  EXPECT_TRUE(closed.timed_out);
  EXPECT_EQ(closed.status.signal, SIGKILL);
}

TEST(ProcessTest, OutputIsCutAtTheCap) {
  const std::string bytes = std::to_string(kMaxCapturedOutput + 4096);
  const CommandResult r = run_process({"sh", "-c", "head -c " + bytes + " /dev/zero"}, 60s);
  EXPECT_TRUE(r.output_truncated);
  EXPECT_EQ(r.output.find('\0' + std::string("\n[kloop: output cut at")), kMaxCapturedOutput - 1);
  EXPECT_TRUE(r.status.exited) << "the rest is read and dropped, so the writer finishes";
}

// Another thread may fork and exec (a worker for a run beside this one,
// with no descriptor sweep) while run_process is spawning. Whatever
// run_process holds open at that moment must be close-on-exec, or that
// other program keeps this command's output pipe open and run_process waits
// for the deadline instead of the command's end (CI saw a beam search take
// 180 s instead of 18).
std::vector<int> descriptors_that_cross_exec() {
  std::vector<int> open_fds;
  for (const auto& e : fs::directory_iterator("/proc/self/fd")) open_fds.push_back(std::stoi(e.path().filename()));
  std::vector<int> crossing;
  for (int fd : open_fds) {
    const int flags = fcntl(fd, F_GETFD);
    if (fd > 2 && flags >= 0 && !(flags & FD_CLOEXEC)) crossing.push_back(fd);
  }
  return crossing;
}

TEST(ProcessTest, NothingItHoldsWhileSpawningCrossesAnotherThreadsExec) {
  const std::vector<int> before = descriptors_that_cross_exec();
  for (const bool separate : {false, true}) {
    for (const bool with_input : {false, true}) {
      std::vector<int> during;
      const Spawn base = plain_spawn();
      const Spawn watching = [&](const std::vector<std::string>& argv, void (*setup)(void*), void* context) {
        during = descriptors_that_cross_exec();
        return base(argv, setup, context);
      };
      CommandIo io;
      io.separate_stderr = separate;
      if (with_input) io.input = "x";
      const CommandResult r = run_process({"true"}, 60s, io, watching);
      EXPECT_TRUE(r.status.exited);
      EXPECT_EQ(during, before) << "separate_stderr " << separate << ", input " << with_input;
    }
  }
}

// The command ends when its process does: a process it started outside
// its group (setsid), or any other holder of a copy of its output pipe,
// does not keep run_process waiting for the pipe to close.
TEST(ProcessTest, ItEndsWithTheChildWhoeverElseHoldsThePipe) {
  const fs::path pidfile = fs::temp_directory_path() / ("kloop-process-stray-" + std::to_string(getpid()));
  const CommandResult r = run_process(
      {"sh", "-c", "setsid sh -c 'echo $$ > " + pidfile.string() + "; exec sleep 300' & sleep 0.2; echo done; exit 4"},
      120s);  // far beyond the 0.2 s it takes, far below the stray's 300 s
  std::ifstream in(pidfile);
  pid_t stray = 0;
  in >> stray;
  if (stray > 0) kill(stray, SIGKILL);
  fs::remove(pidfile);
  EXPECT_FALSE(r.timed_out) << "waited for the stray process's copy of the pipe";
  EXPECT_TRUE(r.status.exited);
  EXPECT_EQ(r.status.code, 4);
  EXPECT_EQ(r.output, "done\n");
  EXPECT_GT(stray, 0) << "the stray process did not start";
}

}  // namespace
}  // namespace kloop
