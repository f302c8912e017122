// Google Gemini generateContent (the Gemini API, not Vertex AI).
//
// The key goes in the x-goog-api-key header rather than the ?key= query so
// it never appears in a URL that curl might print. Thought summaries are
// requested (includeThoughts) whenever a thinking budget is set; parts
// flagged thought:true are reasoning, the rest is the answer. Output tokens
// are candidates + thoughts, which is how Google bills them.
#include <memory>

#include "agent/llm/provider_factories.h"
#include "base/settings.h"

namespace kloop {
namespace {

constexpr char kDefaultBaseUrl[] = "https://generativelanguage.googleapis.com";
constexpr char kDefaultKeyEnv[] = "GEMINI_API_KEY";

std::string normalise_finish_reason(const nlohmann::json& value) {
  if (!value.is_string()) return "other:none";
  std::string raw = value.get<std::string>();
  if (raw == "STOP") return "stop";
  if (raw == "MAX_TOKENS") return "length";
  if (raw == "SAFETY" || raw == "RECITATION" || raw == "BLOCKLIST" || raw == "PROHIBITED_CONTENT" || raw == "SPII") {
    return "content_filter";
  }
  return "other:" + raw;
}

class GeminiProvider : public HttpProvider {
 public:
  GeminiProvider(const ProviderConfig& config, const ProviderHooks& hooks)
      : HttpProvider(config, kDefaultBaseUrl, kDefaultKeyEnv, hooks) {
    if (config.thinking_budget && config.reasoning_effort) {
      throw std::invalid_argument(settings_error("", 0, "provider.reasoning_effort",
                                                 "gemini takes either a thinking level "
                                                 "(reasoning_effort: low, high) or a thinking_budget, not both"));
    }
  }

 protected:
  std::string endpoint_url() const override {
    // Accept both "gemini-2.5-pro" and the API's own "models/gemini-2.5-pro".
    std::string model = config().model;
    if (model.rfind("models/", 0) == 0) model.erase(0, 7);
    return base_url() + "/v1beta/models/" + model + ":generateContent";
  }

  std::vector<std::pair<std::string, std::string>> auth_headers(const std::string& api_key) const override {
    if (api_key.empty()) return {};
    return {{"x-goog-api-key", api_key}};
  }
  // https://ai.google.dev/api/models#method:-models.list: {"models": [{"name": "models/..."}]}
  std::string models_url() const override { return base_url() + "/v1beta/models?pageSize=1000"; }
  std::vector<std::string> listed_models(const nlohmann::json& body) const override {
    std::vector<std::string> out;
    for (const auto& m : body.value("models", nlohmann::json::array())) {
      std::string name = m.value("name", "");
      if (name.rfind("models/", 0) == 0) name.erase(0, 7);
      out.push_back(name);
    }
    return out;
  }

  nlohmann::json request_body(const GenerationRequest& request) const override {
    const ProviderConfig& c = config();
    nlohmann::json contents = nlohmann::json::array();
    for (const auto& m : request.messages) {
      contents.push_back({{"role", m.role == "assistant" ? "model" : m.role},
                          {"parts", nlohmann::json::array({{{"text", m.content}}})}});
    }
    nlohmann::json body = {{"contents", contents}};
    if (!request.system.empty()) {
      body["systemInstruction"] = {{"parts", nlohmann::json::array({{{"text", request.system}}})}};
    }
    nlohmann::json generation = nlohmann::json::object();
    if (c.temperature) generation["temperature"] = *c.temperature;
    if (c.top_p) generation["topP"] = *c.top_p;
    // maxOutputTokens covers the thoughts too: the thinking budget goes on
    // top, so max_tokens stays the answer's budget (as for anthropic; with a
    // thinking level there is no budget to add).
    if (c.max_tokens) {
      generation["maxOutputTokens"] = *c.max_tokens + (c.thinking_budget && *c.thinking_budget > 0 ? *c.thinking_budget : 0);
    }
    if (!c.stop.empty()) generation["stopSequences"] = c.stop;
    if (c.seed) generation["seed"] = *c.seed;
    if (c.thinking_budget) {
      generation["thinkingConfig"] = {{"thinkingBudget", *c.thinking_budget}, {"includeThoughts", true}};
    }
    // Newer models take a thinking level instead of a budget.
    if (c.reasoning_effort) generation["thinkingConfig"] = {{"thinkingLevel", *c.reasoning_effort}, {"includeThoughts", true}};
    if (!generation.empty()) body["generationConfig"] = generation;
    return body;
  }

