// make_provider and the provider block of a run config.
//
// Config errors name the file, the field and the fix, since this is the
// first thing a user sees when a run config is wrong.
#include "agent/llm/provider.h"

#include <cmath>
#include <cstdlib>
#include <set>

#include "agent/llm/provider_factories.h"
#include "base/settings.h"

namespace kloop {
namespace {

const std::vector<std::string> kKnownFields = {"kind",
                                               "model",
                                               "base_url",
                                               "api_key_env",
                                               "temperature",
                                               "top_p",
                                               "max_tokens",
                                               "reasoning_effort",
                                               "thinking_budget",
                                               "seed",
                                               "stop",
                                               "connect_timeout_s",
                                               "timeout_s",
                                               "max_retries",
                                               "retry",
                                               "think_tags",
                                               "stream",
                                               "idle_timeout_s",
                                               "first_token_timeout_s",
                                               "concurrency",
                                               "prices",
                                               "headers",
                                               "extra_body",
                                               "command",
                                               "transcript"};
const std::vector<std::string> kKnownKinds = {"openai", "openai_responses", "anthropic", "gemini", "command", "replay"};

std::string join(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : ", ") + w;
  return out;
}

bool is_http_kind(const std::string& kind) {
  return kind == "openai" || kind == "openai_responses" || kind == "anthropic" || kind == "gemini";
}

}  // namespace

std::unique_ptr<LlmProvider> make_provider(const ProviderConfig& config, const ProviderHooks& hooks) {
  if (config.kind.empty()) {
    throw std::invalid_argument(settings_error("", 0, "provider.kind", "missing; use one of " + join(kKnownKinds)));
  }
  if (is_http_kind(config.kind) && config.model.empty()) {
    throw std::invalid_argument(
        settings_error("", 0, "provider.model", "missing; name the model to call (e.g. the API's model id)"));
  }
  if (config.concurrency < 1) {
    throw std::invalid_argument(settings_error("", 0, "provider.concurrency",
                                               "must be at least 1 (got " + std::to_string(config.concurrency) + ")"));
  }
  if (config.kind == "openai") return make_openai_provider(config, hooks);
  if (config.kind == "openai_responses") return make_openai_responses_provider(config, hooks);
  if (config.kind == "anthropic") return make_anthropic_provider(config, hooks);
  if (config.kind == "gemini") return make_gemini_provider(config, hooks);
  if (config.kind == "command") return make_command_provider(config);
  if (config.kind == "replay") return make_replay_provider(config);
  throw std::invalid_argument(
      settings_error("", 0, "provider.kind", "unknown kind '" + config.kind + "'; use one of " + join(kKnownKinds)));
}

std::unique_ptr<LlmProvider> make_provider(const ProviderConfig& config) { return make_provider(config, {}); }

