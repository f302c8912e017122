// What a user sees when a provider misbehaves: rate limits and outages are
// waited out, bad keys and unknown models stop at once with a message that
// says what to fix, and a key never shows up in any of it.
#include <gtest/gtest.h>

#include <thread>

#include "agent/llm/provider_factories.h"
#include "tests/support/provider_wire_test.h"

namespace kloop {
namespace {

using namespace std::chrono_literals;
using test_support::SleepRecorder;

constexpr char kKeyEnv[] = "KLOOP_TEST_RETRY_KEY";
constexpr char kKey[] = "sk-test-retry-5ecret-3333";

const char kOpenAiAnswer[] = R"({"choices": [{"finish_reason": "stop", "message": {"content": "ok"}}],
                                 "usage": {"prompt_tokens": 10, "completion_tokens": 5}})";
const char kAnthropicAnswer[] = R"({"content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
                                    "usage": {"input_tokens": 10, "output_tokens": 5}})";

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

class ProviderRetryTest : public test_support::ProviderWireTest {
 protected:
  ProviderRetryTest() : ProviderWireTest(kKeyEnv, kKey) {}
  ProviderConfig config(const std::string& kind) const {
    ProviderConfig c = ProviderWireTest::config(kind);
    c.max_retries = 3;
    c.initial_backoff = 1000ms;
    c.max_backoff = 4000ms;
    c.connect_timeout = 2000ms;
    c.total_timeout = 5000ms;
    return c;
  }
  std::unique_ptr<LlmProvider> provider(const ProviderConfig& c) {
    return make_provider(c, {sleeper_.function(), [this](const std::string& line) { notes_.push_back(line); }});
  }
  static GenerationRequest hello() {
    GenerationRequest r;
    r.messages = {{"user", "hello"}};
    return r;
  }

  SleepRecorder sleeper_;
  std::vector<std::string> notes_;  // what the console would show
};

TEST_F(ProviderRetryTest, RateLimitWaitsForRetryAfterThenSucceeds) {
  server_.enqueue({429, {{"Retry-After", "7"}}, R"({"error": {"message": "rate limited"}})", 0ms});
  server_.enqueue_json(200, kOpenAiAnswer);
  GenerationResult r = provider(config("openai"))->generate(hello());
  EXPECT_EQ(r.text, "ok");
  EXPECT_EQ(r.attempts, 2);
  EXPECT_EQ(server_.requests().size(), 2u);
  ASSERT_EQ(sleeper_.sleeps().size(), 1u);
  EXPECT_EQ(sleeper_.sleeps()[0], 7000ms);
}

TEST_F(ProviderRetryTest, ServiceUnavailableTwiceThenSuccessBacksOffWithinCap) {
  server_.enqueue_json(503, R"({"error": {"message": "overloaded"}})");
  server_.enqueue_json(503, R"({"error": {"message": "overloaded"}})");
  server_.enqueue_json(200, kOpenAiAnswer);
  GenerationResult r = provider(config("openai"))->generate(hello());
  EXPECT_EQ(r.attempts, 3);
  EXPECT_EQ(server_.requests().size(), 3u);
  auto sleeps = sleeper_.sleeps();
  ASSERT_EQ(sleeps.size(), 2u);
  EXPECT_LE(sleeps[0], 1000ms);  // full jitter under initial_backoff * 2^0
  EXPECT_LE(sleeps[1], 2000ms);  // ... and under initial_backoff * 2^1
  // Every retry sends the same request.
  EXPECT_EQ(server_.requests()[0].body, server_.requests()[2].body);
}

TEST_F(ProviderRetryTest, AnthropicOverloaded529IsRetried) {
  server_.enqueue_json(529, R"({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})");
  server_.enqueue_json(200, kAnthropicAnswer);
  GenerationResult r = provider(config("anthropic"))->generate(hello());
  EXPECT_EQ(r.attempts, 2);
  EXPECT_EQ(r.text, "ok");
}

