// Just enough HTTP/1.1 for one request per connection with a Content-Length
// body (what libcurl sends for a POST); every response closes the connection.
#include "tests/support/fake_http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace kloop::test_support {
namespace {

int bind_loopback(int* port_out) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error(std::string("socket: ") + strerror(errno));
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    throw std::runtime_error(std::string("bind: ") + strerror(errno));
  }
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  *port_out = ntohs(addr.sin_port);
  return fd;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string trim(const std::string& s) {
  std::size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  std::size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

const char* reason_phrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 429:
      return "Too Many Requests";
    case 500:
      return "Internal Server Error";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    default:
      return "Status";
  }
}

// The bytes sent: all of them, or fewer when the client went away.
std::size_t send_all(int fd, const std::string& data) {
  std::size_t off = 0;
  while (off < data.size()) {
    // MSG_NOSIGNAL: a client that gave up must not kill the test binary.
    ssize_t n = send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return off;
    off += static_cast<std::size_t>(n);
  }
  return off;
}

}  // namespace

FakeHttpServer::FakeHttpServer() {
  listen_fd_ = bind_loopback(&port_);
  if (listen(listen_fd_, 64) != 0) {
    close(listen_fd_);
    throw std::runtime_error(std::string("listen: ") + strerror(errno));
  }
  acceptor_ = std::thread([this] { accept_loop(); });
}

FakeHttpServer::~FakeHttpServer() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  stop_signal_.notify_all();
  if (acceptor_.joinable()) acceptor_.join();
  // No new connections now; the acceptor has stopped adding threads.
  for (auto& t : connections_) {
    if (t.joinable()) t.join();
  }
  close(listen_fd_);
}

void FakeHttpServer::enqueue(ScriptedResponse response) {
  std::lock_guard<std::mutex> lock(mutex_);
  script_.push_back({std::move(response), std::string::npos, std::chrono::milliseconds(0), {}});
}

void FakeHttpServer::enqueue_cut(ScriptedResponse response, std::size_t cut_at, std::chrono::milliseconds stall) {
  std::lock_guard<std::mutex> lock(mutex_);
  script_.push_back({std::move(response), cut_at, stall, {}});
}

void FakeHttpServer::enqueue_paused(ScriptedResponse response, std::size_t at, std::chrono::milliseconds pause) {
  std::lock_guard<std::mutex> lock(mutex_);
  script_.push_back({std::move(response), std::string::npos, std::chrono::milliseconds(0), {{at, pause}}});
}

void FakeHttpServer::set_handler(std::function<ScriptedReply(const RecordedRequest&, std::size_t)> handler) {
  std::lock_guard<std::mutex> lock(mutex_);
  handler_ = std::move(handler);
}

void FakeHttpServer::set_delivered(std::function<void(std::size_t, std::size_t)> delivered) {
  std::lock_guard<std::mutex> lock(mutex_);
  delivered_ = std::move(delivered);
}

void FakeHttpServer::enqueue_json(int status, const std::string& body) {
  enqueue({status, {{"Content-Type", "application/json"}}, body, std::chrono::milliseconds(0)});
}

std::string FakeHttpServer::base_url() const { return "http://127.0.0.1:" + std::to_string(port_); }

std::vector<RecordedRequest> FakeHttpServer::requests() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return requests_;
}

int FakeHttpServer::unused_port() {
  int port = 0;
  int fd = bind_loopback(&port);
  close(fd);  // nothing listens there now: connecting is refused
  return port;
}

void FakeHttpServer::accept_loop() {
  while (!stopping_) {
    pollfd p{listen_fd_, POLLIN, 0};
    int rc = poll(&p, 1, 20);
    if (rc <= 0) continue;
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    std::lock_guard<std::mutex> lock(mutex_);
    connections_.emplace_back([this, fd] { serve(fd); });
  }
}

