// kloop rescore on a tiny run store whose attempts are real CPU candidates
// (tests/fixtures/relu): a kernel 0.5% off is incorrect under strict and
// correct under kernelbench's looser tolerance. The rescore goes through the
// Evaluator, writes its own records and verdicts, resumes, and leaves
// results.jsonl alone.
#include "agent/report/rescore.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "agent/report/kernelbench_import.h"
#include "agent/report/metrics.h"
#include "agent/report/run_view.h"
#include "agent/store/run_store.h"
#include "tests/support/python_support.h"
#include "evaluator/build/builder.h"
#include "evaluator/evaluate.h"
#include "evaluator/problem/registry.h"

namespace kloop::report {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

class RescoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    runs_ = fs::temp_directory_path() / ("kloop-rescore-" + std::to_string(getpid()));
    fs::remove_all(runs_);
    RunStore store(runs_.string(), "tiny");
    run_ = store.path();
    const json config = {{"name", "tiny"},
                         {"problems", {{"suite", "kernelbench"}, {"names", {"19_ReLU"}}}},
                         {"device", "cpu"},
                         {"protocol", "strict"},
                         {"seed", 1},
                         {"provider", {{"kind", "replay"}, {"model", "fixtures"}}},
                         {"scaffold", {{"kind", "iterative"}, {"samples", 1}, {"turns", 3}}},
                         {"evaluation", {{"timeout_s", 60}, {"max_timing_seconds", 0.05}, {"threads", 2}}}};
    RunStore::write_text(run_ + "/config.json", config.dump(2));
    store.seal_files("", {"config.json"});  // as RunStore::write_config does
    add(store, 1, "slightly_off.cpp", "incorrect", std::nullopt);
    add(store, 2, "", "no_code", std::nullopt);
    add(store, 3, "correct.cpp", "correct", 1.0);
  }
  void TearDown() override { fs::remove_all(runs_); }

  // An attempt as kloop run stores it: the fixture as candidate.cpp and a record.
  static void add(RunStore& store, int turn, const std::string& fixture, const std::string& verdict,
                  std::optional<double> speedup) {
    const std::string dir = store.attempt_dir("19_ReLU", 0, turn);
    if (!fixture.empty()) fs::copy_file(std::string(KLOOP_TEST_FIXTURES) + "/relu/" + fixture, dir + "/candidate.cpp");
    AttemptRecord r;
    r.run = "tiny";
    r.problem = "19_ReLU";
    r.level = 1;
    r.turn = turn;
    r.outcome = outcome_from_name(verdict).value();
    r.speedup = speedup;
    r.protocol = "strict";
    r.device = "cpu";
    r.input_tokens = 100;
    r.attempt_dir = store.relative_attempt_dir("19_ReLU", 0, turn);
    store.seal_files(r.attempt_dir, {"candidate.cpp"});  // as the turn loop does
    store.append(r);
  }

  // The attempt's verdict.json as the turn loop writes it: sealed.
  void store_verdict(int turn, const json& verdict) const {
    const std::string rel = "attempts/19_ReLU/sample0/turn" + std::to_string(turn);
    RunStore::write_text(run_ + "/" + rel + "/verdict.json", verdict.dump(2));
    RunStore(runs_.string(), "tiny").seal_files(rel, {"verdict.json"});
  }

  static std::string read(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  RescoreOptions options(const std::string& protocol) const {
    RescoreOptions o;
    o.protocol = protocol;
    o.problems_dir = ProblemRegistry::default_root();
    o.worker_path = KLOOP_TEST_WORKER;
    return o;
  }

  fs::path runs_;
  std::string run_;
};

