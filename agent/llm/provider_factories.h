// One factory per provider kind, and make_provider with test hooks.
// Internal to agent/llm and its tests; callers use provider.h.
#pragma once

#include <memory>

#include "agent/llm/http_provider.h"
#include "agent/llm/provider.h"

namespace kloop {

// Anthropic requires max_tokens; this is sent when the config gives none.
constexpr int kAnthropicDefaultMaxTokens = 8192;

std::unique_ptr<LlmProvider> make_openai_provider(const ProviderConfig& config, const ProviderHooks& hooks);
std::unique_ptr<LlmProvider> make_openai_responses_provider(const ProviderConfig& config, const ProviderHooks& hooks);
std::unique_ptr<LlmProvider> make_anthropic_provider(const ProviderConfig& config, const ProviderHooks& hooks);
std::unique_ptr<LlmProvider> make_gemini_provider(const ProviderConfig& config, const ProviderHooks& hooks);
std::unique_ptr<LlmProvider> make_command_provider(const ProviderConfig& config);
std::unique_ptr<LlmProvider> make_replay_provider(const ProviderConfig& config);

// make_provider() with the backoff sleep replaced (tests).
std::unique_ptr<LlmProvider> make_provider(const ProviderConfig& config, const ProviderHooks& hooks);

// The conversation as the command provider writes it to stdin (see
// command_provider.cpp for the format).
std::string render_conversation(const GenerationRequest& request);

}  // namespace kloop