TEST_F(ProviderRetryTest, UnauthorizedIsFatalAtOnceAndNamesTheVariableNotTheKey) {
  // Servers sometimes echo the key they rejected; it must not reach the user.
  server_.enqueue_json(401, std::string(R"({"type": "error", "error": {"type": "authentication_error",
      "message": "invalid x-api-key: )") +
                                kKey + R"("}})");
  try {
    provider(config("anthropic"))->generate(hello());
    FAIL() << "expected FatalProviderError";
  } catch (const FatalProviderError& e) {
    std::string m = e.what();
    EXPECT_TRUE(contains(m, "401 from anthropic")) << m;
    EXPECT_TRUE(contains(m, "claude-test")) << m;
    EXPECT_TRUE(contains(m, std::string("$") + kKeyEnv)) << m;
    EXPECT_FALSE(contains(m, kKey)) << m;
  }
  EXPECT_EQ(server_.requests().size(), 1u);
  EXPECT_TRUE(sleeper_.sleeps().empty());
}

TEST_F(ProviderRetryTest, UnknownModelIsFatal) {
  server_.enqueue_json(404,
                       R"({"error": {"message": "The model `gpt-test` does not exist", "code": "model_not_found"}})");
  try {
    provider(config("openai"))->generate(hello());
    FAIL() << "expected FatalProviderError";
  } catch (const FatalProviderError& e) {
    std::string m = e.what();
    EXPECT_TRUE(contains(m, "404 from openai")) << m;
    EXPECT_TRUE(contains(m, "provider.model")) << m;
    EXPECT_TRUE(contains(m, "does not exist")) << m;  // the server's own words help too
  }
  EXPECT_EQ(server_.requests().size(), 1u);
}

// Not retried (it cannot succeed) but not fatal either: only this chain
// ends (the turn loop stores the outcome).
TEST_F(ProviderRetryTest, ContextLengthFailsTheAttemptWithAHint) {
  server_.enqueue_json(400, R"({"error": {"message": "This model's maximum context length is 8192 tokens.",
                                          "code": "context_length_exceeded"}})");
  try {
    provider(config("openai"))->generate(hello());
    FAIL() << "expected ContextOverflowError";
  } catch (const FatalProviderError& e) {
    FAIL() << "a context overflow must not stop the whole run: " << e.what();
  } catch (const ContextOverflowError& e) {
    EXPECT_TRUE(contains(e.what(), "context window")) << e.what();
    EXPECT_EQ(e.error_class(), "context_overflow");
    ASSERT_EQ(e.calls().size(), 1u);
    EXPECT_EQ(e.calls()[0]["status"], 400);
  }
  EXPECT_EQ(server_.requests().size(), 1u);
}

// Anthropic's and llama.cpp's wordings end the chain too (they stopped the
// whole run, again at every rerun).
TEST_F(ProviderRetryTest, AnthropicAndLlamaCppContextOverflowsEndTheChain) {
  // https://docs.anthropic.com/en/api/errors (invalid_request_error)
  server_.enqueue_json(400, R"({"type": "error", "error": {"type": "invalid_request_error",
      "message": "input length and `max_tokens` exceed context limit: 198000 + 16000 > 200000, decrease input length or `max_tokens` and try again"}})");
  EXPECT_THROW(provider(config("anthropic"))->generate(hello()), ContextOverflowError);
  // llama.cpp server: exceed_context_size_error
  server_.enqueue_json(400, R"({"error": {"code": 400, "message": "the request exceeds the available context size, try increasing it",
      "type": "exceed_context_size_error", "n_prompt_tokens": 9000, "n_ctx": 8192}})");
  EXPECT_THROW(provider(config("openai"))->generate(hello()), ContextOverflowError);
  EXPECT_EQ(server_.requests().size(), 2u);
}

