// The provider block of a run config: every field lands where it should and
// mistakes are reported with the file, the field and the fix.
#include <gtest/gtest.h>

#include "agent/llm/provider.h"
#include "tests/support/provider_test_support.h"

namespace kloop {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

std::string config_error(const json& j) {
  try {
    provider_config_from_json(j, "configs/run.yaml");
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ProviderConfigTest, ReadsEveryField) {
  json j = json::parse(R"({
    "kind": "openai", "model": "deepseek-reasoner", "base_url": "https://api.deepseek.com/v1",
    "api_key_env": "DEEPSEEK_API_KEY", "temperature": 0.6, "top_p": 0.95, "max_tokens": 8000,
    "reasoning_effort": "high", "thinking_budget": 4096, "seed": 123, "stop": ["</answer>", "###"],
    "connect_timeout_s": 5, "timeout_s": 120.5, "max_retries": 2, "concurrency": 8,
    "prices": {"input": 0.55, "output": 2.19}, "headers": {"HTTP-Referer": "https://x"},
    "extra_body": {"top_k": 20}, "command": ["sh", "-c", "cat"], "transcript": "runs/r1"
  })");
  ProviderConfig c = provider_config_from_json(j, "configs/run.yaml");
  EXPECT_EQ(c.kind, "openai");
  EXPECT_EQ(c.model, "deepseek-reasoner");
  EXPECT_EQ(c.base_url, "https://api.deepseek.com/v1");
  EXPECT_EQ(c.api_key_env, "DEEPSEEK_API_KEY");
  EXPECT_EQ(c.temperature, 0.6);
  EXPECT_EQ(c.top_p, 0.95);
  EXPECT_EQ(c.max_tokens, 8000);
  EXPECT_EQ(c.reasoning_effort, "high");
  EXPECT_EQ(c.thinking_budget, 4096);
  EXPECT_EQ(c.seed, 123);
  EXPECT_EQ(c.stop, (std::vector<std::string>{"</answer>", "###"}));
  EXPECT_EQ(c.connect_timeout, 5000ms);
  EXPECT_EQ(c.total_timeout, 120500ms);
  EXPECT_EQ(c.max_retries, 2);
  EXPECT_EQ(c.concurrency, 8);
  EXPECT_DOUBLE_EQ(c.prices.input, 0.55);
  EXPECT_DOUBLE_EQ(c.prices.output, 2.19);
  EXPECT_EQ(c.extra_headers.at("HTTP-Referer"), "https://x");
  EXPECT_EQ(c.extra_body, json({{"top_k", 20}}));
  EXPECT_EQ(c.command, (std::vector<std::string>{"sh", "-c", "cat"}));
  EXPECT_EQ(c.transcript, "runs/r1");
}

TEST(ProviderConfigTest, DefaultsAndLenientScalars) {
  // YAML converters may hand scalars over as strings; a single stop string is a list of one.
  ProviderConfig c = provider_config_from_json(
      json::parse(R"({"kind": "anthropic", "model": "claude-x", "temperature": "0.3", "max_tokens": "2048",
                      "stop": "END", "seed": null})"),
      "r.yaml");
  EXPECT_EQ(c.temperature, 0.3);
  EXPECT_FALSE(c.seed.has_value());  // null means unset
  EXPECT_EQ(c.max_tokens, 2048);
  EXPECT_EQ(c.stop, std::vector<std::string>{"END"});
  EXPECT_EQ(c.max_retries, 6);
  EXPECT_EQ(c.concurrency, 4);
  EXPECT_EQ(c.total_timeout, 1800000ms);
  EXPECT_TRUE(c.stream);
  EXPECT_EQ(c.idle_timeout, 300000ms);
  EXPECT_EQ(c.first_token_timeout, 900000ms);
  EXPECT_EQ(c.resend_broken_streams, 2);
  // The thinking budget comes on top of anthropic's default max_tokens.
  EXPECT_EQ(max_billed_output_tokens(c), 2048);
}

// A resend of a request whose answer broke may bill its reasoning again:
// how many is a setting of its own; resend_interrupted is its older spelling.
TEST(ProviderConfigTest, BrokenStreamResendsAndTokenClocksAreSettings) {
  ProviderConfig c = provider_config_from_json(
      json::parse(R"({"kind": "openai", "model": "o3", "first_token_timeout_s": 1200, "idle_timeout_s": 90,
                      "retry": {"resend_broken_streams": 0}})"),
      "r.yaml");
  EXPECT_EQ(c.first_token_timeout, 1200000ms);
  EXPECT_EQ(c.idle_timeout, 90000ms);
  EXPECT_EQ(c.resend_broken_streams, 0);
  c = provider_config_from_json(json::parse(R"({"kind": "openai", "model": "o3", "retry": {"resend_interrupted": false}})"),
                                "r.yaml");
  EXPECT_EQ(c.resend_broken_streams, 0);
  std::string m = config_error(
      json::parse(R"({"kind": "openai", "model": "o3", "retry": {"resend_interrupted": true, "resend_broken_streams": 1}})"));
  EXPECT_NE(m.find("'provider.retry.resend_interrupted'"), std::string::npos) << m;
  m = config_error(json::parse(R"({"kind": "openai", "model": "o3", "retry": {"resend_broken_streams": -1}})"));
  EXPECT_NE(m.find("between 0 and 100"), std::string::npos) << m;
}

