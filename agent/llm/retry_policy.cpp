// Retry classification, backoff and the fatal-error messages users read when
// a run stops on a provider problem.
#include "agent/llm/retry_policy.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <thread>

namespace kloop {
namespace {

// A server asking for longer than this is treated as asking for this long:
// a run should not stall for hours on one header.
constexpr std::chrono::milliseconds kMaxRequestedDelay{10 * 60 * 1000};
constexpr std::size_t kMaxMessageChars = 600;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string shorten(const std::string& s) {
  if (s.size() <= kMaxMessageChars) return s;
  return s.substr(0, kMaxMessageChars) + "...";
}

std::string key_hint(const ProviderIdentity& who) {
  if (who.api_key_env.empty()) {
    return "the server wants an API key: set provider.api_key_env to the environment variable that holds it";
  }
  return "check the key in $" + who.api_key_env;
}

}  // namespace

void sleep_for_real(std::chrono::milliseconds delay) { std::this_thread::sleep_for(delay); }

StatusClass classify_status(long status) {
  if (status >= 200 && status < 300) return StatusClass::kSuccess;
  if (status == 0) return StatusClass::kRetry;  // network error or timeout
  // 408 request timeout and 429 rate limit are the client errors that pass;
  // every 5xx (including Anthropic's 529 "overloaded") is the server's trouble.
  if (status == 408 || status == 429 || status >= 500) return StatusClass::kRetry;
  return StatusClass::kFatal;
}

std::optional<std::chrono::milliseconds> parse_retry_after(const std::string& raw,
                                                           std::chrono::system_clock::time_point now) {
  std::string value = raw;
  while (!value.empty() && std::isspace(static_cast<unsigned char>(value.back()))) value.pop_back();
  while (!value.empty() && std::isspace(static_cast<unsigned char>(value.front()))) value.erase(0, 1);
  if (value.empty()) return std::nullopt;
  if (std::isdigit(static_cast<unsigned char>(value[0]))) {
    char* end = nullptr;
    double seconds = std::strtod(value.c_str(), &end);
    if (end == value.c_str() || *end != '\0' || !std::isfinite(seconds) || seconds < 0) return std::nullopt;
    auto ms = std::chrono::milliseconds(static_cast<long long>(std::llround(seconds * 1000.0)));
    return std::min(ms, kMaxRequestedDelay);
  }
  // An HTTP date (IMF-fixdate, RFC 850 or asctime; curl_getdate reads all three).
  time_t when = curl_getdate(value.c_str(), nullptr);
  if (when == -1) return std::nullopt;
  auto target = std::chrono::system_clock::from_time_t(when);
  if (target <= now) return std::chrono::milliseconds(0);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(target - now);
  return std::min(ms, kMaxRequestedDelay);
}

std::optional<std::chrono::milliseconds> requested_retry_delay(const HttpResponse& response,
                                                               std::chrono::system_clock::time_point now) {
  if (auto ms = response.header("retry-after-ms")) {
    char* end = nullptr;
    double value = std::strtod(ms->c_str(), &end);
    if (end != ms->c_str() && *end == '\0' && std::isfinite(value) && value >= 0) {
      return std::min(std::chrono::milliseconds(static_cast<long long>(value)), kMaxRequestedDelay);
    }
  }
  if (auto value = response.header("retry-after")) return parse_retry_after(*value, now);
  return std::nullopt;
}

nlohmann::json parse_error_body(const std::string& body) {
  nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_array() && j.size() == 1 && j[0].is_object()) return j[0];
  return j;
}

std::string server_error_message(const std::string& body) {
  auto j = parse_error_body(body);
  if (!j.is_discarded() && j.is_object()) {
    // OpenAI, Anthropic, Gemini: {"error": {"message": ...}}; some servers
    // {"error": "..."}; vLLM {"message": ...}; FastAPI {"detail": ...}.
    if (j.contains("error")) {
      const auto& e = j["error"];
      if (e.is_object() && e.contains("message") && e["message"].is_string()) {
        return shorten(e["message"].get<std::string>());
      }
      if (e.is_string()) return shorten(e.get<std::string>());
    }
    for (const char* field : {"message", "detail"}) {
      if (j.contains(field) && j[field].is_string()) return shorten(j[field].get<std::string>());
    }
    return shorten(j.dump());
  }
  std::string text = body;
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  return shorten(text);
}

bool is_context_length_error(const std::string& server_message) {
  std::string m = lower(server_message);
  // OpenAI, vLLM, Anthropic ("prompt is too long", "... exceed context
  // limit"), Gemini ("input token count"), llama.cpp ("exceeds the available
  // context size").
  for (const char* marker : {"context_length", "context length", "context window", "maximum context",
                             "prompt is too long", "too many tokens", "input token count", "reduce the length",
                             "exceed context limit", "exceeds the available context size", "context size",
                             "exceed_context_size"}) {
    if (m.find(marker) != std::string::npos) return true;
  }
  return false;
}

std::string fatal_status_message(const ProviderIdentity& who, long status, const std::string& server_message) {
  std::string head = std::to_string(status) + " from " + who.kind + " (model " + who.model + " at " + who.url + ")";
  std::string server = server_message.empty() ? "" : " [server says: " + server_message + "]";
  switch (status) {
    case 401:
      return head + ": the API key was rejected: " + key_hint(who) + server;
    case 403:
      return head + ": permission denied: " + key_hint(who) + " and that it may use model '" + who.model + "'" + server;
    case 404:
      return head + ": model or endpoint not found: check provider.model ('" + who.model + "') and provider.base_url" +
             server;
    case 400:
      if (is_context_length_error(server_message)) {
        return head +
               ": the conversation does not fit the model's context window: lower provider.max_tokens, "
               "shorten the prompt or use fewer turns" +
               server;
      }
      return head +
             ": the request was rejected: check the provider options (temperature, top_p, max_tokens, "
             "reasoning_effort, thinking_budget, extra_body) against what this model accepts" +
             server;
    case 402:
      return head + ": payment required: check the account's credit" + server;
    case 413:
      return head + ": the request is too large: shorten the prompt or use fewer turns" + server;
    default:
      if (status >= 300 && status < 400) {
        return head + ": unexpected redirect: check provider.base_url" + server;
      }
      return head + ": the request failed and retrying will not help" + server;
  }
}

RetryPolicy::RetryPolicy(int max_retries, std::chrono::milliseconds initial_backoff,
                         std::chrono::milliseconds max_backoff, SleepFunction sleep, std::uint64_t seed)
    : max_retries_(std::max(0, max_retries)),
      initial_backoff_(initial_backoff),
      max_backoff_(max_backoff),
      sleep_(sleep ? std::move(sleep) : SleepFunction(sleep_for_real)),
      rng_(seed) {}

std::chrono::milliseconds RetryPolicy::delay_before_retry(int retry,
                                                          std::optional<std::chrono::milliseconds> requested) {
  // The server knows its own rate limits better than our backoff does.
  if (requested) return *requested;
  double ceiling = static_cast<double>(initial_backoff_.count()) * std::pow(2.0, std::max(0, retry - 1));
  ceiling = std::min(ceiling, static_cast<double>(max_backoff_.count()));
  std::lock_guard<std::mutex> lock(mutex_);
  std::uniform_real_distribution<double> draw(0.0, std::max(0.0, ceiling));
  return std::chrono::milliseconds(static_cast<long long>(draw(rng_)));
}

}  // namespace kloop
