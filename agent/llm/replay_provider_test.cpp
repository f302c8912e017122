// The replay provider answers from an earlier run's records, by attempt key.
#include <gtest/gtest.h>

#include <fstream>

#include "agent/llm/provider_factories.h"
#include "tests/support/provider_test_support.h"

namespace kloop {
namespace {

using test_support::TempDir;

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

ProviderConfig replay(const std::filesystem::path& transcript) {
  ProviderConfig c;
  c.kind = "replay";
  c.transcript = transcript.string();
  return c;
}

GenerationRequest for_key(const std::string& problem, int sample, int turn) {
  GenerationRequest r;
  r.messages = {{"user", "ignored"}};
  r.key = {problem, sample, turn};
  return r;
}

TEST(ReplayProviderTest, AnswersFromJsonlByProblemSampleAndTurn) {
  TempDir dir;
  write_file(dir.path() / "t.jsonl",
             R"({"problem": "19_ReLU", "sample": 0, "turn": 1, "response": "first"})"
             "\n\n"
             R"({"problem": "19_ReLU", "sample": 0, "turn": 2, "response": "second", "reasoning": "why"})"
             "\n"
             R"({"problem": "19_ReLU", "sample": 1, "turn": 1, "response": "other sample"})"
             "\n");
  auto p = make_provider(replay(dir.path() / "t.jsonl"));
  EXPECT_EQ(p->generate(for_key("19_ReLU", 0, 1)).text, "first");
  GenerationResult r = p->generate(for_key("19_ReLU", 0, 2));
  EXPECT_EQ(r.text, "second");
  EXPECT_EQ(r.reasoning, "why");
  EXPECT_EQ(r.input_tokens + r.output_tokens, 0);
  EXPECT_EQ(r.cost_usd, 0);
  EXPECT_EQ(p->generate(for_key("19_ReLU", 1, 1)).text, "other sample");
}

TEST(ReplayProviderTest, AnswersFromRunFolder) {
  TempDir dir;
  write_file(dir.path() / "attempts/19_ReLU/sample1/turn2/response.txt", "from the run\n");
  write_file(dir.path() / "attempts/19_ReLU/sample1/turn2/reasoning.txt", "thoughts");
  auto p = make_provider(replay(dir.path()));
  GenerationResult r = p->generate(for_key("19_ReLU", 1, 2));
  EXPECT_EQ(r.text, "from the run\n");
  EXPECT_EQ(r.reasoning, "thoughts");
}

TEST(ReplayProviderTest, MissingRecordNamesTheKeyAndTheTranscript) {
  TempDir dir;
  write_file(dir.path() / "attempts/19_ReLU/sample0/turn1/response.txt", "x");
  auto folder = make_provider(replay(dir.path()));
  try {
    folder->generate(for_key("19_ReLU", 0, 3));
    FAIL() << "expected ProviderError";
  } catch (const ProviderError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("problem '19_ReLU' sample 0 turn 3"), std::string::npos) << m;
    EXPECT_NE(m.find(dir.path().string()), std::string::npos) << m;
  }
  write_file(dir.path() / "t.jsonl", R"({"problem": "19_ReLU", "response": "x"})");
  auto jsonl = make_provider(replay(dir.path() / "t.jsonl"));
  EXPECT_EQ(jsonl->generate(for_key("19_ReLU", 0, 1)).text, "x");  // sample 0, turn 1 by default
  try {
    jsonl->generate(for_key("20_LeakyReLU", 0, 1));
    FAIL() << "expected ProviderError";
  } catch (const ProviderError& e) {
    EXPECT_NE(std::string(e.what()).find("problem '20_LeakyReLU'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("t.jsonl"), std::string::npos) << e.what();
  }
}

TEST(ReplayProviderTest, BadTranscriptsAreConfigErrorsWithTheLine) {
  TempDir dir;
  EXPECT_THROW(make_provider(replay(dir.path() / "missing.jsonl")), std::invalid_argument);
  EXPECT_THROW(make_provider(replay(dir.path())), std::invalid_argument);  // a folder without attempts/
  write_file(dir.path() / "bad.jsonl", "{\"problem\": \"a\", \"response\": \"x\"}\n{\"problem\": \"a\"}\n");
  try {
    make_provider(replay(dir.path() / "bad.jsonl"));
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("bad.jsonl:2:"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("\"response\""), std::string::npos) << e.what();
  }
  write_file(dir.path() / "dup.jsonl",
             "{\"problem\": \"a\", \"response\": \"x\"}\n{\"problem\": \"a\", \"response\": \"y\"}\n");
  EXPECT_THROW(make_provider(replay(dir.path() / "dup.jsonl")), std::invalid_argument);
}

}  // namespace
}  // namespace kloop