// --check's cost ceiling bills the thinking budget where the API adds it
// to the answer's budget (anthropic max_tokens, gemini maxOutputTokens).
TEST(ProviderConfigTest, TheBilledOutputCeilingIncludesTheThinkingBudget) {
  auto ceiling = [](const std::string& kind, const std::string& extra) {
    return max_billed_output_tokens(provider_config_from_json(
        json::parse(R"({"kind": ")" + kind + R"(", "model": "m", "max_tokens": 8000)" + extra + "}"), "r.yaml"));
  };
  EXPECT_EQ(ceiling("anthropic", R"(, "thinking_budget": 4096)"), 12096);
  EXPECT_EQ(ceiling("gemini", R"(, "thinking_budget": 4096)"), 12096);
  EXPECT_EQ(ceiling("gemini", R"(, "thinking_budget": -1)"), 8000);
  EXPECT_EQ(ceiling("openai", R"(, "reasoning_effort": "high")"), 8000);  // reasoning counts inside max_tokens
  EXPECT_EQ(max_billed_output_tokens(provider_config_from_json(
                json::parse(R"({"kind": "anthropic", "model": "m", "thinking_budget": 2048})"), "r.yaml")),
            8192 + 2048);
  EXPECT_FALSE(max_billed_output_tokens(provider_config_from_json(json::parse(R"({"kind": "openai", "model": "m"})"),
                                                                  "r.yaml")));
}

TEST(ProviderConfigTest, UnknownFieldNamesFileFieldAndKnownFields) {
  std::string m = config_error(json::parse(R"({"kind": "openai", "model": "m", "temprature": 0.2})"));
  EXPECT_NE(m.find("configs/run.yaml"), std::string::npos) << m;
  EXPECT_NE(m.find("configs/run.yaml: field 'provider.temprature': unknown field"), std::string::npos) << m;
  EXPECT_NE(m.find("temperature"), std::string::npos) << m;
  EXPECT_NE(m.find("thinking_budget"), std::string::npos) << m;
  EXPECT_NE(
      config_error(json::parse(R"({"kind": "openai", "model": "m", "prices": {"in": 1}})")).find("provider.prices.in"),
      std::string::npos);
}

TEST(ProviderConfigTest, BadValuesNameTheField) {
  EXPECT_NE(config_error(json::parse(R"({"model": "m"})")).find("field 'provider.kind': missing"), std::string::npos);
  EXPECT_NE(config_error(json::parse(R"({"kind": "bard", "model": "m"})")).find("openai, openai_responses, anthropic, gemini"),
            std::string::npos);
  EXPECT_NE(config_error(json::parse(R"({"kind": "gemini"})")).find("provider.model"), std::string::npos);
  EXPECT_NE(config_error(json::parse(R"({"kind": "openai", "model": "m", "temperature": "hot"})"))
                .find("field 'provider.temperature': expected a number"),
            std::string::npos);
  EXPECT_NE(
      config_error(json::parse(R"({"kind": "openai", "model": "m", "max_tokens": 1.5})")).find("provider.max_tokens"),
      std::string::npos);
  EXPECT_NE(
      config_error(json::parse(R"({"kind": "openai", "model": "m", "concurrency": 0})")).find("provider.concurrency"),
      std::string::npos);
  EXPECT_NE(config_error(json::parse(R"({"kind": "openai", "model": "m", "timeout_s": 0})")).find("provider.timeout_s"),
            std::string::npos);
  EXPECT_NE(config_error(json::parse(R"({"kind": "command"})")).find("provider.command"), std::string::npos);
  EXPECT_NE(config_error(json::parse(R"({"kind": "replay"})")).find("provider.transcript"), std::string::npos);
  EXPECT_NE(config_error(json::parse(R"({"kind": "openai", "model": "m", "headers": {"X-Key": 5}})"))
                .find("provider.headers.X-Key"),
            std::string::npos);
  EXPECT_NE(config_error(json::parse(R"(["openai"])")).find("configs/run.yaml: field 'provider'"), std::string::npos);
}

TEST(ProviderConfigTest, MakeProviderChecksKindModelAndKey) {
  ProviderConfig c;
  c.kind = "openai";
  EXPECT_THROW(make_provider(c), std::invalid_argument);  // no model
  c.model = "gpt-x";
  c.kind = "bard";
  EXPECT_THROW(make_provider(c), std::invalid_argument);
  c.kind = "gemini";
  c.api_key_env = "KLOOP_TEST_UNSET_GEMINI_KEY";
  unsetenv("KLOOP_TEST_UNSET_GEMINI_KEY");
  try {
    make_provider(c);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "field 'provider.api_key_env': environment variable KLOOP_TEST_UNSET_GEMINI_KEY is not set");
  }
  test_support::ScopedEnv key("KLOOP_TEST_UNSET_GEMINI_KEY", "AIza-config-5ecret");
  auto p = make_provider(c);
  EXPECT_EQ(p->describe().find("AIza-config-5ecret"), std::string::npos);
  EXPECT_EQ(p->describe(), "gemini gpt-x @ https://generativelanguage.googleapis.com");
}

}  // namespace
}  // namespace kloop
