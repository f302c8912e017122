// A scripted HTTP/1.1 server on 127.0.0.1 for testing HTTP clients against a
// real socket: it answers requests with queued responses in arrival order
// (status, headers, body, optional delay) and records every request. Each
// connection gets its own thread, so concurrent clients are served
// concurrently and max_in_flight() shows how many overlapped.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace kloop::test_support {

struct ScriptedResponse {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::chrono::milliseconds delay{0};  // before the response is sent
};

struct RecordedRequest {
  std::string method;
  std::string path;
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;
};

// Everything a request can be answered with: a scripted response, cut
// after `cut_at` body bytes (the server then waits `stall` and closes),
// with `pauses` in its body (after that many bytes, wait that long).
struct ScriptedReply {
  ScriptedResponse response;
  std::size_t cut_at = std::string::npos;
  std::chrono::milliseconds stall{0};
  std::vector<std::pair<std::size_t, std::chrono::milliseconds>> pauses;
};

class FakeHttpServer {
 public:
  FakeHttpServer();   // binds an ephemeral port and starts serving
  ~FakeHttpServer();  // stops, cutting short any delay
  FakeHttpServer(const FakeHttpServer&) = delete;
  FakeHttpServer& operator=(const FakeHttpServer&) = delete;

  // Queues the response for the next unanswered request. When the queue is
  // empty a request gets 500 "fake server: no scripted response left".
  void enqueue(ScriptedResponse response);
  void enqueue_json(int status, const std::string& body);
  // A response whose body stops after `cut_at` bytes (the Content-Length
  // promises all of it): the server waits `stall`, then closes. A stream
  // that breaks, or goes silent, part way.
  void enqueue_cut(ScriptedResponse response, std::size_t cut_at, std::chrono::milliseconds stall);
  // A response whose body pauses: after `at` bytes, for `pause`, then the rest.
  // A model that reasons silently after its first event.
  void enqueue_paused(ScriptedResponse response, std::size_t at, std::chrono::milliseconds pause);
  // Answers every request the script has no response for (the request and
  // its index among all requests); none set: 500 "no scripted response left".
  void set_handler(std::function<ScriptedReply(const RecordedRequest&, std::size_t index)> handler);
  // Hears, after each response, how many of its body's bytes went out.
  void set_delivered(std::function<void(std::size_t index, std::size_t body_bytes_sent)> delivered);

  int port() const { return port_; }
  std::string base_url() const;  // http://127.0.0.1:<port>
  std::vector<RecordedRequest> requests() const;
  int max_in_flight() const { return max_in_flight_; }

  // A loopback port with nothing listening (bound, then closed).
  static int unused_port();

 private:
  void accept_loop();
  void serve(int fd);

  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  mutable std::mutex mutex_;
  std::condition_variable stop_signal_;
  std::deque<ScriptedReply> script_;
  std::function<ScriptedReply(const RecordedRequest&, std::size_t)> handler_;
  std::function<void(std::size_t, std::size_t)> delivered_;
  std::vector<RecordedRequest> requests_;
  std::vector<std::thread> connections_;
  int in_flight_ = 0;
  std::atomic<int> max_in_flight_{0};
  std::thread acceptor_;
};

}  // namespace kloop::test_support
