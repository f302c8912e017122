// The request/retry loop shared by the HTTP providers. Every text that can
// leave this file (errors, answers, stored responses) passes through the
// provider's Redactor so a key or header value echoed back by a server
// never reaches a log, a run folder or the next prompt.
#include "agent/llm/http_provider.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <iostream>

#include "agent/llm/error_class.h"
#include "agent/llm/http_client.h"
#include "base/settings.h"

namespace kloop {
namespace {

using Clock = std::chrono::steady_clock;

std::string strip_trailing_slashes(std::string url) {
  while (!url.empty() && url.back() == '/') url.pop_back();
  return url;
}

std::string read_key(const std::string& env_name) {
  if (env_name.empty()) return "";
  const char* value = std::getenv(env_name.c_str());
  if (!value || !*value) {
    throw std::invalid_argument(
        settings_error("", 0, "provider.api_key_env", "environment variable " + env_name + " is not set"));
  }
  return value;
}

class ConcurrencySlot {
 public:
  explicit ConcurrencySlot(ConcurrencyLimit& limit) : limit_(limit) { limit_.acquire(); }
  ~ConcurrencySlot() { limit_.release(); }
  ConcurrencySlot(const ConcurrencySlot&) = delete;
  ConcurrencySlot& operator=(const ConcurrencySlot&) = delete;

 private:
  ConcurrencyLimit& limit_;
};

std::string describe_transport_failure(const HttpResponse& response) {
  if (response.timed_out) {
    return "no response in time (provider.timeout_s / connect_timeout_s): " + response.error;
  }
  return "network error: " + response.error;
}

}  // namespace

void ConcurrencyLimit::acquire() {
  std::unique_lock<std::mutex> lock(mutex_);
  freed_.wait(lock, [this] { return available_ > 0; });
  --available_;
}

void ConcurrencyLimit::release() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++available_;
  }
  freed_.notify_one();
}

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

HttpProvider::HttpProvider(const ProviderConfig& config, std::string default_base_url, std::string default_key_env,
                           const ProviderHooks& hooks)
    : config_(config),
      base_url_(strip_trailing_slashes(config.base_url.empty() ? default_base_url : config.base_url)),
      policy_(config.max_retries, config.initial_backoff, config.max_backoff, hooks.sleep),
      limit_(config.concurrency),
      notify_(hooks.notify ? hooks.notify : [](const std::string& line) { std::cerr << line << std::endl; }) {
  identity_.kind = config.kind;
  identity_.model = config.model;
  identity_.url = base_url_;
  identity_.api_key_env = config.api_key_env.empty() ? default_key_env : config.api_key_env;
  api_key_ = read_key(identity_.api_key_env);
  redactor_.add(secrets());
}

std::vector<std::string> HttpProvider::secrets() const {
  std::vector<std::string> out = {api_key_};
  // A header value shorter than a credential ("X-Priority: 1") would blank
  // ordinary text wherever it occurs.
  for (const auto& header : config_.extra_headers) {
    if (header.second.size() >= kMinSecretLength) out.push_back(header.second);
  }
  return out;
}

std::string HttpProvider::describe() const { return config_.kind + " " + config_.model + " @ " + base_url_; }

LlmProvider::Probe HttpProvider::probe() {
  HttpRequest http;
  http.url = models_url();
  http.headers = auth_headers(api_key_);
  for (const auto& header : config_.extra_headers) http.headers.push_back(header);
  http.connect_timeout = config_.connect_timeout;
  http.total_timeout = std::chrono::milliseconds(30000);
  const HttpResponse r = http_get(http);
  Probe p;
  p.checked = true;
  if (!r.received()) {
    p.ok = false;
    p.what = "no answer from " + http.url + " (" + redactor_.redact(r.error) + ")";
    return p;
  }
  const std::string said = redactor_.redact(r.body.substr(0, 300));
  if (r.status == 401 || r.status == 403) {
    p.ok = false;
    p.what = "the key in " + identity_.api_key_env + " was refused (HTTP " + std::to_string(r.status) + "): " + said;
    return p;
  }
  if (r.status / 100 != 2) {
    // Some OpenAI-compatible servers have no model list: not a reason to
    // stop, but worth saying.
    p.what = http.url + " answered HTTP " + std::to_string(r.status) + " (" + said + "); the key was not refused";
    return p;
  }
  std::vector<std::string> models;
  try {
    models = listed_models(nlohmann::json::parse(r.body));
  } catch (const std::exception&) {
  }
  std::string want = config_.model;
  if (want.rfind("models/", 0) == 0) want.erase(0, 7);
  const bool listed = std::find(models.begin(), models.end(), want) != models.end();
  p.what = "reachable, key accepted (HTTP " + std::to_string(r.status) + "); model '" + config_.model + "' " +
           (listed ? "listed" : "not among the " + std::to_string(models.size()) + " models listed (check its id)");
  return p;
}

