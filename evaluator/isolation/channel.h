// The line channel between the driver and a worker: one JSON line per
// message over a unix socket pair (never a path-named socket), with file
// descriptors (CUDA memory exports) riding along as SCM_RIGHTS. Both sides
// use it; everything read from it is untrusted input.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace kloop {

// An owned file descriptor, closed on destruction.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = o.release();
    }
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  int get() const { return fd_; }
  int release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }
  void reset();
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

struct ChannelMessage {
  std::string line;
  std::vector<UniqueFd> fds;  // descriptors received since the previous line
};

// At most this many descriptors are accepted per message; more are closed.
constexpr std::size_t kMaxChannelFds = 4;
// A line longer than this is a protocol violation, not a reason to run out of memory.
constexpr std::size_t kMaxChannelLine = 64u << 20;

class Channel {
 public:
  explicit Channel(int fd) : fd_(fd) {}
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  // False when the peer is gone.
  bool send(const std::string& line, const std::vector<int>& fds = {});
  // The next line, or nullopt when `timeout` passes (timed_out()), the peer
  // closed the channel, or it sent an over-long line (overflowed()).
  // `also_drain` (>= 0) is a descriptor read and handed to `drain` while
  // waiting, so a child's log pipe never fills up.
  std::optional<ChannelMessage> receive(std::optional<std::chrono::milliseconds> timeout, int also_drain = -1,
                                        void (*drain)(void*, const char*, std::size_t) = nullptr,
                                        void* drain_context = nullptr);
  bool timed_out() const { return timed_out_; }
  bool overflowed() const { return overflowed_; }
  int fd() const { return fd_.get(); }

 private:
  UniqueFd fd_;
  std::string buffer_;
  std::vector<UniqueFd> pending_fds_;
  bool timed_out_ = false;
  bool overflowed_ = false;
};

}  // namespace kloop
