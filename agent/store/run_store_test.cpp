#include "agent/store/run_store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

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
    r.outcome = outcome_from_name(v).value();
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
  EXPECT_EQ(back[1].outcome, Outcome::kCorrect);
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
  EXPECT_EQ(back[0].outcome, Outcome::kIncorrect);
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

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The key that signs a run lives outside it (beside the build cache's, per
// user): whoever can write the run folder cannot re-sign what is in it.
TEST_F(RunStoreTest, TheRunKeyLivesOutsideTheRunFolder) {
  RunStore store(dir_.string(), "r1");
  store.write_config({{"seed", 1}}, {"seed"});
  store.append(rec("a", 0, 1, "incorrect"));
  EXPECT_FALSE(fs::exists(dir_ / "r1" / RunStore::kKeyFile));
  EXPECT_TRUE(fs::exists(dir_ / "r1" / RunStore::kSigningFile));
  const fs::path key = RunStore::user_key_path();
  ASSERT_TRUE(fs::exists(key)) << key;
  EXPECT_NE(fs::absolute(key).string().rfind(fs::absolute(dir_).string(), 0), 0u) << "the key is inside the runs";
  struct stat st {};
  ASSERT_EQ(stat(key.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_NE(read_text(dir_ / "r1" / "results.jsonl").find("\"mac\""), std::string::npos);
  // Attack: a key planted in the folder (as older runs kept theirs) and a
  // record signed with it: not believed.
  {
    std::ofstream(dir_ / "r1" / RunStore::kKeyFile) << std::string(32, 'k');
  }
  chmod((dir_ / "r1" / RunStore::kKeyFile).c_str(), 0600);
  const IntegrityKey planted = IntegrityKey::open_or_create((dir_ / "r1" / RunStore::kKeyFile).string());
  nlohmann::json forged = rec("b", 0, 1, "correct").to_json();
  forged["speedup"] = 1000.0;
  forged["mac"] = planted.tag({"kloop-run-record-1", "results.jsonl", rec("b", 0, 1, "correct").to_json().dump()});
  std::ofstream(dir_ / "r1" / "results.jsonl", std::ios::app) << forged.dump() << "\n";
  ::testing::internal::CaptureStderr();
  const auto back = store.load_results();
  const std::string warning = ::testing::internal::GetCapturedStderr();
  ASSERT_EQ(back.size(), 1u) << warning;
  EXPECT_EQ(back[0].problem, "a");
  EXPECT_NE(warning.find("1 of 2 line(s) rejected"), std::string::npos) << warning;
  // A run moved within the user's runs keeps verifying (its id travels with it).
  fs::rename(dir_ / "r1", dir_ / "moved");
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(RunStore(dir_.string(), "moved").load_results().size(), 1u);
  ::testing::internal::GetCapturedStderr();
}

// A run made under another key (another user's, another machine's) loads
// unverified with a warning, and takes no new record: an unsigned record
// among signed ones would pass for one of them.
TEST_F(RunStoreTest, ARunSignedWithAnotherKeyLoadsUnverifiedAndTakesNoRecord) {
  RunStore store(dir_.string(), "r1");
  store.append(rec("a", 0, 1, "correct"));
  const char* before = std::getenv("KLOOP_RUN_KEY");
  const std::string saved = before ? before : "";
  setenv("KLOOP_RUN_KEY", (dir_ / "another-users.key").c_str(), 1);
  ::testing::internal::CaptureStderr();
  const auto back = store.load_results();
  const std::string warning = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(back.size(), 1u);
  EXPECT_NE(warning.find("1 record(s) unverified: the run was signed with another run key"), std::string::npos)
      << warning;
  EXPECT_FALSE(store.verifiable());
  EXPECT_THROW(store.append(rec("a", 0, 2, "correct")), std::runtime_error);
  if (before) {
    setenv("KLOOP_RUN_KEY", saved.c_str(), 1);
  } else {
    unsetenv("KLOOP_RUN_KEY");
  }
  EXPECT_TRUE(store.verifiable());
}

// Every file that enters a verdict or a rescore is sealed with its attempt:
// changed, or swapped for another attempt's (file, or file and seal), it
// is refused.
TEST_F(RunStoreTest, SealedFilesAreBoundToTheirAttempt) {
  RunStore store(dir_.string(), "r1");
  const std::string a = store.relative_attempt_dir("p", 0, 1), b = store.relative_attempt_dir("p", 0, 2);
  RunStore::write_text(store.attempt_dir("p", 0, 1) + "/verdict.json", "{\"verdict\": \"integrity_violation\"}");
  RunStore::write_text(store.attempt_dir("p", 0, 2) + "/verdict.json", "{\"verdict\": \"correct\"}");
  store.seal_files(a, {"verdict.json", "candidate.cpp"});
  store.seal_files(b, {"verdict.json"});
  EXPECT_EQ(store.read_sealed(a, "verdict.json"), "{\"verdict\": \"integrity_violation\"}");
  auto refused = [&](const std::string& rel, const std::string& name, const std::string& why) {
    try {
      store.read_sealed(rel, name);
      ADD_FAILURE() << rel << "/" << name << " was believed";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  fs::copy_file(dir_ / "r1" / b / "verdict.json", dir_ / "r1" / a / "verdict.json",
                fs::copy_options::overwrite_existing);
  refused(a, "verdict.json", "differs from what the run's driver wrote");
  fs::copy_file(dir_ / "r1" / b / "seal.json", dir_ / "r1" / a / "seal.json", fs::copy_options::overwrite_existing);
  refused(a, "verdict.json", "no seal of the run's driver (its MAC does not verify)");
  RunStore::write_text(store.attempt_dir("p", 0, 2) + "/candidate.cpp", "planted");
  refused(b, "candidate.cpp", "not sealed by the run's driver");
}

// A record's attempt_dir is data: it must name a folder inside the run.
TEST_F(RunStoreTest, AttemptPathsStayInsideTheRun) {
  RunStore store(dir_.string(), "r1");
  EXPECT_EQ(store.attempt_path("attempts/p/sample0/turn1"), store.path() + "/attempts/p/sample0/turn1");
  for (const char* bad : {"../../etc", "/etc", "attempts/../..", "attempts//x", "", "attempts/./x"}) {
    EXPECT_THROW(store.attempt_path(bad), std::runtime_error) << bad;
  }
  fs::create_symlink("/etc", dir_ / "r1" / "attempts" / "linked");
  EXPECT_THROW(store.attempt_path("attempts/linked/passwd"), std::runtime_error);
}

// A run's name becomes a folder, a Slurm job name and a word of a script.
TEST_F(RunStoreTest, RunNamesArePlainData) {
  for (const char* good : {"r1", "demo-2026.01", "sweep/lr=0.1/model=gpt-5+x"}) {
    EXPECT_EQ(run_name_problem(good), "") << good;
  }
  for (const char* bad : {"x --hold", "a b", "../..", "a/../b", "/abs", "tab\there", "new\nline", "$(id)", "a;b", ""}) {
    EXPECT_NE(run_name_problem(bad), "") << bad;
    EXPECT_THROW(RunStore(dir_.string(), bad), std::invalid_argument) << bad;
  }
  EXPECT_NE(run_name_problem("x --hold").find("a space"), std::string::npos);
}

// Attack: code that reaches the run folder appends records of its own (a
// "correct, 1000x" for an attempt that failed, or for one never made) or
// edits a genuine one. None of them loads, and one warning says so.
TEST_F(RunStoreTest, ForgedRecordsAreRejectedWithOneWarning) {
  RunStore store(dir_.string(), "r1");
  store.append(rec("a", 0, 1, "incorrect"));
  store.append(rec("b", 0, 1, "compile_error"));
  const fs::path results = dir_ / "r1" / "results.jsonl";
  const std::string genuine = read_text(results);
  nlohmann::json edited = nlohmann::json::parse(genuine.substr(0, genuine.find('\n')));
  edited["verdict"] = "correct";
  edited["speedup"] = 1000.0;  // keeps the genuine record's MAC
  nlohmann::json planted = rec("c", 0, 1, "correct").to_json();
  planted["speedup"] = 1000.0;
  planted["mac"] = std::string(64, 'a');
  nlohmann::json unsigned_record = rec("d", 0, 1, "correct").to_json();
  {
    // The edit goes first so that it would shadow the genuine record of "a".
    std::ofstream(results, std::ios::trunc) << edited.dump() << "\n"
                                            << genuine << planted.dump() << "\n"
                                            << unsigned_record.dump() << "\n";
  }
  ::testing::internal::CaptureStderr();
  auto back = store.load_results();
  store.load_results();  // a second load does not warn again
  const std::string warning = ::testing::internal::GetCapturedStderr();
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].problem, "a");
  EXPECT_EQ(back[0].outcome, Outcome::kIncorrect);
  EXPECT_EQ(back[1].problem, "b");
  EXPECT_NE(warning.find(results.string()), std::string::npos) << warning;
  EXPECT_NE(warning.find("3 of 5 line(s) rejected"), std::string::npos) << warning;
  EXPECT_EQ(warning.find("kloop: warning", 1), std::string::npos) << "one warning: " << warning;
  // The driver still appends and resumes past them.
  store.append(rec("a", 0, 2, "correct"));
  EXPECT_EQ(store.load_results().size(), 3u);
}

TEST_F(RunStoreTest, ARecordMovedToAnotherFileIsRejected) {
  RunStore store(dir_.string(), "r1");
  store.append(rec("a", 0, 1, "correct"));
  // A genuine results.jsonl record planted as a rescore result.
  std::ofstream(dir_ / "r1" / "rescore-kernelbench.jsonl") << read_text(dir_ / "r1" / "results.jsonl");
  ::testing::internal::CaptureStderr();
  EXPECT_TRUE(store.load_results("rescore-kernelbench.jsonl").empty());
  EXPECT_NE(::testing::internal::GetCapturedStderr().find("rejected"), std::string::npos);
}

TEST_F(RunStoreTest, RunsMadeBeforeSigningLoadUnverifiedAndStayUnsigned) {
  fs::create_directories(dir_ / "old");
  std::ofstream(dir_ / "old" / "results.jsonl") << rec("a", 0, 1, "incorrect").to_json().dump() << "\n"
                                                << rec("a", 0, 2, "correct").to_json().dump() << "\n";
  RunStore store(dir_.string(), "old");
  store.write_config({{"seed", 1}}, {"seed"});  // resumed with this kloop
  EXPECT_FALSE(fs::exists(dir_ / "old" / RunStore::kKeyFile)) << "a key now would reject the run's own records";
  EXPECT_FALSE(fs::exists(dir_ / "old" / RunStore::kSigningFile)) << "a key now would reject the run's own records";
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(store.load_results().size(), 2u);
  const std::string warning = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(warning.find("2 record(s) unverified"), std::string::npos) << warning;
  store.append(rec("a", 0, 3, "correct"));
  EXPECT_EQ(store.load_results().size(), 3u) << "a resumed old run keeps its records";
}

// Outcomes are typed: every name kloop writes reads back as itself, and a
// whole line naming one this kloop does not know (a newer kloop's) stops
// the load at that line, rather than being dropped and its attempt paid for
// again.
TEST_F(RunStoreTest, OutcomesRoundTripAndAnUnknownOneNamesItsLine) {
  for (Outcome o : kEveryOutcome) {
    AttemptRecord r = rec("a", 0, 1, "correct");
    r.outcome = o;
    EXPECT_EQ(AttemptRecord::from_json(r.to_json()).outcome, o) << outcome_name(o);
    EXPECT_EQ(r.to_json()["verdict"], outcome_name(o));
  }
  fs::create_directories(dir_ / "newer");
  nlohmann::json future = rec("a", 0, 2, "correct").to_json();
  future["verdict"] = "slower_than_light";
  std::ofstream(dir_ / "newer" / "results.jsonl") << rec("a", 0, 1, "incorrect").to_json().dump() << "\n"
                                                  << future.dump() << "\n";
  RunStore store(dir_.string(), "newer");
  ::testing::internal::CaptureStderr();
  try {
    store.load_results();
    ADD_FAILURE() << "an unknown outcome loaded";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("results.jsonl:2"), std::string::npos) << what;
    EXPECT_NE(what.find("slower_than_light"), std::string::npos) << what;
    EXPECT_NE(what.find("newer kloop"), std::string::npos) << what;
  }
  ::testing::internal::GetCapturedStderr();
}

// A run's shards each append to a file of their own; every reader of the
// run sees all of them as one set of records.
TEST_F(RunStoreTest, ShardsWriteTheirOwnFilesAndLoadAsOneRun) {
  {
    RunStore whole(dir_.string(), "r1");
    whole.write_config({{"seed", 1}}, {"seed"});
    whole.append(rec("a", 0, 1, "incorrect"));  // a turn run before the run was split
  }
  RunStore shard0(dir_.string(), "r1"), shard1(dir_.string(), "r1");
  shard0.set_shard(0);
  shard1.set_shard(1);
  shard0.append(rec("a", 0, 2, "correct"));
  shard1.append(rec("b", 0, 1, "correct"));
  shard1.append(rec("b", 0, 1, "incorrect"));  // a duplicate: the first stays
  EXPECT_TRUE(fs::exists(dir_ / "r1" / "results.shard-0.jsonl"));
  EXPECT_TRUE(fs::exists(dir_ / "r1" / "results.shard-1.jsonl"));
  const RunStore reader(dir_.string(), "r1");
  EXPECT_EQ(reader.record_files(),
            (std::vector<std::string>{"results.jsonl", "results.shard-0.jsonl", "results.shard-1.jsonl"}));
  const auto back = reader.load_results();
  ASSERT_EQ(back.size(), 3u);
  std::map<std::string, std::string> verdict;
  for (const auto& r : back) verdict[r.problem + std::to_string(r.turn)] = outcome_name(r.outcome);
  EXPECT_EQ(verdict["a1"], "incorrect");
  EXPECT_EQ(verdict["a2"], "correct");
  EXPECT_EQ(verdict["b1"], "correct");
  EXPECT_EQ(RunStore::shard_file("rescore-kernelbench.jsonl", 3), "rescore-kernelbench.shard-3.jsonl");
}

// Attack: a genuine record of one shard copied into another shard's file
// (or into results.jsonl) does not verify there.
TEST_F(RunStoreTest, ARecordMovedBetweenShardFilesIsRejected) {
  RunStore store(dir_.string(), "r1");
  store.set_shard(0);
  store.append(rec("a", 0, 1, "incorrect"));
  RunStore other(dir_.string(), "r1");
  other.set_shard(1);
  other.append(rec("b", 0, 1, "correct"));
  std::ofstream(dir_ / "r1" / "results.shard-2.jsonl") << read_text(dir_ / "r1" / "results.shard-1.jsonl");
  std::ofstream(dir_ / "r1" / "results.shard-x.jsonl") << read_text(dir_ / "r1" / "results.shard-1.jsonl");
  ::testing::internal::CaptureStderr();
  const auto back = RunStore(dir_.string(), "r1").load_results();
  const std::string warning = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(back.size(), 2u);
  EXPECT_NE(warning.find("results.shard-2.jsonl: 1 of 1 line(s) rejected"), std::string::npos) << warning;
}

TEST_F(RunStoreTest, AShardCountOnceRecordedIsKept) {
  RunStore store(dir_.string(), "r1");
  EXPECT_FALSE(store.shard_count());
  store.check_shard_count(4);
  EXPECT_EQ(store.shard_count(), 4);
  store.check_shard_count(4);
  try {
    store.check_shard_count(5);
    ADD_FAILURE() << "another shard count was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("use --shards 4"), std::string::npos) << e.what();
  }
}

// Shards of a run go on side by side; each shard has one driver, and a
// driver of the whole run refuses while any shard runs (and the reverse).
TEST_F(RunStoreTest, ShardLocksAllowShardsSideBySideButOneDriverEach) {
  RunStore store(dir_.string(), "r1");
  std::ostringstream notes;
  {
    RunLock a(store.path(), notes, 0);
    RunLock b(store.path(), notes, 1);
    EXPECT_TRUE(RunLock::shard_running(store.path(), 0));
    EXPECT_FALSE(RunLock::shard_running(store.path(), 2));
    EXPECT_THROW(RunLock(store.path(), notes, 1), std::runtime_error);
    try {
      RunLock whole(store.path(), notes);
      ADD_FAILURE() << "the whole run was locked while shards ran";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("shards"), std::string::npos) << e.what();
    }
  }
  EXPECT_FALSE(RunLock::shard_running(store.path(), 0));
  RunLock whole(store.path(), notes);
  EXPECT_THROW(RunLock(store.path(), notes, 0), std::runtime_error);
}

}  // namespace
}  // namespace kloop
