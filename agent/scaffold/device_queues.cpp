#include "agent/scaffold/device_queues.h"

#include <stdexcept>

namespace kloop {

DeviceQueues::DeviceQueues(std::vector<std::string> devices)
    : busy_(devices.size(), false), start_(std::chrono::steady_clock::now()) {
  if (devices.empty()) throw std::invalid_argument("DeviceQueues: no device");
  for (auto& d : devices) figures_.push_back({std::move(d), 0, 0});
}

DeviceQueues::Lease::Lease(DeviceQueues* owner, int index)
    : owner_(owner), index_(index), start_(std::chrono::steady_clock::now()) {}

DeviceQueues::Lease::Lease(Lease&& other) noexcept
    : owner_(other.owner_), index_(other.index_), start_(other.start_) {
  other.owner_ = nullptr;
}

DeviceQueues::Lease::~Lease() {
  if (owner_) {
    owner_->release(index_, std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
  }
}

DeviceQueues::Lease DeviceQueues::acquire() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    for (std::size_t i = 0; i < busy_.size(); ++i) {
      if (!busy_[i]) {
        busy_[i] = true;
        return Lease(this, static_cast<int>(i));
      }
    }
    freed_.wait(lock);
  }
}

void DeviceQueues::release(int index, double seconds) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& f = figures_.at(static_cast<std::size_t>(index));
    ++f.evaluations;
    f.busy_seconds += seconds;
    busy_[static_cast<std::size_t>(index)] = false;
  }
  freed_.notify_one();
}

std::vector<QueueFigures> DeviceQueues::figures() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return figures_;
}

double DeviceQueues::seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

}  // namespace kloop
