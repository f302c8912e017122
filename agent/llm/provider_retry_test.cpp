// What a user sees when a provider misbehaves: rate limits and outages are
// waited out, bad keys and unknown models stop at once with a message that
// says what to fix, and a key never shows up in any of it.
#include <gtest/gtest.h>

#include <thread>

#include "agent/llm/provider_factories.h"
#include "tests/support/fake_http_server.h"
#include "tests/support/provider_test_support.h"

namespace kloop {
namespace {

using namespace std::chrono_literals;
using test_support::FakeHttpServer;
using test_support::ScopedEnv;
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

class ProviderRetryTest : public ::testing::Test {
 protected:
  ProviderConfig config(const std::string& kind) {
    ProviderConfig c;
    c.kind = kind;
    c.model = kind == "anthropic" ? "claude-test" : "gpt-test";
    c.base_url = server_.base_url();
    c.api_key_env = kKeyEnv;
    c.max_retries = 3;
    c.initial_backoff = 1000ms;
    c.max_backoff = 4000ms;
    c.connect_timeout = 2000ms;
    c.total_timeout = 5000ms;
    return c;
  }
  std::unique_ptr<LlmProvider> provider(const ProviderConfig& c) { return make_provider(c, {sleeper_.function()}); }
  static GenerationRequest hello() {
    GenerationRequest r;
    r.messages = {{"user", "hello"}};
    return r;
  }

  ScopedEnv key_{kKeyEnv, kKey};
  FakeHttpServer server_;
  SleepRecorder sleeper_;
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

// Not retried (it cannot succeed) but not fatal either: only this chain ends.
TEST_F(ProviderRetryTest, ContextLengthFailsTheAttemptWithAHint) {
  server_.enqueue_json(400, R"({"error": {"message": "This model's maximum context length is 8192 tokens.",
                                          "code": "context_length_exceeded"}})");
  try {
    provider(config("openai"))->generate(hello());
    FAIL() << "expected ProviderError";
  } catch (const FatalProviderError& e) {
    FAIL() << "a context overflow must not stop the whole run: " << e.what();
  } catch (const ProviderError& e) {
    EXPECT_TRUE(contains(e.what(), "context window")) << e.what();
  }
  EXPECT_EQ(server_.requests().size(), 1u);
}

TEST_F(ProviderRetryTest, ConnectionRefusedIsRetriedThenGivesUp) {
  ProviderConfig c = config("openai");
  c.base_url = "http://127.0.0.1:" + std::to_string(FakeHttpServer::unused_port());
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

TEST_F(ProviderRetryTest, SlowResponseHitsTotalTimeoutAndIsRetried) {
  ProviderConfig c = config("openai");
  c.total_timeout = 300ms;
  server_.enqueue({200, {}, kOpenAiAnswer, 3000ms});  // longer than the timeout
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
    EXPECT_STREQ(e.what(), "provider.api_key_env: environment variable KLOOP_TEST_SURELY_UNSET_KEY is not set");
  }
}

}  // namespace
}  // namespace kloop
