// When to try a provider call again and how long to wait first.
//
// Transient failures (429, 5xx, 529 "overloaded", network errors and
// timeouts) are retried with exponential backoff and full jitter, or after
// the server's Retry-After when it sends one. Failures a retry cannot fix
// (400, 401, 403, 404, ...) become FatalProviderError with a message that
// names the provider, the model and what to change. The sleep is injectable
// so tests can check the waits without waiting.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "agent/llm/http_client.h"

namespace kloop {

using SleepFunction = std::function<void(std::chrono::milliseconds)>;
void sleep_for_real(std::chrono::milliseconds delay);

enum class StatusClass { kSuccess, kRetry, kFatal };
// status 0 means no response arrived (network error or timeout): retried.
StatusClass classify_status(long status);

// Retry-After as delta-seconds ("30", "1.5") or an HTTP date; nullopt when
// unparseable. A date in the past gives zero.
std::optional<std::chrono::milliseconds> parse_retry_after(const std::string& value,
                                                           std::chrono::system_clock::time_point now);
// The server's requested wait: retry-after-ms (OpenAI) or Retry-After.
std::optional<std::chrono::milliseconds> requested_retry_delay(const HttpResponse& response,
                                                               std::chrono::system_clock::time_point now);

// An API error body parsed; Gemini sends its errors as a one-element JSON
// array ([{"error": {...}}]), which is unwrapped. Discarded (is_discarded)
// when the body is not JSON.
nlohmann::json parse_error_body(const std::string& body);

// The human part of an API error body ({"error": {"message": ...}} and the
// usual variants), else the body itself, shortened.
std::string server_error_message(const std::string& body);

// A 400 that says the conversation does not fit the model's context window.
bool is_context_length_error(const std::string& server_message);

// Who was called, for messages. Holds the variable's name, never the key.
struct ProviderIdentity {
  std::string kind;
  std::string model;
  std::string url;
  std::string api_key_env;
};

// "401 from anthropic (model claude-x): the API key was rejected: check the
// key in $ANTHROPIC_API_KEY". server_message must already be redacted.
std::string fatal_status_message(const ProviderIdentity& who, long status, const std::string& server_message);

class RetryPolicy {
 public:
  RetryPolicy(int max_retries, std::chrono::milliseconds initial_backoff, std::chrono::milliseconds max_backoff,
              SleepFunction sleep = sleep_for_real, std::uint64_t seed = std::random_device{}());

  int max_attempts() const { return max_retries_ + 1; }
  // The wait before retry number `retry` (1 for the first retry): the
  // server's requested delay when given, else a uniform draw from
  // [0, min(max_backoff, initial_backoff * 2^(retry-1))]. Thread-safe.
  std::chrono::milliseconds delay_before_retry(int retry, std::optional<std::chrono::milliseconds> requested);
  void wait(std::chrono::milliseconds delay) const { sleep_(delay); }

 private:
  int max_retries_;
  std::chrono::milliseconds initial_backoff_;
  std::chrono::milliseconds max_backoff_;
  SleepFunction sleep_;
  std::mutex mutex_;
  std::mt19937_64 rng_;
};

}  // namespace kloop
