// The correct-verdict feedback carries the profile digests exactly when the
// scaffold enables the profiler feedback kind.
#include "agent/prompt/prompt_builder.h"

#include <gtest/gtest.h>

namespace kloop {
namespace {

Verdict correct_with_digests() {
  Verdict v;
  v.verdict = VerdictClass::kCorrect;
  v.profile_digest = "GPU time 12.0 us per forward: relu_kernel 100% (1 launch), memory-bound";
  v.reference_digest = "GPU time 10.0 us per forward: at::native::vectorized_elementwise_kernel 100%";
  return v;
}

PromptSettings settings() {
  PromptSettings s;
  s.dir = std::string(KLOOP_TEST_PROBLEMS) + "/../prompts";
  s.cuda = true;
  return s;
}

TEST(PromptBuilderTest, ProfilerFeedbackShowsBothDigests) {
  std::string text = PromptBuilder(settings()).feedback(correct_with_digests());
  EXPECT_NE(text.find("relu_kernel 100%"), std::string::npos) << text;
  EXPECT_NE(text.find("What the reference runs:"), std::string::npos) << text;
  EXPECT_NE(text.find("vectorized_elementwise_kernel"), std::string::npos) << text;
}

TEST(PromptBuilderTest, WithoutTheProfilerKindNoDigestIsShown) {
  PromptSettings s = settings();
  s.feedback.erase(FeedbackKind::kProfiler);
  std::string text = PromptBuilder(s).feedback(correct_with_digests());
  EXPECT_EQ(text.find("relu_kernel"), std::string::npos) << text;
  EXPECT_EQ(text.find("Profile:"), std::string::npos) << text;
}

}  // namespace
}  // namespace kloop