TEST_F(RescoreTest, ReevaluatesStoredCandidatesUnderAnotherProtocol) {
  const std::string before = read(fs::path(run_) / "results.jsonl");
  std::ostringstream progress;
  const RescoreSummary s = rescore_run(run_, options("kernelbench"), progress);
  EXPECT_TRUE(s.errors.empty()) << progress.str();
  EXPECT_EQ(s.rescored, 2);
  EXPECT_EQ(s.copied, 1);
  EXPECT_EQ(read(fs::path(run_) / "results.jsonl"), before);

  RunStore store(runs_.string(), "tiny");
  const auto records = store.load_results("rescore-kernelbench.jsonl");
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0].protocol, "kernelbench");
  EXPECT_EQ(records[0].outcome, Outcome::kCorrect) << records[0].message;  // 0.5% off passes 1e-2
  EXPECT_TRUE(records[0].speedup.has_value());
  EXPECT_EQ(records[1].outcome, Outcome::kNoCode);
  EXPECT_EQ(records[2].outcome, Outcome::kCorrect) << records[2].message;
  EXPECT_EQ(records[0].input_tokens, 100);  // the generation's cost stays with its attempt
  EXPECT_EQ((s.transitions.at({Outcome::kIncorrect, Outcome::kCorrect})), 1);

  const json verdict =
      json::parse(read(fs::path(run_) / "rescore-kernelbench/attempts/19_ReLU/sample0/turn1/verdict.json"));
  EXPECT_EQ(verdict["protocol"]["name"], "kernelbench-v0.1");  // the version `kernelbench` names
  EXPECT_FALSE(fs::exists(fs::path(run_) / "attempts/19_ReLU/sample0/turn1/verdict.json"));
  EXPECT_NE(progress.str().find("[1/3] 19_ReLU sample 0 turn 1: incorrect -> correct"), std::string::npos)
      << progress.str();

  // The report reads the rescore: one-shot correct under kernelbench, not under strict.
  const RunView kb = load_run_view(run_, "kernelbench", nullptr);
  const RunView strict = load_run_view(run_, "", nullptr);
  MetricOptions o;
  o.bootstrap_resamples = 0;
  EXPECT_DOUBLE_EQ(compute_metrics(kb.problems, kb.attempts, 3, 1, o).groups.back().by_turn[0].correctness.value, 1);
  EXPECT_DOUBLE_EQ(
      compute_metrics(strict.problems, strict.attempts, 3, 1, o).groups.back().by_turn[0].correctness.value, 0);

  // Run again through the command: everything resumes, nothing is evaluated.
  std::string out;
  FILE* pipe =
      popen((std::string(KLOOP_TEST_BINARY) + " rescore " + run_ + " --protocol kernelbench 2>&1").c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  char buf[4096];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  const int status = pclose(pipe);
  EXPECT_EQ(WEXITSTATUS(status), 0) << out;
  EXPECT_NE(out.find("0 attempt(s) evaluated now, 3 resumed"), std::string::npos) << out;
  EXPECT_NE(out.find("incorrect -> correct: 1  (changed)"), std::string::npos) << out;
}

TEST_F(RescoreTest, RefusesTheRunsOwnProtocolAndUnknownOnes) {
  std::ostringstream progress;
  EXPECT_THROW(rescore_run(run_, options("strict"), progress), std::invalid_argument);
  EXPECT_THROW(rescore_run(run_, options("loose"), progress), std::invalid_argument);
  EXPECT_FALSE(fs::exists(fs::path(run_) / "rescore-strict.jsonl"));
}

