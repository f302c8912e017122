// The worker log helpers: the tail a verdict carries of a worker's log, and
// whether a worker got as far as announcing a phase.
#include "evaluator/detail/worker_session.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace kloop::detail {
namespace {

// A worker that died before writing a byte left an empty log: its tail is
// empty, not basic_string::substr's out_of_range (which ended paid attempts
// with "substr: __pos (which is 1) > this->size() (which is 0)").
TEST(WorkerLogTest, TheTailOfAnEmptyOrShortLogIsWhatItHolds) {
  EXPECT_EQ(last_lines("", 30), "");
  EXPECT_EQ(last_lines("\n", 30), "\n");
  EXPECT_EQ(last_lines("one line", 30), "one line");
  EXPECT_EQ(last_lines("a\nb\nc\n", 1), "c\n");
  EXPECT_EQ(last_lines("a\nb\nc", 1), "b\nc");  // an unfinished last line comes with them
  EXPECT_EQ(last_lines("a\nb\nc\n", 5), "a\nb\nc\n");
  EXPECT_EQ(last_lines("\n\n\n", 1), "\n");
}

TEST(WorkerLogTest, AWorkerStartedWhenItsLogAnnouncesAPhase) {
  const std::filesystem::path log =
      std::filesystem::temp_directory_path() / ("kloop-worker-log-" + std::to_string(getpid()) + ".log");
  std::ofstream(log) << "";
  EXPECT_FALSE(announced_a_phase(log.string()));
  std::ofstream(log) << "sandbox: ready\nkloop-worker: preparing cpu\n";
  EXPECT_TRUE(announced_a_phase(log.string()));
  std::filesystem::remove(log);
  EXPECT_FALSE(announced_a_phase(log.string())) << "no log at all: never started";
}

}  // namespace
}  // namespace kloop::detail
