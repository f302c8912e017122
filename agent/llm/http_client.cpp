// libcurl easy interface, one handle per request: requests last seconds to
// minutes, so a fresh connection costs nothing worth pooling for.
#include "agent/llm/http_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <memory>
#include <mutex>

namespace kloop {
namespace {

using Clock = std::chrono::steady_clock;

void init_curl_once() {
  // curl_global_init is not thread-safe; every request passes through here.
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

std::string trim(const std::string& s) {
  std::size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

// The body, and when its last token came (for the first-token and idle
// timeouts).
struct BodySink {
  const HttpRequest* request;
  std::string* body;
  Clock::time_point start;
  Clock::time_point last_token;
  bool any_token = false;
  std::string stalled;  // which clock ran out
  bool cancelled = false;
};

std::size_t on_body(char* data, std::size_t size, std::size_t count, void* user) {
  auto* sink = static_cast<BodySink*>(user);
  sink->body->append(data, size * count);
  const bool token = sink->request->on_chunk ? sink->request->on_chunk(data, size * count) : true;
  if (token) {
    sink->last_token = Clock::now();
    sink->any_token = true;
  }
  return size * count;
}

// Called about once a second and on progress: a transfer is aborted when
// it is cancelled, when no token came for first_token_timeout after the
// request, or for idle_timeout after the last token.
int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* sink = static_cast<BodySink*>(user);
  const HttpRequest& r = *sink->request;
  if (r.cancel && r.cancel->load()) {
    sink->cancelled = true;
    return 1;
  }
  const auto now = Clock::now();
  if (!sink->any_token && r.first_token_timeout.count() > 0 && now - sink->start > r.first_token_timeout) {
    sink->stalled = "first_token";
    return 1;
  }
  if (sink->any_token && r.idle_timeout.count() > 0 && now - sink->last_token > r.idle_timeout) {
    sink->stalled = "idle";
    return 1;
  }
  return 0;
}

std::string seconds_text(std::chrono::milliseconds ms) {
  const double s = static_cast<double>(ms.count()) / 1000.0;
  std::string text = std::to_string(s);
  text.erase(text.find_last_not_of('0') + 1);
  if (!text.empty() && text.back() == '.') text.pop_back();
  return text;
}

std::size_t on_header(char* data, std::size_t size, std::size_t count, void* user) {
  auto* headers = static_cast<std::map<std::string, std::string>*>(user);
  std::string line(data, size * count);
  // A new status line (after 100 Continue, for instance) starts a new header set.
  if (line.rfind("HTTP/", 0) == 0) {
    headers->clear();
    return size * count;
  }
  auto colon = line.find(':');
  if (colon == std::string::npos) return size * count;
  std::string name = trim(line.substr(0, colon));
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  (*headers)[name] = trim(line.substr(colon + 1));
  return size * count;
}

struct CurlDeleter {
  void operator()(CURL* h) const { curl_easy_cleanup(h); }
};
struct SlistDeleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};

}  // namespace

std::optional<std::string> HttpResponse::header(const std::string& lower_name) const {
  auto it = headers.find(lower_name);
  if (it == headers.end()) return std::nullopt;
  return it->second;
}

namespace {

// What a transfer that did not complete leaves: why (a token clock, a
// cancel, curl's words), whether the request had gone out, and, when a 2xx
// answer had begun, what of it arrived (`interrupted`).
void read_failed_transfer(CURL* h, CURLcode rc, const char* error_buffer, const BodySink& sink,
                          const HttpRequest& request, bool post, HttpResponse& response) {
  // The error text names the host and the failure, never request headers.
  response.error = curl_easy_strerror(rc);
  if (error_buffer[0]) response.error += std::string(": ") + error_buffer;
  response.stalled = sink.stalled;
  response.cancelled = sink.cancelled;
  response.timed_out = rc == CURLE_OPERATION_TIMEDOUT || !sink.stalled.empty();
  if (sink.stalled == "first_token") {
    response.error = "no token for " + seconds_text(request.first_token_timeout) +
                     " s after the request (provider.first_token_timeout_s)";
  } else if (sink.stalled == "idle") {
    response.error = "no token for " + seconds_text(request.idle_timeout) + " s after the last one (provider.idle_timeout_s)";
  } else if (sink.cancelled) {
    response.error = "cancelled (the run was stopped)";
  }
  long status = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  curl_off_t uploaded = 0;
  curl_easy_getinfo(h, CURLINFO_SIZE_UPLOAD_T, &uploaded);
  response.request_sent = uploaded >= static_cast<curl_off_t>(request.body.size()) && (post ? uploaded > 0 : true);
  if (status >= 200 && status < 300 && !response.body.empty()) {
    response.status = status;
    response.interrupted = true;
    return;
  }
  response.status = 0;
  response.body.clear();
}

HttpResponse perform(const HttpRequest& request, bool post) {
  init_curl_once();
  HttpResponse response;
  auto start = Clock::now();
  std::unique_ptr<CURL, CurlDeleter> handle(curl_easy_init());
  if (!handle) {
    response.error = "cannot create a libcurl handle";
    return response;
  }
  CURL* h = handle.get();

  curl_slist* raw_list = post ? curl_slist_append(nullptr, "Content-Type: application/json") : nullptr;
  // Without this curl waits for "100 Continue" before sending large bodies.
  raw_list = curl_slist_append(raw_list, "Expect:");
  for (const auto& [name, value] : request.headers) {
    raw_list = curl_slist_append(raw_list, (name + ": " + value).c_str());
  }
  std::unique_ptr<curl_slist, SlistDeleter> header_list(raw_list);

  char error_buffer[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(h, CURLOPT_URL, request.url.c_str());
  if (post) {
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, request.body.data());
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
  } else {
    curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
  }
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, header_list.get());
  BodySink sink{&request, &response.body, start, start, false, "", false};
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &sink);
  if (request.idle_timeout.count() > 0 || request.first_token_timeout.count() > 0 || request.cancel) {
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, &sink);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
  }
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &response.headers);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, error_buffer);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(request.connect_timeout.count()));
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(request.total_timeout.count()));
  // Signals for timeouts do not mix with threads.
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  // Long generations leave the connection idle for minutes; keep NATs from dropping it.
  curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");

  CURLcode rc = curl_easy_perform(h);
  response.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  response.any_token = sink.any_token;
  if (rc != CURLE_OK) {
    read_failed_transfer(h, rc, error_buffer, sink, request, post, response);
    return response;
  }
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &response.status);
  if (response.status == 0) response.error = "no HTTP status in the response";
  return response;
}

}  // namespace

