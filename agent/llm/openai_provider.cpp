// OpenAI Chat Completions, and every server that speaks it (vLLM, SGLang,
// llama.cpp server, Ollama's /v1, OpenRouter, DeepSeek, Together).
//
// OpenAI itself takes max_completion_tokens (max_tokens is deprecated there
// and rejected by its o-series and gpt-5), so that is sent to api.openai.com
// and whenever reasoning_effort is set; other servers get max_tokens, which
// all of them read. Servers that return their reasoning text put it in
// message.reasoning_content (DeepSeek, vLLM) or message.reasoning
// (OpenRouter, newer vLLM); a server without a reasoning parser leaves a
// <think>...</think> block at the start of content, which is split out
// (provider.think_tags). A refusal (message.refusal) is an outcome.
// Usage: https://platform.openai.com/docs/api-reference/chat/object
// (prompt_tokens_details.cached_tokens are part of prompt_tokens).
#include <memory>

#include "agent/llm/openai_base.h"
#include "agent/llm/provider_factories.h"

namespace kloop {
namespace {

std::string normalise_finish_reason(const nlohmann::json& value) {
  if (!value.is_string()) return "other:none";
  std::string raw = value.get<std::string>();
  if (raw == "stop" || raw == "length" || raw == "content_filter") return raw;
  return "other:" + raw;
}

class OpenAiProvider : public OpenAiBase {
  // A leading think block in the answer becomes reasoning; one that never
  // closes (the answer was cut inside it) leaves no answer, so no draft
  // inside it is evaluated.
  void split_think_block(GenerationResult& out) const {
    const std::string& open = config().think_open;
    const std::string& close = config().think_close;
    if (open.empty() || close.empty()) return;
    const std::size_t lead = out.text.find_first_not_of(" \t\r\n");
    if (lead == std::string::npos || out.text.compare(lead, open.size(), open) != 0) return;
    const std::size_t end = out.text.find(close, lead + open.size());
    if (end == std::string::npos) {
      out.reasoning = out.text.substr(lead + open.size());
      out.text.clear();
      return;
    }
    out.reasoning = out.text.substr(lead + open.size(), end - lead - open.size());
    out.text = out.text.substr(end + close.size());
  }

 public:
  using OpenAiBase::OpenAiBase;

 protected:
  std::string endpoint_url() const override { return base_url() + "/chat/completions"; }

  nlohmann::json request_body(const GenerationRequest& request) const override {
    const ProviderConfig& c = config();
    nlohmann::json messages = nlohmann::json::array();
    if (!request.system.empty()) messages.push_back({{"role", "system"}, {"content", request.system}});
    for (const auto& m : request.messages) messages.push_back({{"role", m.role}, {"content", m.content}});
    nlohmann::json body = {{"model", c.model}, {"messages", messages}};
    if (c.temperature) body["temperature"] = *c.temperature;
    if (c.top_p) body["top_p"] = *c.top_p;
    const bool openai_itself = base_url().find("api.openai.com") != std::string::npos;
    if (c.max_tokens) body[c.reasoning_effort || openai_itself ? "max_completion_tokens" : "max_tokens"] = *c.max_tokens;
    if (c.reasoning_effort) body["reasoning_effort"] = *c.reasoning_effort;
    if (c.seed) body["seed"] = *c.seed;
    if (!c.stop.empty()) body["stop"] = c.stop;
    return body;
  }

