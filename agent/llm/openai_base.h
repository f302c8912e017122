// What OpenAI's two APIs (Chat Completions, kind openai; Responses, kind
// openai_responses) share: the base URL, the key, bearer auth and the model
// list. Internal to agent/llm.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "agent/llm/http_provider.h"

namespace kloop {

class OpenAiBase : public HttpProvider {
 public:
  // Without a base_url this is OpenAI itself, which always needs a key; a
  // local server named by base_url usually needs none.
  OpenAiBase(const ProviderConfig& config, const ProviderHooks& hooks)
      : HttpProvider(config, "https://api.openai.com/v1", config.base_url.empty() ? "OPENAI_API_KEY" : "", hooks) {}

 protected:
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
};

}  // namespace kloop
