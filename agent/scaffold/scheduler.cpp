// The run's threads, lanes and cancellation (scheduler.h).
#include "agent/scaffold/scheduler.h"

#include <algorithm>
#include <chrono>

namespace kloop {

Scheduler::Scheduler(const Limits& limits)
    : request_limit_(std::max(1, limits.requests)),
      compile_(std::max(1, limits.compile_slots)),
      devices_(limits.devices) {
  for (int i = 0; i < std::max(1, limits.workers); ++i) threads_.emplace_back([this] { work(false); });
  for (int i = 0; i < std::max(0, limits.background_workers); ++i) threads_.emplace_back([this] { work(true); });
}

Scheduler::~Scheduler() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closing_ = true;
    background_.clear();
  }
  changed_.notify_all();
  for (auto& t : threads_) t.join();
  if (watcher_.joinable()) watcher_.join();
}

void Scheduler::submit(Priority priority, std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopped() || closing_) return;
    jobs_.push({priority, order_++, std::move(job)});
    ++pending_;
  }
  changed_.notify_all();
}

void Scheduler::submit_background(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closing_) return;
    background_.push_back(std::move(job));
  }
  changed_.notify_all();
}

void Scheduler::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [this] { return pending_ == 0; });
}

void Scheduler::work(bool background) {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [&] { return closing_ || (background ? !background_.empty() : !jobs_.empty()); });
      if (background) {
        if (background_.empty() || stopped()) {
          if (closing_) return;
          background_.clear();
          continue;
        }
        job = std::move(background_.front());
        background_.erase(background_.begin());
      } else {
        if (jobs_.empty()) return;  // closing
        job = jobs_.top().run;
        jobs_.pop();
        if (stopped()) {  // dropped: nothing of it was stored, the next run makes it
          --pending_;
          changed_.notify_all();
          continue;
        }
      }
    }
    job();
    if (!background) {
      std::lock_guard<std::mutex> lock(mutex_);
      --pending_;
    }
    changed_.notify_all();
  }
}

Scheduler::RequestSlot::RequestSlot(Scheduler& s) : s_(s) {
  std::unique_lock<std::mutex> lock(s_.mutex_);
  s_.changed_.wait(lock, [this] { return s_.requests_out_ < s_.request_limit_; });
  ++s_.requests_out_;
  s_.most_requests_ = std::max(s_.most_requests_, s_.requests_out_);
}

Scheduler::RequestSlot::~RequestSlot() {
  {
    std::lock_guard<std::mutex> lock(s_.mutex_);
    --s_.requests_out_;
  }
  s_.changed_.notify_all();
}

void Scheduler::stop(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stop_reason_.empty()) stop_reason_ = why;
    stopped_ = true;
  }
  changed_.notify_all();
}

void Scheduler::abort(const std::string& why) {
  stop(why);
  aborted_ = true;
}

std::string Scheduler::stop_reason() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stop_reason_.empty() && stopped() ? "interrupted" : stop_reason_;
}

int Scheduler::most_requests_at_once() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return most_requests_;
}

void Scheduler::follow_interrupts(const std::atomic<int>* count, std::function<void(const std::string&)> notes) {
  if (!count) return;
  interrupts_seen_ = count->load();
  interrupts_ = count;
  watcher_ = std::thread([this, count, notes = std::move(notes)] {
    int seen = interrupts_seen_;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        if (changed_.wait_for(lock, std::chrono::milliseconds(100), [this] { return closing_; })) return;
      }
      const int now = count->load();
      if (now == seen) continue;
      seen = now;
      if (now == interrupts_seen_ + 1) {
        stop("interrupted");
        notes("kloop: stopping: no new request, build or evaluation starts; the requests in flight finish and their "
              "answers are kept (interrupt again to cut them)");
      } else {
        abort("interrupted twice");
        notes("kloop: cutting the requests in flight (their partial cost is recorded)");
      }
    }
  });
}

}  // namespace kloop