  // https://platform.openai.com/docs/api-reference/chat-streaming: chunks of
  // choices[].delta, the usage in a last chunk (stream_options.include_usage),
  // then "data: [DONE]".
  void ask_for_stream(nlohmann::json& body, HttpRequest&) const override {
    body["stream"] = true;
    body["stream_options"] = {{"include_usage", true}};
  }
  // The answer ends with a chunk that has a finish_reason (then the usage
  // chunk and [DONE]); an error mid-stream is a chunk with an "error".
  nlohmann::json assemble_stream(const std::vector<SseEvent>& events, StreamEnd& end) const override {
    std::string content, reasoning, refusal;
    nlohmann::json finish = nullptr, usage = nullptr;
    bool any_choice = false;
    for (const auto& e : events) {
      if (e.data == "[DONE]") continue;
      const auto chunk = nlohmann::json::parse(e.data, nullptr, false);
      if (!chunk.is_object()) continue;
      if (chunk.contains("error")) end.error = server_error_message(e.data);
      if (chunk.contains("usage") && chunk["usage"].is_object()) usage = chunk["usage"];
      if (!chunk.contains("choices") || !chunk["choices"].is_array() || chunk["choices"].empty()) continue;
      any_choice = true;
      const auto& choice = chunk["choices"][0];
      if (choice.contains("delta") && choice["delta"].is_object()) {
        const auto& d = choice["delta"];
        content += json_text(d, "content");
        reasoning += json_text(d, "reasoning_content") + json_text(d, "reasoning");
        refusal += json_text(d, "refusal");
      }
      if (choice.contains("finish_reason") && !choice["finish_reason"].is_null()) finish = choice["finish_reason"];
    }
    end.complete = !finish.is_null();
    if (!any_choice) throw MalformedResponse("a stream without choices" + (end.error.empty() ? "" : ": " + end.error));
    nlohmann::json message = {{"content", content}, {"reasoning_content", reasoning}};
    if (!refusal.empty()) message["refusal"] = refusal;
    return {{"choices", nlohmann::json::array({{{"message", message}, {"finish_reason", finish}}})}, {"usage", usage},
            {"streamed", true}};
  }

  bool carries_tokens(const SseEvent& e) const override {
    if (e.data == "[DONE]") return true;
    const auto chunk = nlohmann::json::parse(e.data, nullptr, false);
    if (!chunk.is_object()) return false;
    if (chunk.contains("error") || chunk.contains("usage")) return true;
    if (!chunk.contains("choices") || !chunk["choices"].is_array() || chunk["choices"].empty()) return false;
    const auto& choice = chunk["choices"][0];
    if (choice.contains("finish_reason") && !choice["finish_reason"].is_null()) return true;
    const auto d = choice.value("delta", nlohmann::json::object());
    return !(json_text(d, "content") + json_text(d, "reasoning_content") + json_text(d, "reasoning") +
             json_text(d, "refusal"))
                .empty();
  }

  void read_response(const nlohmann::json& body, GenerationResult& out) const override {
    if (!body.contains("choices") || !body["choices"].is_array() || body["choices"].empty()) {
      throw MalformedResponse("no choices in the response: " + server_error_message(body.dump()));
    }
    const auto& choice = body["choices"][0];
    const auto& message = choice.at("message");
    out.text = json_text(message, "content");
    out.reasoning = json_text(message, "reasoning_content");
    if (out.reasoning.empty()) out.reasoning = json_text(message, "reasoning");
    out.finish_reason = normalise_finish_reason(choice.value("finish_reason", nlohmann::json()));
    out.refusal = json_text(message, "refusal");
    if (!out.refusal.empty()) out.finish_reason = "content_filter";
    if (out.reasoning.empty()) split_think_block(out);
    if (body.contains("usage") && body["usage"].is_object()) {
      const auto& usage = body["usage"];
      out.input_tokens = json_count(usage, "prompt_tokens");
      // completion_tokens already includes the reasoning tokens.
      out.output_tokens = json_count(usage, "completion_tokens");
      if (usage.contains("completion_tokens_details")) {
        out.reasoning_tokens = json_count(usage["completion_tokens_details"], "reasoning_tokens");
      }
      if (usage.contains("prompt_tokens_details")) {
        out.cached_input_tokens = json_count(usage["prompt_tokens_details"], "cached_tokens");
      }
    }
  }
};

}  // namespace

std::unique_ptr<LlmProvider> make_openai_provider(const ProviderConfig& config, const ProviderHooks& hooks) {
  return std::make_unique<OpenAiProvider>(config, hooks);
}

}  // namespace kloop
