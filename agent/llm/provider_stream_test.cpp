// Streamed answers (Server-Sent Events) from each HTTP kind, in the event
// formats their documentation gives (the page beside each body): assembled
// into the same result as a whole answer; a stream cut part way keeps what
// arrived (finish_reason "interrupted") and is not sent again unless
// provider.retry.resend_interrupted; one cut before any answer is retried;
// a stream gone silent fails after idle_timeout.
#include <gtest/gtest.h>

#include "agent/llm/provider_factories.h"
#include "tests/support/provider_wire_test.h"

namespace kloop {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using test_support::SleepRecorder;

constexpr char kKeyEnv[] = "KLOOP_TEST_STREAM_KEY";
constexpr char kKey[] = "sk-test-stream-5ecret-4444";

std::string sse(const std::vector<std::pair<std::string, std::string>>& events) {
  std::string out;
  for (const auto& [event, data] : events) {
    if (!event.empty()) out += "event: " + event + "\n";
    out += "data: " + data + "\n\n";
  }
  return out;
}

// https://platform.openai.com/docs/api-reference/chat-streaming (chat.completion.chunk)
const std::string kOpenAiStream = sse({
    {"", R"({"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]})"},
    {"", R"({"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"reasoning_content":"think "},"finish_reason":null}]})"},
    {"", R"({"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"reasoning_content":"hard"},"finish_reason":null}]})"},
    {"", R"({"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"```cpp\nint x;"},"finish_reason":null}]})"},
    {"", R"({"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"\n```"},"finish_reason":"stop"}]})"},
    {"", R"({"id":"c1","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":120,"completion_tokens":40,"prompt_tokens_details":{"cached_tokens":100},"completion_tokens_details":{"reasoning_tokens":30}}})"},
    {"", "[DONE]"},
});

// https://docs.anthropic.com/en/docs/build-with-claude/streaming
const std::string kAnthropicStream = sse({
    {"message_start", R"({"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-test","stop_reason":null,"usage":{"input_tokens":20,"cache_read_input_tokens":900,"cache_creation_input_tokens":0,"output_tokens":1}}})"},
    {"content_block_start", R"({"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}})"},
    {"content_block_delta", R"({"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"plan the tiles"}})"},
    {"content_block_delta", R"({"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQB"}})"},
    {"content_block_stop", R"({"type":"content_block_stop","index":0})"},
    {"ping", R"({"type":"ping"})"},
    {"content_block_start", R"({"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}})"},
    {"content_block_delta", R"({"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Here is "}})"},
    {"content_block_delta", R"({"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"the kernel."}})"},
    {"content_block_stop", R"({"type":"content_block_stop","index":1})"},
    {"message_delta", R"({"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":55}})"},
    {"message_stop", R"({"type":"message_stop"})"},
});

// https://ai.google.dev/api/generate-content#method:-models.streamgeneratecontent (alt=sse)
const std::string kGeminiStream = sse({
    {"", R"({"candidates":[{"content":{"parts":[{"text":"consider blocks","thought":true}],"role":"model"}}]})"},
    {"", R"({"candidates":[{"content":{"parts":[{"text":"Here "}],"role":"model"}}]})"},
    {"", R"({"candidates":[{"content":{"parts":[{"text":"it is."}],"role":"model"},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":70,"cachedContentTokenCount":50,"candidatesTokenCount":4,"thoughtsTokenCount":9}})"},
});

class ProviderStreamTest : public test_support::ProviderWireTest {
 protected:
  ProviderStreamTest() : ProviderWireTest(kKeyEnv, kKey) {}
  ProviderConfig config(const std::string& kind) const {
    ProviderConfig c = ProviderWireTest::config(kind);
    c.max_retries = 3;
    c.connect_timeout = 2000ms;
    c.total_timeout = 20000ms;
    return c;
  }
  GenerationResult generate(const ProviderConfig& c) {
    GenerationRequest r;
    r.messages = {{"user", "Write a kernel."}};
    return make_provider(c, {sleeper_.function(), [](const std::string&) {}})->generate(r);
  }
  void enqueue_stream(const std::string& body) {
    server_.enqueue({200, {{"Content-Type", "text/event-stream"}}, body, 0ms});
  }
  SleepRecorder sleeper_;
};

TEST_F(ProviderStreamTest, OpenAiChunksAreAssembled) {
  enqueue_stream(kOpenAiStream);
  GenerationResult r = generate(config("openai"));
  EXPECT_EQ(r.text, "```cpp\nint x;\n```");
  EXPECT_EQ(r.reasoning, "think hard");
  EXPECT_EQ(r.finish_reason, "stop");
  EXPECT_EQ(r.input_tokens, 120);
  EXPECT_EQ(r.cached_input_tokens, 100);
  EXPECT_EQ(r.output_tokens, 40);
  EXPECT_EQ(r.reasoning_tokens, 30);
  EXPECT_EQ(sent_body()["stream"], true);
  EXPECT_EQ(sent_body()["stream_options"]["include_usage"], true);
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0]["streamed"], true);
}