// A 429 that is a quota, spend limit or billing problem stops the run at
// once (every chain would fail after its retries, and every later one).
TEST_F(ProviderRetryTest, QuotaStopsTheRunWithoutRetries) {
  // https://platform.openai.com/docs/guides/error-codes (429 insufficient_quota)
  server_.enqueue_json(429, R"({"error": {"message": "You exceeded your current quota, please check your plan and billing details.",
      "type": "insufficient_quota", "param": null, "code": "insufficient_quota"}})");
  try {
    provider(config("openai"))->generate(hello());
    FAIL() << "expected FatalProviderError";
  } catch (const FatalProviderError& e) {
    EXPECT_EQ(e.error_class(), "quota");
    EXPECT_TRUE(contains(e.what(), "exceeded your current quota")) << e.what();
    EXPECT_TRUE(contains(e.what(), "the run stops")) << e.what();
  }
  EXPECT_EQ(server_.requests().size(), 1u);
  EXPECT_TRUE(sleeper_.sleeps().empty());
}

// Gemini puts its delay in the body (google.rpc.RetryInfo), not a header;
// the wait is said on the console.
TEST_F(ProviderRetryTest, GeminiRetryDelayInTheBodyIsWaitedFor) {
  // https://ai.google.dev/gemini-api/docs/troubleshooting (429 RESOURCE_EXHAUSTED)
  server_.enqueue_json(429, R"({"error": {"code": 429, "message": "You exceeded your current quota.", "status": "RESOURCE_EXHAUSTED",
      "details": [{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [
                     {"quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"}]},
                  {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "38s"}]}})");
  server_.enqueue_json(200, R"({"candidates": [{"content": {"parts": [{"text": "ok"}]}, "finishReason": "STOP"}],
      "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 2}})");
  GenerationResult r = provider(config("gemini"))->generate(hello());
  EXPECT_EQ(r.text, "ok");
  ASSERT_EQ(sleeper_.sleeps().size(), 1u);
  EXPECT_EQ(sleeper_.sleeps()[0], 38000ms);
  ASSERT_EQ(notes_.size(), 1u);
  EXPECT_TRUE(contains(notes_[0], "attempt 2 of 4 in 38.0 s (the provider's delay)")) << notes_[0];
  EXPECT_FALSE(contains(notes_[0], kKey));
}

// Gemini may send its error as a one-element JSON array (as its streaming
// endpoint does): its RetryInfo delay is still waited for, and a per-day
// quota still stops the run.
TEST_F(ProviderRetryTest, GeminiErrorsAsAOneElementArrayAreRead) {
  // https://ai.google.dev/gemini-api/docs/troubleshooting (429 RESOURCE_EXHAUSTED), in an array
  server_.enqueue_json(429, R"([{"error": {"code": 429, "message": "Resource has been exhausted (e.g. check quota).", "status": "RESOURCE_EXHAUSTED",
      "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "21s"}]}}])");
  server_.enqueue_json(200, R"({"candidates": [{"content": {"parts": [{"text": "ok"}]}, "finishReason": "STOP"}],
      "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 2}})");
  GenerationResult r = provider(config("gemini"))->generate(hello());
  EXPECT_EQ(r.text, "ok");
  ASSERT_EQ(sleeper_.sleeps().size(), 1u);
  EXPECT_EQ(sleeper_.sleeps()[0], 21000ms);
  EXPECT_NE(r.calls[0]["message"].get<std::string>().find("Resource has been exhausted"), std::string::npos) << r.calls[0];
  server_.enqueue_json(429, R"([{"error": {"code": 429, "message": "You exceeded your current quota.", "status": "RESOURCE_EXHAUSTED",
      "details": [{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [
                     {"quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier"}]}]}}])");
  EXPECT_THROW(provider(config("gemini"))->generate(hello()), FatalProviderError);
  EXPECT_EQ(server_.requests().size(), 3u);
}

