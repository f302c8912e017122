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
#include <thread>

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
  if (response.cancelled || !response.stalled.empty()) return response.error;
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

HttpProvider::HttpProvider(const ProviderConfig& config, std::string default_base_url, std::string default_key_env,
                           const ProviderHooks& hooks)
    : config_(config),
      base_url_(strip_trailing_slashes(config.base_url.empty() ? default_base_url : config.base_url)),
      policy_(config.max_retries, config.initial_backoff, config.max_backoff, hooks.sleep),
      limit_(config.concurrency),
      notify_(hooks.notify ? hooks.notify : [](const std::string& line) { std::cerr << line << std::endl; }),
      real_sleep_(!hooks.sleep) {
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

// Tokens of text the provider sent no usage for: 4 characters a token.
long long estimated_tokens(std::size_t chars) { return static_cast<long long>((chars + 3) / 4); }

nlohmann::json token_json(const GenerationResult& r) {
  return {{"input", r.input_tokens},   {"cached_input", r.cached_input_tokens}, {"cache_write", r.cache_write_tokens},
          {"output", r.output_tokens}, {"reasoning", r.reasoning_tokens}};
}

}  // namespace

// One generate(): its HTTP request and every attempt's record so far.
struct HttpProvider::Exchange {
  const GenerationRequest& request;
  std::string body;  // the request body as sent (estimates of unreported input)
  Clock::time_point start = Clock::now();
  nlohmann::json calls = nlohmann::json::array();
  int attempt = 0;
  int broken = 0;  // attempts whose answer broke after HTTP 200
  // Keeps one attempt's record and tells the caller at once.
  void emit(nlohmann::json call) {
    calls.push_back(std::move(call));
    if (request.on_call) request.on_call(calls.back());
  }
};

// What became of one HTTP attempt: an answer, or a failure to try again
// under the transient budget (kRetry) or the broken-stream one (kResend).
struct HttpProvider::Step {
  enum Kind { kAnswer, kRetry, kResend } kind = kRetry;
  GenerationResult result;  // kAnswer
  nlohmann::json call;      // the attempt's record (a retry adds its wait)
  std::string failure;      // what went wrong, for messages
  std::string error_class;
  std::optional<std::chrono::milliseconds> requested_delay;
  bool cancelled = false;
};

nlohmann::json HttpProvider::call_record(int attempt, const HttpResponse& r, const std::string& error_class,
                                         const std::string& message) const {
  nlohmann::json c = {{"attempt", attempt}, {"status", r.status}, {"latency_s", r.seconds}, {"at", utc_now_text()}};
  if (const std::string id = redactor_.redact(request_id(r)); !id.empty()) c["request_id"] = id;
  if (!error_class.empty()) c["error_class"] = error_class;
  if (!message.empty()) c["message"] = redactor_.redact(message);
  return c;
}

HttpRequest HttpProvider::http_request(const GenerationRequest& request) const {
  nlohmann::json body = request_body(request);
  HttpRequest http;
  http.url = endpoint_url();
  if (config_.stream) {
    ask_for_stream(body, http);
    http.first_token_timeout = config_.first_token_timeout;
    http.idle_timeout = config_.idle_timeout;
  }
  // merge_patch: extra_body overrides ours, and a null there removes a field we set.
  if (config_.extra_body.is_object() && !config_.extra_body.empty()) body.merge_patch(config_.extra_body);
  http.headers = auth_headers(api_key_);
  for (const auto& header : config_.extra_headers) http.headers.push_back(header);
  http.body = body.dump();
  http.connect_timeout = config_.connect_timeout;
  http.total_timeout = config_.total_timeout;
  http.cancel = request.cancel;
  return http;
}

HttpResponse HttpProvider::send(HttpRequest& http) {
  // The token clocks count the events that carry generated text.
  SseSplitter splitter;
  if (config_.stream) {
    http.on_chunk = [&](const char* data, std::size_t size) {
      bool token = false;
      for (const SseEvent& e : splitter.feed(data, size)) token = carries_tokens(e) || token;
      return token;
    };
  }
  ConcurrencySlot slot(limit_);
  HttpResponse response = http_post_json(http);
  http.on_chunk = nullptr;
  return response;
}

