// The status line, drawn with a carriage return and an erase-to-end.
#include "agent/scaffold/status_line.h"

#include <fmt/format.h>
#include <unistd.h>

#include <iostream>

namespace kloop {
namespace {

std::string clock_text(double seconds) {
  const long s = static_cast<long>(seconds + 0.5);
  std::string buf;
  if (s >= 3600) {
    buf = fmt::format("{}h{:02}m", s / 3600, (s / 60) % 60);
  } else {
    buf = fmt::format("{}m{:02}s", s / 60, s % 60);
  }
  return buf;
}

}  // namespace

bool StatusLine::default_enabled() { return isatty(STDERR_FILENO) == 1; }

StatusLine::StatusLine(int total, bool enabled) : total_(total), enabled_(enabled) {
  if (!enabled_) return;
  ticker_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stop_.wait_for(lock, std::chrono::seconds(1), [this] { return stopping_; })) draw_locked();
  });
}

StatusLine::~StatusLine() {
  if (!enabled_) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    clear_locked();
  }
  stop_.notify_all();
  ticker_.join();
}

void StatusLine::begin(const std::string& phase) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++in_flight_[phase];
}

void StatusLine::end(const std::string& phase) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (--in_flight_[phase] <= 0) in_flight_.erase(phase);
}

void StatusLine::done(double cost_usd) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++done_;
  cost_ += cost_usd;
}

void StatusLine::print(std::ostream& out, const std::string& line) {
  std::lock_guard<std::mutex> lock(mutex_);
  clear_locked();
  out << line << std::flush;
  if (enabled_) draw_locked();
}

std::unique_lock<std::mutex> StatusLine::quiet() {
  std::unique_lock<std::mutex> lock(mutex_);
  clear_locked();
  return lock;
}

std::string StatusLine::text() const {
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::string s = "[" + std::to_string(done_) + "/" + std::to_string(total_) + "]";
  if (!in_flight_.empty()) {
    s += " in flight:";
    const char* order[][2] = {{"model", "waiting for the model"}, {"compile", "compiling"}, {"eval", "evaluating"}};
    for (const auto& [key, words] : order) {
      auto it = in_flight_.find(key);
      if (it != in_flight_.end()) s += " " + std::to_string(it->second) + " " + words + ",";
    }
    if (s.back() == ',') s.pop_back();
  }
  s += " | " + clock_text(elapsed) + " elapsed";
  if (done_ > 0 && done_ < total_) s += ", ETA " + clock_text(elapsed / done_ * (total_ - done_));
  const std::string cost = fmt::format(" | ${:.4f}", cost_);
  return s + cost;
}

void StatusLine::draw_locked() {
  std::string line = text();
  if (line.size() > 160) line.resize(160);
  std::fprintf(stderr, "\r%s\x1b[K", line.c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void StatusLine::clear_locked() {
  if (!drawn_) return;
  std::fprintf(stderr, "\r\x1b[K");
  std::fflush(stderr);
  drawn_ = false;
}

}  // namespace kloop
