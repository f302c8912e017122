// Streamed answers (Server-Sent Events) from each HTTP kind, in the event
// formats their documentation gives (the page beside each body): assembled
// into the same result as a whole answer. A stream that breaks after HTTP
// 200 (an error event of any of the four APIs, a reset, a stall, an end
// without the API's final event) is a transport fault: never the answer,
// its partial cost recorded, sent again up to
// provider.retry.resend_broken_streams times. A model that thinks silently
// has first_token_timeout before its first token; idle_timeout counts only
// between tokens.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

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

// Just past the end of the event that carries "int x;".
std::size_t after_first_code_chunk() { return kOpenAiStream.find("\n\n", kOpenAiStream.find("int x;")) + 2; }

// A stream cut part way is the provider's fault: its partial cost is
// recorded (estimated from what arrived: the usage comes last), it is not
// the answer, and the request is sent again; with no resend allowed the
// attempt fails without an answer.
TEST_F(ProviderStreamTest, AStreamCutPartWayIsATransportFaultResentNeverTheAnswer) {
  ProviderConfig c = config("openai");
  c.prices = {2.0, 8.0, std::nullopt, std::nullopt};
  const std::size_t cut = after_first_code_chunk();
  server_.enqueue_cut({200, {{"Content-Type", "text/event-stream"}}, kOpenAiStream, 0ms}, cut, 0ms);
  enqueue_stream(kOpenAiStream);
  std::vector<json> heard;
  GenerationRequest request;
  request.messages = {{"user", "Write a kernel."}};
  request.on_call = [&](const json& call) { heard.push_back(call); };
  GenerationResult r = make_provider(c, {sleeper_.function(), [](const std::string&) {}})->generate(request);
  EXPECT_EQ(r.finish_reason, "stop");
  EXPECT_EQ(r.text, "```cpp\nint x;\n```");
  EXPECT_EQ(r.attempts, 2);
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0]["error_class"], "transport_fault");
  EXPECT_EQ(r.calls[0]["transport_fault"], "reset");
  EXPECT_EQ(r.calls[0]["billed"], true);
  EXPECT_EQ(r.calls[0]["usage_estimated"], true);
  EXPECT_GT(r.calls[0]["cost_usd"].get<double>(), 0.0) << "a cut stream is not free";
  EXPECT_EQ(r.calls[0]["tokens"]["output"], (std::string("think hard```cpp\nint x;").size() + 3) / 4);
  // Each call told as it was made; the answer's own comes back with it.
  EXPECT_EQ(heard, std::vector<json>(r.calls.begin(), r.calls.end() - 1));

  c.resend_broken_streams = 0;
  server_.enqueue_cut({200, {{"Content-Type", "text/event-stream"}}, kOpenAiStream, 0ms}, cut, 0ms);
  try {
    make_provider(c, {sleeper_.function(), [](const std::string&) {}})->generate(request);
    FAIL() << "a cut stream was taken as the answer";
  } catch (const FatalProviderError& e) {
    FAIL() << e.what();
  } catch (const ProviderError& e) {
    EXPECT_EQ(e.error_class(), "transport_fault");
    EXPECT_NE(std::string(e.what()).find("not sent again"), std::string::npos) << e.what();
    ASSERT_EQ(e.calls().size(), 1u);
    EXPECT_GT(e.calls()[0]["cost_usd"].get<double>(), 0.0);
  }
  EXPECT_EQ(server_.requests().size(), 3u);
}

// What each API sends when it fails mid-stream, each from its documentation.
// https://platform.openai.com/docs/guides/error-codes (server_error, in a chunk)
const std::string kOpenAiErrorEvent =
    sse({{"", R"({"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}})"}});
// https://platform.openai.com/docs/api-reference/responses-streaming/error
const std::string kResponsesErrorEvent =
    sse({{"error", R"({"type":"error","code":"server_error","message":"The server had an error while processing your request.","param":null,"sequence_number":4})"}});
// https://docs.anthropic.com/en/docs/build-with-claude/streaming#error-events
const std::string kAnthropicErrorEvent =
    sse({{"error", R"({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}})"}});
