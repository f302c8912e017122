// The error tables on bodies written in each provider's documented format
// (the page beside each); what the run does with each class is tested in
// provider_retry_test.cpp and the turn loop's tests.
#include "agent/llm/error_class.h"

#include <gtest/gtest.h>

#include "agent/llm/retry_policy.h"

namespace kloop {
namespace {

using namespace std::chrono_literals;

HttpResponse response(long status, const std::string& body, std::map<std::string, std::string> headers = {}) {
  HttpResponse r;
  r.status = status;
  r.body = body;
  r.headers = std::move(headers);
  return r;
}

ErrorReading read(const std::string& kind, const HttpResponse& r) {
  return classify_error(kind, r, server_error_message(r.body), std::chrono::system_clock::now());
}

ErrorClass cls(const std::string& kind, long status, const std::string& body,
               std::map<std::string, std::string> headers = {}) {
  return read(kind, response(status, body, std::move(headers))).error_class;
}

TEST(ErrorClassTest, OpenAi) {
  // https://platform.openai.com/docs/guides/error-codes: 429 "You exceeded
  // your current quota" (insufficient_quota) vs "Rate limit reached".
  EXPECT_EQ(cls("openai", 429,
                R"j({"error": {"message": "You exceeded your current quota, please check your plan and billing details.",
                    "type": "insufficient_quota", "param": null, "code": "insufficient_quota"}})j"),
            ErrorClass::kQuota);
  const HttpResponse limited =
      response(429, R"j({"error": {"message": "Rate limit reached for gpt-x on tokens per min (TPM)", "type": "tokens",
                        "code": "rate_limit_exceeded"}})j",
               {{"x-ratelimit-reset-requests", "1s"}, {"x-ratelimit-reset-tokens", "6m0s"}});
  const ErrorReading r = read("openai", limited);
  EXPECT_EQ(r.error_class, ErrorClass::kTransient);
  ASSERT_TRUE(r.retry_delay.has_value());
  EXPECT_EQ(*r.retry_delay, 360000ms);  // the later reset
  // https://platform.openai.com/docs/guides/error-codes: context_length_exceeded
  EXPECT_EQ(cls("openai", 400,
                R"j({"error": {"message": "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.",
                    "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}})j"),
            ErrorClass::kContextOverflow);
  EXPECT_EQ(cls("openai", 400,
                R"j({"error": {"message": "Your request was rejected as a result of our safety system.",
                    "type": "invalid_request_error", "code": "content_policy_violation"}})j"),
            ErrorClass::kContentPolicy);
  EXPECT_EQ(cls("openai", 401, R"j({"error": {"message": "Incorrect API key provided", "code": "invalid_api_key"}})j"),
            ErrorClass::kAuth);
  EXPECT_EQ(cls("openai", 404, R"j({"error": {"message": "The model `gpt-x` does not exist", "code": "model_not_found"}})j"),
            ErrorClass::kModel);
  // The SDKs' x-should-retry: the server's word on a 5xx, and on a 4xx.
  EXPECT_EQ(cls("openai", 500, R"j({"error": {"message": "boom"}})j", {{"x-should-retry", "false"}}),
            ErrorClass::kServerRefused);
  EXPECT_EQ(cls("openai", 400, R"j({"error": {"message": "try again"}})j", {{"x-should-retry", "true"}}),
            ErrorClass::kTransient);
  EXPECT_EQ(cls("openai", 408, R"j({"error": {"message": "Request timeout"}})j"), ErrorClass::kTransient);
  EXPECT_EQ(cls("openai", 409, R"j({"error": {"message": "conflict"}})j"), ErrorClass::kTransient);
}

