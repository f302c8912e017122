// Chat Completions on the wire and back, against a real loopback server:
// what a user of OpenAI or any OpenAI-compatible server depends on.
#include <gtest/gtest.h>

#include <algorithm>

#include "agent/llm/provider_factories.h"
#include "tests/support/provider_wire_test.h"

namespace kloop {
namespace {

using nlohmann::json;
using test_support::RecordedRequest;

constexpr char kKeyEnv[] = "KLOOP_TEST_OPENAI_KEY";
constexpr char kKey[] = "sk-test-openai-5ecret-0000";

const char kAnswer[] = R"({
  "id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-test",
  "choices": [{"index": 0, "finish_reason": "length",
               "message": {"role": "assistant", "content": "the kernel", "reasoning_content": "think first"}}],
  "usage": {"prompt_tokens": 1000, "completion_tokens": 500, "total_tokens": 1500,
            "completion_tokens_details": {"reasoning_tokens": 300}}
})";

class OpenAiProviderTest : public test_support::ProviderWireTest {
 protected:
  OpenAiProviderTest() : ProviderWireTest(kKeyEnv, kKey) {}
  ProviderConfig config() const { return ProviderWireTest::config("openai", "/v1"); }
};

TEST_F(OpenAiProviderTest, SendsChatCompletionsRequest) {
  ProviderConfig c = config();
  c.temperature = 0.2;
  c.top_p = 0.9;
  c.max_tokens = 1000;
  c.seed = 7;
  c.stop = {"</answer>"};
  c.extra_headers = {{"HTTP-Referer", "https://kloop.example"}};
  c.extra_body = {{"top_k", 20}, {"chat_template_kwargs", {{"enable_thinking", true}}}};
  server_.enqueue_json(200, kAnswer);
  make_provider(c)->generate(conversation());

  ASSERT_EQ(server_.requests().size(), 1u);
  const RecordedRequest req = server_.requests()[0];
  EXPECT_EQ(req.method, "POST");
  EXPECT_EQ(req.path, "/v1/chat/completions");
  EXPECT_EQ(req.headers.at("authorization"), std::string("Bearer ") + kKey);
  EXPECT_EQ(req.headers.at("content-type"), "application/json");
  EXPECT_EQ(req.headers.at("http-referer"), "https://kloop.example");
  json body = sent_body();
  EXPECT_EQ(body["model"], "gpt-test");
  ASSERT_EQ(body["messages"].size(), 4u);
  EXPECT_EQ(body["messages"][0], json({{"role", "system"}, {"content", "You write CUDA kernels."}}));
  EXPECT_EQ(body["messages"][1], json({{"role", "user"}, {"content", "Write a ReLU."}}));
  EXPECT_EQ(body["messages"][2]["role"], "assistant");
  EXPECT_EQ(body["messages"][3]["content"], "Faster.");
  EXPECT_DOUBLE_EQ(body["temperature"].get<double>(), 0.2);
  EXPECT_DOUBLE_EQ(body["top_p"].get<double>(), 0.9);
  EXPECT_EQ(body["max_tokens"], 1000);
  EXPECT_FALSE(body.contains("max_completion_tokens"));
  EXPECT_FALSE(body.contains("reasoning_effort"));
  EXPECT_EQ(body["seed"], 7);
  EXPECT_EQ(body["stop"], json({"</answer>"}));
  EXPECT_EQ(body["top_k"], 20);
  EXPECT_EQ(body["chat_template_kwargs"]["enable_thinking"], true);
}

TEST_F(OpenAiProviderTest, ReasoningEffortUsesMaxCompletionTokens) {
  ProviderConfig c = config();
  c.max_tokens = 4096;
  c.reasoning_effort = "high";
  c.temperature = 1.0;
  c.extra_body = {{"temperature", nullptr}};  // a null in extra_body removes what we would send
  server_.enqueue_json(200, kAnswer);
  make_provider(c)->generate(conversation());
  json body = sent_body();
  EXPECT_EQ(body["reasoning_effort"], "high");
  EXPECT_EQ(body["max_completion_tokens"], 4096);
  EXPECT_FALSE(body.contains("max_tokens"));
  EXPECT_FALSE(body.contains("temperature"));
}