// A server's x-should-retry: false ends the attempt without retries, and
// without stopping the run.
TEST_F(ProviderRetryTest, ServerSaysDoNotRetry) {
  server_.enqueue({500, {{"x-should-retry", "false"}}, R"({"error": {"message": "internal"}})", 0ms});
  try {
    provider(config("openai"))->generate(hello());
    FAIL() << "expected ProviderError";
  } catch (const FatalProviderError& e) {
    FAIL() << e.what();
  } catch (const ProviderError& e) {
    EXPECT_EQ(e.error_class(), "server_refused");
  }
  EXPECT_EQ(server_.requests().size(), 1u);
  server_.enqueue_json(408, R"({"error": {"message": "timeout"}})");
  server_.enqueue_json(409, R"({"error": {"message": "conflict"}})");
  server_.enqueue_json(200, kOpenAiAnswer);
  EXPECT_EQ(provider(config("openai"))->generate(hello()).attempts, 3);  // 408 and 409 pass
}

// A refusal by the provider's safety system is the attempt's outcome.
TEST_F(ProviderRetryTest, ContentPolicyIsAnOutcomeNotAnError) {
  server_.enqueue_json(400, R"({"error": {"message": "Your request was rejected as a result of our safety system.",
      "type": "invalid_request_error", "code": "content_policy_violation"}})");
  GenerationResult r = provider(config("openai"))->generate(hello());
  EXPECT_EQ(r.finish_reason, "content_filter");
  EXPECT_TRUE(contains(r.refusal, "safety system")) << r.refusal;
  EXPECT_TRUE(r.text.empty());
}

// Every attempt leaves a record: status, request id, error class, the wait
// before the next one, and the tokens and cost of the one that answered.
TEST_F(ProviderRetryTest, EveryAttemptIsRecorded) {
  server_.enqueue({503, {{"x-request-id", "req_1"}}, R"({"error": {"message": "overloaded"}})", 0ms});
  server_.enqueue({200, {{"x-request-id", "req_2"}}, kOpenAiAnswer, 0ms});
  ProviderConfig c = config("openai");
  c.prices = {2.0, 8.0, std::nullopt, std::nullopt};
  GenerationResult r = provider(c)->generate(hello());
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0]["status"], 503);
  EXPECT_EQ(r.calls[0]["request_id"], "req_1");
  EXPECT_EQ(r.calls[0]["error_class"], "transient");
  EXPECT_TRUE(r.calls[0].contains("retry_delay_s"));
  EXPECT_EQ(r.calls[1]["status"], 200);
  EXPECT_EQ(r.calls[1]["request_id"], "req_2");
  EXPECT_EQ(r.calls[1]["tokens"]["input"], 10);
  EXPECT_DOUBLE_EQ(r.calls[1]["cost_usd"].get<double>(), (10 * 2.0 + 5 * 8.0) / 1e6);
}

