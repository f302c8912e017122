// make_provider and the provider block of a run config.
//
// Config errors name the file, the field and the fix, since this is the
// first thing a user sees when a run config is wrong.
#include "agent/llm/provider.h"

#include <cmath>
#include <cstdlib>
#include <set>

#include "agent/llm/provider_factories.h"

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

// Reads typed fields of the provider block. YAML-to-JSON conversion may
// leave scalars as strings ("0.7"), so numbers are accepted in either form.
class FieldReader {
 public:
  // `prefix`: the block's path under provider ("retry." for provider.retry).
  FieldReader(const nlohmann::json& block, std::string where, std::string prefix = "")
      : block_(block), where_(std::move(where)), prefix_(std::move(prefix)) {}

  bool has(const char* field) const { return block_.contains(field) && !block_[field].is_null(); }
  const nlohmann::json& at(const char* field) const { return block_[field]; }

  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    throw std::invalid_argument(where_ + ": provider." + prefix_ + field + ": " + what);
  }

  std::string text(const char* field) const {
    if (!at(field).is_string()) fail(field, "expected a string, got " + std::string(at(field).type_name()));
    return at(field).get<std::string>();
  }

  double number(const char* field) const {
    const auto& v = at(field);
    if (v.is_number()) return v.get<double>();
    if (v.is_string()) {
      const std::string s = v.get<std::string>();
      char* end = nullptr;
      double d = std::strtod(s.c_str(), &end);
      if (!s.empty() && end && *end == '\0' && std::isfinite(d)) return d;
    }
    fail(field, "expected a number, got " + v.dump());
  }

  long long integer(const char* field) const {
    double d = number(field);
    if (d != std::floor(d) || std::fabs(d) > 9.0e15) fail(field, "expected a whole number, got " + at(field).dump());
    return static_cast<long long>(d);
  }

  double non_negative(const char* field) const {
    double d = number(field);
    if (d < 0) fail(field, "must not be negative (got " + at(field).dump() + ")");
    return d;
  }

  std::chrono::milliseconds seconds(const char* field) const {
    double s = number(field);
    if (s <= 0) fail(field, "must be a positive number of seconds (got " + at(field).dump() + ")");
    return std::chrono::milliseconds(static_cast<long long>(std::llround(s * 1000.0)));
  }

  std::vector<std::string> strings(const char* field, bool allow_single) const {
    const auto& v = at(field);
    if (allow_single && v.is_string()) return {v.get<std::string>()};
    if (!v.is_array()) fail(field, "expected a list of strings, got " + std::string(v.type_name()));
    std::vector<std::string> out;
    for (const auto& item : v) {
      if (!item.is_string()) fail(field, "expected a list of strings; " + item.dump() + " is not a string");
      out.push_back(item.get<std::string>());
    }
    return out;
  }

 private:
  const nlohmann::json& block_;
  std::string where_;
  std::string prefix_;
};

}  // namespace

std::unique_ptr<LlmProvider> make_provider(const ProviderConfig& config, const ProviderHooks& hooks) {
  if (config.kind.empty()) {
    throw std::invalid_argument("provider.kind: missing; use one of " + join(kKnownKinds));
  }
  if (is_http_kind(config.kind) && config.model.empty()) {
    throw std::invalid_argument("provider.model: missing; name the model to call (e.g. the API's model id)");
  }
  if (config.concurrency < 1) {
    throw std::invalid_argument("provider.concurrency: must be at least 1 (got " + std::to_string(config.concurrency) +
                                ")");
  }
  if (config.kind == "openai") return make_openai_provider(config, hooks);
  if (config.kind == "openai_responses") return make_openai_responses_provider(config, hooks);
  if (config.kind == "anthropic") return make_anthropic_provider(config, hooks);
  if (config.kind == "gemini") return make_gemini_provider(config, hooks);
  if (config.kind == "command") return make_command_provider(config);
  if (config.kind == "replay") return make_replay_provider(config);
  throw std::invalid_argument("provider.kind: unknown kind '" + config.kind + "'; use one of " + join(kKnownKinds));
}

std::unique_ptr<LlmProvider> make_provider(const ProviderConfig& config) { return make_provider(config, {}); }