// strict-libraries measures what strict does: the rescore judges each
// stored verdict again from its observations, with no worker (the path given
// does not exist) and the same outcomes and speedups on the CPU, where the
// library rule does not apply. A verdict without observations (an older
// kloop's) is evaluated again, and says why.
TEST_F(RescoreTest, AProtocolThatOnlyJudgesDifferentlyJudgesTheStoredVerdictsAgain) {
  // The verdicts kloop run stored with the attempts, under the run's protocol.
  Builder builder(BuilderConfig::from_environment());
  EvalOptions eo;
  eo.protocol = "strict";
  eo.worker_path = KLOOP_TEST_WORKER;
  eo.max_timing_seconds = 0.05;
  eo.threads = 2;
  Evaluator evaluator(builder, eo);
  const ProblemSpec spec = ProblemRegistry(ProblemRegistry::default_root()).load("19_ReLU");
  std::map<int, Verdict> stored;
  for (int turn : {1, 3}) {
    const fs::path dir = fs::path(run_) / ("attempts/19_ReLU/sample0/turn" + std::to_string(turn));
    stored[turn] = evaluator.evaluate(spec, (dir / "candidate.cpp").string());
    store_verdict(turn, stored[turn].to_json());
  }
  ASSERT_EQ(stored[1].verdict, VerdictClass::kIncorrect) << stored[1].message;
  ASSERT_EQ(stored[3].verdict, VerdictClass::kCorrect) << stored[3].message;
  ASSERT_TRUE(stored[3].speedup.has_value());

  RescoreOptions o = options("strict-libraries");
  o.worker_path = (runs_ / "no-such-worker").string();
  std::ostringstream progress;
  const RescoreSummary s = rescore_run(run_, o, progress);
  EXPECT_TRUE(s.errors.empty()) << progress.str();
  EXPECT_TRUE(s.judging_only);
  EXPECT_EQ(s.rejudged, 2) << progress.str();
  EXPECT_EQ(s.rescored, 0);
  EXPECT_EQ(s.copied, 1);
  RunStore store(runs_.string(), "tiny");
  const auto records = store.load_results("rescore-strict-libraries.jsonl");
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0].outcome, Outcome::kIncorrect);
  EXPECT_EQ(records[0].message, stored[1].message);
  EXPECT_EQ(records[2].outcome, Outcome::kCorrect);
  ASSERT_TRUE(records[2].speedup.has_value());
  EXPECT_DOUBLE_EQ(*records[2].speedup, *stored[3].speedup);
  EXPECT_EQ(records[2].message, stored[3].message);
  const json verdict =
      json::parse(read(fs::path(run_) / "rescore-strict-libraries/attempts/19_ReLU/sample0/turn3/verdict.json"));
  EXPECT_EQ(verdict["protocol"]["name"], "strict-libraries");
  EXPECT_EQ(verdict["rejudged_from"], "strict");
  EXPECT_EQ(verdict["tests"], stored[3].to_json()["tests"]);
  EXPECT_NE(progress.str().find("[3/3] 19_ReLU sample 0 turn 3: correct 1.00x -> correct"), std::string::npos)
      << progress.str();
  EXPECT_NE(progress.str().find("(re-judged)"), std::string::npos) << progress.str();
  const std::string summary = format_rescore_summary(s, run_, "strict-libraries");
  EXPECT_NE(summary.find("2 attempt(s) judged again from their stored observations"), std::string::npos) << summary;

  // An older kloop's verdict keeps no observations: evaluated again.
  fs::remove(fs::path(run_) / "rescore-strict-libraries.jsonl");
  fs::remove_all(fs::path(run_) / "rescore-strict-libraries");
  json older = stored[3].to_json();
  older.erase("observed");
  store_verdict(3, older);
  std::ostringstream again;
  const RescoreSummary t = rescore_run(run_, options("strict-libraries"), again);
  EXPECT_TRUE(t.errors.empty()) << again.str();
  EXPECT_EQ(t.rejudged, 1) << again.str();
  EXPECT_EQ(t.rescored, 1);
  EXPECT_NE(again.str().find("keeps no observations (a kloop before re-judging wrote it); evaluated again"),
            std::string::npos)
      << again.str();
  EXPECT_EQ(store.load_results("rescore-strict-libraries.jsonl")[2].outcome, Outcome::kCorrect) << again.str();
}

// Attempts that never had code (no_code, and the provider's refused and
// context_overflow) are copied with their verdict; lost code is an error.
TEST_F(RescoreTest, LostCodeIsAnErrorForThatAttemptOnly) {
  fs::remove(fs::path(run_) / "attempts/19_ReLU/sample0/turn1/candidate.cpp");
  fs::remove(fs::path(run_) / "attempts/19_ReLU/sample0/turn3/candidate.cpp");
  RunStore store(runs_.string(), "tiny");
  for (const char* verdict : {"refused", "context_overflow"}) {
    AttemptRecord r = store.load_results().front();
    r.sample = std::string(verdict) == "refused" ? 1 : 2;
    r.outcome = outcome_from_name(verdict).value();
    r.attempt_dir = store.relative_attempt_dir("19_ReLU", r.sample, 1);
    store.append(r);
  }
  std::ostringstream progress;
  const RescoreSummary s = rescore_run(run_, options("kernelbench"), progress);
  ASSERT_EQ(s.errors.size(), 2u) << progress.str();
  EXPECT_NE(s.errors[0].find("no candidate.cpp or candidate.cu"), std::string::npos) << s.errors[0];
  EXPECT_EQ(s.copied, 3);
  EXPECT_EQ((s.transitions.at({Outcome::kRefused, Outcome::kRefused})), 1);
  EXPECT_EQ((s.transitions.at({Outcome::kContextOverflow, Outcome::kContextOverflow})), 1);
}

