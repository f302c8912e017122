// The live status line of a long command on a terminal: attempts done of
// the total, what is in flight by phase (waiting for the model, compiling,
// evaluating), elapsed time and ETA, cost so far. Redrawn on stderr about
// once a second, and only when stderr is a terminal; elsewhere (a log, CI)
// it prints nothing and the command's one line per attempt is the record.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>

namespace kloop {

class StatusLine {
 public:
  // `enabled`: draw at all (default: stderr is a terminal).
  explicit StatusLine(int total, bool enabled = default_enabled());
  ~StatusLine();
  StatusLine(const StatusLine&) = delete;
  StatusLine& operator=(const StatusLine&) = delete;

  static bool default_enabled();

  // A unit of work enters or leaves a phase ("model", "compile", "eval").
  void begin(const std::string& phase);
  void end(const std::string& phase);
  // One attempt finished, at this cost.
  void done(double cost_usd);
  // Prints a whole line on `out` without the status line in the way.
  void print(std::ostream& out, const std::string& line);
  // Clears the status line and keeps it away while the lock is held, for
  // commands that print with printf; it is drawn again on the next tick.
  std::unique_lock<std::mutex> quiet();
  // The line as it would be drawn now (for tests).
  std::string text() const;

 private:
  void draw_locked();
  void clear_locked();

  const int total_;
  const bool enabled_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  mutable std::mutex mutex_;
  std::condition_variable stop_;
  bool stopping_ = false;
  bool drawn_ = false;
  int done_ = 0;
  double cost_ = 0;
  std::map<std::string, int> in_flight_;
  std::thread ticker_;
};

}  // namespace kloop
