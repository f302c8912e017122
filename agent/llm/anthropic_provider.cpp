// Anthropic Messages API, with extended thinking.
//
// max_tokens is required by the API and, with thinking on, must exceed
// budget_tokens: the thinking budget is added on top of the answer budget so
// a configured max_tokens keeps meaning "tokens for the answer". The API
// rejects a modified temperature while thinking, so it is left out then, and
// takes top_p only in [0.95, 1] then (a config outside is refused here).
// Usage (https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching):
// input_tokens excludes cache_read_input_tokens and
// cache_creation_input_tokens, which are billed at their own rates.
#include <memory>

#include "agent/llm/provider_factories.h"
#include "base/settings.h"

namespace kloop {
namespace {

constexpr char kDefaultBaseUrl[] = "https://api.anthropic.com";
constexpr char kDefaultKeyEnv[] = "ANTHROPIC_API_KEY";
constexpr char kApiVersion[] = "2023-06-01";
constexpr int kMinThinkingBudget = 1024;  // the API's floor

std::string normalise_stop_reason(const nlohmann::json& value) {
  if (!value.is_string()) return "other:none";
  std::string raw = value.get<std::string>();
  if (raw == "end_turn" || raw == "stop_sequence") return "stop";
  if (raw == "max_tokens") return "length";
  if (raw == "refusal") return "content_filter";
  return "other:" + raw;
}

class AnthropicProvider : public HttpProvider {
 public:
  AnthropicProvider(const ProviderConfig& config, const ProviderHooks& hooks)
      : HttpProvider(config, kDefaultBaseUrl, kDefaultKeyEnv, hooks) {
    if (config.thinking_budget && *config.thinking_budget < kMinThinkingBudget) {
      throw std::invalid_argument(settings_error("", 0, "provider.thinking_budget",
                                                 "anthropic needs at least " + std::to_string(kMinThinkingBudget) +
                                                     " tokens (got " + std::to_string(*config.thinking_budget) +
                                                     "); leave it out to disable thinking"));
    }
    if (config.thinking_budget && config.reasoning_effort) {
      throw std::invalid_argument(
          settings_error("", 0, "provider.reasoning_effort",
                         "anthropic takes either adaptive thinking with an effort "
                         "(reasoning_effort) or a fixed thinking_budget (older models), not both"));
    }
    if ((config.thinking_budget || config.reasoning_effort) && config.top_p &&
        (*config.top_p < 0.95 || *config.top_p > 1)) {
      throw std::invalid_argument(settings_error("", 0, "provider.top_p",
                                                 "anthropic with thinking takes top_p between 0.95 and 1 (got " +
                                                     std::to_string(*config.top_p) + "); leave it out or raise it"));
    }
  }

 protected:
  std::string endpoint_url() const override { return base_url() + "/v1/messages"; }
  // https://docs.anthropic.com/en/api/models-list: {"data": [{"id": ...}]}
  std::string models_url() const override { return base_url() + "/v1/models?limit=1000"; }
  std::vector<std::string> listed_models(const nlohmann::json& body) const override {
    std::vector<std::string> out;
    for (const auto& m : body.value("data", nlohmann::json::array())) out.push_back(m.value("id", ""));
    return out;
  }

  std::vector<std::pair<std::string, std::string>> auth_headers(const std::string& api_key) const override {
    std::vector<std::pair<std::string, std::string>> headers = {{"anthropic-version", kApiVersion}};
    if (!api_key.empty()) headers.emplace_back("x-api-key", api_key);
    return headers;
  }

  nlohmann::json request_body(const GenerationRequest& request) const override {
    const ProviderConfig& c = config();
    nlohmann::json messages = nlohmann::json::array();
    for (const auto& m : request.messages) messages.push_back({{"role", m.role}, {"content", m.content}});
    long long max_tokens = c.max_tokens.value_or(kAnthropicDefaultMaxTokens);
    if (c.thinking_budget) max_tokens += *c.thinking_budget;
    const bool thinking = c.thinking_budget || c.reasoning_effort;
    nlohmann::json body = {{"model", c.model}, {"max_tokens", max_tokens}, {"messages", messages}};
    if (!request.system.empty()) body["system"] = request.system;
    if (c.temperature && !thinking) body["temperature"] = *c.temperature;
    if (c.top_p) body["top_p"] = *c.top_p;
    if (!c.stop.empty()) body["stop_sequences"] = c.stop;
    if (c.thinking_budget) body["thinking"] = {{"type", "enabled"}, {"budget_tokens", *c.thinking_budget}};
    // Adaptive thinking (the form newer models take; budget_tokens is
    // refused by them): the model decides how much to think at this effort
    // (low, medium, high, max); its max_tokens then covers thinking too.
    if (c.reasoning_effort) {
      body["thinking"] = {{"type", "adaptive"}};
      body["output_config"] = {{"effort", *c.reasoning_effort}};
    }
    return body;
  }