// Prompt caching: cached input and cache writes at their own prices.
TEST_F(ProviderRetryTest, CachedTokensAreCountedAndPriced) {
  // https://platform.openai.com/docs/guides/prompt-caching: cached_tokens are part of prompt_tokens
  server_.enqueue_json(200, R"({"choices": [{"finish_reason": "stop", "message": {"content": "ok"}}],
      "usage": {"prompt_tokens": 1000, "completion_tokens": 100, "prompt_tokens_details": {"cached_tokens": 800}}})");
  ProviderConfig c = config("openai");
  c.prices = {2.0, 8.0, 0.5, std::nullopt};
  GenerationResult r = provider(c)->generate(hello());
  EXPECT_EQ(r.input_tokens, 1000);
  EXPECT_EQ(r.cached_input_tokens, 800);
  EXPECT_DOUBLE_EQ(r.cost_usd, (200 * 2.0 + 800 * 0.5 + 100 * 8.0) / 1e6);
  // https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching: cache reads and
  // writes are reported beside input_tokens
  server_.enqueue_json(200, R"({"content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
      "usage": {"input_tokens": 100, "cache_read_input_tokens": 900, "cache_creation_input_tokens": 50, "output_tokens": 10,
                "output_tokens_details": {"thinking_tokens": 6}}})");
  ProviderConfig a = config("anthropic");
  a.prices = {3.0, 15.0, 0.3, 3.75};
  GenerationResult ra = provider(a)->generate(hello());
  EXPECT_EQ(ra.input_tokens, 1050);
  EXPECT_EQ(ra.cached_input_tokens, 900);
  EXPECT_EQ(ra.cache_write_tokens, 50);
  EXPECT_EQ(ra.reasoning_tokens, 6);  // a part of output_tokens
  EXPECT_DOUBLE_EQ(ra.cost_usd, (100 * 3.0 + 900 * 0.3 + 50 * 3.75 + 10 * 15.0) / 1e6);
  // Without cache prices, cached tokens cost what input costs.
  server_.enqueue_json(200, R"({"candidates": [{"content": {"parts": [{"text": "ok"}]}, "finishReason": "STOP"}],
      "usageMetadata": {"promptTokenCount": 400, "cachedContentTokenCount": 300, "candidatesTokenCount": 2}})");
  ProviderConfig g = config("gemini");
  g.prices = {1.0, 10.0, std::nullopt, std::nullopt};
  GenerationResult rg = provider(g)->generate(hello());
  EXPECT_EQ(rg.cached_input_tokens, 300);
  EXPECT_DOUBLE_EQ(rg.cost_usd, (400 * 1.0 + 2 * 10.0) / 1e6);
}

