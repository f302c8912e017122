// The fixture the provider tests start from: a loopback server standing in
// for the API, the key in a test-only environment variable, and a config of
// one kind pointed at the server (no retries; a test that wants them says so).
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "agent/llm/provider.h"
#include "tests/support/fake_http_server.h"
#include "tests/support/provider_test_support.h"

namespace kloop::test_support {

class ProviderWireTest : public ::testing::Test {
 protected:
  ProviderWireTest(const char* key_env, const char* key) : key_env_(key_env), key_(key_env, key) {}

  // url_suffix: what the kind's base URL adds to the server's ("/v1" for OpenAI's).
  ProviderConfig config(const std::string& kind, const std::string& url_suffix = "") const {
    ProviderConfig c;
    c.kind = kind;
    c.model = kind == "anthropic" ? "claude-test" : kind == "gemini" ? "gemini-test" : "gpt-test";
    c.base_url = server_.base_url() + url_suffix;
    c.api_key_env = key_env_;
    c.max_retries = 0;
    return c;
  }
  // A system prompt and three turns: user, assistant, user.
  static GenerationRequest conversation() {
    GenerationRequest r;
    r.system = "You write CUDA kernels.";
    r.messages = {{"user", "Write a ReLU."}, {"assistant", "Done."}, {"user", "Faster."}};
    return r;
  }
  nlohmann::json sent_body(std::size_t i = 0) const { return nlohmann::json::parse(server_.requests().at(i).body); }

  std::string key_env_;
  ScopedEnv key_;
  FakeHttpServer server_;
};

}  // namespace kloop::test_support