namespace {

// The provider's id of the call, for support tickets: OpenAI x-request-id,
// Anthropic request-id, Google x-goog-request-id (when sent).
std::string request_id(const HttpResponse& r) {
  for (const char* h : {"x-request-id", "request-id", "x-goog-request-id"}) {
    if (auto v = r.header(h)) return *v;
  }
  return "";
}

std::string utc_now_text() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

GenerationResult HttpProvider::generate(const GenerationRequest& request) {
  auto start = Clock::now();
  nlohmann::json body = request_body(request);
  HttpRequest http;
  http.url = endpoint_url();
  if (config_.stream) {
    ask_for_stream(body, http);
    http.idle_timeout = config_.idle_timeout;
  }
  // merge_patch: extra_body overrides ours, and a null there removes a field we set.
  if (config_.extra_body.is_object() && !config_.extra_body.empty()) body.merge_patch(config_.extra_body);
  http.headers = auth_headers(api_key_);
  for (const auto& header : config_.extra_headers) http.headers.push_back(header);
  http.body = body.dump();
  http.connect_timeout = config_.connect_timeout;
  http.total_timeout = config_.total_timeout;

  // Every attempt leaves a record (calls.jsonl), whatever became of it.
  nlohmann::json calls = nlohmann::json::array();
  auto record = [&](int attempt, const HttpResponse& r, const std::string& error_class, const std::string& message) {
    nlohmann::json c = {{"attempt", attempt}, {"status", r.status}, {"latency_s", r.seconds}, {"at", utc_now_text()}};
    if (const std::string id = redactor_.redact(request_id(r)); !id.empty()) c["request_id"] = id;
    if (!error_class.empty()) c["error_class"] = error_class;
    if (!message.empty()) c["message"] = redactor_.redact(message);
    calls.push_back(std::move(c));
  };
  std::string last_failure;
  for (int attempt = 1;; ++attempt) {
    HttpResponse response;
    {
      ConcurrencySlot slot(limit_);
      response = http_post_json(http);
    }
    std::optional<std::chrono::milliseconds> requested_delay;
    const bool sse = response.header("content-type").value_or("").find("text/event-stream") != std::string::npos;
    if (classify_status(response.status) == StatusClass::kSuccess) {
      try {
        // A streamed answer (or one cut part way, or with an error event in
        // it) is assembled into the shape of a whole one first.
        std::string stream_error;
        const bool streamed = sse || (response.interrupted && response.body.find("data:") != std::string::npos);
        auto json = streamed ? assemble_stream(parse_sse(response.body), stream_error) : nlohmann::json::parse(response.body);
        GenerationResult result;
        read_response(json, result);
        const bool cut = response.interrupted || !stream_error.empty();
        const std::string why_cut = response.interrupted ? response.error : stream_error;
        if (cut && result.text.empty() && result.reasoning.empty()) {
          // Nothing generated yet: nothing billed beyond the prompt; tried again.
          throw MalformedResponse("the stream broke before any answer (" + why_cut + ")");
        }
        if (cut) {
          result.finish_reason = "interrupted";
          if (config_.resend_interrupted) {
            throw MalformedResponse("the stream broke part way (" + why_cut + "); provider.retry.resend_interrupted");
          }
        }
        result.text = redactor_.redact(result.text);
        result.reasoning = redactor_.redact(result.reasoning);
        result.refusal = redactor_.redact(result.refusal);
        result.finish_reason = redactor_.redact(result.finish_reason);
        result.raw_response = redactor_.redact_json(json);
        result.attempts = attempt;
        result.latency_seconds = response.seconds;
        result.total_seconds = std::chrono::duration<double>(Clock::now() - start).count();
        result.cost_usd = token_cost(config_.prices, result.usage());
        record(attempt, response, cut ? "interrupted" : "", cut ? "the answer was cut part way: " + why_cut : "");
        calls.back()["finish_reason"] = result.finish_reason;
        calls.back()["streamed"] = streamed;
        calls.back()["tokens"] = {{"input", result.input_tokens},
                                  {"cached_input", result.cached_input_tokens},
                                  {"cache_write", result.cache_write_tokens},
                                  {"output", result.output_tokens},
                                  {"reasoning", result.reasoning_tokens}};
        calls.back()["cost_usd"] = result.cost_usd;
        result.calls = std::move(calls);
        return result;
      } catch (const nlohmann::json::exception& e) {
        last_failure = "HTTP " + std::to_string(response.status) + " with an unreadable body: " + e.what();
      } catch (const MalformedResponse& e) {
        last_failure = "HTTP " + std::to_string(response.status) + " without an answer: " + e.what();
      }
      record(attempt, response, "malformed", last_failure);  // proxies, overloaded servers, broken streams: retried
    } else if (!response.received()) {
      last_failure = describe_transport_failure(response);
      // A request that reached the server and then ran out of time may have
      // been generating all along: not sent again (and billed twice) unless
      // the config says so. A stream would have kept what arrived.
      if (response.timed_out && response.request_sent && !config_.resend_interrupted) {
        record(attempt, response, "timeout_after_send", last_failure);
        throw ProviderError(redactor_.redact(describe() + ": " + last_failure +
                                             " after the request was sent; not sent again, since the provider may "
                                             "have generated (and billed) the answer: raise provider.timeout_s, keep "
                                             "provider.stream on, or set provider.retry.resend_interrupted"),
                            calls, "timeout_after_send");
      }
      record(attempt, response, error_class_name(ErrorClass::kTransient), last_failure);
    } else {
      const std::string server = redactor_.redact(server_error_message(response.body));
      const ErrorReading er = classify_error(config_.kind, response, server, std::chrono::system_clock::now());
      const std::string cls = error_class_name(er.error_class);
      const std::string head = std::to_string(response.status) + " from " + config_.kind + " (model " + config_.model + ")";
      switch (er.error_class) {
        case ErrorClass::kTransient:
          last_failure = "HTTP " + std::to_string(response.status) + ": " + server;
          requested_delay = er.retry_delay;
          record(attempt, response, cls, last_failure);
          break;
        case ErrorClass::kContentPolicy: {
          // Refused by the provider's safety system: that attempt's outcome.
          record(attempt, response, cls, server);
          GenerationResult refused;
          refused.finish_reason = "content_filter";
          refused.refusal = server.empty() ? "refused by the provider (HTTP " + std::to_string(response.status) + ")" : server;
          refused.raw_response = redactor_.redact_json(nlohmann::json::parse(response.body, nullptr, false));
          refused.attempts = attempt;
          refused.latency_seconds = response.seconds;
          refused.total_seconds = std::chrono::duration<double>(Clock::now() - start).count();
          refused.calls = std::move(calls);
          return refused;
        }
        case ErrorClass::kContextOverflow: {
          record(attempt, response, cls, server);
          throw ContextOverflowError(redactor_.redact(head + ": the conversation does not fit the model's context "
                                                             "window; this chain ends here [server says: " + server + "]"),
                                     calls, cls);
        }
        case ErrorClass::kServerRefused:
          record(attempt, response, cls, server);
          throw ProviderError(redactor_.redact(head + ": the server said not to retry (x-should-retry: false) [server says: " +
                                               server + "]"),
                              calls, cls);
        case ErrorClass::kQuota:
          record(attempt, response, cls, server);
          throw FatalProviderError(
              redactor_.redact(head + ": quota, spend limit or billing: every later call would fail too, so the run "
                                      "stops; check the account's plan, credit and limits, then run again (finished "
                                      "work is kept) [server says: " + server + "]"),
              calls, cls);
        case ErrorClass::kAuth:
        case ErrorClass::kModel:
        case ErrorClass::kBadRequest:
          record(attempt, response, cls, server);
          throw FatalProviderError(redactor_.redact(fatal_status_message(identity_, response.status, server)), calls, cls);
      }
    }
    if (attempt >= policy_.max_attempts()) {
      throw ProviderError(redactor_.redact(describe() + ": gave up after " + std::to_string(attempt) +
                                           " attempts (provider.retry.max_attempts = " +
                                           std::to_string(policy_.max_attempts()) + "); last failure: " + last_failure),
                          calls, "transient");
    }
    const auto delay = policy_.delay_before_retry(attempt, requested_delay);
    calls.back()["retry_delay_s"] = static_cast<double>(delay.count()) / 1000.0;
    const std::string wait = fmt::format("{:.1f} s", static_cast<double>(delay.count()) / 1000.0);
    notify_(redactor_.redact("kloop: " + config_.kind + " " + config_.model + ": " + last_failure.substr(0, 200) +
                             "; attempt " + std::to_string(attempt + 1) + " of " +
                             std::to_string(policy_.max_attempts()) + " in " + wait +
                             (requested_delay ? " (the provider's delay)" : "")));
    policy_.wait(delay);
  }
}

}  // namespace kloop