// Attack (issue 48): an integrity_violation attempt given an honest
// attempt's verdict.json (its observations) became correct, signed, when
// rescore re-judged it. The seal ties each file to its attempt: the swapped
// file is refused, and the attempt is evaluated again (here there is no
// worker, so it is not rescored at all) rather than judged from the copy.
TEST_F(RescoreTest, AnotherAttemptsObservationsAreNeverReJudged) {
  // Turn 3's genuine verdict (correct, with its observations), as stored.
  Builder builder(BuilderConfig::from_environment());
  EvalOptions eo;
  eo.protocol = "strict";
  eo.worker_path = KLOOP_TEST_WORKER;
  eo.max_timing_seconds = 0.05;
  eo.threads = 2;
  const Verdict honest = Evaluator(builder, eo).evaluate(ProblemRegistry(ProblemRegistry::default_root()).load("19_ReLU"),
                                                         run_ + "/attempts/19_ReLU/sample0/turn3/candidate.cpp");
  ASSERT_EQ(honest.verdict, VerdictClass::kCorrect) << honest.message;
  store_verdict(1, {{"verdict", "integrity_violation"}});
  store_verdict(3, honest.to_json());
  fs::copy_file(fs::path(run_) / "attempts/19_ReLU/sample0/turn3/verdict.json",
                fs::path(run_) / "attempts/19_ReLU/sample0/turn1/verdict.json", fs::copy_options::overwrite_existing);
  RescoreOptions o = options("strict-libraries");
  o.worker_path = (runs_ / "no-such-worker").string();
  std::ostringstream progress;
  const RescoreSummary s = rescore_run(run_, o, progress);
  for (const auto& r : RunStore(runs_.string(), "tiny").load_results("rescore-strict-libraries.jsonl")) {
    EXPECT_NE(r.turn, 1) << "ESCAPED: turn 1 was rescored from turn 3's observations: " << outcome_name(r.outcome);
  }
  EXPECT_EQ(s.rejudged, 1) << "turn 3, whose own verdict it is\n" << progress.str();
  ASSERT_GE(s.errors.size(), 1u) << progress.str();
  EXPECT_NE(s.errors[0].find("turn 1"), std::string::npos) << s.errors[0];
}

// Attack: a record whose attempt_dir leads out of the run (rescore once
// compiled and wrote outside the run folder), and a config changed to run
// candidates without a sandbox.
TEST_F(RescoreTest, RecordsAndConfigsAreDataRescoreChecks) {
  RunStore store(runs_.string(), "tiny");
  AttemptRecord r = store.load_results().front();
  r.sample = 5;
  r.attempt_dir = "../../outside";
  store.append(r);
  RescoreOptions o = options("kernelbench");
  o.worker_path = (runs_ / "no-such-worker").string();
  std::ostringstream progress;
  RescoreSummary s;
  try {
    s = rescore_run(run_, o, progress);
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what();
  }
  bool named = false;
  for (const auto& e : s.errors) named = named || e.find("'../../outside' has an empty, '.' or '..' part") != std::string::npos;
  EXPECT_TRUE(named) << progress.str();
  EXPECT_FALSE(fs::exists(runs_.parent_path() / "outside"));
  EXPECT_FALSE(fs::exists(fs::path(run_) / "rescore-kernelbench" / ".." / ".." / "outside"));

  json config = json::parse(read(fs::path(run_) / "config.json"));
  config["evaluation"]["isolation"] = "none";
  RunStore::write_text(run_ + "/config.json", config.dump(2));
  try {
    rescore_run(run_, options("kernelbench"), progress);
    ADD_FAILURE() << "a changed config was believed";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("config.json: differs from what the run's driver wrote"), std::string::npos)
        << e.what();
  }
}

