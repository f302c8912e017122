// A provider that bills: Anthropic's Messages API (streamed, in the event
// format of https://docs.anthropic.com/en/docs/build-with-claude/streaming)
// on a loopback server, answering every request with a seeded mix of what a
// real one sends: whole answers, 429 rate limits, 529 overloads, 500s, and
// streams that break after HTTP 200 (an error event part way, a reset, a
// stall, an end without message_stop).
//
// Its bill: a response that began a stream bills the usage its delivered
// events reported (message_start's input tokens, message_delta's output
// tokens), at the prices given; an error status bills nothing. Each
// response carries a request-id header of its own, which kloop records
// with the call, so the bill can be checked call by call against kloop's
// ledger.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "tests/support/fake_http_server.h"

namespace kloop::test_support {

class FakeBillingProvider {
 public:
  // `answer` gives the text for a request: the problem (from the task's
  // "# Task: NAME" line) and the turn (1 + the assistant messages sent).
  using Answer = std::function<std::string(const std::string& problem, int turn)>;
  FakeBillingProvider(std::uint64_t seed, Answer answer, double input_price, double output_price);

  std::string base_url() const { return server_.base_url(); }

  struct Bill {
    std::string request_id;
    std::string kind;  // answer, rate_limit, overloaded, server_error, error_event, reset, stall, no_final_event
    bool billed = false;
    double cost_usd = 0;
  };
  // Every response so far, in order (a response's bill is final once sent).
  std::vector<Bill> bills() const;
  std::map<std::string, int> kinds() const;
  // Every response has gone out (a stalled one is still being held).
  bool settled() const;

 private:
  ScriptedReply reply(const RecordedRequest& request, std::size_t index);
  void delivered(std::size_t index, std::size_t bytes);

  Answer answer_;
  double input_price_, output_price_;
  std::uint64_t seed_;
  mutable std::mutex mutex_;
  struct Pending {
    Bill bill;
    // The usage the stream has reported once this many body bytes are out.
    std::vector<std::pair<std::size_t, std::pair<long long, long long>>> usage_at;
    bool delivered = false;
  };
  std::map<std::size_t, Pending> responses_;
  FakeHttpServer server_;
};

}  // namespace kloop::test_support
