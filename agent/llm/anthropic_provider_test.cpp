// Anthropic Messages on the wire and back, including extended thinking.
#include <gtest/gtest.h>

#include "agent/llm/provider_factories.h"
#include "tests/support/provider_wire_test.h"

namespace kloop {
namespace {

using nlohmann::json;
using test_support::RecordedRequest;

constexpr char kKeyEnv[] = "KLOOP_TEST_ANTHROPIC_KEY";
constexpr char kKey[] = "sk-ant-test-5ecret-1111";

const char kAnswer[] = R"({
  "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
  "content": [
    {"type": "thinking", "thinking": "Let me tile it.", "signature": "sig"},
    {"type": "text", "text": "Here is "},
    {"type": "text", "text": "the kernel."}
  ],
  "stop_reason": "max_tokens",
  "usage": {"input_tokens": 2000, "output_tokens": 700}
})";

class AnthropicProviderTest : public test_support::ProviderWireTest {
 protected:
  AnthropicProviderTest() : ProviderWireTest(kKeyEnv, kKey) {}
  ProviderConfig config() const { return ProviderWireTest::config("anthropic"); }
};

TEST_F(AnthropicProviderTest, SendsMessagesRequestWithThinking) {
  ProviderConfig c = config();
  c.max_tokens = 4000;
  c.thinking_budget = 2048;
  c.temperature = 0.5;  // must not be sent: the API rejects it with thinking
  c.top_p = 0.95;
  c.stop = {"</answer>"};
  server_.enqueue_json(200, kAnswer);
  make_provider(c)->generate(conversation());

  const RecordedRequest req = server_.requests().at(0);
  EXPECT_EQ(req.method, "POST");
  EXPECT_EQ(req.path, "/v1/messages");
  EXPECT_EQ(req.headers.at("x-api-key"), kKey);
  EXPECT_EQ(req.headers.at("anthropic-version"), "2023-06-01");
  EXPECT_EQ(req.headers.count("authorization"), 0u);
  json body = sent_body();
  EXPECT_EQ(body["model"], "claude-test");
  EXPECT_EQ(body["max_tokens"], 4000 + 2048);  // the answer keeps its 4000 next to the thinking budget
  EXPECT_EQ(body["thinking"], json({{"type", "enabled"}, {"budget_tokens", 2048}}));
  EXPECT_FALSE(body.contains("temperature"));
  EXPECT_DOUBLE_EQ(body["top_p"].get<double>(), 0.95);
  EXPECT_EQ(body["system"], "You write CUDA kernels.");
  ASSERT_EQ(body["messages"].size(), 3u);
  EXPECT_EQ(body["messages"][0], json({{"role", "user"}, {"content", "Write a ReLU."}}));
  EXPECT_EQ(body["messages"][1]["role"], "assistant");
  EXPECT_EQ(body["stop_sequences"], json({"</answer>"}));
}

TEST_F(AnthropicProviderTest, WithoutThinkingSendsTemperatureAndDefaultMaxTokens) {
  ProviderConfig c = config();
  c.temperature = 0.5;
  GenerationRequest r;
  r.messages = {{"user", "hi"}};
  server_.enqueue_json(200, kAnswer);
  make_provider(c)->generate(r);
  json body = sent_body();
  EXPECT_EQ(body["max_tokens"], 8192);
  EXPECT_DOUBLE_EQ(body["temperature"].get<double>(), 0.5);
  EXPECT_FALSE(body.contains("thinking"));
  EXPECT_FALSE(body.contains("system"));
}

TEST_F(AnthropicProviderTest, ParsesThinkingTextStopReasonUsageAndCost) {
  ProviderConfig c = config();
  c.prices = {3.0, 15.0, std::nullopt, std::nullopt};
  server_.enqueue_json(200, kAnswer);
  GenerationResult r = make_provider(c)->generate(conversation());
  EXPECT_EQ(r.text, "Here is the kernel.");
  EXPECT_EQ(r.reasoning, "Let me tile it.");
  EXPECT_EQ(r.finish_reason, "length");
  EXPECT_EQ(r.input_tokens, 2000);
  EXPECT_EQ(r.output_tokens, 700);
  EXPECT_DOUBLE_EQ(r.cost_usd, 2000 * 3.0 / 1e6 + 700 * 15.0 / 1e6);
  EXPECT_EQ(r.raw_response["id"], "msg_1");
  for (const std::string& text : {r.text, r.reasoning, r.raw_response.dump()}) {
    EXPECT_EQ(text.find(kKey), std::string::npos);
  }
}

TEST_F(AnthropicProviderTest, EndTurnIsStop) {
  server_.enqueue_json(200, R"({"content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
                                "usage": {"input_tokens": 1, "output_tokens": 1}})");
  EXPECT_EQ(make_provider(config())->generate(conversation()).finish_reason, "stop");
}

TEST_F(AnthropicProviderTest, ThinkingBudgetBelowApiMinimumIsAConfigError) {
  ProviderConfig c = config();
  c.thinking_budget = 500;
  try {
    make_provider(c);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("provider.thinking_budget"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("1024"), std::string::npos) << e.what();
  }
}

// Newer models take adaptive thinking with an effort (budget_tokens is
// refused by them): https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking
TEST_F(AnthropicProviderTest, AdaptiveThinkingWithEffort) {
  ProviderConfig c = config();
  c.reasoning_effort = "high";
  c.max_tokens = 16000;
  c.temperature = 0.5;  // not with thinking
  server_.enqueue_json(200, kAnswer);
  make_provider(c)->generate(conversation());
  const json body = sent_body();
  EXPECT_EQ(body["thinking"], json({{"type", "adaptive"}}));
  EXPECT_EQ(body["output_config"], json({{"effort", "high"}}));
  EXPECT_EQ(body["max_tokens"], 16000);
  EXPECT_FALSE(body.contains("temperature"));
  c.thinking_budget = 4096;
  EXPECT_THROW(make_provider(c), std::invalid_argument);  // one form or the other
  c.thinking_budget.reset();
  c.top_p = 0.9;
  EXPECT_THROW(make_provider(c), std::invalid_argument);  // top_p in [0.95, 1] with thinking
}

}  // namespace
}  // namespace kloop