TEST_F(ProviderStreamTest, AnthropicEventsAreAssembled) {
  enqueue_stream(kAnthropicStream);
  GenerationResult r = generate(config("anthropic"));
  EXPECT_EQ(r.text, "Here is the kernel.");
  EXPECT_EQ(r.reasoning, "plan the tiles");
  EXPECT_EQ(r.finish_reason, "stop");
  EXPECT_EQ(r.input_tokens, 920);
  EXPECT_EQ(r.cached_input_tokens, 900);
  EXPECT_EQ(r.output_tokens, 55);
  EXPECT_EQ(sent_body()["stream"], true);
}

TEST_F(ProviderStreamTest, GeminiEventsAreAssembled) {
  enqueue_stream(kGeminiStream);
  GenerationResult r = generate(config("gemini"));
  EXPECT_EQ(r.text, "Here it is.");
  EXPECT_EQ(r.reasoning, "consider blocks");
  EXPECT_EQ(r.finish_reason, "stop");
  EXPECT_EQ(r.cached_input_tokens, 50);
  EXPECT_EQ(r.output_tokens, 4 + 9);
  EXPECT_NE(server_.requests().at(0).path.find(":streamGenerateContent?alt=sse"), std::string::npos);
}

// Cut after the first answer chunk: the provider generated (and bills)
// that much, so it is kept and not sent again.
// Just past the end of the event that carries "int x;".
std::size_t after_first_code_chunk() { return kOpenAiStream.find("\n\n", kOpenAiStream.find("int x;")) + 7; }

TEST_F(ProviderStreamTest, AStreamCutPartWayIsKeptNotResent) {
  const std::size_t cut = after_first_code_chunk();
  server_.enqueue_cut({200, {{"Content-Type", "text/event-stream"}}, kOpenAiStream, 0ms}, cut, 0ms);
  GenerationResult r = generate(config("openai"));
  EXPECT_EQ(r.finish_reason, "interrupted");
  EXPECT_EQ(r.text, "```cpp\nint x;");
  EXPECT_EQ(r.reasoning, "think hard");
  EXPECT_EQ(server_.requests().size(), 1u);
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0]["error_class"], "interrupted");
  // Asked for: sent again.
  ProviderConfig c = config("openai");
  c.resend_interrupted = true;
  server_.enqueue_cut({200, {{"Content-Type", "text/event-stream"}}, kOpenAiStream, 0ms}, cut, 0ms);
  enqueue_stream(kOpenAiStream);
  GenerationResult again = generate(c);
  EXPECT_EQ(again.finish_reason, "stop");
  EXPECT_EQ(again.text, "```cpp\nint x;\n```");
  EXPECT_EQ(server_.requests().size(), 3u);
}

// Cut before any answer: nothing generated, so it is tried again.
TEST_F(ProviderStreamTest, AStreamCutBeforeAnyAnswerIsRetried) {
  const std::size_t cut = kOpenAiStream.find("think ") - 10;
  server_.enqueue_cut({200, {{"Content-Type", "text/event-stream"}}, kOpenAiStream, 0ms}, cut, 0ms);
  enqueue_stream(kOpenAiStream);
  GenerationResult r = generate(config("openai"));
  EXPECT_EQ(r.finish_reason, "stop");
  EXPECT_EQ(r.attempts, 2);
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0]["error_class"], "malformed");
}

// Anthropic reports an overload inside a stream as an error event: what
// came before it is kept.
TEST_F(ProviderStreamTest, AnErrorEventInsideTheStreamKeepsThePartialAnswer) {
  std::string body = kAnthropicStream.substr(0, kAnthropicStream.find("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}"));
  body += sse({{"error", R"({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}})"}});
  enqueue_stream(body);
  GenerationResult r = generate(config("anthropic"));
  EXPECT_EQ(r.finish_reason, "interrupted");
  EXPECT_EQ(r.text, "Here is the kernel.");
  EXPECT_NE(r.calls[0]["message"].get<std::string>().find("Overloaded"), std::string::npos) << r.calls[0].dump();
  EXPECT_EQ(server_.requests().size(), 1u);
}

// A stream that goes silent fails after idle_timeout, well before the
// overall cap, and keeps what it had.
TEST_F(ProviderStreamTest, ASilentStreamFailsAfterTheIdleTimeout) {
  ProviderConfig c = config("openai");
  c.idle_timeout = 1000ms;
  const std::size_t cut = after_first_code_chunk();
  server_.enqueue_cut({200, {{"Content-Type", "text/event-stream"}}, kOpenAiStream, 0ms}, cut, 8000ms);
  GenerationResult r = generate(c);
  EXPECT_EQ(r.finish_reason, "interrupted");
  EXPECT_EQ(r.text, "```cpp\nint x;");
  // Cut by the idle timeout, not by the server closing at 8 s.
  EXPECT_NE(r.calls[0]["message"].get<std::string>().find("provider.idle_timeout_s"), std::string::npos) << r.calls[0];
}

TEST_F(ProviderStreamTest, StreamingCanBeTurnedOff) {
  ProviderConfig c = config("openai");
  c.stream = false;
  server_.enqueue_json(200, R"({"choices": [{"finish_reason": "stop", "message": {"content": "ok"}}]})");
  EXPECT_EQ(generate(c).text, "ok");
  EXPECT_FALSE(sent_body().contains("stream"));
}

}  // namespace
}  // namespace kloop