GenerationResult HttpProvider::generate(const GenerationRequest& request) {
  Exchange x{request, ""};
  HttpRequest http = http_request(request);
  x.body = http.body;
  for (x.attempt = 1;; ++x.attempt) {
    if (request.cancel && request.cancel->load()) {
      throw ProviderCancelled(describe() + ": cancelled (the run was stopped) before attempt " +
                                  std::to_string(x.attempt) + " was sent",
                              x.calls, "cancelled");
    }
    const HttpResponse response = send(http);
    Step step = classify_status(response.status) == StatusClass::kSuccess ? read_success(response, x)
                                                                          : read_failure(response, x);
    if (step.kind == Step::kAnswer) {
      // The answer's own call goes back with it (the caller stores the two together).
      x.calls.push_back(step.call);
      step.result.calls = x.calls;
      return step.result;
    }
    if (step.cancelled) {
      x.emit(step.call);
      throw ProviderCancelled(redactor_.redact(describe() + ": cancelled (the run was stopped): " + step.failure),
                              x.calls, "cancelled");
    }
    const bool broken = step.kind == Step::kResend;
    x.broken += broken ? 1 : 0;
    if (broken ? x.broken > config_.resend_broken_streams : x.attempt - x.broken >= policy_.max_attempts()) {
      x.emit(step.call);
      throw ProviderError(redactor_.redact(describe() + ": " + give_up_message(broken, x, step.failure)), x.calls,
                          step.error_class);
    }
    const auto delay = policy_.delay_before_retry(x.attempt, step.requested_delay);
    step.call["retry_delay_s"] = static_cast<double>(delay.count()) / 1000.0;
    x.emit(step.call);
    const std::string budget = broken ? "resend " + std::to_string(x.broken) + " of " +
                                            std::to_string(config_.resend_broken_streams) + " (each billed)"
                                      : "attempt " + std::to_string(x.attempt - x.broken + 1) + " of " +
                                            std::to_string(policy_.max_attempts());
    notify_(redactor_.redact("kloop: " + config_.kind + " " + config_.model + ": " + step.failure.substr(0, 200) +
                             "; " + budget + " in " + fmt::format("{:.1f} s", delay.count() / 1000.0) +
                             (step.requested_delay ? " (the provider's delay)" : "")));
    wait_before_retry(delay, request.cancel);
  }
}

std::string HttpProvider::give_up_message(bool broken, const Exchange& x, const std::string& failure) const {
  if (broken) {
    return "the answer broke after HTTP 200 (" + failure + "); not sent again: " + std::to_string(x.broken - 1) +
           " resend(s) made, provider.retry.resend_broken_streams = " + std::to_string(config_.resend_broken_streams) +
           " (the provider may have billed each broken answer in full; a rerun asks again)";
  }
  return "gave up after " + std::to_string(x.attempt - x.broken) + " attempts (provider.retry.max_attempts = " +
         std::to_string(policy_.max_attempts()) + "); last failure: " + failure;
}

void HttpProvider::wait_before_retry(std::chrono::milliseconds delay, const std::atomic<bool>* cancel) {
  if (!cancel || !real_sleep_) {
    policy_.wait(delay);
    return;
  }
  // In slices, so that a stopped run does not sit out a long delay.
  const auto end = Clock::now() + delay;
  while (!cancel->load()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now());
    if (left.count() <= 0) return;
    std::this_thread::sleep_for(std::min(left, std::chrono::milliseconds(200)));
  }
}

