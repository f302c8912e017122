#include "agent/scaffold/device_queues.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

namespace kloop {
namespace {

// Held devices are not handed out twice; a free one is handed out at once
// while another is busy; with every device busy the next evaluation waits
// for the first that is given back.
TEST(DeviceQueuesTest, EachEvaluationGetsAFreeDeviceAndWaitsOnlyWhenAllAreBusy) {
  DeviceQueues queues({"cuda:0", "cuda:1"});
  auto first = std::make_unique<DeviceQueues::Lease>(queues.acquire());
  EXPECT_EQ(first->index(), 0);
  {
    const DeviceQueues::Lease second = queues.acquire();  // does not wait for the first
    EXPECT_EQ(second.index(), 1);
    std::atomic<bool> got{false};
    auto third = std::async(std::launch::async, [&] {
      const DeviceQueues::Lease l = queues.acquire();
      got = true;
      return l.index();
    });
    // Both devices are held: the third cannot have one (it is blocked, not
    // slow: nothing but a release wakes it).
    EXPECT_EQ(third.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);
    EXPECT_FALSE(got);
    first.reset();  // device 0 back
    EXPECT_EQ(third.get(), 0);
  }
  const auto figures = queues.figures();
  ASSERT_EQ(figures.size(), 2u);
  EXPECT_EQ(figures[0].device, "cuda:0");
  EXPECT_EQ(figures[0].evaluations, 2);
  EXPECT_EQ(figures[1].evaluations, 1);
  EXPECT_GE(figures[0].busy_seconds, 0);
}

TEST(DeviceQueuesTest, ManyThreadsNeverShareADevice) {
  DeviceQueues queues({"cpu", "cpu", "cpu"});
  std::atomic<int> holders[3] = {0, 0, 0};
  std::atomic<bool> shared{false};
  std::vector<std::thread> pool;
  for (int t = 0; t < 8; ++t) {
    pool.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        const DeviceQueues::Lease l = queues.acquire();
        if (holders[l.index()]++ != 0) shared = true;
        std::this_thread::yield();
        --holders[l.index()];
      }
    });
  }
  for (auto& t : pool) t.join();
  EXPECT_FALSE(shared);
  int total = 0;
  for (const auto& f : queues.figures()) total += f.evaluations;
  EXPECT_EQ(total, 8 * 200);
}

}  // namespace
}  // namespace kloop
