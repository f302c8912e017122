// A small blocking HTTP client over libcurl for the provider APIs: one JSON
// POST, with a connect timeout and a total timeout. Network failures come
// back as values (status 0 and an error text) so the retry loop can decide
// what to do; nothing here throws on a failed transfer. Header values are
// never logged or copied into errors: API keys travel in them.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kloop {

struct HttpRequest {
  std::string url;
  std::vector<std::pair<std::string, std::string>> headers;  // name, value
  std::string body;
  std::chrono::milliseconds connect_timeout{10000};
  std::chrono::milliseconds total_timeout{600000};
  // Streamed answers: the transfer fails when no token arrives for
  // first_token_timeout after the request (a reasoning model may think
  // for minutes before its first one), or for idle_timeout between tokens
  // (0: no limit beyond total_timeout). What a token is, on_chunk says:
  // called with each piece of the body as it arrives, it returns whether
  // that piece completed an event carrying generated text or reasoning.
  // Without on_chunk every byte counts.
  std::chrono::milliseconds first_token_timeout{0};
  std::chrono::milliseconds idle_timeout{0};
  std::function<bool(const char* data, std::size_t size)> on_chunk;
  // Set (by another thread) to abort the transfer: Ctrl-C of a run.
  const std::atomic<bool>* cancel = nullptr;
};


// One Server-Sent Event (text/event-stream): its `event:` name ("" when
// none) and its `data:` lines joined by newlines.
struct SseEvent {
  std::string event;
  std::string data;
};
// The complete events of a stream's text (a cut last event is left out).
std::vector<SseEvent> parse_sse(const std::string& text);

// Splits a stream's text into events as it arrives: feed() returns the
// events its piece completed.
class SseSplitter {
 public:
  std::vector<SseEvent> feed(const char* data, std::size_t size);

 private:
  std::string pending_;
};

struct HttpResponse {
  long status = 0;  // 0 when no response arrived (see error)
  std::string body;
  std::map<std::string, std::string> headers;  // names in lower case
  std::string error;                           // why no response arrived; "" when one did
  bool timed_out = false;                      // the connect, first-token, idle or total timeout passed
  // Which token clock ended a stream: "first_token" or "idle"; "" when none did.
  std::string stalled;
  bool cancelled = false;                      // HttpRequest::cancel was set
  bool any_token = false;                      // a token arrived (on_chunk said so)
  // A 2xx answer had begun (status, headers and part of the body are kept)
  // when the transfer broke: the provider was generating, and bills for it.
  bool interrupted = false;
  // The whole request reached the server before the transfer failed: a
  // timeout then means the provider may have been generating (and billing).
  bool request_sent = false;
  double seconds = 0;

  bool received() const { return status != 0; }
  // A response header by lower-case name.
  std::optional<std::string> header(const std::string& lower_name) const;
};

// POSTs request.body with Content-Type: application/json plus request.headers.
// Safe to call from several threads at once.
HttpResponse http_post_json(const HttpRequest& request);
// GETs request.url with request.headers (request.body is ignored).
HttpResponse http_get(const HttpRequest& request);

}  // namespace kloop