TEST_F(OpenAiProviderTest, ParsesAnswerReasoningTokensAndCost) {
  ProviderConfig c = config();
  c.prices = {2.0, 8.0, std::nullopt, std::nullopt};
  server_.enqueue_json(200, kAnswer);
  GenerationResult r = make_provider(c)->generate(conversation());
  EXPECT_EQ(r.text, "the kernel");
  EXPECT_EQ(r.reasoning, "think first");
  EXPECT_EQ(r.finish_reason, "length");
  EXPECT_EQ(r.input_tokens, 1000);
  EXPECT_EQ(r.output_tokens, 500);
  EXPECT_EQ(r.reasoning_tokens, 300);
  EXPECT_DOUBLE_EQ(r.cost_usd, 1000 * 2.0 / 1e6 + 500 * 8.0 / 1e6);
  EXPECT_EQ(r.attempts, 1);
  EXPECT_GT(r.latency_seconds, 0);
  EXPECT_GE(r.total_seconds, r.latency_seconds);
  EXPECT_EQ(r.raw_response["id"], "chatcmpl-1");
  EXPECT_EQ(r.raw_response.dump().find(kKey), std::string::npos);
}

TEST_F(OpenAiProviderTest, ReadsOpenRouterReasoningFieldAndNullContent) {
  server_.enqueue_json(200, R"({"choices": [{"finish_reason": "stop",
      "message": {"content": null, "reasoning": "only thoughts"}}], "usage": null})");
  GenerationResult r = make_provider(config())->generate(conversation());
  EXPECT_EQ(r.text, "");
  EXPECT_EQ(r.reasoning, "only thoughts");
  EXPECT_EQ(r.finish_reason, "stop");
  // No usage: not $0 in silence, an estimate from the lengths, marked so.
  EXPECT_EQ(r.input_tokens, static_cast<long long>((server_.requests().at(0).body.size() + 3) / 4));
  EXPECT_EQ(r.calls.back()["usage_estimated"], true);
}

TEST_F(OpenAiProviderTest, LocalServerWithoutKeySendsNoAuthorization) {
  ProviderConfig c = config();
  c.api_key_env = "";
  GenerationRequest r;
  r.messages = {{"user", "hi"}};
  server_.enqueue_json(200, kAnswer);
  make_provider(c)->generate(r);
  const RecordedRequest req = server_.requests().at(0);
  EXPECT_EQ(req.headers.count("authorization"), 0u);
  // No system prompt: no empty system message either.
  json body = sent_body();
  ASSERT_EQ(body["messages"].size(), 1u);
  EXPECT_EQ(body["messages"][0]["role"], "user");
}

TEST_F(OpenAiProviderTest, KeyEchoedInAResponseIsRedactedFromTheStoredResponse) {
  server_.enqueue_json(200, std::string(R"({"choices": [{"finish_reason": "stop", "message": {"content": "ok"}}],
                                            "debug": {"echo": "Bearer )") +
                                kKey + R"("}})");
  GenerationResult r = make_provider(config())->generate(conversation());
  EXPECT_EQ(r.raw_response.dump().find(kKey), std::string::npos) << r.raw_response.dump();
  EXPECT_EQ(r.raw_response["debug"]["echo"], "Bearer [REDACTED]");
}

// provider.headers may carry credentials (an org token, a gateway key): their
// values are redacted wherever the key is, and the scaffold learns them
// from secrets() to keep them out of prompts.
TEST_F(OpenAiProviderTest, HeaderValuesAreRedactedLikeTheKey) {
  const std::string header = "team-gateway-token-77";
  ProviderConfig c = config();
  c.extra_headers = {{"X-Gateway-Token", header}, {"X-Priority", "1"}};
  server_.enqueue_json(200, R"({"choices": [{"finish_reason": "stop", "message": {"content": "saw )" + header +
                                R"("}}], "debug": {"echo": ")" + header + R"("}})");
  auto p = make_provider(c);
  GenerationResult r = p->generate(conversation());
  EXPECT_EQ(server_.requests().at(0).headers.at("x-gateway-token"), header) << "the header is still sent";
  EXPECT_EQ(r.text, "saw [REDACTED]");
  EXPECT_EQ(r.raw_response.dump().find(header), std::string::npos) << r.raw_response.dump();
  const std::vector<std::string> secrets = p->secrets();
  EXPECT_NE(std::find(secrets.begin(), secrets.end(), kKey), secrets.end());
  EXPECT_NE(std::find(secrets.begin(), secrets.end(), header), secrets.end());
  EXPECT_EQ(std::find(secrets.begin(), secrets.end(), "1"), secrets.end()) << "too short to be a credential";

  server_.enqueue_json(401, R"({"error": {"message": "bad token )" + header + R"("}})");
  try {
    p->generate(conversation());
    FAIL() << "expected FatalProviderError";
  } catch (const FatalProviderError& e) {
    EXPECT_EQ(std::string(e.what()).find(header), std::string::npos) << e.what();
  }
}

TEST_F(OpenAiProviderTest, DescribeNamesModelAndUrlButNotKey) {
  std::string d = make_provider(config())->describe();
  EXPECT_EQ(d, "openai gpt-test @ " + server_.base_url() + "/v1");
}

}  // namespace
}  // namespace kloop
