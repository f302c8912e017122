// sendmsg/recvmsg with SCM_RIGHTS over a SOCK_STREAM socket pair. A stream
// keeps descriptors attached to the bytes they were sent with; since the
// protocol alternates one request and one reply, every descriptor that
// arrives before a line's end belongs to that line.
#include "evaluator/isolation/channel.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace kloop {
namespace {

using Clock = std::chrono::steady_clock;

int remaining_ms(std::optional<Clock::time_point> deadline) {
  if (!deadline) return -1;
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(std::min<long long>(left, 1000 * 60 * 60));
}

}  // namespace

void UniqueFd::reset() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

bool Channel::send(const std::string& line, const std::vector<int>& fds) {
  std::string data = line + "\n";
  std::size_t off = 0;
  bool fds_sent = fds.empty();
  while (off < data.size()) {
    struct iovec iov = {data.data() + off, data.size() - off};
    struct msghdr msg = {};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxChannelFds)];
    if (!fds_sent) {
      const std::size_t n = std::min(fds.size(), kMaxChannelFds);
      std::memset(control, 0, sizeof(control));
      msg.msg_control = control;
      msg.msg_controllen = CMSG_SPACE(sizeof(int) * n);
      struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int) * n);
      std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * n);
    }
    ssize_t n = sendmsg(fd_.get(), &msg, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    fds_sent = true;
    off += static_cast<std::size_t>(n);
  }
  return true;
}

std::optional<ChannelMessage> Channel::receive(std::optional<std::chrono::milliseconds> timeout, int also_drain,
                                               void (*drain)(void*, const char*, std::size_t), void* drain_context) {
  timed_out_ = false;
  std::optional<Clock::time_point> deadline;
  if (timeout) deadline = Clock::now() + *timeout;
  for (;;) {
    auto nl = buffer_.find('\n');
    if (nl != std::string::npos) {
      ChannelMessage m;
      m.line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      m.fds = std::move(pending_fds_);
      pending_fds_.clear();
      return m;
    }
    if (buffer_.size() > kMaxChannelLine) {
      overflowed_ = true;
      return std::nullopt;
    }
    struct pollfd p[2] = {{fd_.get(), POLLIN, 0}, {also_drain, POLLIN, 0}};
    int rc = poll(p, also_drain >= 0 ? 2 : 1, remaining_ms(deadline));
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) return std::nullopt;
    if (rc == 0) {
      timed_out_ = true;
      return std::nullopt;
    }
    if (also_drain >= 0 && (p[1].revents & (POLLIN | POLLHUP))) {
      char buf[65536];
      ssize_t n = read(also_drain, buf, sizeof(buf));
      if (n > 0 && drain) drain(drain_context, buf, static_cast<std::size_t>(n));
      if (n == 0) also_drain = -1;  // the log's writer is gone; the reply may still be buffered
    }
    if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    char buf[65536];
    struct iovec iov = {buf, sizeof(buf)};
    alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxChannelFds * 4)];
    struct msghdr msg = {};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    ssize_t n = recvmsg(fd_.get(), &msg, MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR) continue;
    for (struct cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (std::size_t i = 0; i < count; ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        UniqueFd owned(fd);
        if (pending_fds_.size() < kMaxChannelFds) pending_fds_.push_back(std::move(owned));
      }
    }
    if (n <= 0) return std::nullopt;
    buffer_.append(buf, static_cast<std::size_t>(n));
  }
}

}  // namespace kloop
