// The tables. Sources:
//  OpenAI   https://platform.openai.com/docs/guides/error-codes (429
//           insufficient_quota vs rate limits; x-ratelimit-reset-requests /
//           -tokens) and the SDKs' x-should-retry handling
//  Anthropic https://docs.anthropic.com/en/api/errors (429 rate_limit_error,
//           529 overloaded_error, 413 request_too_large; billing and
//           context-window messages in invalid_request_error)
//  Gemini   https://ai.google.dev/gemini-api/docs/troubleshooting (429
//           RESOURCE_EXHAUSTED with google.rpc.QuotaFailure violations and
//           google.rpc.RetryInfo retryDelay in error.details)
//  llama.cpp server: exceed_context_size_error; vLLM: "maximum context length"
#include "agent/llm/error_class.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "agent/llm/retry_policy.h"

namespace kloop {
namespace {

constexpr std::chrono::milliseconds kMaxRequestedDelay{10 * 60 * 1000};

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

bool has(const std::string& haystack, const char* needle) { return haystack.find(needle) != std::string::npos; }

// error.code / error.type / error.status of the usual JSON error bodies.
std::string error_field(const nlohmann::json& body, const char* field) {
  if (!body.is_object() || !body.contains("error") || !body["error"].is_object()) return "";
  const auto& e = body["error"];
  return e.contains(field) && e[field].is_string() ? e[field].get<std::string>() : "";
}

bool context_overflow(const std::string& message, const std::string& code) {
  return code == "context_length_exceeded" || code == "exceed_context_size_error" || is_context_length_error(message);
}

bool billing(const std::string& message) {
  const std::string m = lower(message);
  for (const char* marker : {"credit balance", "insufficient_quota", "exceeded your current quota", "spend limit",
                             "usage limit", "billing", "payment"}) {
    if (has(m, marker)) return true;
  }
  return false;
}

// Gemini: a QuotaFailure whose violated quota is per day does not pass
// within a run; RetryInfo's retryDelay ("38s", "1.5s") is the wait it wants.
bool gemini_daily_quota(const nlohmann::json& body) {
  if (!body.is_object() || !body.contains("error")) return false;
  for (const auto& d : body["error"].value("details", nlohmann::json::array())) {
    if (d.value("@type", "").find("QuotaFailure") == std::string::npos) continue;
    for (const auto& v : d.value("violations", nlohmann::json::array())) {
      const std::string id = lower(v.value("quotaId", "") + " " + v.value("quotaMetric", ""));
      if (has(id, "perday") || has(id, "per_day") || has(id, "daily")) return true;
    }
  }
  return false;
}

std::optional<std::chrono::milliseconds> gemini_retry_delay(const nlohmann::json& body) {
  if (!body.is_object() || !body.contains("error")) return std::nullopt;
  for (const auto& d : body["error"].value("details", nlohmann::json::array())) {
    if (d.value("@type", "").find("RetryInfo") == std::string::npos) continue;
    if (auto ms = parse_go_duration(d.value("retryDelay", ""))) return std::min(*ms, kMaxRequestedDelay);
  }
  return std::nullopt;
}

}  // namespace

const char* error_class_name(ErrorClass c) {
  switch (c) {
    case ErrorClass::kTransient: return "transient";
    case ErrorClass::kQuota: return "quota";
    case ErrorClass::kContextOverflow: return "context_overflow";
    case ErrorClass::kAuth: return "auth";
    case ErrorClass::kModel: return "model";
    case ErrorClass::kBadRequest: return "bad_request";
    case ErrorClass::kContentPolicy: return "content_policy";
    case ErrorClass::kServerRefused: return "server_refused";
  }
  return "?";
}

std::optional<std::chrono::milliseconds> parse_go_duration(const std::string& text) {
  if (text.empty()) return std::nullopt;
  double total_ms = 0;
  std::size_t i = 0;
  while (i < text.size()) {
    const char* start = text.c_str() + i;
    char* end = nullptr;
    const double value = std::strtod(start, &end);
    if (end == start || !std::isfinite(value) || value < 0) return std::nullopt;
    i += static_cast<std::size_t>(end - start);
    std::string unit;
    while (i < text.size() && std::isalpha(static_cast<unsigned char>(text[i]))) unit += text[i++];
    if (unit == "h") total_ms += value * 3600e3;
    else if (unit == "m") total_ms += value * 60e3;
    else if (unit == "s") total_ms += value * 1e3;
    else if (unit == "ms") total_ms += value;
    else if (unit == "us" || unit == "µs") total_ms += value * 1e-3;
    else return std::nullopt;
  }
  return std::chrono::milliseconds(static_cast<long long>(std::ceil(total_ms)));
}

ErrorReading classify_error(const std::string& kind, const HttpResponse& response, const std::string& server_message,
                            std::chrono::system_clock::time_point now) {
  ErrorReading r;
  if (!response.received()) return r;  // network error or timeout: transient
  const long status = response.status;
  const nlohmann::json body = parse_error_body(response.body);
  const std::string code = error_field(body, "code"), type = error_field(body, "type");
  r.retry_delay = requested_retry_delay(response, now);

  // Gemini words its per-minute limits "You exceeded your current quota"
  // too: there only a per-day QuotaFailure is one (below).
  if (status == 402 || code == "insufficient_quota" || type == "insufficient_quota" ||
      ((status == 400 || status == 403 || (status == 429 && kind != "gemini")) && billing(server_message))) {
    r.error_class = ErrorClass::kQuota;
    return r;
  }
  if (status == 413 || ((status == 400 || status == 422) && context_overflow(server_message, code))) {
    r.error_class = ErrorClass::kContextOverflow;
    return r;
  }
  if (kind == "gemini" && status == 429) {
    if (gemini_daily_quota(body)) {
      r.error_class = ErrorClass::kQuota;
      return r;
    }
    if (!r.retry_delay) r.retry_delay = gemini_retry_delay(body);
  }
  if (kind.rfind("openai", 0) == 0 && status == 429 && !r.retry_delay) {  // openai, openai_responses
    // The later of the two resets is when both limits allow the call.
    std::optional<std::chrono::milliseconds> reset;
    for (const char* h : {"x-ratelimit-reset-requests", "x-ratelimit-reset-tokens"}) {
      if (auto v = response.header(h)) {
        if (auto ms = parse_go_duration(*v)) reset = std::max(reset.value_or(std::chrono::milliseconds(0)), *ms);
      }
    }
    if (reset) r.retry_delay = std::min(*reset, kMaxRequestedDelay);
  }
  if (code == "content_policy_violation" || code == "content_filter" || type == "content_filter") {
    r.error_class = ErrorClass::kContentPolicy;
    return r;
  }
  const auto should_retry = response.header("x-should-retry");
  if (should_retry && lower(*should_retry) == "true") return r;
  if (status == 408 || status == 409 || status == 429 || status >= 500) {
    if (should_retry && lower(*should_retry) == "false") r.error_class = ErrorClass::kServerRefused;
    return r;
  }
  if (status == 401 || status == 403) {
    r.error_class = ErrorClass::kAuth;
  } else if (status == 404) {
    r.error_class = ErrorClass::kModel;
  } else {
    r.error_class = ErrorClass::kBadRequest;
  }
  return r;
}

}  // namespace kloop