// https://ai.google.dev/gemini-api/docs/troubleshooting (503 UNAVAILABLE)
const std::string kGeminiErrorEvent =
    sse({{"", R"({"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}})"}});

// https://platform.openai.com/docs/api-reference/responses-streaming
std::string responses_stream(bool final_event) {
  std::string out = sse({
      {"response.created", R"({"type":"response.created","sequence_number":0,"response":{"id":"resp_1","status":"in_progress","output":[]}})"},
      {"response.output_text.delta", R"({"type":"response.output_text.delta","sequence_number":1,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Here is the kernel."})"},
  });
  if (final_event) {
    out += sse({{"response.completed", R"({"type":"response.completed","sequence_number":2,"response":{"id":"resp_1","status":"completed","output":[{"type":"message","content":[{"type":"output_text","text":"Here is the kernel."}]}],"usage":{"input_tokens":12,"output_tokens":5}}})"}});
  }
  return out;
}

// The first part of each kind's stream (some of the answer, no final event)
// and the whole stream.
struct KindStreams {
  std::string kind;
  std::string head;
  std::string whole;
  std::string error_event;
};
std::vector<KindStreams> kind_streams() {
  const std::string anthropic_head = kAnthropicStream.substr(0, kAnthropicStream.find("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}"));
  const std::string gemini_head = kGeminiStream.substr(0, kGeminiStream.find("data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"it is.\"}"));
  return {{"openai", kOpenAiStream.substr(0, after_first_code_chunk()), kOpenAiStream, kOpenAiErrorEvent},
          {"openai_responses", responses_stream(false), responses_stream(true), kResponsesErrorEvent},
          {"anthropic", anthropic_head, kAnthropicStream, kAnthropicErrorEvent},
          {"gemini", gemini_head, kGeminiStream, kGeminiErrorEvent}};
}

// An error event part way, of any of the four APIs: a transport fault,
// resent; the answer is the second stream's, never the first one's part.
TEST_F(ProviderStreamTest, AnErrorEventOfEachApiIsATransportFaultAndResent) {
  for (const KindStreams& k : kind_streams()) {
    SCOPED_TRACE(k.kind);
    enqueue_stream(k.head + k.error_event);
    enqueue_stream(k.whole);
    const GenerationResult r = generate(config(k.kind));
    EXPECT_EQ(r.finish_reason, "stop");
    EXPECT_EQ(r.attempts, 2);
    ASSERT_EQ(r.calls.size(), 2u);
    EXPECT_EQ(r.calls[0]["transport_fault"], "error_event") << r.calls[0];
    EXPECT_EQ(r.calls[0]["billed"], true);
    EXPECT_FALSE(r.calls[1].contains("transport_fault"));
  }
}

// A stream that ends (the connection closed cleanly) without the API's
// final event ([DONE] after a finish reason, message_stop, finishReason,
// response.completed) is not a complete answer with 0 tokens.
TEST_F(ProviderStreamTest, AStreamWithoutItsFinalEventIsATransportFault) {
  for (const KindStreams& k : kind_streams()) {
    SCOPED_TRACE(k.kind);
    enqueue_stream(k.head);
    enqueue_stream(k.whole);
    const GenerationResult r = generate(config(k.kind));
    EXPECT_EQ(r.finish_reason, "stop");
    ASSERT_EQ(r.calls.size(), 2u);
    EXPECT_EQ(r.calls[0]["transport_fault"], "no_final_event") << r.calls[0];
  }
}

// A stream that goes silent between tokens fails after idle_timeout, well
// before the overall cap, and is resent.
TEST_F(ProviderStreamTest, AStreamSilentBetweenTokensStallsAndIsResent) {
  ProviderConfig c = config("openai");
  c.idle_timeout = 1000ms;
  server_.enqueue_cut({200, {{"Content-Type", "text/event-stream"}}, kOpenAiStream, 0ms}, after_first_code_chunk(), 8000ms);
  enqueue_stream(kOpenAiStream);
  GenerationResult r = generate(c);
  EXPECT_EQ(r.text, "```cpp\nint x;\n```");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0]["transport_fault"], "stall_idle");
  // Cut by the idle timeout, not by the server closing at 8 s.
  EXPECT_NE(r.calls[0]["message"].get<std::string>().find("provider.idle_timeout_s"), std::string::npos) << r.calls[0];
}

