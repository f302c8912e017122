#include "agent/store/run_store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace kloop {
namespace {

namespace fs = std::filesystem;

class RunStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kloop-runstore-" + std::to_string(getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  static AttemptRecord rec(const std::string& p, int s, int t, const std::string& v) {
    AttemptRecord r;
    r.problem = p;
    r.sample = s;
    r.turn = t;
    r.verdict = v;
    if (v == "correct") r.speedup = 1.5;
    return r;
  }
  fs::path dir_;
};

TEST_F(RunStoreTest, AppendsAndReloadsRecords) {
  RunStore store(dir_.string(), "r1");
  store.append(rec("19_ReLU", 0, 1, "compile_error"));
  store.append(rec("19_ReLU", 0, 2, "correct"));
  auto back = RunStore(dir_.string(), "r1").load_results();
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[1].verdict, "correct");
  ASSERT_TRUE(back[1].speedup);
  EXPECT_DOUBLE_EQ(*back[1].speedup, 1.5);
  EXPECT_FALSE(back[0].speedup);
}

TEST_F(RunStoreTest, TornLastLineIsSkippedAndDoesNotSwallowTheNextRecord) {
  RunStore store(dir_.string(), "r1");
  store.append(rec("a", 0, 1, "correct"));
  std::ofstream(dir_ / "r1" / "results.jsonl", std::ios::app) << "{\"problem\": \"a\", \"sam";  // killed mid-write
  EXPECT_EQ(store.load_results().size(), 1u);
  store.append(rec("a", 0, 2, "incorrect"));
  auto back = store.load_results();
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[1].turn, 2);
}

TEST_F(RunStoreTest, DuplicateAttemptsKeepTheFirst) {
  RunStore store(dir_.string(), "r1");
  store.append(rec("a", 0, 1, "incorrect"));
  store.append(rec("a", 0, 1, "correct"));
  auto back = store.load_results();
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].verdict, "incorrect");
}

TEST_F(RunStoreTest, ResumingWithAnotherIdentityIsRefused) {
  RunStore store(dir_.string(), "r1");
  store.write_config({{"model_identity", "openai:a"}, {"seed", 1}}, {"model_identity", "seed"});
  store.write_config({{"model_identity", "openai:a"}, {"seed", 1}, {"extra", 2}}, {"model_identity", "seed"});
  try {
    store.write_config({{"model_identity", "openai:b"}, {"seed", 1}}, {"model_identity", "seed"});
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("different 'model_identity'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(RunStore(dir_.string(), "../escape"), std::invalid_argument);
}

}  // namespace
}  // namespace kloop