// Attack: a forged record in results.jsonl is not rescored nor counted.
TEST_F(RescoreTest, ForgedRecordsAreNeitherRescoredNorCounted) {
  AttemptRecord forged;
  forged.run = "tiny";
  forged.problem = "19_ReLU";
  forged.sample = 1;
  forged.turn = 1;
  forged.outcome = Outcome::kNoCode;
  std::ofstream(fs::path(run_) / "results.jsonl", std::ios::app) << forged.to_json().dump() << "\n";
  // No code to evaluate: only the records are under test here.
  fs::remove(fs::path(run_) / "attempts/19_ReLU/sample0/turn1/candidate.cpp");
  fs::remove(fs::path(run_) / "attempts/19_ReLU/sample0/turn3/candidate.cpp");
  std::ostringstream progress;
  ::testing::internal::CaptureStderr();
  const RescoreSummary s = rescore_run(run_, options("kernelbench"), progress);
  const std::string warning = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(s.attempts, 3) << progress.str();
  EXPECT_EQ(s.copied, 1) << "the forged no_code record is not copied";
  EXPECT_NE(warning.find("1 of 4 line(s) rejected"), std::string::npos) << warning;
  for (const auto& r : RunStore(runs_.string(), "tiny").load_results("rescore-kernelbench.jsonl")) {
    EXPECT_EQ(r.sample, 0);
  }
}

// A KernelBench generation folder as a run: its kernel files become
// attempts with KernelBench's own verdicts where eval_results.json has them,
// a file of a task kloop lacks is named, strict then tells the published
// "correct" that returns its input from a real one, and importing again adds
// nothing.
TEST_F(RescoreTest, AKernelBenchGenerationFolderIsImportedAndRescored) {
  KLOOP_NEED_PYTHON_CANDIDATES();
  const fs::path gen = runs_ / "kernelbench-gen";
  fs::create_directories(gen);
  const std::string fixtures = std::string(KLOOP_TEST_FIXTURES) + "/kernelbench/";
  fs::copy_file(fixtures + "relu_correct.py", gen / "level_1_problem_19_sample_0_kernel.py");
  fs::copy_file(fixtures + "relu_in_place.py", gen / "level_1_problem_19_sample_1_kernel.py");
  fs::copy_file(fixtures + "relu_correct.py", gen / "level_1_problem_999_sample_0_kernel.py");
  std::ofstream(gen / "generation_config.yaml") << "model_name: some-model\nlevel: 1\n";
  std::ofstream(gen / "eval_results.json")
      << R"({"19": [{"sample_id": 0, "compiled": true, "correctness": true, "runtime": 0.02, "metadata": {}},
                    {"sample_id": 1, "compiled": true, "correctness": true, "runtime": 0.01, "metadata": {}}]})";
  KernelBenchImportOptions io;
  io.generations = gen.string();
  io.runs_dir = runs_.string();
  io.name = "imported";
  io.kernelbench = fixtures + "versions/head";
  io.problems_dir = ProblemRegistry::default_root();
  const KernelBenchImportSummary s = import_kernelbench(io);
  EXPECT_EQ(s.imported, 2);
  EXPECT_EQ(s.published, 2);
  ASSERT_EQ(s.skipped.size(), 1u);
  EXPECT_NE(s.skipped[0].find("has no KernelBench/level1/999_*.py"), std::string::npos) << s.skipped[0];
  const std::string run = (runs_ / "imported").string();
  EXPECT_TRUE(fs::exists(run + "/attempts/19_ReLU/sample1/turn1/candidate.py"));
  RunStore store(runs_.string(), "imported");
  const auto published = store.load_results();
  ASSERT_EQ(published.size(), 2u);
  EXPECT_EQ(published[1].outcome, Outcome::kCorrect);
  EXPECT_EQ(published[1].model, "some-model");

  std::ostringstream progress;
  RescoreOptions o = options("strict");
  o.max_timing_seconds = 0.05;
  o.threads = 2;
  const RescoreSummary r = rescore_run(run, o, progress);
  EXPECT_TRUE(r.errors.empty()) << progress.str();
  std::map<int, std::string> strict;
  for (const auto& a : store.load_results("rescore-strict.jsonl")) strict[a.sample] = outcome_name(a.outcome);
  EXPECT_EQ(strict[0], "correct") << progress.str();
  EXPECT_EQ(strict[1], "integrity_violation") << progress.str();
  EXPECT_NO_THROW(load_run_view(run, "strict", nullptr));
  EXPECT_NO_THROW(load_run_view(run, "", nullptr)) << "the published verdicts are a view of their own";

  EXPECT_EQ(import_kernelbench(io).imported, 0) << "importing again adds nothing";
}