  // https://ai.google.dev/api/generate-content#method:-models.streamgeneratecontent:
  // with alt=sse each event is a GenerateContentResponse with the next
  // parts; the last carries finishReason and the whole usageMetadata.
  void ask_for_stream(nlohmann::json&, HttpRequest& http) const override {
    const std::string plain = ":generateContent";
    http.url.replace(http.url.rfind(plain), plain.size(), ":streamGenerateContent?alt=sse");
  }
  // The last chunk carries finishReason (a blocked prompt: promptFeedback
  // with its blockReason); an error comes as a chunk with an "error".
  nlohmann::json assemble_stream(const std::vector<SseEvent>& events, StreamEnd& end) const override {
    nlohmann::json parts = nlohmann::json::array(), usage = nullptr, finish = nullptr, feedback = nullptr;
    bool any = false;
    for (const auto& e : events) {
      const auto d = nlohmann::json::parse(e.data, nullptr, false);
      if (!d.is_object()) continue;
      if (d.contains("error")) end.error = server_error_message(e.data);
      if (d.contains("usageMetadata")) usage = d["usageMetadata"];
      if (d.contains("promptFeedback")) feedback = d["promptFeedback"];
      if (d.contains("promptFeedback") && d["promptFeedback"].contains("blockReason")) end.complete = true;
      if (!d.contains("candidates") || !d["candidates"].is_array() || d["candidates"].empty()) continue;
      any = true;
      const auto& c = d["candidates"][0];
      if (c.contains("content") && c["content"].contains("parts")) {
        for (const auto& p : c["content"]["parts"]) parts.push_back(p);
      }
      if (c.contains("finishReason") && c["finishReason"].is_string()) {
        finish = c["finishReason"];
        end.complete = true;
      }
    }
    nlohmann::json body = {{"streamed", true}};
    if (!usage.is_null()) body["usageMetadata"] = usage;
    if (!feedback.is_null()) body["promptFeedback"] = feedback;
    if (any) body["candidates"] = nlohmann::json::array({{{"content", {{"parts", parts}}}, {"finishReason", finish}}});
    if (!any && feedback.is_null()) {
      throw MalformedResponse("a stream without candidates" + (end.error.empty() ? "" : ": " + end.error));
    }
    return body;
  }

  // Every chunk with candidates carries the next parts; an error ends it.
  bool carries_tokens(const SseEvent& e) const override {
    const auto d = nlohmann::json::parse(e.data, nullptr, false);
    return d.is_object() && (d.contains("candidates") || d.contains("error") || d.contains("promptFeedback"));
  }

  void read_response(const nlohmann::json& body, GenerationResult& out) const override {
    if (body.contains("usageMetadata")) {
      const auto& usage = body["usageMetadata"];
      out.input_tokens = json_count(usage, "promptTokenCount");  // cachedContentTokenCount included
      out.cached_input_tokens = json_count(usage, "cachedContentTokenCount");
      out.reasoning_tokens = json_count(usage, "thoughtsTokenCount");
      out.output_tokens = json_count(usage, "candidatesTokenCount") + out.reasoning_tokens;
    }
    if (!body.contains("candidates") || !body["candidates"].is_array() || body["candidates"].empty()) {
      // A blocked prompt comes back as 200 with promptFeedback and no candidates.
      if (body.contains("promptFeedback") && body["promptFeedback"].contains("blockReason")) {
        out.finish_reason = "content_filter";
        out.refusal = "the prompt was blocked (" + json_text(body["promptFeedback"], "blockReason") + ")";
        return;
      }
      throw MalformedResponse("no candidates in the response: " + server_error_message(body.dump()));
    }
    const auto& candidate = body["candidates"][0];
    if (candidate.contains("content") && candidate["content"].contains("parts")) {
      for (const auto& part : candidate["content"]["parts"]) {
        bool thought = part.value("thought", false);
        (thought ? out.reasoning : out.text) += json_text(part, "text");
      }
    }
    out.finish_reason = normalise_finish_reason(candidate.value("finishReason", nlohmann::json()));
  }
};

}  // namespace

std::unique_ptr<LlmProvider> make_gemini_provider(const ProviderConfig& config, const ProviderHooks& hooks) {
  return std::make_unique<GeminiProvider>(config, hooks);
}

}  // namespace kloop
