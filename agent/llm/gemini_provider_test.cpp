// Gemini generateContent on the wire and back, including thought summaries.
#include <gtest/gtest.h>

#include "agent/llm/provider_factories.h"
#include "tests/support/provider_wire_test.h"

namespace kloop {
namespace {

using nlohmann::json;
using test_support::RecordedRequest;

constexpr char kKeyEnv[] = "KLOOP_TEST_GEMINI_KEY";
constexpr char kKey[] = "AIza-test-5ecret-2222";

const char kAnswer[] = R"({
  "candidates": [{
    "content": {"role": "model", "parts": [
      {"text": "Plan: fuse the loads.", "thought": true},
      {"text": "Here is "}, {"text": "the kernel."}]},
    "finishReason": "MAX_TOKENS", "index": 0}],
  "usageMetadata": {"promptTokenCount": 1200, "candidatesTokenCount": 300, "thoughtsTokenCount": 900,
                    "totalTokenCount": 2400},
  "modelVersion": "gemini-test"
})";

class GeminiProviderTest : public test_support::ProviderWireTest {
 protected:
  GeminiProviderTest() : ProviderWireTest(kKeyEnv, kKey) {}
  ProviderConfig config() const { return ProviderWireTest::config("gemini"); }
};

TEST_F(GeminiProviderTest, SendsGenerateContentRequestWithThinkingConfig) {
  ProviderConfig c = config();
  c.temperature = 0.7;
  c.top_p = 0.95;
  c.max_tokens = 3000;
  c.seed = 42;
  c.stop = {"</answer>"};
  c.thinking_budget = 8192;
  server_.enqueue_json(200, kAnswer);
  make_provider(c)->generate(conversation());

  const RecordedRequest req = server_.requests().at(0);
  EXPECT_EQ(req.method, "POST");
  // The key travels in a header, never in the URL.
  EXPECT_EQ(req.path, "/v1beta/models/gemini-test:streamGenerateContent?alt=sse");  // streamed by default
  EXPECT_EQ(req.headers.at("x-goog-api-key"), kKey);
  json body = sent_body();
  ASSERT_EQ(body["contents"].size(), 3u);
  EXPECT_EQ(body["contents"][0], json::parse(R"({"role": "user", "parts": [{"text": "Write a ReLU."}]})"));
  EXPECT_EQ(body["contents"][1]["role"], "model");
  EXPECT_EQ(body["systemInstruction"], json::parse(R"({"parts": [{"text": "You write CUDA kernels."}]})"));
  const json& g = body["generationConfig"];
  EXPECT_DOUBLE_EQ(g["temperature"].get<double>(), 0.7);
  EXPECT_DOUBLE_EQ(g["topP"].get<double>(), 0.95);
  EXPECT_EQ(g["maxOutputTokens"], 3000 + 8192);  // the answer's budget plus the thinking budget
  EXPECT_EQ(g["stopSequences"], json({"</answer>"}));
  EXPECT_EQ(g["seed"], 42);
  EXPECT_EQ(g["thinkingConfig"], json({{"thinkingBudget", 8192}, {"includeThoughts", true}}));
}

TEST_F(GeminiProviderTest, AcceptsModelsPrefixInModelName) {
  ProviderConfig c = config();
  c.model = "models/gemini-test";
  server_.enqueue_json(200, kAnswer);
  make_provider(c)->generate(conversation());
  EXPECT_EQ(server_.requests().at(0).path, "/v1beta/models/gemini-test:streamGenerateContent?alt=sse");
  EXPECT_FALSE(sent_body().contains("generationConfig"));  // nothing configured, nothing sent
}

TEST_F(GeminiProviderTest, ParsesThoughtsTextUsageAndCost) {
  ProviderConfig c = config();
  c.prices = {1.25, 10.0, std::nullopt, std::nullopt};
  server_.enqueue_json(200, kAnswer);
  GenerationResult r = make_provider(c)->generate(conversation());
  EXPECT_EQ(r.text, "Here is the kernel.");
  EXPECT_EQ(r.reasoning, "Plan: fuse the loads.");
  EXPECT_EQ(r.finish_reason, "length");
  EXPECT_EQ(r.input_tokens, 1200);
  EXPECT_EQ(r.output_tokens, 300 + 900);  // thoughts are billed as output
  EXPECT_EQ(r.reasoning_tokens, 900);
  for (const std::string& text : {r.text, r.reasoning, r.raw_response.dump()}) {
    EXPECT_EQ(text.find(kKey), std::string::npos);
  }
  EXPECT_DOUBLE_EQ(r.cost_usd, 1200 * 1.25 / 1e6 + 1200 * 10.0 / 1e6);
}

TEST_F(GeminiProviderTest, SafetyStopAndBlockedPromptAreContentFilter) {
  server_.enqueue_json(200, R"({"candidates": [{"content": {"parts": [{"text": "partial"}]},
                                "finishReason": "SAFETY"}]})");
  server_.enqueue_json(200, R"({"promptFeedback": {"blockReason": "SAFETY"},
                                "usageMetadata": {"promptTokenCount": 10}})");
  auto provider = make_provider(config());
  EXPECT_EQ(provider->generate(conversation()).finish_reason, "content_filter");
  GenerationResult blocked = provider->generate(conversation());
  EXPECT_EQ(blocked.finish_reason, "content_filter");
  EXPECT_EQ(blocked.text, "");
  EXPECT_EQ(blocked.input_tokens, 10);
}

TEST_F(GeminiProviderTest, StopIsStop) {
  server_.enqueue_json(200, R"({"candidates": [{"content": {"parts": [{"text": "ok"}]}, "finishReason": "STOP"}]})");
  GenerationResult r = make_provider(config())->generate(conversation());
  EXPECT_EQ(r.finish_reason, "stop");
  EXPECT_EQ(r.text, "ok");
}

// Newer models take a thinking level instead of a budget:
// https://ai.google.dev/gemini-api/docs/thinking (thinkingConfig.thinkingLevel)
TEST_F(GeminiProviderTest, ThinkingLevelFromReasoningEffort) {
  ProviderConfig c = config();
  c.reasoning_effort = "low";
  c.max_tokens = 3000;
  server_.enqueue_json(200, kAnswer);
  make_provider(c)->generate(conversation());
  const json body = sent_body();
  const json& g = body["generationConfig"];
  EXPECT_EQ(g["thinkingConfig"], json({{"thinkingLevel", "low"}, {"includeThoughts", true}}));
  EXPECT_EQ(g["maxOutputTokens"], 3000);
  c.thinking_budget = 1024;
  EXPECT_THROW(make_provider(c), std::invalid_argument);
}

}  // namespace
}  // namespace kloop
