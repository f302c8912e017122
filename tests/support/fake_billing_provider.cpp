// The billing provider of fake_billing_provider.h.
#include "tests/support/fake_billing_provider.h"

#include <nlohmann/json.hpp>


namespace kloop::test_support {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

std::string event(const std::string& type, const json& data) { return "event: " + type + "\ndata: " + data.dump() + "\n\n"; }

// https://docs.anthropic.com/en/api/errors
ScriptedReply error_reply(int status, const std::string& type, const std::string& message, const std::string& id) {
  return {{status,
           {{"Content-Type", "application/json"}, {"request-id", id}, {"retry-after", "0"}},
           json{{"type", "error"}, {"error", {{"type", type}, {"message", message}}}}.dump(),
           0ms},
          std::string::npos, 0ms, {}};
}

}  // namespace

FakeBillingProvider::FakeBillingProvider(std::uint64_t seed, Answer answer, double input_price, double output_price)
    : answer_(std::move(answer)), input_price_(input_price), output_price_(output_price), seed_(seed) {
  server_.set_handler([this](const RecordedRequest& r, std::size_t i) { return reply(r, i); });
  server_.set_delivered([this](std::size_t i, std::size_t bytes) { delivered(i, bytes); });
}

ScriptedReply FakeBillingProvider::reply(const RecordedRequest& request, std::size_t index) {
  const json body = json::parse(request.body, nullptr, false);
  std::string problem;
  int turn = 1;
  if (body.is_object() && body.contains("messages")) {
    const std::string task = body["messages"][0].value("content", "");
    const std::size_t at = task.find("# Task: ");
    if (at != std::string::npos) problem = task.substr(at + 8, task.find('\n', at) - at - 8);
    for (const auto& m : body["messages"]) turn += m.value("role", "") == "assistant" ? 1 : 0;
  }
  // splitmix64 of (seed, index): each request's draw on its own.
  std::uint64_t z = seed_ + 0x9e3779b97f4a7c15ULL * (index + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  const int draw = static_cast<int>((z ^ (z >> 31)) % 100);
  const std::string id = "req_" + std::to_string(index);
  Pending p;
  p.bill.request_id = id;
  // The faults a real provider sends, by share of requests; the first
  // requests meet each of them once.
  static const char* const kKinds[] = {"rate_limit", "overloaded",     "server_error", "error_event",
                                       "reset",      "no_final_event", "stall"};
  const char* kind = index < 7 ? kKinds[index]
                   : draw < 8 ? "rate_limit" : draw < 12 ? "overloaded" : draw < 16 ? "server_error"
                   : draw < 24 ? "error_event" : draw < 32 ? "reset" : draw < 35 ? "stall"
                   : draw < 41 ? "no_final_event" : "answer";
  p.bill.kind = kind;
  ScriptedReply out;
  if (p.bill.kind == "rate_limit") out = error_reply(429, "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit", id);
  if (p.bill.kind == "overloaded") out = error_reply(529, "overloaded_error", "Overloaded", id);
  if (p.bill.kind == "server_error") out = error_reply(500, "api_error", "An unexpected error has occurred internal to Anthropic's systems.", id);
  if (out.response.status == 200) {
    const std::string text = answer_(problem, turn);
    const long long input = static_cast<long long>(request.body.size() / 4), output = static_cast<long long>(text.size() / 4 + 1);
    std::string sse = event("message_start", {{"type", "message_start"},
                                              {"message", {{"id", "msg_" + std::to_string(index)}, {"type", "message"},
                                                           {"role", "assistant"}, {"content", json::array()},
                                                           {"model", "claude-test"}, {"stop_reason", nullptr},
                                                           {"usage", {{"input_tokens", input}, {"output_tokens", 1}}}}}});
    p.usage_at.push_back({sse.size(), {input, 1}});
    sse += event("content_block_start", {{"type", "content_block_start"}, {"index", 0},
                                         {"content_block", {{"type", "text"}, {"text", ""}}}});
    const std::size_t third = text.size() / 3;
    std::size_t cut = 0;
    for (int part = 0; part < 3; ++part) {
      const std::string piece = text.substr(part * third, part == 2 ? std::string::npos : third);
      sse += event("content_block_delta", {{"type", "content_block_delta"}, {"index", 0},
                                           {"delta", {{"type", "text_delta"}, {"text", piece}}}});
      if (part == 1) cut = sse.size();
    }
    const std::string rest =
        event("content_block_stop", {{"type", "content_block_stop"}, {"index", 0}}) +
        event("message_delta", {{"type", "message_delta"}, {"delta", {{"stop_reason", "end_turn"}, {"stop_sequence", nullptr}}},
                                {"usage", {{"output_tokens", output}}}});
    out = {{200, {{"Content-Type", "text/event-stream"}, {"request-id", id}}, "", 0ms}, std::string::npos, 0ms, {}};
    if (p.bill.kind == "answer" || p.bill.kind == "no_final_event") {
      sse += rest;
      p.usage_at.push_back({sse.size(), {input, output}});
      if (p.bill.kind == "answer") sse += event("message_stop", {{"type", "message_stop"}});
    } else if (p.bill.kind == "error_event") {
      sse = sse.substr(0, cut) + event("error", {{"type", "error"}, {"error", {{"type", "overloaded_error"}, {"message", "Overloaded"}}}});
    } else {
      out.cut_at = cut;
      if (p.bill.kind == "stall") out.stall = 3000ms;
    }
    out.response.body = sse;
    p.bill.billed = true;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  responses_[index] = std::move(p);
  return out;
}

void FakeBillingProvider::delivered(std::size_t index, std::size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  Pending& p = responses_[index];
  p.bill.cost_usd = 0;
  for (const auto& [offset, usage] : p.usage_at) {
    if (offset <= bytes) p.bill.cost_usd = (usage.first * input_price_ + usage.second * output_price_) / 1e6;
  }
  p.delivered = true;
}

std::vector<FakeBillingProvider::Bill> FakeBillingProvider::bills() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Bill> out;
  for (const auto& [index, p] : responses_) out.push_back(p.bill);
  return out;
}

bool FakeBillingProvider::settled() const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [index, p] : responses_) {
    if (!p.delivered) return false;
  }
  return true;
}

std::map<std::string, int> FakeBillingProvider::kinds() const {
  std::map<std::string, int> out;
  for (const Bill& b : bills()) ++out[b.kind];
  return out;
}

}  // namespace kloop::test_support
