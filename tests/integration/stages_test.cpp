// An attempt's life as stored stages: a run stopped at any stage (by the
// stage's own hook, KLOOP_TEST_STOP_AT, not at a moment of the clock)
// resumes from it and never asks the model again for an answer it has; an
// error of kloop's while judging an answer keeps the answer for the next
// run; a worker that cannot start is the machine's fault, evaluated again,
// never the candidate's verdict.
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "agent/scaffold/environment_retry.h"
#include "agent/scaffold/stage_journal.h"
#include "agent/scaffold/turn_loop.h"
#include "evaluator/build/content_hash.h"
#include "evaluator/isolation/subprocess.h"
#include "tests/support/fake_http_server.h"
#include "tests/support/relu_answers.h"

namespace kloop {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using test_support::kReluAnswer;


// A streamed Chat Completions answer as OpenAI sends it
// (https://platform.openai.com/docs/api-reference/chat-streaming).
std::string openai_stream(const std::string& content) {
  auto chunk = [](const json& choice) {
    return "data: " + json{{"id", "c1"}, {"object", "chat.completion.chunk"}, {"choices", {choice}}}.dump() + "\n\n";
  };
  return chunk({{"index", 0}, {"delta", {{"role", "assistant"}, {"content", content}}}, {"finish_reason", nullptr}}) +
         chunk({{"index", 0}, {"delta", json::object()}, {"finish_reason", "stop"}}) +
         "data: " +
         json{{"id", "c1"}, {"choices", json::array()}, {"usage", {{"prompt_tokens", 100}, {"completion_tokens", 50}}}}
             .dump() +
         "\n\ndata: [DONE]\n\n";
}

class StagesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kloop-stages-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    server_.set_handler([](const test_support::RecordedRequest&, std::size_t) {
      return test_support::ScriptedReply{{200, {{"Content-Type", "text/event-stream"}}, openai_stream(kReluAnswer), 0ms},
                                         std::string::npos, 0ms, {}};
    });
    std::ofstream(dir_ / "s.yaml") << "name: s\nruns_dir: runs\nproblems: {names: [19_ReLU]}\ndevice: cpu\n"
                                      "provider: {kind: openai, model: m, base_url: " + server_.base_url() +
                                          "/v1, prices: {input: 1, output: 2}}\n"
                                      "scaffold: {kind: one_shot}\n"
                                      "evaluation: {timeout_s: 30, max_timing_seconds: 0.02, threads: 1}\n";
  }
  void TearDown() override { fs::remove_all(dir_); }

  // `kloop run` of the config as run `name`, with `env` set (VAR=value ...).
  CommandResult kloop(const std::string& name, const std::string& env = "") {
    return run_command({"bash", "-c", env + " exec '" + std::string(KLOOP_TEST_BINARY) +
                                          "' run s.yaml --no-provider-check --name " + name},
                       dir_.string(), 600s);
  }
  int requests() const { return static_cast<int>(server_.requests().size()); }
  // The stage lines of run `name` with this event.
  int lines(const std::string& name, const std::string& event) {
    std::ifstream in(dir_ / "runs" / name / "stages.jsonl");
    int n = 0;
    std::string line;
    while (std::getline(in, line)) n += json::parse(line).value("event", "") == event ? 1 : 0;
    return n;
  }
  std::vector<json> records(const std::string& name) {
    std::vector<json> out;
    std::ifstream in(dir_ / "runs" / name / "results.jsonl");
    std::string line;
    while (std::getline(in, line)) out.push_back(json::parse(line));
    return out;
  }

  // The next run of `name` finishes it with no request beyond the first:
  // the kept answer is judged, one correct record.
  void expect_resumed_without_a_request(const std::string& name, const std::string& env = "") {
    const CommandResult resumed = kloop(name, env);
    ASSERT_EQ(resumed.status.code, 0) << resumed.output;
    EXPECT_EQ(requests(), 1) << "the answer was paid for once";
    ASSERT_EQ(records(name).size(), 1u);
    EXPECT_EQ(records(name)[0]["verdict"], "correct");
  }

  fs::path dir_;
  test_support::FakeHttpServer server_;
};

