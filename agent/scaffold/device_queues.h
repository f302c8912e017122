// DeviceQueues: a run's evaluation queues, one per device. An evaluation
// takes a free device (the lowest-numbered one), runs alone on it, and
// gives it back; while every device is busy the next evaluation waits.
// Each queue keeps its own accounting (evaluations, busy seconds), the
// figures a run prints for how well it kept its devices busy.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

namespace kloop {

struct QueueFigures {
  std::string device;
  int evaluations = 0;
  double busy_seconds = 0;
};

class DeviceQueues {
 public:
  explicit DeviceQueues(std::vector<std::string> devices);

  // One device, held for as long as the Lease lives.
  class Lease {
   public:
    Lease(Lease&& other) noexcept;
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    Lease& operator=(Lease&&) = delete;
    ~Lease();
    int index() const { return index_; }

   private:
    friend class DeviceQueues;
    Lease(DeviceQueues* owner, int index);
    DeviceQueues* owner_;
    int index_;
    std::chrono::steady_clock::time_point start_;
  };

  // Waits for a free device.
  Lease acquire();
  std::size_t size() const { return figures_.size(); }
  const std::string& device(int index) const { return figures_.at(static_cast<std::size_t>(index)).device; }
  // Since construction: per queue, and the wall time they shared.
  std::vector<QueueFigures> figures() const;
  double seconds() const;

 private:
  void release(int index, double seconds);

  mutable std::mutex mutex_;
  std::condition_variable freed_;
  std::vector<bool> busy_;
  std::vector<QueueFigures> figures_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace kloop