// A reasoning model that thinks silently after response.created: the idle
// clock starts at the first token, so the request is not sent again (and
// billed again); only first_token_timeout ends such a wait.
TEST_F(ProviderStreamTest, ASilentlyReasoningModelIsNotResentBeforeItsFirstToken) {
  ProviderConfig c = config("openai_responses");
  c.idle_timeout = 500ms;
  c.first_token_timeout = 20000ms;
  const std::string stream = responses_stream(true);
  const std::size_t after_created = stream.find("event: response.output_text.delta");
  server_.enqueue_paused({200, {{"Content-Type", "text/event-stream"}}, stream, 0ms}, after_created, 2000ms);
  GenerationResult r = generate(c);
  EXPECT_EQ(r.text, "Here is the kernel.");
  EXPECT_EQ(r.attempts, 1);
  EXPECT_EQ(server_.requests().size(), 1u);
  // Past first_token_timeout it is a stall, resent as the config allows.
  c.first_token_timeout = 500ms;
  server_.enqueue_paused({200, {{"Content-Type", "text/event-stream"}}, stream, 0ms}, after_created, 3000ms);
  enqueue_stream(stream);
  GenerationResult again = generate(c);
  ASSERT_EQ(again.calls.size(), 2u);
  EXPECT_EQ(again.calls[0]["transport_fault"], "stall_first_token");
  EXPECT_NE(again.calls[0]["message"].get<std::string>().find("provider.first_token_timeout_s"), std::string::npos);
}

// An answer whose stream carried no usage is not costed $0 in silence:
// estimated from its length, and said.
TEST_F(ProviderStreamTest, AStreamWithoutUsageIsEstimatedAndWarned) {
  ProviderConfig c = config("openai");
  c.prices = {2.0, 8.0, std::nullopt, std::nullopt};
  std::string no_usage = kOpenAiStream;
  const std::size_t usage = no_usage.find("data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\"");
  no_usage.erase(usage, no_usage.find("\n\n", usage) + 2 - usage);
  enqueue_stream(no_usage);
  std::vector<std::string> notes;
  GenerationRequest request;
  request.messages = {{"user", "Write a kernel."}};
  const GenerationResult r =
      make_provider(c, {sleeper_.function(), [&](const std::string& n) { notes.push_back(n); }})->generate(request);
  EXPECT_EQ(r.finish_reason, "stop");
  EXPECT_GT(r.cost_usd, 0.0);
  EXPECT_EQ(r.calls[0]["usage_estimated"], true);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("without its usage"), std::string::npos) << notes[0];
}

// A stopped run cuts the transfer in progress: the call is recorded (its
// partial cost too) and generate() says it was cancelled.
TEST_F(ProviderStreamTest, ACancelledRequestKeepsItsCallRecord) {
  std::atomic<bool> cancel{false};
  server_.enqueue_paused({200, {{"Content-Type", "text/event-stream"}}, kOpenAiStream, 0ms}, after_first_code_chunk(), 5000ms);
  GenerationRequest request;
  request.messages = {{"user", "Write a kernel."}};
  request.cancel = &cancel;
  request.on_call = [&](const json&) {};
  std::thread stopper([&] {
    while (server_.requests().empty()) std::this_thread::sleep_for(10ms);
    cancel = true;
  });
  try {
    make_provider(config("openai"), {sleeper_.function(), [](const std::string&) {}})->generate(request);
    ADD_FAILURE() << "not cancelled";
  } catch (const ProviderCancelled& e) {
    ASSERT_EQ(e.calls().size(), 1u);
    EXPECT_EQ(e.calls()[0]["transport_fault"], "cancelled");
    EXPECT_EQ(e.calls()[0]["billed"], true);
  }
  stopper.join();
  EXPECT_EQ(server_.requests().size(), 1u);
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
