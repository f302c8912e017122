// Secrets in a verdict never reach the feedback or the stored verdict, not
// even in part where a long log is cut to fit the prompt.
#include "agent/scaffold/redaction.h"

#include <gtest/gtest.h>

#include "agent/prompt/prompt_builder.h"

namespace kloop {
namespace {

const std::string kSecret = "sk-live-ABCDEFGHIJKLMNOP";

bool shows_a_piece(const std::string& text, const std::string& secret, std::size_t piece = 6) {
  for (std::size_t i = 0; i + piece <= secret.size(); ++i) {
    if (text.find(secret.substr(i, piece)) != std::string::npos) return true;
  }
  return false;
}

PromptBuilder prompts() {
  PromptSettings s;
  s.dir = std::string(KLOOP_TEST_PROBLEMS) + "/../prompts";
  return PromptBuilder(s);
}

TEST(RedactVerdictTest, EveryTextFieldIsRedacted) {
  Verdict v;
  v.verdict = VerdictClass::kCompileError;
  v.message = "failed: " + kSecret;
  v.build.log = "candidate.cpp:3:1: error: static assertion failed: " + kSecret + "\n";
  v.build.command = "g++ -D" + kSecret;
  v.build.diagnostics = parse_compiler_output(v.build.log);
  ASSERT_FALSE(v.build.diagnostics.empty());
  v.log_tail = "printed " + kSecret;
  v.integrity = {{"protocol_violation", "reply said " + kSecret}};
  TestOutcome t;
  t.label = kSecret;
  t.problem = kSecret;
  t.outputs.push_back({});
  t.outputs.back().name = kSecret;
  t.outputs.back().problem = kSecret;
  v.tests.push_back(t);
  v.profile_digest = v.reference_digest = v.exchange = v.input_exchange = v.fp64_unavailable = kSecret;
  v.activity = {{"kernels", {kSecret}}};
  v.error_analysis = {{kSecret, kSecret}};
  v.vendor_libraries = {kSecret};
  ASSERT_NE(v.to_json().dump().find(kSecret), std::string::npos);

  const Verdict r = redact_verdict(v, Redactor({kSecret}));
  EXPECT_EQ(r.to_json().dump().find(kSecret), std::string::npos) << r.to_json().dump(2);
  EXPECT_EQ(r.to_text().find(kSecret), std::string::npos) << r.to_text();
  EXPECT_EQ(r.build.diagnostics.front().message, "static assertion failed: [REDACTED]");
  const std::string feedback = prompts().feedback(r);
  EXPECT_NE(feedback.find("[REDACTED]"), std::string::npos) << feedback;
  EXPECT_FALSE(shows_a_piece(feedback, kSecret)) << feedback;
}

// A log longer than the feedback cap is cut in the middle; a secret across
// the cut would survive a redaction of the rendered text in two pieces.
TEST(RedactVerdictTest, NoPieceOfASecretSurvivesTheFeedbackCap) {
  const Redactor redactor({kSecret});
  const PromptBuilder builder = prompts();
  bool leaks_when_redacted_after = false;
  for (std::size_t at = 1800; at < 2300; ++at) {
    Verdict v;
    v.verdict = VerdictClass::kRuntimeError;
    v.message = "the candidate crashed";
    v.log_tail = std::string(at, 'x') + kSecret + std::string(4000, 'y');
    const std::string feedback = builder.feedback(redact_verdict(v, redactor));
    ASSERT_FALSE(shows_a_piece(feedback, kSecret)) << "secret at " << at << ":\n" << feedback;
    leaks_when_redacted_after = leaks_when_redacted_after || shows_a_piece(redactor.redact(builder.feedback(v)), kSecret);
  }
  EXPECT_TRUE(leaks_when_redacted_after) << "the cut never split the secret: the test shows nothing";
}

}  // namespace
}  // namespace kloop