ProviderConfig provider_config_from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) {
    throw std::invalid_argument(where + ": provider: expected a mapping of fields, got " + std::string(j.type_name()));
  }
  const std::set<std::string> known(kKnownFields.begin(), kKnownFields.end());
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!known.count(it.key())) {
      throw std::invalid_argument(where + ": provider." + it.key() +
                                  ": unknown field; known fields: " + join(kKnownFields));
    }
  }
  FieldReader r(j, where);
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
  if (r.has("temperature")) c.temperature = r.non_negative("temperature");
  if (r.has("top_p")) {
    c.top_p = r.number("top_p");
    if (*c.top_p <= 0 || *c.top_p > 1) r.fail("top_p", "must be in (0, 1] (got " + r.at("top_p").dump() + ")");
  }
  if (r.has("max_tokens")) {
    long long v = r.integer("max_tokens");
    if (v < 1 || v > 100000000) r.fail("max_tokens", "must be a positive token count (got " + std::to_string(v) + ")");
    c.max_tokens = static_cast<int>(v);
  }
  if (r.has("reasoning_effort")) c.reasoning_effort = r.text("reasoning_effort");
  if (r.has("thinking_budget")) {
    // Gemini takes -1 (dynamic) and 0 (off); Anthropic checks its own floor.
    long long v = r.integer("thinking_budget");
    if (v < -1 || v > 100000000) r.fail("thinking_budget", "must be a token count (got " + std::to_string(v) + ")");
    c.thinking_budget = static_cast<int>(v);
  }
  if (r.has("seed")) c.seed = r.integer("seed");
  if (r.has("stop")) c.stop = r.strings("stop", /*allow_single=*/true);
  if (r.has("connect_timeout_s")) c.connect_timeout = r.seconds("connect_timeout_s");
  if (r.has("timeout_s")) c.total_timeout = r.seconds("timeout_s");
  if (r.has("max_retries")) {
    long long v = r.integer("max_retries");
    if (v < 0 || v > 100) r.fail("max_retries", "must be between 0 and 100 (got " + std::to_string(v) + ")");
    c.max_retries = static_cast<int>(v);
  }
  if (r.has("concurrency")) {
    long long v = r.integer("concurrency");
    if (v < 1 || v > 10000) r.fail("concurrency", "must be at least 1 (got " + std::to_string(v) + ")");
    c.concurrency = static_cast<int>(v);
  }
  if (r.has("retry")) {
    // retry: {max_attempts, base_delay_s, max_delay_s}; max_retries is the
    // older spelling of max_attempts - 1.
    const auto& b = r.at("retry");
    if (!b.is_object()) r.fail("retry", "expected {max_attempts: N, base_delay_s: S, max_delay_s: S}");
    for (auto it = b.begin(); it != b.end(); ++it) {
      if (it.key() != "max_attempts" && it.key() != "base_delay_s" && it.key() != "max_delay_s" &&
          it.key() != "resend_interrupted") {
        r.fail("retry." + it.key(),
               "unknown field; known fields: max_attempts, base_delay_s, max_delay_s, resend_interrupted");
      }
    }
    FieldReader retry(b, where, "retry.");
    if (retry.has("max_attempts")) {
      long long v = retry.integer("max_attempts");
      if (v < 1 || v > 101) r.fail("retry.max_attempts", "must be between 1 and 101 (got " + std::to_string(v) + ")");
      c.max_retries = static_cast<int>(v - 1);
    }
    if (retry.has("resend_interrupted")) {
      if (!b["resend_interrupted"].is_boolean()) r.fail("retry.resend_interrupted", "expected true or false");
      c.resend_interrupted = b["resend_interrupted"].get<bool>();
    }
    if (retry.has("base_delay_s")) c.initial_backoff = retry.seconds("base_delay_s");
    if (retry.has("max_delay_s")) c.max_backoff = retry.seconds("max_delay_s");
    if (c.max_backoff < c.initial_backoff) r.fail("retry.max_delay_s", "must be at least retry.base_delay_s");
  }
  if (r.has("stream")) {
    if (!r.at("stream").is_boolean()) r.fail("stream", "expected true or false");
    c.stream = r.at("stream").get<bool>();
  }
  if (r.has("idle_timeout_s")) c.idle_timeout = r.seconds("idle_timeout_s");
  if (r.has("think_tags")) {
    const auto tags = r.strings("think_tags", /*allow_single=*/false);
    if (!tags.empty() && (tags.size() != 2 || tags[0].empty() || tags[1].empty())) {
      r.fail("think_tags", "expected [open, close], e.g. [\"<think>\", \"</think>\"], or [] for none");
    }
    c.think_open = tags.empty() ? "" : tags[0];
    c.think_close = tags.empty() ? "" : tags[1];
  }
  if (r.has("prices")) {
    const auto& p = r.at("prices");
    if (!p.is_object()) r.fail("prices", "expected {input: <$ per million tokens>, output: <$ per million tokens>}");
    for (auto it = p.begin(); it != p.end(); ++it) {
      if (it.key() != "input" && it.key() != "output" && it.key() != "cached_input" && it.key() != "cache_write") {
        r.fail("prices." + it.key(),
               "unknown field; known fields: input, output, cached_input, cache_write (US dollars per million tokens)");
      }
    }
    FieldReader prices(p, where, "prices.");
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
