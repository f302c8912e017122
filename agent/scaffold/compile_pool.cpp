#include "agent/scaffold/compile_pool.h"

#include <sched.h>

#include <chrono>
#include <stdexcept>
#include <thread>

namespace kloop {

CompilePool::CompilePool(int slots) : slots_(slots) {
  if (slots < 1) throw std::invalid_argument("CompilePool: at least one slot");
  figures_.slots = slots;
}

CompilePool::Slot::Slot(Slot&& other) noexcept : owner_(other.owner_) { other.owner_ = nullptr; }

CompilePool::Slot::~Slot() {
  if (owner_) owner_->release();
}

CompilePool::Slot CompilePool::acquire() {
  const auto asked = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mutex_);
  const std::uint64_t ticket = next_ticket_++;
  ++figures_.asked;
  changed_.wait(lock, [&] { return serving_ == ticket && in_flight_ < slots_; });
  ++serving_;
  ++in_flight_;
  if (in_flight_ > figures_.most_in_flight) figures_.most_in_flight = in_flight_;
  figures_.wait_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - asked).count();
  lock.unlock();
  changed_.notify_all();  // the next ticket may be served now too
  return Slot(this);
}

void CompilePool::release() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    --in_flight_;
    ++figures_.builds;
  }
  changed_.notify_all();
}

CompilePoolFigures CompilePool::figures() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return figures_;
}

int available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  const unsigned n = std::thread::hardware_concurrency();
  return n > 0 ? static_cast<int>(n) : 1;
}

}  // namespace kloop
