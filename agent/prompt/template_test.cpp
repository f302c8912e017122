#include "agent/prompt/template.h"

#include <gtest/gtest.h>

namespace kloop {
namespace {

TEST(TemplateTest, SubstitutesAndRendersSections) {
  TemplateValues v = {{"name", "19_ReLU"}, {"details", "3 values wrong"}, {"profile", ""}};
  EXPECT_EQ(render_template("Task {{name}}.{{#details}} Details: {{details}}.{{/details}}{{#profile}} P{{/profile}}", v,
                            "t.txt"),
            "Task 19_ReLU. Details: 3 values wrong.");
}

TEST(TemplateTest, UnknownPlaceholderNamesFileAndLine) {
  try {
    render_template("line one\nhello {{nmae}}", {{"name", "x"}}, "prompts/task.txt");
    FAIL();
  } catch (const TemplateError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("prompts/task.txt:2"), std::string::npos) << m;
    EXPECT_NE(m.find("{{nmae}}"), std::string::npos) << m;
    EXPECT_NE(m.find("known: name"), std::string::npos) << m;
  }
  EXPECT_THROW(render_template("{{#a}} unterminated", {{"a", "1"}}, "f"), TemplateError);
  EXPECT_THROW(render_template("{{a", {{"a", "1"}}, "f"), TemplateError);
}

TEST(TemplateTest, CapKeepsHeadAndTailAndSaysWhatWasCut) {
  std::string text(10000, 'x');
  text.replace(0, 5, "HEAD:");
  text.replace(text.size() - 5, 5, ":TAIL");
  std::string capped = cap_text(text, 1000);
  EXPECT_LE(capped.size(), 1000u);
  EXPECT_EQ(capped.rfind("HEAD:", 0), 0u);
  EXPECT_EQ(capped.substr(capped.size() - 5), ":TAIL");
  EXPECT_NE(capped.find("characters left out"), std::string::npos);
  EXPECT_EQ(cap_text("short", 1000), "short");
}

}  // namespace
}  // namespace kloop