TEST_F(StagesTest, ARunKilledAtEachStageResumesThereWithoutAnotherRequest) {
  for (const std::string event : {"planned", "requested", "answered", "extracted", "built", "judged", "recorded"}) {
    SCOPED_TRACE(event);
    const int before = requests();
    const CommandResult killed = kloop(event, "KLOOP_TEST_STOP_AT=" + event + ":1:KILL");
    ASSERT_FALSE(killed.status.exited) << killed.output;
    ASSERT_EQ(killed.status.signal, SIGKILL) << killed.output;
    const CommandResult resumed = kloop(event);
    ASSERT_EQ(resumed.status.code, 0) << resumed.output;
    EXPECT_EQ(requests() - before, 1) << "one request for the one attempt, whatever the stage it stopped at";
    const std::vector<json> r = records(event);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0]["verdict"], "correct") << r[0];
    // The request's cost, once, whichever run recorded it.
    EXPECT_DOUBLE_EQ(r[0]["cost_usd"].get<double>(), (100 * 1.0 + 50 * 2.0) / 1e6);
    EXPECT_EQ(lines(event, "judged"), 1) << "judged once";
    if (event != "planned" && event != "requested") {
      EXPECT_EQ(lines(event, "requested"), 1) << "an answered attempt is not asked for again";
    }
    if (event == "judged" || event == "recorded") {
      EXPECT_EQ(lines(event, "built"), 1) << "a judged attempt is not built or evaluated again";
    }
    if (event == "recorded") {
      EXPECT_NE(resumed.output.find("0 attempt(s) run now, 1 resumed"), std::string::npos) << resumed.output;
    } else {
      EXPECT_NE(resumed.output.find("1 attempt(s) run now, 0 resumed"), std::string::npos) << resumed.output;
    }
  }
}

// Ctrl-C: nothing new starts, the request in flight finishes and its
// answer is kept; the summary says so, and the next run evaluates the
// answer without asking again.
TEST_F(StagesTest, AnInterruptedRunKeepsTheAnswerInFlight) {
  const CommandResult stopped = kloop("int", "KLOOP_TEST_STOP_AT=requested:1:INT");
  EXPECT_EQ(stopped.status.code, 130) << stopped.output;
  EXPECT_NE(stopped.output.find("1 answer(s) kept that the next run evaluates without a request"), std::string::npos)
      << stopped.output;
  EXPECT_TRUE(records("int").empty());
  EXPECT_EQ(lines("int", "answered"), 1);
  expect_resumed_without_a_request("int");
}

// An error of kloop's own while judging an answer (here the reference does
// not build) leaves a kloop_error record naming the attempt folder and its
// log; the answer is kept, and the next run judges it without a request.
TEST_F(StagesTest, AKloopErrorKeepsThePaidAnswerForTheNextRun) {
  const fs::path problems = dir_ / "problems";
  const std::string level = std::string(KLOOP_TEST_PROBLEMS) + "/kernelbench/level1";
  fs::create_directories(problems / "kernelbench/level1");
  fs::copy_file(level + "/19_ReLU.yaml", problems / "kernelbench/level1/19_ReLU.yaml");
  std::ofstream(problems / "kernelbench/level1/19_ReLU.cpp") << "this reference does not compile\n";
  const std::string here = "KLOOP_PROBLEMS_DIR=" + problems.string();
  const CommandResult broken = kloop("err", here);
  EXPECT_EQ(broken.status.code, 1) << broken.output;
  EXPECT_NE(broken.output.find("kloop_error while evaluating the answered attempt (kept in "
                               "attempts/19_ReLU/sample0/turn1; log attempts/19_ReLU/sample0/turn1/kloop_error.log)"),
            std::string::npos)
      << broken.output;
  EXPECT_TRUE(records("err").empty());
  EXPECT_EQ(lines("err", "kloop_error"), 1);
  EXPECT_NE(read_file((dir_ / "runs/err/attempts/19_ReLU/sample0/turn1/kloop_error.log").string()).find("does not build"),
            std::string::npos);
  fs::copy_file(level + "/19_ReLU.cpp", problems / "kernelbench/level1/19_ReLU.cpp", fs::copy_options::overwrite_existing);
  expect_resumed_without_a_request("err", here);
}

// A worker that cannot start (here: one that exits before it says
// anything) is the machine's fault: evaluated again, and when it never
// starts, an environment_error that keeps the answer, never a verdict of
// the candidate's.
TEST_F(StagesTest, AWorkerThatCannotStartIsNeverTheCandidatesVerdict) {
  const CommandResult down = kloop("env", "KLOOP_WORKER=/bin/false");
  EXPECT_EQ(down.status.code, 1) << down.output;
  EXPECT_NE(down.output.find("evaluated again (3 of 3)"), std::string::npos) << down.output;
  EXPECT_NE(down.output.find("environment_error while evaluating the answered attempt"), std::string::npos)
      << down.output;
  EXPECT_TRUE(records("env").empty()) << "no verdict stored for the candidate";
  expect_resumed_without_a_request("env");
}

