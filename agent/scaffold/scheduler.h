// Scheduler: the one place where a run's work waits and runs.
//
// It owns the run's threads: workers that carry attempts through their
// stages (attempt_stages.h), the most urgent first (a smaller priority: an
// earlier problem, a chain's next turn before a later chain's first), and
// background workers for the run-start reference builds. Each stage holds
// a lane while it runs:
//   request   a model request: at most provider.concurrency at once
//   compile   a build: compile_jobs slots, first come first served (CompilePool)
//   device    an evaluation: one at a time on each device (DeviceQueues)
//
// Cancellation flows through it. stop() (the first Ctrl-C or SIGTERM, a
// fatal provider error) lets no new stage begin: queued attempts are
// dropped and each attempt in flight ends at the stage it is in, stored.
// Requests in flight are let finish, since they are paid for: their
// answers are kept for the next run. abort() (a second Ctrl-C) also cuts
// the requests in flight (their partial cost is recorded).
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <queue>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "agent/scaffold/compile_pool.h"
#include "agent/scaffold/device_queues.h"

namespace kloop {

class Scheduler {
 public:
  struct Limits {
    int workers = 1;             // attempts carried at once
    int background_workers = 1;  // reference builds at once
    int requests = 1;            // model requests at once
    int compile_slots = 1;
    std::vector<std::string> devices;
  };
  using Priority = std::tuple<int, int, int>;

  explicit Scheduler(const Limits& limits);
  // Stops taking work and joins every thread (background jobs not yet
  // started are dropped).
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // An attempt's stages, run on a worker when one is free (dropped once
  // the run is stopped).
  void submit(Priority priority, std::function<void()> job);
  // A job beside the attempts (a reference build).
  void submit_background(std::function<void()> job);
  // Returns when every attempt job submitted (and every one they
  // submitted) has finished or was dropped.
  void wait();

  // The request lane: held while a model request is out.
  class RequestSlot {
   public:
    explicit RequestSlot(Scheduler& s);
    ~RequestSlot();
    RequestSlot(const RequestSlot&) = delete;
    RequestSlot& operator=(const RequestSlot&) = delete;

   private:
    Scheduler& s_;
  };
  RequestSlot request_slot() { return RequestSlot(*this); }
  CompilePool::Slot compile_slot() { return compile_.acquire(); }
  DeviceQueues::Lease device() { return devices_.acquire(); }

  void stop(const std::string& why);
  void abort(const std::string& why);
  // Stopped, or interrupted (at once: before the watcher has said so).
  bool stopped() const {
    return stopped_.load() || (interrupts_ && interrupts_->load() > interrupts_seen_);
  }
  const std::atomic<bool>& aborted() const { return aborted_; }
  std::string stop_reason() const;
  // Follows a count of interrupts (the CLI's SIGINT and SIGTERM handler):
  // the first stops the run, the second aborts it. `notes` hears of each.
  void follow_interrupts(const std::atomic<int>* count, std::function<void(const std::string&)> notes);

  CompilePoolFigures compile_figures() const { return compile_.figures(); }
  std::vector<QueueFigures> device_figures() const { return devices_.figures(); }
  double device_seconds() const { return devices_.seconds(); }
  int most_requests_at_once() const;

 private:
  struct Job {
    Priority priority;
    std::uint64_t order;
    std::function<void()> run;
    bool operator<(const Job& o) const {  // std::priority_queue pops the largest: the smallest priority first
      return priority != o.priority ? priority > o.priority : order > o.order;
    }
  };
  void work(bool background);

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::priority_queue<Job> jobs_;
  std::vector<std::function<void()>> background_;
  std::uint64_t order_ = 0;
  int pending_ = 0;  // attempt jobs queued or running
  bool closing_ = false;
  std::atomic<bool> stopped_{false};
  std::atomic<bool> aborted_{false};
  std::string stop_reason_;
  // The request lane.
  const int request_limit_;
  int requests_out_ = 0;
  int most_requests_ = 0;
  CompilePool compile_;
  DeviceQueues devices_;
  std::vector<std::thread> threads_;
  std::thread watcher_;
  const std::atomic<int>* interrupts_ = nullptr;
  int interrupts_seen_ = 0;  // the count when it was handed over
};

}  // namespace kloop
