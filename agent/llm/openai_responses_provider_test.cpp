// The OpenAI Responses API (kind: openai_responses) on the wire and back,
// whole and streamed, on bodies in the format of
// https://platform.openai.com/docs/api-reference/responses (the response
// object) and .../responses-streaming (the events).
#include <gtest/gtest.h>

#include "agent/llm/provider_factories.h"
#include "tests/support/provider_wire_test.h"

namespace kloop {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

constexpr char kKeyEnv[] = "KLOOP_TEST_RESPONSES_KEY";
constexpr char kKey[] = "sk-test-responses-5ecret-5555";

const char kAnswer[] = R"({
  "id": "resp_1", "object": "response", "status": "completed", "model": "gpt-test",
  "output": [
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Tile by 128."}]},
    {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
     "content": [{"type": "output_text", "text": "```cpp\nkernel\n```", "annotations": []}]}
  ],
  "usage": {"input_tokens": 900, "input_tokens_details": {"cached_tokens": 512},
            "output_tokens": 300, "output_tokens_details": {"reasoning_tokens": 200}, "total_tokens": 1200}
})";

class OpenAiResponsesTest : public test_support::ProviderWireTest {
 protected:
  OpenAiResponsesTest() : ProviderWireTest(kKeyEnv, kKey) {}
  ProviderConfig config() const {
    ProviderConfig c = ProviderWireTest::config("openai_responses", "/v1");
    c.stream = false;
    return c;
  }
};

TEST_F(OpenAiResponsesTest, RequestAndAnswer) {
  ProviderConfig c = config();
  c.max_tokens = 4000;
  c.reasoning_effort = "high";
  c.prices = {2.0, 8.0, 0.5, std::nullopt};
  server_.enqueue_json(200, kAnswer);
  GenerationResult r = make_provider(c)->generate(conversation());
  EXPECT_EQ(server_.requests().at(0).path, "/v1/responses");
  EXPECT_EQ(server_.requests().at(0).headers.at("authorization"), std::string("Bearer ") + kKey);
  const json body = sent_body();
  EXPECT_EQ(body["instructions"], "You write CUDA kernels.");
  ASSERT_EQ(body["input"].size(), 3u);
  EXPECT_EQ(body["input"][1], json({{"role", "assistant"}, {"content", "Done."}}));
  EXPECT_EQ(body["max_output_tokens"], 4000);
  EXPECT_EQ(body["reasoning"], json({{"effort", "high"}, {"summary", "auto"}}));
  EXPECT_EQ(r.text, "```cpp\nkernel\n```");
  EXPECT_EQ(r.reasoning, "Tile by 128.");
  EXPECT_EQ(r.finish_reason, "stop");
  EXPECT_EQ(r.input_tokens, 900);
  EXPECT_EQ(r.cached_input_tokens, 512);
  EXPECT_EQ(r.reasoning_tokens, 200);
  EXPECT_DOUBLE_EQ(r.cost_usd, (388 * 2.0 + 512 * 0.5 + 300 * 8.0) / 1e6);
}

TEST_F(OpenAiResponsesTest, IncompleteAndRefused) {
  server_.enqueue_json(200, R"({"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"},
      "output": [{"type": "message", "content": [{"type": "output_text", "text": "```cpp\nhalf"}]}]})");
  EXPECT_EQ(make_provider(config())->generate(conversation()).finish_reason, "length");
  server_.enqueue_json(200, R"({"status": "completed",
      "output": [{"type": "message", "content": [{"type": "refusal", "refusal": "I can't help with that."}]}]})");
  GenerationResult no = make_provider(config())->generate(conversation());
  EXPECT_EQ(no.refusal, "I can't help with that.");
  EXPECT_EQ(no.finish_reason, "content_filter");
}

TEST_F(OpenAiResponsesTest, StreamedEventsEndWithTheWholeResponse) {
  ProviderConfig c = config();
  c.stream = true;
  std::string events;
  auto add = [&](const std::string& type, const std::string& data) {
    events += "event: " + type + "\ndata: " + data + "\n\n";
  };
  add("response.created", R"({"type":"response.created","response":{"id":"resp_1","status":"in_progress","output":[]}})");
  add("response.reasoning_summary_text.delta", R"({"type":"response.reasoning_summary_text.delta","delta":"Tile by 128."})");
  add("response.output_text.delta", R"({"type":"response.output_text.delta","delta":"```cpp\nkernel"})");
  add("response.output_text.delta", R"({"type":"response.output_text.delta","delta":"\n```"})");
  add("response.completed", std::string(R"({"type":"response.completed","response":)") + json::parse(kAnswer).dump() + "}");
  server_.enqueue({200, {{"Content-Type", "text/event-stream"}}, events, 0ms});
  GenerationResult r = make_provider(c)->generate(conversation());
  EXPECT_EQ(sent_body()["stream"], true);
  EXPECT_EQ(r.text, "```cpp\nkernel\n```");
  EXPECT_EQ(r.reasoning, "Tile by 128.");
  EXPECT_EQ(r.cached_input_tokens, 512);
  // Cut before response.completed: a transport fault, never the answer;
  // the request is sent again and the whole answer taken.
  const std::size_t cut = events.find("event: response.completed");
  server_.enqueue_cut({200, {{"Content-Type", "text/event-stream"}}, events, 0ms}, cut, 0ms);
  server_.enqueue({200, {{"Content-Type", "text/event-stream"}}, events, 0ms});
  GenerationResult again = make_provider(c)->generate(conversation());
  EXPECT_EQ(again.finish_reason, "stop");
  EXPECT_EQ(again.attempts, 2);
  EXPECT_EQ(again.calls[0]["transport_fault"], "reset") << again.calls[0];
}

}  // namespace
}  // namespace kloop