namespace {

// provider.retry: {max_attempts, base_delay_s, max_delay_s,
// resend_broken_streams}; max_retries is the older spelling of
// max_attempts - 1, resend_interrupted (true/false) of resend_broken_streams.
void read_retry(const SettingsReader& r, ProviderConfig& c) {
  if (r.has("max_retries")) {
    long long v = r.whole("max_retries");
    if (v < 0 || v > 100) r.fail("max_retries", "must be between 0 and 100 (got " + std::to_string(v) + ")");
    c.max_retries = static_cast<int>(v);
  }
  if (!r.has("retry")) return;
  if (!r.at("retry").is_object()) {
    r.fail("retry", "expected {max_attempts: N, base_delay_s: S, max_delay_s: S, resend_broken_streams: N}");
  }
  const SettingsReader retry = r.block("retry");
  retry.known({"max_attempts", "base_delay_s", "max_delay_s", "resend_broken_streams", "resend_interrupted"});
  if (retry.has("max_attempts")) {
    long long v = retry.whole("max_attempts");
    if (v < 1 || v > 101) r.fail("retry.max_attempts", "must be between 1 and 101 (got " + std::to_string(v) + ")");
    c.max_retries = static_cast<int>(v - 1);
  }
  if (retry.has("resend_interrupted") && retry.has("resend_broken_streams")) {
    r.fail("retry.resend_interrupted", "is the older spelling of retry.resend_broken_streams; give only that");
  }
  if (retry.has("resend_interrupted")) c.resend_broken_streams = retry.get<bool>("resend_interrupted", false) ? 2 : 0;
  if (retry.has("resend_broken_streams")) {
    long long v = retry.whole("resend_broken_streams");
    if (v < 0 || v > 100) {
      r.fail("retry.resend_broken_streams", "must be between 0 and 100 (got " + std::to_string(v) + ")");
    }
    c.resend_broken_streams = static_cast<int>(v);
  }
  if (retry.has("base_delay_s")) c.initial_backoff = retry.seconds("base_delay_s");
  if (retry.has("max_delay_s")) c.max_backoff = retry.seconds("max_delay_s");
  if (c.max_backoff < c.initial_backoff) r.fail("retry.max_delay_s", "must be at least retry.base_delay_s");
}

// The sampling and budget fields: temperature, top_p, max_tokens,
// reasoning_effort, thinking_budget, seed, stop.
void read_sampling(const SettingsReader& r, ProviderConfig& c) {
  if (r.has("temperature")) c.temperature = r.non_negative("temperature");
  if (r.has("top_p")) {
    c.top_p = r.number("top_p");
    if (*c.top_p <= 0 || *c.top_p > 1) r.fail("top_p", "must be in (0, 1] (got " + r.at("top_p").dump() + ")");
  }
  if (r.has("max_tokens")) {
    long long v = r.whole("max_tokens");
    if (v < 1 || v > 100000000) r.fail("max_tokens", "must be a positive token count (got " + std::to_string(v) + ")");
    c.max_tokens = static_cast<int>(v);
  }
  if (r.has("reasoning_effort")) c.reasoning_effort = r.text("reasoning_effort");
  if (r.has("thinking_budget")) {
    // Gemini takes -1 (dynamic) and 0 (off); Anthropic checks its own floor.
    long long v = r.whole("thinking_budget");
    if (v < -1 || v > 100000000) r.fail("thinking_budget", "must be a token count (got " + std::to_string(v) + ")");
    c.thinking_budget = static_cast<int>(v);
  }
  if (r.has("seed")) c.seed = r.whole("seed");
  if (r.has("stop")) c.stop = r.strings("stop", /*allow_single=*/true);
}

// The transport: timeouts, streaming, concurrency, retries, think tags.
void read_transport(const SettingsReader& r, ProviderConfig& c) {
  if (r.has("connect_timeout_s")) c.connect_timeout = r.seconds("connect_timeout_s");
  if (r.has("timeout_s")) c.total_timeout = r.seconds("timeout_s");
  if (r.has("concurrency")) {
    long long v = r.whole("concurrency");
    if (v < 1 || v > 10000) r.fail("concurrency", "must be at least 1 (got " + std::to_string(v) + ")");
    c.concurrency = static_cast<int>(v);
  }
  read_retry(r, c);
  c.stream = r.get<bool>("stream", c.stream);
  if (r.has("idle_timeout_s")) c.idle_timeout = r.seconds("idle_timeout_s");
  if (r.has("first_token_timeout_s")) c.first_token_timeout = r.seconds("first_token_timeout_s");
  if (r.has("think_tags")) {
    const auto tags = r.strings("think_tags", /*allow_single=*/false);
    if (!tags.empty() && (tags.size() != 2 || tags[0].empty() || tags[1].empty())) {
      r.fail("think_tags", "expected [open, close], e.g. [\"<think>\", \"</think>\"], or [] for none");
    }
    c.think_open = tags.empty() ? "" : tags[0];
    c.think_close = tags.empty() ? "" : tags[1];
  }
}

// prices, headers and extra_body.
void read_extras(const SettingsReader& r, ProviderConfig& c) {
  if (r.has("prices")) {
    if (!r.at("prices").is_object()) {
      r.fail("prices", "expected {input: <$ per million tokens>, output: <$ per million tokens>}");
    }
    const SettingsReader prices = r.block("prices");
    prices.known({"input", "output", "cached_input", "cache_write"});  // US dollars per million tokens
    if (prices.has("input")) c.prices.input = prices.non_negative("input");
    if (prices.has("output")) c.prices.output = prices.non_negative("output");
    if (prices.has("cached_input")) c.prices.cached_input = prices.non_negative("cached_input");
    if (prices.has("cache_write")) c.prices.cache_write = prices.non_negative("cache_write");
  }
  if (r.has("headers")) {
    const auto& h = r.at("headers");
    if (!h.is_object()) r.fail("headers", "expected a mapping of header name to value");
    for (auto it = h.begin(); it != h.end(); ++it) {
      // The value is not echoed: headers may carry credentials.
      if (!it.value().is_string()) r.fail("headers." + it.key(), "expected a string value");
      c.extra_headers[it.key()] = it.value().get<std::string>();
    }
  }
  if (r.has("extra_body")) {
    if (!r.at("extra_body").is_object()) r.fail("extra_body", "expected a mapping merged into the request body");
    c.extra_body = r.at("extra_body");
  }
}

}  // namespace