TEST(ErrorClassTest, Anthropic) {
  // https://docs.anthropic.com/en/api/errors: {"type": "error", "error": {"type": ..., "message": ...}}
  EXPECT_EQ(cls("anthropic", 400,
                R"j({"type": "error", "error": {"type": "invalid_request_error",
                    "message": "input length and `max_tokens` exceed context limit: 198000 + 16000 > 200000, decrease input length or `max_tokens` and try again"}})j"),
            ErrorClass::kContextOverflow);
  EXPECT_EQ(cls("anthropic", 400,
                R"j({"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long: 210000 tokens > 200000 maximum"}})j"),
            ErrorClass::kContextOverflow);
  EXPECT_EQ(cls("anthropic", 400,
                R"j({"type": "error", "error": {"type": "invalid_request_error",
                    "message": "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."}})j"),
            ErrorClass::kQuota);
  EXPECT_EQ(cls("anthropic", 429,
                R"j({"type": "error", "error": {"type": "rate_limit_error", "message": "You have reached your specified workspace API usage limits."}})j"),
            ErrorClass::kQuota);
  EXPECT_EQ(cls("anthropic", 429,
                R"j({"type": "error", "error": {"type": "rate_limit_error", "message": "Number of request tokens has exceeded your per-minute rate limit"}})j"),
            ErrorClass::kTransient);
  EXPECT_EQ(cls("anthropic", 529, R"j({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})j"),
            ErrorClass::kTransient);
  EXPECT_EQ(cls("anthropic", 413, R"j({"type": "error", "error": {"type": "request_too_large", "message": "Request exceeds the maximum allowed number of bytes."}})j"),
            ErrorClass::kContextOverflow);
}

TEST(ErrorClassTest, Gemini) {
  // https://ai.google.dev/gemini-api/docs/troubleshooting: 429 RESOURCE_EXHAUSTED
  // with google.rpc.QuotaFailure and google.rpc.RetryInfo in error.details.
  const std::string per_minute = R"j({"error": {"code": 429, "message": "You exceeded your current quota.",
    "status": "RESOURCE_EXHAUSTED", "details": [
      {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [
        {"quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
         "quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"}]},
      {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "38s"}]}})j";
  const ErrorReading r = read("gemini", response(429, per_minute));
  EXPECT_EQ(r.error_class, ErrorClass::kTransient);
  ASSERT_TRUE(r.retry_delay.has_value());
  EXPECT_EQ(*r.retry_delay, 38000ms);
  const std::string per_day = R"j({"error": {"code": 429, "message": "You exceeded your current quota.",
    "status": "RESOURCE_EXHAUSTED", "details": [
      {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [
        {"quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
         "quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier"}]},
      {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "12h1s"}]}})j";
  EXPECT_EQ(cls("gemini", 429, per_day), ErrorClass::kQuota);
  EXPECT_EQ(cls("gemini", 400, R"j({"error": {"code": 400, "message": "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).", "status": "INVALID_ARGUMENT"}})j"),
            ErrorClass::kContextOverflow);
  EXPECT_EQ(cls("gemini", 400, R"j({"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.", "status": "INVALID_ARGUMENT"}})j"),
            ErrorClass::kBadRequest);
}

TEST(ErrorClassTest, OpenAiCompatibleServers) {
  // llama.cpp server (tools/server): {"error": {"code": 400, "message": "...", "type": "exceed_context_size_error"}}
  EXPECT_EQ(cls("openai", 400,
                R"j({"error": {"code": 400, "message": "the request exceeds the available context size, try increasing it",
                    "type": "exceed_context_size_error", "n_prompt_tokens": 9000, "n_ctx": 8192}})j"),
            ErrorClass::kContextOverflow);
  // vLLM: {"object": "error", "message": "This model's maximum context length is 32768 tokens..."}
  EXPECT_EQ(cls("openai", 400,
                R"j({"object": "error", "message": "This model's maximum context length is 32768 tokens. However, you requested 40000 tokens.", "type": "BadRequestError", "code": 400})j"),
            ErrorClass::kContextOverflow);
  EXPECT_EQ(read("openai", response(0, "")).error_class, ErrorClass::kTransient);  // no response: network
}

TEST(ErrorClassTest, GoDurations) {
  EXPECT_EQ(parse_go_duration("20ms"), 20ms);
  EXPECT_EQ(parse_go_duration("1s"), 1000ms);
  EXPECT_EQ(parse_go_duration("6m0s"), 360000ms);
  EXPECT_EQ(parse_go_duration("1h2m3.5s"), 3723500ms);
  EXPECT_EQ(parse_go_duration("1.5s"), 1500ms);
  EXPECT_FALSE(parse_go_duration("soon").has_value());
  EXPECT_FALSE(parse_go_duration("").has_value());
}

}  // namespace
}  // namespace kloop
