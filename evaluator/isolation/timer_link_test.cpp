// The trusted timer's shared blocks and handshake on the CPU, between two
// real processes: what the candidate's side can and cannot do to them.
#include "evaluator/isolation/timer_link.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <algorithm>
#include <cstring>
#include <vector>

namespace kloop {
namespace {

using timer::Word;
using Clock = std::chrono::steady_clock;

TEST(TimerLinkTest, TheHandshakeCrossesProcesses) {
  auto control = SharedBlock::create("cpu", timer::kControlBytes);
  auto data = SharedBlock::create("cpu", 4096);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The candidate's side: maps what it was given, serves three calls.
    auto c = SharedBlock::attach("cpu", control->fd(), timer::kControlBytes);
    auto d = SharedBlock::attach("cpu", data->fd(), 4096);
    for (uint32_t s = 1; s <= 3; ++s) {
      const auto go = timer::host_wait(*c, Word::kGo, s, Clock::now() + std::chrono::seconds(20));
      if (!go || *go != s) _exit(10 + static_cast<int>(s));
      d->data()[100] = static_cast<char>(d->data()[0] * 2);  // "forward": reads the input, writes an output
      timer::host_store(*c, Word::kCalled, s);
      timer::host_store(*c, Word::kCopied, s);
    }
    _exit(0);
  }
  for (uint32_t s = 1; s <= 3; ++s) {
    data->data()[0] = static_cast<char>(s + 20);  // the timer draws the call's input
    timer::host_store(*control, Word::kGo, s);
    const auto called = timer::host_wait(*control, Word::kCalled, s, Clock::now() + std::chrono::seconds(20));
    ASSERT_TRUE(called.has_value());
    EXPECT_EQ(*called, s);
    ASSERT_TRUE(timer::host_wait(*control, Word::kCopied, s, Clock::now() + std::chrono::seconds(20)));
    EXPECT_EQ(data->data()[100], static_cast<char>(2 * (s + 20))) << "the output of call " << s;
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

// The candidate holds the block's descriptor: a file it could shrink would
// be a SIGBUS in the timer the next time it draws an input there.
TEST(TimerLinkTest, TheCandidateCannotShrinkOrGrowABlock) {
  auto data = SharedBlock::create("cpu", 1 << 20);
  EXPECT_NE(ftruncate(data->fd(), 0), 0);
  EXPECT_NE(ftruncate(data->fd(), 1 << 21), 0);
  std::memset(data->data(), 7, 1 << 20);  // still all there
  EXPECT_EQ(data->data()[(1 << 20) - 1], 7);
  EXPECT_THROW(SharedBlock::attach("cpu", data->fd(), 1 << 21), std::runtime_error) << "bigger than the block";
}

TEST(TimerLinkTest, AWaitEndsAtItsDeadlineOrOnAbort) {
  auto control = SharedBlock::create("cpu", timer::kControlBytes);
  EXPECT_FALSE(timer::host_wait(*control, Word::kCalled, 1, Clock::now() + std::chrono::milliseconds(20)).has_value());
  timer::host_store(*control, Word::kCalled, timer::kAbort);
  const auto seen = timer::host_wait(*control, Word::kCalled, 5, Clock::now() + std::chrono::seconds(20));
  ASSERT_TRUE(seen.has_value());
  EXPECT_EQ(*seen, timer::kAbort);
}

// A later number the candidate's side stored into `called` outlives the
// worker's own store of the call's number, so the timer reads the forgery
// however late it looks (under load it may look only after the worker's
// store); the worker's numbers still rise as the calls go.
TEST(TimerLinkTest, TheWorkersStoreNeverHidesALaterNumber) {
  auto control = SharedBlock::create("cpu", timer::kControlBytes);
  timer::host_raise(*control, Word::kCalled, 1);
  timer::host_raise(*control, Word::kCalled, 2);
  EXPECT_EQ(timer::host_load(*control, Word::kCalled), 2u);
  timer::host_store(*control, Word::kCalled, 1002);  // the candidate, inside call 3
  timer::host_raise(*control, Word::kCalled, 3);     // the worker, after it
  EXPECT_EQ(timer::host_load(*control, Word::kCalled), 1002u);
  timer::host_raise(*control, Word::kCalled, timer::kAbort);
  EXPECT_EQ(timer::host_load(*control, Word::kCalled), timer::kAbort);
}

// The seal (GPU) as the timer reads it after a batch: every call's row must
// hold its own value; a row a skipping call left (from the block's start,
// or from the call kSealRows before it) is found, and rows later calls of
// the batch wrote over are not asked for.
TEST(TimerLinkTest, TheSealFindsTheFirstCallThatDidNotWriteItsRow) {
  std::vector<float> seal(static_cast<std::size_t>(timer::kSealRows * timer::kSealWidth), -1.0f);
  auto write = [&](uint32_t seq) {
    const auto row = static_cast<std::size_t>(timer::seal_row(seq) * timer::kSealWidth);
    std::fill(seal.begin() + static_cast<std::ptrdiff_t>(row),
              seal.begin() + static_cast<std::ptrdiff_t>(row + timer::kSealWidth), timer::seal_value(seq));
  };
  const uint32_t first = 1000;
  for (uint32_t s = first; s < first + 40; ++s) write(s);
  EXPECT_FALSE(timer::first_unsealed(seal.data(), first, 40).has_value());
  EXPECT_EQ(timer::first_unsealed(seal.data(), first, 41), 40) << "call 40 never ran";
  // Call 7 of a later batch skipped kloop's kernel: its row still holds
  // call 7's of kSealRows calls before, and one element short is as wrong.
  const uint32_t later = first + static_cast<uint32_t>(timer::kSealRows);
  for (uint32_t s = later; s < later + 40; ++s) {
    if (s != later + 7) write(s);
  }
  EXPECT_EQ(timer::first_unsealed(seal.data(), later, 40), 7);
  write(later + 7);
  seal[static_cast<std::size_t>(timer::seal_row(later + 9) * timer::kSealWidth + 63)] = 0.0f;
  EXPECT_EQ(timer::first_unsealed(seal.data(), later, 40), 9);
  // A batch longer than the rows: only its last kSealRows calls are asked.
  for (uint32_t s = later; s < later + 600; ++s) write(s);
  EXPECT_FALSE(timer::first_unsealed(seal.data(), later, 600).has_value());
  EXPECT_NE(timer::seal_value(first), timer::seal_value(later)) << "the value a row held before is never this call's";
}

}  // namespace
}  // namespace kloop