HttpResponse http_post_json(const HttpRequest& request) { return perform(request, true); }

std::vector<SseEvent> parse_sse(const std::string& text) {
  std::vector<SseEvent> events;
  SseEvent current;
  bool has_data = false;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t end = text.find('\n', pos);
    if (end == std::string::npos) break;  // a cut last line: not a complete event
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) {  // the end of an event
      if (has_data) events.push_back(current);
      current = SseEvent{};
      has_data = false;
      continue;
    }
    if (line[0] == ':') continue;  // a comment (keep-alive)
    const std::size_t colon = line.find(':');
    const std::string field = line.substr(0, colon);
    std::string value = colon == std::string::npos ? "" : line.substr(colon + 1);
    if (!value.empty() && value[0] == ' ') value.erase(0, 1);
    if (field == "event") {
      current.event = value;
    } else if (field == "data") {
      current.data += (has_data ? "\n" : "") + value;
      has_data = true;
    }
  }
  return events;
}

std::vector<SseEvent> SseSplitter::feed(const char* data, std::size_t size) {
  pending_.append(data, size);
  // An event ends at a blank line ("\n\n", or "\r\n\r\n" from some servers).
  std::size_t end = std::string::npos;
  for (std::size_t at = pending_.find('\n'); at != std::string::npos; at = pending_.find('\n', at + 1)) {
    std::size_t next = at + 1;
    if (next < pending_.size() && pending_[next] == '\r') ++next;
    if (next < pending_.size() && pending_[next] == '\n') end = next + 1;
  }
  if (end == std::string::npos) return {};
  std::vector<SseEvent> events = parse_sse(pending_.substr(0, end));
  pending_.erase(0, end);
  return events;
}

HttpResponse http_get(const HttpRequest& request) { return perform(request, false); }

}  // namespace kloop
