// What a failed provider call means for the run, one table per provider
// kind, from their documentation (error_class.cpp cites the pages):
//
//   transient        retry, after the provider's delay when it gives one
//                    (Retry-After, retry-after-ms, OpenAI's x-ratelimit-reset-*,
//                    Gemini's RetryInfo in the body), else with backoff
//   quota            quota, spend limit or billing: stop the run with the
//                    provider's message (every later call would fail too)
//   context_overflow the conversation does not fit: end that chain and store
//                    the outcome, so a rerun does not send it again
//   auth, model      bad key or permission, unknown model or endpoint: stop
//   bad_request      the request was refused as malformed: stop
//   content_policy   refused by the provider's safety system: an outcome of
//                    that attempt, not an error
//   server_refused   a 5xx the server marked x-should-retry: false: the
//                    attempt fails, the run goes on
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "agent/llm/http_client.h"

namespace kloop {

enum class ErrorClass { kTransient, kQuota, kContextOverflow, kAuth, kModel, kBadRequest, kContentPolicy, kServerRefused };
const char* error_class_name(ErrorClass c);

struct ErrorReading {
  ErrorClass error_class = ErrorClass::kTransient;
  std::optional<std::chrono::milliseconds> retry_delay;  // the provider's own, when it gave one
};

// A non-2xx response (or status 0: no response) of provider `kind`
// (openai, anthropic, gemini). `server_message` is the human part of the
// body (server_error_message).
ErrorReading classify_error(const std::string& kind, const HttpResponse& response, const std::string& server_message,
                            std::chrono::system_clock::time_point now);

// Go-style durations as OpenAI's x-ratelimit-reset-* headers send them
// ("20ms", "1s", "6m0s", "1h2m3.5s"); nullopt when unreadable.
std::optional<std::chrono::milliseconds> parse_go_duration(const std::string& text);

}  // namespace kloop