// The reference out of memory beside the candidate may be another
// evaluation's doing: evaluated again before it stands. This problem's
// reference fails whenever a candidate process exists, so the verdict comes
// back every time and stands as the candidate's, saying so.
TEST_F(StagesTest, AnOutOfMemoryBesideTheCandidateIsEvaluatedAgainBeforeItStands) {
  const std::string candidate = read_file(std::string(KLOOP_TEST_FIXTURES) + "/precision/naive_fp32_matmul.cpp");
  server_.set_handler([&](const test_support::RecordedRequest&, std::size_t) {
    return test_support::ScriptedReply{
        {200, {{"Content-Type", "text/event-stream"}}, openai_stream("```cpp\n" + candidate + "\n```\n"), 0ms},
        std::string::npos, 0ms, {}};
  });
  std::ofstream(dir_ / "s.yaml") << "name: s\nruns_dir: runs\nproblems: {names: [starved_beside_candidate]}\ndevice: cpu\n"
                                    "provider: {kind: openai, model: m, base_url: " + server_.base_url() + "/v1}\n"
                                    "scaffold: {kind: one_shot}\n"
                                    "evaluation: {timeout_s: 60, max_timing_seconds: 0.05, threads: 2, "
                                    "environment_retries: 1}\n";
  const CommandResult r = kloop("oom", "KLOOP_PROBLEMS_DIR=" + std::string(KLOOP_TEST_FIXTURES) + "/problems");
  ASSERT_EQ(r.status.code, 0) << r.output;
  EXPECT_NE(r.output.find("evaluated again (2 of 2)"), std::string::npos) << r.output;
  const std::vector<json> rec = records("oom");
  ASSERT_EQ(rec.size(), 1u);
  EXPECT_EQ(rec[0]["verdict"], "runtime_error");
  EXPECT_NE(rec[0]["message"].get<std::string>().find("in each of 2 evaluations"), std::string::npos) << rec[0];
}

// --check's cost ceiling counts what a request can be billed: the thinking
// budget anthropic adds to max_tokens (8,000 said where 12,096 are billable);
// and it says that a broken stream may be sent, and billed, again.
TEST_F(StagesTest, TheCheckCeilingBillsTheThinkingBudgetAndTheResends) {
  setenv("KLOOP_TEST_STAGES_KEY", "sk-test-stages-0000", 1);
  std::ofstream(dir_ / "c.yaml") << "name: c\nruns_dir: runs\nproblems: {names: [19_ReLU]}\n"
                                    "provider: {kind: anthropic, model: claude-test, api_key_env: KLOOP_TEST_STAGES_KEY, "
                                    "base_url: " + server_.base_url() + ", max_tokens: 8000, thinking_budget: 4096, "
                                    "prices: {input: 3, output: 15}}\nscaffold: {kind: one_shot}\n";
  const RunConfig c = load_run_config((dir_ / "c.yaml").string());
  auto provider = make_provider(c.provider);
  std::ostringstream out, notes;
  TurnLoop loop(c, *provider, notes);
  EXPECT_EQ(loop.check(out), 0) << out.str();
  EXPECT_NE(out.str().find("at most 12096 output tokens (12096 a request: the answer's budget plus the thinking budget)"),
            std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("sent again up to 2 time(s)"), std::string::npos) << out.str();
  unsetenv("KLOOP_TEST_STAGES_KEY");
  EXPECT_EQ(requests(), 0);
}

// The retry rule itself: a fault of the machine is evaluated again; one
// that comes back every time is the candidate's (it leaves no room), and a
// worker that never starts is thrown, not made a verdict.
TEST(EnvironmentRetryTest, AFaultIsEvaluatedAgainAndStandsOnlyWhenItAlwaysComesBack) {
  int calls = 0;
  std::vector<std::string> notes;
  auto note = [&](const std::string& n) { notes.push_back(n); };
  Verdict fault;
  fault.verdict = VerdictClass::kRuntimeError;
  fault.message = "out of memory beside the candidate";
  fault.environment_fault = "the reference ran out of memory beside the candidate";
  Verdict good;
  good.verdict = VerdictClass::kCorrect;
  RetriedVerdict r = evaluate_retrying_environment([&] { return ++calls < 2 ? fault : good; }, 2, note);
  EXPECT_EQ(r.verdict.verdict, VerdictClass::kCorrect);
  EXPECT_EQ(r.evaluations, 2);
  EXPECT_EQ(notes.size(), 1u);
  calls = 0;
  r = evaluate_retrying_environment([&] { return ++calls, fault; }, 2, note);
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(r.verdict.verdict, VerdictClass::kRuntimeError);
  EXPECT_NE(r.verdict.message.find("in each of 3 evaluations"), std::string::npos) << r.verdict.message;
  calls = 0;
  EXPECT_THROW(evaluate_retrying_environment([&]() -> Verdict { ++calls; throw EnvironmentError("fork: EAGAIN"); }, 1, note),
               EnvironmentError);
  EXPECT_EQ(calls, 2);
  EXPECT_TRUE(machine_exhausted("fork: Resource temporarily unavailable"));
  EXPECT_TRUE(machine_exhausted("RuntimeError: can't start new thread"));
  EXPECT_FALSE(machine_exhausted("illegal memory access"));
}

}  // namespace
}  // namespace kloop