void FakeHttpServer::serve(int fd) {
  std::string data;
  std::size_t header_end = std::string::npos;
  std::size_t content_length = 0;
  char buffer[65536];
  // Read the head, then Content-Length bytes of body.
  for (;;) {
    if (header_end != std::string::npos && data.size() >= header_end + 4 + content_length) break;
    if (stopping_) {
      close(fd);
      return;
    }
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 20) <= 0) continue;
    ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      close(fd);
      return;
    }
    data.append(buffer, static_cast<std::size_t>(n));
    if (header_end == std::string::npos) {
      header_end = data.find("\r\n\r\n");
      if (header_end != std::string::npos) {
        std::string head = lower(data.substr(0, header_end));
        auto pos = head.find("\r\ncontent-length:");
        if (pos != std::string::npos) content_length = std::stoul(head.substr(pos + 17));
      }
    }
  }

  RecordedRequest request;
  std::string head = data.substr(0, header_end);
  std::size_t line_end = head.find("\r\n");
  std::string request_line = head.substr(0, line_end);
  std::size_t sp1 = request_line.find(' ');
  std::size_t sp2 = request_line.find(' ', sp1 + 1);
  request.method = request_line.substr(0, sp1);
  request.path = request_line.substr(sp1 + 1, sp2 - sp1 - 1);
  std::size_t pos = line_end == std::string::npos ? head.size() : line_end + 2;
  while (pos < head.size()) {
    std::size_t next = head.find("\r\n", pos);
    if (next == std::string::npos) next = head.size();
    std::string line = head.substr(pos, next - pos);
    std::size_t colon = line.find(':');
    if (colon != std::string::npos) request.headers[lower(trim(line.substr(0, colon)))] = trim(line.substr(colon + 1));
    pos = next + 2;
  }
  request.body = data.substr(header_end + 4, content_length);

  ScriptedReply reply{{500, {}, "fake server: no scripted response left", std::chrono::milliseconds(0)},
                      std::string::npos, std::chrono::milliseconds(0), {}};
  std::size_t index = 0;
  std::function<ScriptedReply(const RecordedRequest&, std::size_t)> handler;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    index = requests_.size();
    requests_.push_back(request);
    if (!script_.empty()) {
      reply = script_.front();
      script_.pop_front();
    } else {
      handler = handler_;
    }
  }
  if (handler) reply = handler(request, index);
  const ScriptedResponse& response = reply.response;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    max_in_flight_ = std::max(max_in_flight_.load(), ++in_flight_);
    if (response.delay.count() > 0) {
      stop_signal_.wait_for(lock, response.delay, [this] { return stopping_.load(); });
    }
    // Answered from here on: once the client reads the response it may send
    // its next request, which must not find this one still counted.
    --in_flight_;
  }
  std::size_t body_sent = 0;
  if (!stopping_) {
    std::string head = "HTTP/1.1 " + std::to_string(response.status) + " " + reason_phrase(response.status) + "\r\n";
    for (const auto& [name, value] : response.headers) head += name + ": " + value + "\r\n";
    head += "Content-Length: " + std::to_string(response.body.size()) + "\r\nConnection: close\r\n\r\n";
    const std::string body = response.body.substr(0, reply.cut_at);
    bool open = send_all(fd, head) == head.size();
    std::size_t from = 0;
    for (const auto& [at, pause] : reply.pauses) {
      if (!open || at <= from || at > body.size()) continue;
      const std::size_t n = send_all(fd, body.substr(from, at - from));
      body_sent += n;
      open = n == at - from;
      from = at;
      std::unique_lock<std::mutex> lock(mutex_);
      stop_signal_.wait_for(lock, pause, [this] { return stopping_.load(); });
    }
    if (open) body_sent += send_all(fd, body.substr(from));
    if (reply.stall.count() > 0) {
      std::unique_lock<std::mutex> lock(mutex_);
      stop_signal_.wait_for(lock, reply.stall, [this] { return stopping_.load(); });
    }
  }
  close(fd);
  std::function<void(std::size_t, std::size_t)> delivered;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    delivered = delivered_;
  }
  if (delivered) delivered(index, body_sent);
}

}  // namespace kloop::test_support
