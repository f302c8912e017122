#include "agent/llm/redactor.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "tests/support/provider_test_support.h"

namespace kloop {
namespace {

TEST(RedactorTest, ReplacesEverySecretInTextAndJson) {
  Redactor r({"sk-short", "sk-short-and-longer", ""});
  EXPECT_EQ(r.redact("key sk-short-and-longer, again sk-short."), "key [REDACTED], again [REDACTED].")
      << "a secret containing another is replaced whole";
  const nlohmann::json j = {{"log", {"a sk-short b", 3}}, {"sk-short", true}};
  EXPECT_EQ(r.redact_json(j).dump(), R"({"[REDACTED]":true,"log":["a [REDACTED] b",3]})");
  EXPECT_EQ(Redactor().redact("sk-short"), "sk-short");
}

TEST(RedactorTest, CredentialsOfTheEnvironmentByName) {
  test_support::ScopedEnv key("KLOOP_TEST_SERVICE_KEY", "svc-key-value-1");
  test_support::ScopedEnv token("my_gh_token", "ghp-value-0002");
  test_support::ScopedEnv password("DB_Password", "hunter2hunter2");
  test_support::ScopedEnv short_one("KLOOP_TEST_SHORT_SECRET", "1234567");
  test_support::ScopedEnv other("KLOOP_TEST_PLAIN", "not-a-credential-value");
  const std::vector<std::string> s = environment_secrets();
  auto has = [&](const std::string& v) { return std::find(s.begin(), s.end(), v) != s.end(); };
  EXPECT_TRUE(has("svc-key-value-1"));
  EXPECT_TRUE(has("ghp-value-0002")) << "names match in any case";
  EXPECT_TRUE(has("hunter2hunter2"));
  EXPECT_FALSE(has("1234567")) << "too short to be a credential";
  EXPECT_FALSE(has("not-a-credential-value"));
}

}  // namespace
}  // namespace kloop