  // https://docs.anthropic.com/en/docs/build-with-claude/streaming:
  // message_start (usage of the input), content_block_start/_delta
  // (text_delta, thinking_delta), message_delta (stop_reason, output
  // usage), message_stop; an `error` event (overloaded_error) may come at
  // any point.
  void ask_for_stream(nlohmann::json& body, HttpRequest&) const override { body["stream"] = true; }
  nlohmann::json assemble_stream(const std::vector<SseEvent>& events, StreamEnd& end) const override {
    nlohmann::json blocks = nlohmann::json::array(), usage = nlohmann::json::object(), stop = nullptr;
    bool started = false;
    for (const auto& e : events) {
      const auto d = nlohmann::json::parse(e.data, nullptr, false);
      if (!d.is_object()) continue;
      const std::string type = e.event.empty() ? json_text(d, "type") : e.event;
      if (type == "error") {
        end.error = server_error_message(e.data);
      } else if (type == "message_stop") {
        end.complete = true;
      } else if (type == "message_start" && d.contains("message")) {
        started = true;
        if (d["message"].contains("usage")) usage.update(d["message"]["usage"]);
      } else if (type == "content_block_start" && d.contains("content_block")) {
        const auto index = d.value("index", static_cast<std::size_t>(blocks.size()));
        while (blocks.size() <= index) blocks.push_back(nlohmann::json::object());
        blocks[index] = d["content_block"];
      } else if (type == "content_block_delta" && d.contains("delta")) {
        const auto index = d.value("index", std::size_t{0});
        while (blocks.size() <= index) blocks.push_back({{"type", "text"}, {"text", ""}});
        const auto& delta = d["delta"];
        const std::string kind = json_text(delta, "type");
        auto& block = blocks[index];
        if (kind == "text_delta") block["text"] = json_text(block, "text") + json_text(delta, "text");
        if (kind == "thinking_delta") block["thinking"] = json_text(block, "thinking") + json_text(delta, "thinking");
      } else if (type == "message_delta") {
        if (d.contains("delta") && d["delta"].contains("stop_reason")) stop = d["delta"]["stop_reason"];
        if (d.contains("usage") && d["usage"].is_object()) usage.update(d["usage"]);
      }
    }
    if (!started && blocks.empty()) {
      throw MalformedResponse("a stream without a message" + (end.error.empty() ? "" : ": " + end.error));
    }
    return {{"content", blocks}, {"stop_reason", stop}, {"usage", usage}, {"streamed", true}};
  }

  // Deltas of text or thinking and the events that end the message;
  // message_start, block starts and stops and pings carry nothing generated.
  bool carries_tokens(const SseEvent& e) const override {
    std::string type = e.event;
    if (type.empty()) type = json_text(nlohmann::json::parse(e.data, nullptr, false), "type");
    return type == "content_block_delta" || type == "message_delta" || type == "message_stop" || type == "error";
  }

  void read_response(const nlohmann::json& body, GenerationResult& out) const override {
    if (!body.contains("content") || !body["content"].is_array()) {
      throw MalformedResponse("no content in the response: " + server_error_message(body.dump()));
    }
    for (const auto& block : body["content"]) {
      std::string type = json_text(block, "type");
      if (type == "text") {
        out.text += json_text(block, "text");
      } else if (type == "thinking") {
        if (!out.reasoning.empty()) out.reasoning += "\n\n";
        out.reasoning += json_text(block, "thinking");
      }
      // redacted_thinking is encrypted and tool blocks are not used here.
    }
    out.finish_reason = normalise_stop_reason(body.value("stop_reason", nlohmann::json()));
    if (json_text(body, "stop_reason") == "refusal") {
      out.refusal = out.text.empty() ? "the model declined (stop_reason refusal)" : out.text;
    }
    if (body.contains("usage")) {
      const auto& usage = body["usage"];
      out.cached_input_tokens = json_count(usage, "cache_read_input_tokens");
      out.cache_write_tokens = json_count(usage, "cache_creation_input_tokens");
      out.input_tokens = json_count(usage, "input_tokens") + out.cached_input_tokens + out.cache_write_tokens;
      // Thinking is billed as output and included here; newer responses also
      // break it out (usage.output_tokens_details.thinking_tokens, part of
      // output_tokens, not beside them).
      out.output_tokens = json_count(usage, "output_tokens");
      if (usage.contains("output_tokens_details")) {
        out.reasoning_tokens = json_count(usage["output_tokens_details"], "thinking_tokens");
      }
    }
  }
};

}  // namespace

std::unique_ptr<LlmProvider> make_anthropic_provider(const ProviderConfig& config, const ProviderHooks& hooks) {
  return std::make_unique<AnthropicProvider>(config, hooks);
}

}  // namespace kloop