double token_cost(const TokenPrices& prices, const TokenUsage& u) {
  const long long fresh = std::max(0LL, u.input - u.cached_input - u.cache_write);
  return (static_cast<double>(fresh) * prices.input +
          static_cast<double>(u.cached_input) * prices.cached_input.value_or(prices.input) +
          static_cast<double>(u.cache_write) * prices.cache_write.value_or(prices.input) +
          static_cast<double>(u.output) * prices.output) /
         1e6;
}

long long json_count(const nlohmann::json& object, const char* field) {
  if (!object.is_object()) return 0;
  auto it = object.find(field);
  if (it == object.end() || !it->is_number()) return 0;
  return it->get<long long>();
}

std::string json_text(const nlohmann::json& object, const char* field) {
  if (!object.is_object()) return "";
  auto it = object.find(field);
  if (it == object.end() || !it->is_string()) return "";
  return it->get<std::string>();
}

std::optional<long long> max_billed_output_tokens(const ProviderConfig& c) {
  const long long thinking = c.thinking_budget && *c.thinking_budget > 0 ? *c.thinking_budget : 0;
  if (c.kind == "anthropic") return static_cast<long long>(c.max_tokens.value_or(kAnthropicDefaultMaxTokens)) + thinking;
  if (!c.max_tokens) return std::nullopt;
  if (c.kind == "gemini") return *c.max_tokens + thinking;
  return *c.max_tokens;  // openai and openai_responses: reasoning counts inside max_tokens
}

ProviderConfig provider_config_from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) {
    throw std::invalid_argument(settings_error(where, 0, "provider", "expected a mapping of fields, got " + j.dump()));
  }
  const SettingsReader r(j, where, "provider.");
  r.known(std::set<std::string>(kKnownFields.begin(), kKnownFields.end()));
  ProviderConfig c;
  if (!r.has("kind")) r.fail("kind", "missing; use one of " + join(kKnownKinds));
  c.kind = r.text("kind");
  bool known_kind = false;
  for (const auto& k : kKnownKinds) known_kind = known_kind || k == c.kind;
  if (!known_kind) r.fail("kind", "unknown kind '" + c.kind + "'; use one of " + join(kKnownKinds));

  if (r.has("model")) c.model = r.text("model");
  if (is_http_kind(c.kind) && c.model.empty()) r.fail("model", "missing; " + c.kind + " needs a model id");
  if (r.has("base_url")) c.base_url = r.text("base_url");
  if (r.has("api_key_env")) c.api_key_env = r.text("api_key_env");
  read_sampling(r, c);
  read_transport(r, c);
  read_extras(r, c);
  if (r.has("command")) {
    c.command = r.strings("command", /*allow_single=*/false);
    if (c.command.empty()) r.fail("command", "must name a program: [program, arg, ...]");
  }
  if (c.kind == "command" && c.command.empty())
    r.fail("command", "missing; the command provider needs [program, arg, ...]");
  if (r.has("transcript")) c.transcript = r.text("transcript");
  if (c.kind == "replay" && c.transcript.empty()) {
    r.fail("transcript", "missing; the replay provider needs a run folder or a JSONL file");
  }
  return c;
}

}  // namespace kloop
