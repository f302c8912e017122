// The part the four HTTP APIs share: the request/retry loop, the
// per-provider concurrency limit, key handling and cost. Each API supplies
// its URL, auth headers, request body, response reader and how its stream
// says what it carries and that it ended.
//
// Internal to agent/llm; callers use make_provider() from provider.h.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "agent/llm/provider.h"
#include "agent/llm/redactor.h"
#include "agent/llm/retry_policy.h"

namespace kloop {

// What tests replace: the backoff sleep, and where the notes on waits go.
struct ProviderHooks {
  SleepFunction sleep;                        // empty: really sleep
  std::function<void(const std::string&)> notify;  // empty: one line on stderr
};

// A counting semaphore (C++17 has none): at most `limit` holders at once.
class ConcurrencyLimit {
 public:
  explicit ConcurrencyLimit(int limit) : available_(limit < 1 ? 1 : limit) {}
  ConcurrencyLimit(const ConcurrencyLimit&) = delete;
  ConcurrencyLimit& operator=(const ConcurrencyLimit&) = delete;
  void acquire();
  void release();

 private:
  std::mutex mutex_;
  std::condition_variable freed_;
  int available_;
};

// A 2xx body that is not the API's shape; retried like a 5xx because
// proxies and overloaded servers produce these and they pass.
class MalformedResponse : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Numbers and strings from a parsed body, tolerating null and absent fields
// (OpenAI-compatible servers differ in what they leave out).
long long json_count(const nlohmann::json& object, const char* field);
std::string json_text(const nlohmann::json& object, const char* field);

class HttpProvider : public LlmProvider {
 public:
  // default_base_url when config.base_url is empty; default_key_env when
  // config.api_key_env is empty ("" for none). Throws std::invalid_argument
  // when the key variable is unset.
  HttpProvider(const ProviderConfig& config, std::string default_base_url, std::string default_key_env,
               const ProviderHooks& hooks);
  HttpProvider(const HttpProvider&) = delete;
  HttpProvider& operator=(const HttpProvider&) = delete;

  GenerationResult generate(const GenerationRequest& request) final;
  std::string describe() const override;
  // The API key and the values of provider.headers (those of at least
  // kMinSecretLength characters).
  std::vector<std::string> secrets() const override;
  // GET models_url() with the key: reachable, key accepted, model listed.
  Probe probe() override;

 protected:
  virtual std::string endpoint_url() const = 0;
  // The API's model list (GET, no tokens billed), and the model ids in its
  // answer.
  virtual std::string models_url() const = 0;
  virtual std::vector<std::string> listed_models(const nlohmann::json& body) const = 0;
  virtual std::vector<std::pair<std::string, std::string>> auth_headers(const std::string& api_key) const = 0;
  virtual nlohmann::json request_body(const GenerationRequest& request) const = 0;
  // Fills text, reasoning, finish_reason and token counts; throws
  // MalformedResponse or a json exception when the body is not the API's.
  virtual void read_response(const nlohmann::json& body, GenerationResult& out) const = 0;
  // Streaming: makes the request ask for Server-Sent Events, and assembles
  // the events into the body read_response reads (throwing
  // MalformedResponse when they hold nothing of an answer). `end` gets
  // whether the API's final event arrived and any error event's message.
  virtual void ask_for_stream(nlohmann::json& body, HttpRequest& http) const = 0;
  struct StreamEnd {
    bool complete = false;  // the API's final event arrived
    std::string error;      // an error event's message ("" when none came)
  };
  virtual nlohmann::json assemble_stream(const std::vector<SseEvent>& events, StreamEnd& end) const = 0;
  // Whether an event carries generated text or reasoning, or ends the
  // answer: what the first-token and idle clocks count. Metadata
  // (response.created, message_start, pings) does not.
  virtual bool carries_tokens(const SseEvent& event) const = 0;

  const ProviderConfig& config() const { return config_; }
  const std::string& base_url() const { return base_url_; }  // no trailing slash

 private:
  struct Exchange;
  struct Step;
  HttpRequest http_request(const GenerationRequest& request) const;
  HttpResponse send(HttpRequest& http);
  Step read_success(const HttpResponse& response, Exchange& x) const;
  Step read_failure(const HttpResponse& response, Exchange& x) const;
  Step transport_fault(const HttpResponse& response, const std::string& kind, const std::string& why,
                       GenerationResult partial, Exchange& x) const;
  Step finish_answer(GenerationResult result, const nlohmann::json& body, const HttpResponse& response,
                                 bool streamed, Exchange& x) const;
  void wait_before_retry(std::chrono::milliseconds delay, const std::atomic<bool>* cancel);
  std::string give_up_message(bool broken, const Exchange& x, const std::string& failure) const;
  nlohmann::json call_record(int attempt, const HttpResponse& r, const std::string& error_class,
                             const std::string& message) const;

  ProviderConfig config_;
  std::string base_url_;
  std::string api_key_;
  Redactor redactor_;
  ProviderIdentity identity_;
  RetryPolicy policy_;
  ConcurrencyLimit limit_;
  std::function<void(const std::string&)> notify_;
  bool real_sleep_;  // the backoff really sleeps (no test hook): a stopped run cuts it short
};

}  // namespace kloop