// Attack (issue 48): `kloop import kernelbench` of a hostile folder. A
// kernel file that is a link to /proc/self/environ (the API key in it), a
// 2 GiB sparse kernel file, a generation_config.yaml of nested aliases (a
// billion values from 448 bytes), a folder name that is #SBATCH syntax.
// Each is refused by name; nothing of the environment reaches the run.
TEST_F(RescoreTest, AHostileKernelBenchFolderIsData) {
  const fs::path gen = runs_ / "hostile";
  fs::create_directories(gen);
  const std::string secret = "kloop_import_secret_" + std::to_string(getpid());
  setenv("KLOOP_TEST_IMPORT_API_KEY", secret.c_str(), 1);
  fs::create_symlink("/proc/self/environ", gen / "level_1_problem_19_sample_0_kernel.py");
  {
    std::ofstream(gen / "level_1_problem_19_sample_1_kernel.py") << "import torch\n";
  }
  fs::resize_file(gen / "level_1_problem_19_sample_1_kernel.py", 2ull << 30);
  fs::copy_file(std::string(KLOOP_TEST_FIXTURES) + "/kernelbench/relu_correct.py",
                gen / "level_1_problem_19_sample_2_kernel.py");
  KernelBenchImportOptions io;
  io.generations = gen.string();
  io.runs_dir = runs_.string();
  io.name = "hostile-import";
  io.kernelbench = std::string(KLOOP_TEST_FIXTURES) + "/kernelbench/versions/head";
  io.problems_dir = ProblemRegistry::default_root();
  const KernelBenchImportSummary s = import_kernelbench(io);
  EXPECT_EQ(s.imported, 1);
  std::string skipped;
  for (const auto& x : s.skipped) skipped += x + "\n";
  EXPECT_NE(skipped.find("level_1_problem_19_sample_0_kernel.py: a link or not a regular file"), std::string::npos)
      << skipped;
  EXPECT_NE(skipped.find("more than the 4194304 kloop reads"), std::string::npos) << skipped;
  for (const auto& e : fs::recursive_directory_iterator(runs_ / "hostile-import")) {
    if (e.is_regular_file()) {
      EXPECT_EQ(read(e.path()).find(secret), std::string::npos) << "ESCAPED into " << e.path();
    }
  }
  // 448 bytes of nested aliases.
  std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= 'j'; ++c) {
    const char prev = static_cast<char>(c - 1);
    bomb += std::string(1, c) + ": &" + c + " [*" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev +
            ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + "]\n";
  }
  bomb += "model_name: *j\n";
  std::ofstream(gen / "generation_config.yaml") << bomb;
  io.name = "hostile-import-2";
  try {
    import_kernelbench(io);
    ADD_FAILURE() << "an alias bomb was read";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("expands to more than 1000000 values"), std::string::npos) << e.what();
  }
  fs::remove(gen / "generation_config.yaml");
  io.name = "x --hold";
  try {
    import_kernelbench(io);
    ADD_FAILURE() << "a run named like #SBATCH options was made";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("holds a space"), std::string::npos) << e.what();
  }
  unsetenv("KLOOP_TEST_IMPORT_API_KEY");
}

}  // namespace
}  // namespace kloop::report