HttpProvider::Step HttpProvider::read_success(const HttpResponse& response, Exchange& x) const {
  const bool sse = response.header("content-type").value_or("").find("text/event-stream") != std::string::npos;
  const bool streamed = sse || (response.interrupted && response.body.find("data:") != std::string::npos);
  if (!streamed) {
    if (response.interrupted) return transport_fault(response, response.stalled.empty() ? "reset" : "stall", response.error, {}, x);
    Step step;
    try {
      const auto body = nlohmann::json::parse(response.body);
      GenerationResult result;
      read_response(body, result);
      return finish_answer(std::move(result), body, response, false, x);
    } catch (const nlohmann::json::exception& e) {
      step.failure = "HTTP " + std::to_string(response.status) + " with an unreadable body: " + e.what();
    } catch (const MalformedResponse& e) {
      step.failure = "HTTP " + std::to_string(response.status) + " without an answer: " + e.what();
    }
    // Proxies and overloaded servers produce these, and they pass.
    step.error_class = "malformed";
    step.call = call_record(x.attempt, response, step.error_class, step.failure);
    return step;
  }
  StreamEnd end;
  nlohmann::json body;
  GenerationResult partial;
  bool readable = true;
  try {
    body = assemble_stream(parse_sse(response.body), end);
    read_response(body, partial);
  } catch (const std::exception&) {  // nothing of an answer arrived
    readable = false;
  }
  if (response.interrupted) {
    const std::string kind = response.cancelled ? "cancelled" : response.stalled.empty() ? "reset" : "stall_" + response.stalled;
    return transport_fault(response, kind, response.error, std::move(partial), x);
  }
  if (!end.error.empty()) return transport_fault(response, "error_event", "an error event: " + end.error, std::move(partial), x);
  if (!end.complete || !readable) {
    return transport_fault(response, "no_final_event", "the stream ended without its final event", std::move(partial), x);
  }
  return finish_answer(std::move(partial), body, response, true, x);
}

HttpProvider::Step HttpProvider::transport_fault(const HttpResponse& response, const std::string& kind,
                                                 const std::string& why, GenerationResult partial,
                                                 Exchange& x) const {
  // The provider bills what it generated: the usage the stream reported,
  // else an estimate from what arrived.
  const bool estimated = partial.input_tokens == 0 && partial.output_tokens == 0;
  if (estimated) {
    partial.input_tokens = estimated_tokens(x.body.size());
    partial.output_tokens = estimated_tokens(partial.text.size() + partial.reasoning.size());
  }
  Step step;
  step.kind = Step::kResend;
  step.cancelled = kind == "cancelled";
  step.error_class = "transport_fault";
  step.failure = why;
  step.call = call_record(x.attempt, response, step.error_class, "the answer broke after HTTP 200: " + why);
  step.call["transport_fault"] = kind;
  step.call["billed"] = response.received() || response.request_sent;
  step.call["streamed"] = config_.stream;
  step.call["tokens"] = token_json(partial);
  step.call["cost_usd"] = token_cost(config_.prices, partial.usage());
  if (estimated) step.call["usage_estimated"] = true;
  return step;
}

HttpProvider::Step HttpProvider::finish_answer(GenerationResult result, const nlohmann::json& body,
                                               const HttpResponse& response, bool streamed, Exchange& x) const {
  result.text = redactor_.redact(result.text);
  result.reasoning = redactor_.redact(result.reasoning);
  result.refusal = redactor_.redact(result.refusal);
  result.finish_reason = redactor_.redact(result.finish_reason);
  result.raw_response = redactor_.redact_json(body);
  result.attempts = x.attempt;
  result.latency_seconds = response.seconds;
  result.total_seconds = std::chrono::duration<double>(Clock::now() - x.start).count();
  // An answer without usage is not free: estimated, and said.
  const bool estimated = result.input_tokens == 0 && result.output_tokens == 0;
  if (estimated) {
    result.input_tokens = estimated_tokens(x.body.size());
    result.output_tokens = estimated_tokens(result.text.size() + result.reasoning.size());
    notify_("kloop: " + config_.kind + " " + config_.model + ": the answer came without its usage; its cost is "
            "estimated from its length (4 characters a token): " + std::to_string(result.input_tokens) +
            " input and " + std::to_string(result.output_tokens) + " output tokens");
  }
  result.cost_usd = token_cost(config_.prices, result.usage());
  Step step;
  step.kind = Step::kAnswer;
  step.call = call_record(x.attempt, response, "", "");
  step.call["finish_reason"] = result.finish_reason;
  step.call["streamed"] = streamed;
  step.call["billed"] = true;
  step.call["tokens"] = token_json(result);
  step.call["cost_usd"] = result.cost_usd;
  if (estimated) step.call["usage_estimated"] = true;
  step.result = std::move(result);
  return step;
}

