#include "agent/scaffold/compile_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace kloop {
namespace {

// However many threads ask, no more than `slots` hold one at once, and every
// slot given is given back.
TEST(CompilePoolTest, NeverMoreBuildsThanSlots) {
  CompilePool pool(3);
  std::atomic<int> holding{0}, most{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 12; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        const CompilePool::Slot slot = pool.acquire();
        const int now = ++holding;
        for (int seen = most.load(); now > seen && !most.compare_exchange_weak(seen, now);) {
        }
        std::this_thread::yield();
        --holding;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_LE(most.load(), 3);
  const CompilePoolFigures f = pool.figures();
  EXPECT_EQ(f.slots, 3);
  EXPECT_EQ(f.builds, 12 * 50);
  EXPECT_LE(f.most_in_flight, 3);
  EXPECT_GE(f.most_in_flight, 1);
}

// Slots go in the order they were asked for: requests queued behind a
// held slot are served first come, first served, whatever the scheduler
// wakes first.
TEST(CompilePoolTest, SlotsAreGrantedInTheOrderAskedFor) {
  CompilePool pool(1);
  std::optional<CompilePool::Slot> held(pool.acquire());
  std::mutex order_mutex;
  std::vector<int> order;
  std::vector<std::thread> threads;
  for (int i = 0; i < 6; ++i) {
    threads.emplace_back([&, i] {
      const CompilePool::Slot slot = pool.acquire();
      std::lock_guard<std::mutex> lock(order_mutex);
      order.push_back(i);
    });
    // Thread i has its ticket before thread i + 1 starts.
    while (pool.figures().asked < i + 2) std::this_thread::yield();
  }
  held.reset();
  for (auto& t : threads) t.join();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4, 5}));
}

TEST(CompilePoolTest, NeedsASlotAndFindsTheCores) {
  EXPECT_THROW(CompilePool(0), std::invalid_argument);
  EXPECT_GE(available_cores(), 1);
}

}  // namespace
}  // namespace kloop
