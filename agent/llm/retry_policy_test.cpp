// Retry decisions and waits, without a server.
#include "agent/llm/retry_policy.h"

#include <gtest/gtest.h>

#include <set>

namespace kloop {
namespace {

using namespace std::chrono_literals;

TEST(RetryPolicyTest, TransientStatusesAreRetriedOthersAreFatal) {
  for (long s : {0L, 408L, 429L, 500L, 502L, 503L, 504L, 529L}) {
    EXPECT_EQ(classify_status(s), StatusClass::kRetry) << s;
  }
  for (long s : {400L, 401L, 403L, 404L, 422L}) EXPECT_EQ(classify_status(s), StatusClass::kFatal) << s;
  EXPECT_EQ(classify_status(200), StatusClass::kSuccess);
}

TEST(RetryPolicyTest, RetryAfterInSecondsOrAsHttpDate) {
  auto now = std::chrono::system_clock::from_time_t(784111777);  // Sun, 06 Nov 1994 08:49:37 GMT
  EXPECT_EQ(parse_retry_after("30", now), 30000ms);
  EXPECT_EQ(parse_retry_after(" 1.5 ", now), 1500ms);
  EXPECT_EQ(parse_retry_after("Sun, 06 Nov 1994 08:50:07 GMT", now), 30000ms);
  EXPECT_EQ(parse_retry_after("Sun, 06 Nov 1994 08:00:00 GMT", now), 0ms);  // already past
  EXPECT_EQ(parse_retry_after("soon", now), std::nullopt);
  EXPECT_EQ(parse_retry_after("-5", now), std::nullopt);
}

TEST(RetryPolicyTest, RetryAfterMsHeaderWinsOverRetryAfter) {
  HttpResponse r;
  r.status = 429;
  r.headers = {{"retry-after", "2"}, {"retry-after-ms", "250"}};
  EXPECT_EQ(requested_retry_delay(r, std::chrono::system_clock::now()), 250ms);
  r.headers.erase("retry-after-ms");
  EXPECT_EQ(requested_retry_delay(r, std::chrono::system_clock::now()), 2000ms);
}

TEST(RetryPolicyTest, FullJitterStaysUnderTheCapAndVaries) {
  RetryPolicy policy(
      10, 1000ms, 5000ms, [](std::chrono::milliseconds) {}, 1234);
  std::set<long long> seen;
  for (int retry = 1; retry <= 8; ++retry) {
    auto cap = std::min(5000ms, 1000ms * (1 << (retry - 1)));
    for (int i = 0; i < 50; ++i) {
      auto d = policy.delay_before_retry(retry, std::nullopt);
      EXPECT_GE(d, 0ms);
      EXPECT_LE(d, cap) << "retry " << retry;
      seen.insert(d.count());
    }
  }
  EXPECT_GT(seen.size(), 100u);                               // jittered, not a fixed schedule
  EXPECT_EQ(policy.delay_before_retry(3, 42000ms), 42000ms);  // the server's request is honoured as is
  EXPECT_EQ(policy.max_attempts(), 11);
}

TEST(RetryPolicyTest, FatalMessagesSayWhatToFix) {
  ProviderIdentity who{"anthropic", "claude-x", "https://api.anthropic.com", "ANTHROPIC_API_KEY"};
  std::string m401 = fatal_status_message(who, 401, "invalid x-api-key");
  EXPECT_NE(m401.find("401 from anthropic"), std::string::npos) << m401;
  EXPECT_NE(m401.find("check the key in $ANTHROPIC_API_KEY"), std::string::npos) << m401;
  who.api_key_env = "";
  std::string no_key = fatal_status_message(who, 401, "");
  EXPECT_NE(no_key.find("set provider.api_key_env"), std::string::npos) << no_key;
  EXPECT_NE(fatal_status_message(who, 403, "").find("may use model 'claude-x'"), std::string::npos);
  EXPECT_NE(fatal_status_message(who, 400, "prompt is too long: 210000 tokens > 200000 maximum").find("context window"),
            std::string::npos);
}

TEST(RetryPolicyTest, ServerErrorMessageFromTheUsualShapes) {
  EXPECT_EQ(server_error_message(R"({"error": {"message": "bad model"}})"), "bad model");
  EXPECT_EQ(server_error_message(R"({"error": "plain"})"), "plain");
  EXPECT_EQ(server_error_message(R"({"object": "error", "message": "vllm says"})"), "vllm says");
  EXPECT_EQ(server_error_message("Bad Gateway\n"), "Bad Gateway");
  EXPECT_LT(server_error_message(std::string(5000, 'x')).size(), 700u);
}

}  // namespace
}  // namespace kloop