HttpProvider::Step HttpProvider::read_failure(const HttpResponse& response, Exchange& x) const {
  Step step;
  if (!response.received()) {
    step.failure = describe_transport_failure(response);
    // A request that reached the server and then stalled or ran out of
    // time may have been generating (and billing) all along.
    if (response.cancelled || !response.stalled.empty() || (response.timed_out && response.request_sent)) {
      const std::string kind = response.cancelled ? "cancelled" : response.stalled.empty() ? "timeout_after_send"
                                                                                         : "stall_" + response.stalled;
      return transport_fault(response, kind, step.failure, {}, x);
    }
    step.error_class = error_class_name(ErrorClass::kTransient);
    step.call = call_record(x.attempt, response, step.error_class, step.failure);
    return step;
  }
  const std::string server = redactor_.redact(server_error_message(response.body));
  const ErrorReading er = classify_error(config_.kind, response, server, std::chrono::system_clock::now());
  const std::string cls = error_class_name(er.error_class);
  const std::string head = std::to_string(response.status) + " from " + config_.kind + " (model " + config_.model + ")";
  // A failure that ends generate(): its record kept, then thrown.
  auto last = [&](const std::string& message) {
    x.emit(call_record(x.attempt, response, cls, server));
    return redactor_.redact(message);
  };
  std::string message;
  switch (er.error_class) {
    case ErrorClass::kTransient:
      step.failure = "HTTP " + std::to_string(response.status) + ": " + server;
      step.requested_delay = er.retry_delay;
      step.error_class = cls;
      step.call = call_record(x.attempt, response, cls, step.failure);
      return step;
    case ErrorClass::kContentPolicy: {
      // Refused by the provider's safety system: that attempt's outcome.
      step.kind = Step::kAnswer;
      step.call = call_record(x.attempt, response, cls, server);
      GenerationResult& refused = step.result;
      refused.finish_reason = "content_filter";
      refused.refusal = server.empty() ? "refused by the provider (HTTP " + std::to_string(response.status) + ")" : server;
      refused.raw_response = redactor_.redact_json(nlohmann::json::parse(response.body, nullptr, false));
      refused.attempts = x.attempt;
      refused.latency_seconds = response.seconds;
      refused.total_seconds = std::chrono::duration<double>(Clock::now() - x.start).count();
      return step;
    }
    case ErrorClass::kContextOverflow:
      message = last(head + ": the conversation does not fit the model's context window; this chain ends here "
                            "[server says: " + server + "]");
      throw ContextOverflowError(message, x.calls, cls);
    case ErrorClass::kServerRefused:
      message = last(head + ": the server said not to retry (x-should-retry: false) [server says: " + server + "]");
      throw ProviderError(message, x.calls, cls);
    case ErrorClass::kQuota:
      message = last(head + ": quota, spend limit or billing: every later call would fail too, so the run stops; "
                            "check the account's plan, credit and limits, then run again (finished work is kept) "
                            "[server says: " + server + "]");
      throw FatalProviderError(message, x.calls, cls);
    case ErrorClass::kAuth:
    case ErrorClass::kModel:
    case ErrorClass::kBadRequest:
      message = last(fatal_status_message(identity_, response.status, server));
      throw FatalProviderError(message, x.calls, cls);
  }
  return step;
}

}  // namespace kloop
