// OpenAI Chat Completions, and every server that speaks it (vLLM, SGLang,
// llama.cpp server, Ollama's /v1, OpenRouter, DeepSeek, Together).
//
// Reasoning models take max_completion_tokens (max_tokens is rejected by
// OpenAI's o-series and gpt-5), so it is sent whenever reasoning_effort is
// set. Servers that return their reasoning text put it in
// message.reasoning_content (DeepSeek, vLLM) or message.reasoning
// (OpenRouter, newer vLLM).
#include <memory>

#include "agent/llm/provider_factories.h"

namespace kloop {
namespace {

constexpr char kDefaultBaseUrl[] = "https://api.openai.com/v1";
constexpr char kDefaultKeyEnv[] = "OPENAI_API_KEY";

std::string normalise_finish_reason(const nlohmann::json& value) {
  if (!value.is_string()) return "other:none";
  std::string raw = value.get<std::string>();
  if (raw == "stop" || raw == "length" || raw == "content_filter") return raw;
  return "other:" + raw;
}

class OpenAiProvider : public HttpProvider {
 public:
  // Without a base_url this is OpenAI itself, which always needs a key; a
  // local server named by base_url usually needs none.
  OpenAiProvider(const ProviderConfig& config, const ProviderHooks& hooks)
      : HttpProvider(config, kDefaultBaseUrl, config.base_url.empty() ? kDefaultKeyEnv : "", hooks) {}

 protected:
  std::string endpoint_url() const override { return base_url() + "/chat/completions"; }
  // https://platform.openai.com/docs/api-reference/models/list: {"data": [{"id": ...}]}
  std::string models_url() const override { return base_url() + "/models"; }
  std::vector<std::string> listed_models(const nlohmann::json& body) const override {
    std::vector<std::string> out;
    for (const auto& m : body.value("data", nlohmann::json::array())) out.push_back(m.value("id", ""));
    return out;
  }

  std::vector<std::pair<std::string, std::string>> auth_headers(const std::string& api_key) const override {
    if (api_key.empty()) return {};
    return {{"Authorization", "Bearer " + api_key}};
  }

  nlohmann::json request_body(const GenerationRequest& request) const override {
    const ProviderConfig& c = config();
    nlohmann::json messages = nlohmann::json::array();
    if (!request.system.empty()) messages.push_back({{"role", "system"}, {"content", request.system}});
    for (const auto& m : request.messages) messages.push_back({{"role", m.role}, {"content", m.content}});
    nlohmann::json body = {{"model", c.model}, {"messages", messages}};
    if (c.temperature) body["temperature"] = *c.temperature;
    if (c.top_p) body["top_p"] = *c.top_p;
    if (c.max_tokens) body[c.reasoning_effort ? "max_completion_tokens" : "max_tokens"] = *c.max_tokens;
    if (c.reasoning_effort) body["reasoning_effort"] = *c.reasoning_effort;
    if (c.seed) body["seed"] = *c.seed;
    if (!c.stop.empty()) body["stop"] = c.stop;
    return body;
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
    if (body.contains("usage") && body["usage"].is_object()) {
      const auto& usage = body["usage"];
      out.input_tokens = json_count(usage, "prompt_tokens");
      // completion_tokens already includes the reasoning tokens.
      out.output_tokens = json_count(usage, "completion_tokens");
      if (usage.contains("completion_tokens_details")) {
        out.reasoning_tokens = json_count(usage["completion_tokens_details"], "reasoning_tokens");
      }
    }
  }
};

}  // namespace

std::unique_ptr<LlmProvider> make_openai_provider(const ProviderConfig& config, const ProviderHooks& hooks) {
  return std::make_unique<OpenAiProvider>(config, hooks);
}

}  // namespace kloop
