// LLM providers: one interface over the HTTP APIs (OpenAI-compatible Chat
// Completions, Anthropic Messages, Google Gemini generateContent) and the
// offline ones (a user command, a replayed transcript).
//
// A provider turns a conversation into one completion and records what the
// call cost. Transient failures (429, 5xx, network) are retried inside
// generate(); so is a transport fault (a stream broken after HTTP 200: an
// error event, a reset, a stall, a missing final event), as the provider's
// fault, up to provider.retry.resend_broken_streams times, since each
// resend is billed again. A partial answer is never returned as an answer.
// Failures that will not go away (bad key, unknown model) throw
// FatalProviderError so the run stops at once instead of failing every
// problem. API keys come from environment variables named in the config;
// they and the configured header values never appear in logs, errors,
// stored responses or prompts (secrets(), redactor.h).
#pragma once

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace kloop {

struct ChatMessage {
  std::string role;  // "user" or "assistant"
  std::string content;
};

// Where to find a problem's attempt, for providers that answer from records.
struct AttemptKey {
  std::string problem;
  int sample = 0;
  int turn = 1;
};

struct GenerationRequest {
  std::string system;
  std::vector<ChatMessage> messages;  // alternating, ending with "user"
  AttemptKey key;                     // used by the replay provider
  // Set by another thread to stop: an HTTP transfer in progress is cut and
  // generate() throws ProviderCancelled with its calls (a cut stream's
  // partial cost included).
  const std::atomic<bool>* cancel = nullptr;
  // Hears of each HTTP attempt's record (calls.jsonl) as soon as it is
  // complete, before any wait or retry, so that the caller stores every
  // billed call even if the process dies before generate() returns; all
  // but the one whose answer generate() returns (the last of
  // GenerationResult::calls), which the caller stores with the answer.
  std::function<void(const nlohmann::json& call)> on_call;
};

// Prices in US dollars per million tokens. Cached input (a prompt-cache
// hit) and cache writes cost `input` unless priced on their own.
struct TokenPrices {
  double input = 0;
  double output = 0;  // reasoning tokens are billed as output
  std::optional<double> cached_input;
  std::optional<double> cache_write;
};

// Tokens of one call by kind. `input` counts every prompt token, cached
// ones and cache writes included (the providers differ: Anthropic reports
// cache reads and writes beside input_tokens, OpenAI and Gemini inside).
struct TokenUsage {
  long long input = 0;
  long long cached_input = 0;
  long long cache_write = 0;
  long long output = 0;  // reasoning included
  long long reasoning = 0;
};
double token_cost(const TokenPrices& prices, const TokenUsage& usage);

struct ProviderConfig {
  std::string kind;      // openai | anthropic | gemini | command | replay
  std::string model;
  std::string base_url;  // default per kind; any OpenAI-compatible server for "openai"
  std::string api_key_env;  // name of the environment variable holding the key
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::optional<int> max_tokens;
  std::optional<std::string> reasoning_effort;  // openai: low|medium|high
  std::optional<int> thinking_budget;           // anthropic / gemini: tokens
  std::optional<long long> seed;
  std::vector<std::string> stop;
  std::chrono::milliseconds connect_timeout{10000};
  std::chrono::milliseconds total_timeout{1800000};  // the whole request, streamed or not
  // HTTP kinds: ask for Server-Sent Events, so a long generation is not one
  // silent wait. A stream fails (a transport fault) when no token arrives
  // for first_token_timeout after the request (a reasoning model thinks
  // silently first), or for idle_timeout between tokens; events that carry
  // no generated text (response.created, pings) do not count.
  bool stream = true;
  std::chrono::milliseconds first_token_timeout{900000};
  std::chrono::milliseconds idle_timeout{300000};
  // How many times a request whose answer broke after HTTP 200 (or, not
  // streamed, timed out after it was sent) is sent again. Each such request
  // may have been billed in full, reasoning included: every resend is
  // counted and its partial cost recorded. 0: never; the attempt is then
  // left unanswered and a rerun asks again.
  int resend_broken_streams = 2;
  int max_retries = 6;  // provider.retry.max_attempts - 1
  std::chrono::milliseconds initial_backoff{1000};
  std::chrono::milliseconds max_backoff{60000};
  int concurrency = 4;  // simultaneous requests to this provider
  TokenPrices prices;
  std::map<std::string, std::string> extra_headers;
  nlohmann::json extra_body = nlohmann::json::object();  // merged into the request body
  // command provider
  std::vector<std::string> command;
  // replay provider
  std::string transcript;  // a run folder or a JSONL transcript
  // openai kind: a reasoning block inside the answer (servers without a
  // reasoning parser), split out as reasoning; empty: none.
  std::string think_open = "<think>", think_close = "</think>";
};

struct GenerationResult {
  std::string text;       // the answer (without reasoning)
  std::string reasoning;  // thinking/reasoning text where the API returns it
  std::string finish_reason;  // normalised: stop | length | content_filter | error | other:<raw>
  long long input_tokens = 0;   // every prompt token (cached and cache writes included)
  long long output_tokens = 0;
  long long reasoning_tokens = 0;
  long long cached_input_tokens = 0;
  long long cache_write_tokens = 0;
  std::string refusal;  // the provider's refusal text (finish_reason content_filter)
  double latency_seconds = 0;  // wall time of the successful attempt
  double total_seconds = 0;    // including retries and backoff
  int attempts = 1;
  double cost_usd = 0;
  nlohmann::json raw_response;  // the provider's response body, verbatim
  // One record per HTTP attempt, failed ones included (calls.jsonl): status,
  // request id, latency, tokens by kind, cost, error class, retry delay.
  nlohmann::json calls = nlohmann::json::array();

  TokenUsage usage() const {
    return {input_tokens, cached_input_tokens, cache_write_tokens, output_tokens, reasoning_tokens};
  }
};

// A failed generate(): the message, the error class (error_class.h) and the
// record of every attempt made.
class ProviderFailure : public std::runtime_error {
 public:
  explicit ProviderFailure(const std::string& message, nlohmann::json calls = nlohmann::json::array(),
                           std::string error_class = "")
      : std::runtime_error(message), calls_(std::move(calls)), error_class_(std::move(error_class)) {}
  const nlohmann::json& calls() const { return calls_; }
  const std::string& error_class() const { return error_class_; }

 private:
  nlohmann::json calls_;
  std::string error_class_;
};

// generate() stopped because GenerationRequest::cancel was set; calls()
// holds every attempt made, a cut stream's included.
class ProviderCancelled : public ProviderFailure {
 public:
  using ProviderFailure::ProviderFailure;
};

// Stops the run: authentication, permission, unknown model, bad request,
// quota, spend limit or billing.
class FatalProviderError : public ProviderFailure {
 public:
  using ProviderFailure::ProviderFailure;
};

// The attempt fails, the run goes on: retries exhausted on a transient
// failure, or a server that said not to retry.
class ProviderError : public ProviderFailure {
 public:
  using ProviderFailure::ProviderFailure;
};

// The conversation does not fit the model's context window: the chain ends
// here, with that outcome stored, so a rerun does not send it again.
class ContextOverflowError : public ProviderError {
 public:
  using ProviderError::ProviderError;
};

class LlmProvider {
 public:
  virtual ~LlmProvider() = default;
  virtual GenerationResult generate(const GenerationRequest& request) = 0;
  virtual std::string describe() const = 0;  // "openai gpt-5 @ https://..." (no key)
  // The values this provider holds that must never reach a log, a run
  // folder or a prompt (its API key, its configured header values). The
  // scaffold redacts them from everything it feeds back (redactor.h).
  virtual std::vector<std::string> secrets() const { return {}; }
  // A cheap check, before a run's first request, that the provider answers
  // and takes the key (HTTP kinds: the API's model list), with no tokens
  // spent. `ok` false: the run would fail; `checked` false: this kind has
  // nothing to check beyond its config.
  struct Probe {
    bool checked = false;
    bool ok = true;
    std::string what;
  };
  virtual Probe probe() { return {false, true, "nothing to check beyond the config"}; }
};

// The most output tokens one request of this config can be billed for:
// max_tokens plus, where the API adds it on top, the thinking budget
// (anthropic's max_tokens and gemini's maxOutputTokens carry both; anthropic
// has a default when max_tokens is not given). nullopt: no limit is set.
std::optional<long long> max_billed_output_tokens(const ProviderConfig& config);

// Builds the provider named by config.kind; throws std::invalid_argument
// with the field and the fix when the config is unusable (unknown kind,
// missing model, key variable unset).
std::unique_ptr<LlmProvider> make_provider(const ProviderConfig& config);

// Reads a provider block of a YAML config (already parsed to JSON).
// `where` names the file for error messages.
ProviderConfig provider_config_from_json(const nlohmann::json& j, const std::string& where);

}  // namespace kloop