// Servers without a reasoning parser put the reasoning in content; OpenAI
// says a refusal in message.refusal.
TEST_F(ProviderRetryTest, ThinkBlocksAndRefusalsAreSplitOut) {
  server_.enqueue_json(200, R"({"choices": [{"finish_reason": "stop", "message": {"content": "<think>plan: one kernel</think>\n```cpp\nanswer\n```"}}]})");
  GenerationResult r = provider(config("openai"))->generate(hello());
  EXPECT_EQ(r.reasoning, "plan: one kernel");
  EXPECT_EQ(r.text, "\n```cpp\nanswer\n```");
  // Cut inside the block: no answer, so its draft code is not evaluated.
  server_.enqueue_json(200, R"({"choices": [{"finish_reason": "length", "message": {"content": "<think>draft ```cpp\nx\n```"}}]})");
  GenerationResult cut = provider(config("openai"))->generate(hello());
  EXPECT_TRUE(cut.text.empty());
  EXPECT_EQ(cut.finish_reason, "length");
  server_.enqueue_json(200, R"({"choices": [{"finish_reason": "stop", "message": {"content": null, "refusal": "I can't help with that."}}]})");
  GenerationResult no = provider(config("openai"))->generate(hello());
  EXPECT_EQ(no.refusal, "I can't help with that.");
  EXPECT_EQ(no.finish_reason, "content_filter");
}

TEST_F(ProviderRetryTest, ConnectionRefusedIsRetriedThenGivesUp) {
  ProviderConfig c = config("openai");
  c.base_url = "http://127.0.0.1:" + std::to_string(test_support::FakeHttpServer::unused_port());
  c.max_retries = 2;
  try {
    provider(c)->generate(hello());
    FAIL() << "expected ProviderError";
  } catch (const ProviderError& e) {
    std::string m = e.what();
    EXPECT_TRUE(contains(m, "gave up after 3 attempts")) << m;
    EXPECT_TRUE(contains(m, "network error")) << m;
    EXPECT_FALSE(contains(m, kKey)) << m;
  }
  EXPECT_EQ(sleeper_.sleeps().size(), 2u);
}

// A request that reached the server and then timed out may have been
// generating: a transport fault, whose resend may be billed again, so it is
// sent again only as often as provider.retry.resend_broken_streams says.
TEST_F(ProviderRetryTest, SlowResponseHitsTotalTimeoutAndIsResentOnlyAsTheConfigSays) {
  ProviderConfig c = config("openai");
  c.total_timeout = 300ms;
  c.stream = false;
  c.resend_broken_streams = 0;
  server_.enqueue({200, {}, kOpenAiAnswer, 3000ms});  // longer than the timeout
  try {
    provider(c)->generate(hello());
    FAIL() << "expected ProviderError";
  } catch (const FatalProviderError& e) {
    FAIL() << e.what();
  } catch (const ProviderError& e) {
    EXPECT_EQ(e.error_class(), "transport_fault");
    EXPECT_TRUE(contains(e.what(), "not sent again")) << e.what();
    ASSERT_EQ(e.calls().size(), 1u);
    EXPECT_EQ(e.calls()[0]["transport_fault"], "timeout_after_send");
    EXPECT_EQ(e.calls()[0]["billed"], true) << "it may have been billed";
  }
  EXPECT_EQ(server_.requests().size(), 1u);
  c.resend_broken_streams = 1;
  server_.enqueue({200, {}, kOpenAiAnswer, 3000ms});
  server_.enqueue_json(200, kOpenAiAnswer);
  GenerationResult r = provider(c)->generate(hello());
  EXPECT_EQ(r.attempts, 2) << "the slow answer was cut off and the request retried";
  EXPECT_EQ(r.text, "ok");
  // Latency is the successful attempt's only; the total counts the timed-out one too.
  EXPECT_GT(r.total_seconds, r.latency_seconds);
}

TEST_F(ProviderRetryTest, PersistentOutageGivesUpWithTheLastError) {
  ProviderConfig c = config("openai");
  c.max_retries = 2;
  for (int i = 0; i < 3; ++i) server_.enqueue_json(502, R"({"error": {"message": "upstream down"}})");
  try {
    provider(c)->generate(hello());
    FAIL() << "expected ProviderError";
  } catch (const FatalProviderError&) {
    FAIL() << "an outage is not fatal";
  } catch (const ProviderError& e) {
    EXPECT_TRUE(contains(e.what(), "HTTP 502: upstream down")) << e.what();
  }
  EXPECT_EQ(server_.requests().size(), 3u);
}

TEST_F(ProviderRetryTest, UnreadableSuccessBodyIsRetried) {
  server_.enqueue({200, {{"Content-Type", "text/html"}}, "<html>gateway hiccup</html>", 0ms});
  server_.enqueue_json(200, kOpenAiAnswer);
  GenerationResult r = provider(config("openai"))->generate(hello());
  EXPECT_EQ(r.attempts, 2);
}

TEST_F(ProviderRetryTest, ConcurrencyLimitCapsSimultaneousRequests) {
  ProviderConfig c = config("openai");
  c.concurrency = 2;
  constexpr int kThreads = 6;
  for (int i = 0; i < kThreads; ++i) server_.enqueue({200, {}, kOpenAiAnswer, 100ms});
  auto p = provider(c);
  std::vector<std::thread> threads;
  std::atomic<int> answered{0};
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&] {
      if (p->generate(hello()).text == "ok") ++answered;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(answered, kThreads);
  EXPECT_EQ(server_.max_in_flight(), 2);
}

TEST_F(ProviderRetryTest, UnsetKeyVariableIsAConfigError) {
  ProviderConfig c = config("openai");
  c.api_key_env = "KLOOP_TEST_SURELY_UNSET_KEY";
  unsetenv("KLOOP_TEST_SURELY_UNSET_KEY");
  try {
    make_provider(c);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "field 'provider.api_key_env': environment variable KLOOP_TEST_SURELY_UNSET_KEY is not set");
  }
}

}  // namespace
}  // namespace kloop
