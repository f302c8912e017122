// The feedback loop end to end on CPU: a replayed model answers, kloop
// compiles and evaluates, the verdict becomes the next prompt, every attempt
// lands in the run store, and a killed run resumes without redoing work.
#include "agent/scaffold/turn_loop.h"

#include <gtest/gtest.h>

#include "tests/support/python_support.h"
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "evaluator/build/content_hash.h"
#include "evaluator/build/environment.h"
#include "tests/support/fake_http_server.h"

namespace kloop {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const char* kHack = "Identity is enough here:\n```cpp\n#include <kloop/kernel_api.h>\nstruct ModelNew {\n"
                    "  explicit ModelNew(const kloop::ModuleInit&) {}\n"
                    "  at::Tensor forward(const at::Tensor& x) { return x; }\n};\n"
                    "KLOOP_REGISTER_CANDIDATE(ModelNew)\n```\n";
const char* kNoInclude = "```cpp\n#include <kloop/kernel_api.h>\nstruct ModelNew {\n"
                         "  explicit ModelNew(const kloop::ModuleInit&) {}\n"
                         "  at::Tensor forward(const at::Tensor& x) { at::Tensor y = at::empty_like(x); "
                         "return y.copy_(x).clamp_min_(0); }\n};\nKLOOP_REGISTER_CANDIDATE(ModelNew)\n```\n";
const char* kGood = "```cpp\n#include <ATen/ops/empty_like.h>\n#include <kloop/kernel_api.h>\nstruct ModelNew {\n"
                    "  explicit ModelNew(const kloop::ModuleInit&) {}\n"
                    "  at::Tensor forward(const at::Tensor& x) { at::Tensor y = at::empty_like(x); "
                    "return y.copy_(x).clamp_min_(0); }\n};\nKLOOP_REGISTER_CANDIDATE(ModelNew)\n```\n";
const char* kProse = "I would fuse the operations into a single pass over the data.";

class TurnLoopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kloop-loop-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // responses[i] answers turn i + 1 of sample 0, or, with per_sample, turn 1 of sample i.
  void transcript(const std::vector<std::string>& responses, bool per_sample = false) {
    std::ofstream out(dir_ / "t.jsonl");
    for (std::size_t i = 0; i < responses.size(); ++i) {
      out << json{{"problem", "19_ReLU"}, {"sample", per_sample ? i : 0}, {"turn", per_sample ? 1 : i + 1},
                  {"response", responses[i]}}
                 .dump()
          << "\n";
    }
  }

  RunConfig config(const std::string& extra_scaffold = "") {
    std::ofstream(dir_ / "run.yaml") << "name: t\nruns_dir: runs\nproblems: {names: [19_ReLU]}\n"
                                        "device: cpu\nprotocol: strict\n"
                                        "provider: {kind: replay, model: scripted, transcript: t.jsonl}\n"
                                        "scaffold: {kind: iterative, turns: 3" + extra_scaffold + "}\n"
                                        "evaluation: {timeout_s: 30, max_timing_seconds: 0.05, threads: 2}\n";
    return load_run_config((dir_ / "run.yaml").string());
  }

  LoopSummary run(const RunConfig& c) {
    auto provider = make_provider(c.provider);
    progress_.str("");
    TurnLoop loop(c, *provider, progress_);
    return loop.run();
  }

  // A config for the same run with a scaffold and problems of its own.
  RunConfig config_with(const std::string& scaffold, const std::string& problems = "names: [19_ReLU]",
                        const std::string& protocol = "strict") {
    std::ofstream(dir_ / "run.yaml") << "name: t\nruns_dir: runs\nproblems: {" + problems + "}\n"
                                        "device: cpu\nprotocol: " + protocol + "\n"
                                        "provider: {kind: replay, model: scripted, transcript: t.jsonl}\n"
                                        "scaffold: {" + scaffold + "}\n"
                                        "evaluation: {timeout_s: 30, max_timing_seconds: 0.05, threads: 2}\n";
    return load_run_config((dir_ / "run.yaml").string());
  }

  void config_error(const std::string& yaml, const std::string& field, const std::string& words) {
    std::ofstream(dir_ / "bad.yaml") << yaml;
    try {
      load_run_config((dir_ / "bad.yaml").string());
      ADD_FAILURE() << "accepted:\n" << yaml;
    } catch (const std::invalid_argument& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("bad.yaml"), std::string::npos) << m;
      EXPECT_NE(m.find("'" + field + "'"), std::string::npos) << m;
      EXPECT_NE(m.find(words), std::string::npos) << m;
    }
  }

  std::ostringstream progress_;

  std::vector<json> results() {
    std::vector<json> out;
    std::ifstream in(dir_ / "runs" / "t" / "results.jsonl");
    std::string line;
    while (std::getline(in, line)) out.push_back(json::parse(line));
    return out;
  }

  json prompt(int turn) {
    return json::parse(read_file((dir_ / "runs/t/attempts/19_ReLU/sample0" / ("turn" + std::to_string(turn)) /
                                  "prompt.json").string()));
  }

  fs::path dir_;
};

TEST_F(TurnLoopTest, VerdictsFeedTheNextTurnAndResumeSkipsFinishedWork) {
  transcript({kHack, kNoInclude, kGood});
  RunConfig c = config();
  LoopSummary s = run(c);
  ASSERT_TRUE(s.fatal_error.empty()) << s.fatal_error;
  ASSERT_TRUE(s.errors.empty()) << s.errors.front();
  auto r = results();
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0]["verdict"], "integrity_violation");
  EXPECT_EQ(r[1]["verdict"], "compile_error");
  EXPECT_EQ(r[2]["verdict"], "correct");
  EXPECT_TRUE(r[2]["chain_done"]);
  EXPECT_EQ(r[2]["stop_reason"], "turns");
  // One build per candidate: the evaluation finds the turn's own build.
  EXPECT_TRUE(r[2]["build_cached"]) << r[2].dump();
  EXPECT_GT(r[2]["compile_seconds"].get<double>(), 0.0);

  // The full-history context: turn 3 sees both earlier answers and feedbacks.
  json p3 = prompt(3);
  ASSERT_EQ(p3["messages"].size(), 5u);
  EXPECT_NE(p3["messages"][2]["content"].get<std::string>().find("output_aliases_input"), std::string::npos);
  std::string fb2 = p3["messages"][4]["content"];
  EXPECT_NE(fb2.find("did not compile"), std::string::npos) << fb2;
  EXPECT_NE(fb2.find("empty_like"), std::string::npos) << "compiler diagnostics expected: " << fb2;
  EXPECT_TRUE(fs::exists(dir_ / "runs/t/attempts/19_ReLU/sample0/turn2/build.log"));
  EXPECT_TRUE(fs::exists(dir_ / "runs/t/attempts/19_ReLU/sample0/turn3/candidate.cpp"));
  EXPECT_TRUE(fs::exists(dir_ / "runs/t/config.json"));

  ASSERT_EQ(s.by_turn.size(), 3u);
  EXPECT_EQ(s.by_turn[0].correct, 0);
  EXPECT_EQ(s.by_turn[2].correct, 1);
  EXPECT_NE(format_summary(s).find("one-shot -> iterative: correct 0 -> 1"), std::string::npos) << format_summary(s);

  // Kill after turn 2: drop the last record; the rerun redoes turn 3 only.
  std::string all = read_file((dir_ / "runs/t/results.jsonl").string());
  all = all.substr(0, all.rfind('\n', all.size() - 2) + 1);
  std::ofstream(dir_ / "runs/t/results.jsonl", std::ios::trunc) << all;
  LoopSummary again = run(c);
  EXPECT_EQ(again.attempts_run, 1);
  EXPECT_EQ(again.attempts_resumed, 2);
  EXPECT_EQ(results().size(), 3u);
  EXPECT_EQ(results()[2]["verdict"], "correct");
  // A finished run is not repeated.
  EXPECT_EQ(run(c).attempts_run, 0);
}

// KernelBench's format end to end: KernelBench's prompt structure with the
// upstream task file, python blocks extracted, candidate.py built once and
// judged by the Python host, its feedback in the next turn.
TEST_F(TurnLoopTest, KernelBenchFormatRunsFromPromptToVerdict) {
  KLOOP_NEED_PYTHON_CANDIDATES();
  const std::string wrong = "Half of it:\n```python\nimport torch\nclass ModelNew(torch.nn.Module):\n"
                            "    def forward(self, x):\n        return torch.relu(x) * 0.5\n```\n";
  const std::string good = "```python\nimport torch\nclass ModelNew(torch.nn.Module):\n"
                           "    def forward(self, x):\n        return torch.relu(x)\n```\n";
  transcript({wrong, good});
  const std::string upstream = std::string(KLOOP_TEST_FIXTURES) + "/upstream";
  std::ofstream(dir_ / "run.yaml") << "name: t\nruns_dir: runs\nproblems: {names: [19_ReLU]}\n"
                                      "device: cpu\nprotocol: strict\ncandidate_format: kernelbench_python\n"
                                      "prompts: {upstream: " + upstream + "}\n"
                                      "provider: {kind: replay, model: scripted, transcript: t.jsonl}\n"
                                      "scaffold: {kind: iterative, turns: 2}\n"
                                      "evaluation: {timeout_s: 60, max_timing_seconds: 0.05, threads: 2}\n";
  RunConfig c = load_run_config((dir_ / "run.yaml").string());
  EXPECT_EQ(c.prompts.style, "kernelbench");
  LoopSummary s = run(c);
  ASSERT_TRUE(s.fatal_error.empty()) << s.fatal_error;
  ASSERT_TRUE(s.errors.empty()) << s.errors.front();
  auto r = results();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0]["verdict"], "incorrect") << r[0].dump();
  EXPECT_EQ(r[1]["verdict"], "correct") << r[1].dump();
  EXPECT_TRUE(r[1]["build_cached"]) << "one build per candidate: " << r[1].dump();
  EXPECT_TRUE(fs::exists(dir_ / "runs/t/attempts/19_ReLU/sample0/turn2/candidate.py"));
  const json p2 = prompt(2);
  ASSERT_EQ(p2["messages"].size(), 3u) << p2.dump();
  const std::string system = p2["system"];
  const std::string task = p2["messages"][0]["content"];
  EXPECT_NE(system.find("```python"), std::string::npos) << system;
  EXPECT_NE(task.find("return torch.relu(x)"), std::string::npos) << "the upstream task file: " << task;
  EXPECT_NE(task.find("load_inline"), std::string::npos) << task;
  const std::string feedback = p2["messages"][2]["content"];
  EXPECT_NE(feedback.find("max abs error 0.5"), std::string::npos) << feedback;
  EXPECT_NE(feedback.find("```python block"), std::string::npos) << feedback;

  const std::string base = "name: x\nprovider: {kind: replay, transcript: t.jsonl}\n";
  config_error(base + "candidate_format: kernelbench_python\nprompts: {style: kloop}\n", "prompts.style",
               "candidate_format is kernelbench_python");
  config_error(base + "candidate_format: python\n", "candidate_format", "use cpp");
}

TEST_F(TurnLoopTest, NoCodeIsAFeedbackTurnAndAblationsHideDetails) {
  transcript({kProse, kNoInclude, kGood});
  RunConfig c = config(", feedback: [correctness], context: last");
  LoopSummary s = run(c);
  ASSERT_TRUE(s.errors.empty()) << s.errors.front();
  auto r = results();
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0]["verdict"], "no_code");
  json p2 = prompt(2);
  EXPECT_NE(p2["messages"].back()["content"].get<std::string>().find("no code block"), std::string::npos);
  // context: last -> task, previous answer, its feedback.
  json p3 = prompt(3);
  ASSERT_EQ(p3["messages"].size(), 3u);
  std::string fb = p3["messages"][2]["content"];
  EXPECT_NE(fb.find("did not compile"), std::string::npos);
  EXPECT_EQ(fb.find("Compiler diagnostics"), std::string::npos) << "compiler feedback is off: " << fb;
}

// Three chains side by side, their compiles through one slot (compile_jobs).
TEST_F(TurnLoopTest, BestOfKRunsIndependentSamplesInParallel) {
  transcript({kHack, kProse, kGood}, /*per_sample=*/true);
  std::ofstream(dir_ / "run.yaml") << "name: t\nruns_dir: runs\nproblems: {names: [19_ReLU]}\nparallel_chains: 3\n"
                                      "compile_jobs: 1\n"
                                      "provider: {kind: replay, model: scripted, transcript: t.jsonl}\n"
                                      "scaffold: {kind: best_of_k, samples: 3}\n"
                                      "evaluation: {timeout_s: 30, max_timing_seconds: 0.05, threads: 1}\n";
  LoopSummary s = run(load_run_config((dir_ / "run.yaml").string()));
  ASSERT_TRUE(s.errors.empty()) << s.errors.front();
  EXPECT_EQ(s.chains, 3);
  std::map<int, std::string> verdicts;
  for (const auto& r : results()) verdicts[r["sample"].get<int>()] = r["verdict"];
  EXPECT_EQ(verdicts, (std::map<int, std::string>{{0, "integrity_violation"}, {1, "no_code"}, {2, "correct"}}));
  ASSERT_EQ(s.by_turn.size(), 1u);
  EXPECT_EQ(s.by_turn[0].correct, 1) << "best of k: one correct sample makes the problem correct";
  // The reference's run-start build and the two candidates with code, one at a time.
  EXPECT_EQ(s.compiles.slots, 1);
  EXPECT_EQ(s.compiles.builds, 3);
  EXPECT_EQ(s.compiles.most_in_flight, 1);
  EXPECT_NE(format_summary(s).find("compiles: 3 on 1 slot(s), at most 1 at once"), std::string::npos) << format_summary(s);
}

TEST_F(TurnLoopTest, KeepBestShowsTheBestCorrectAttempt) {
  transcript({kGood, kNoInclude, kGood});
  RunConfig c = config(", context: last, keep_best: true");
  run(c);
  // Turn 3 sees turn 1 (correct), not turn 2 (a compile error).
  json p3 = prompt(3);
  ASSERT_EQ(p3["messages"].size(), 3u);
  EXPECT_NE(p3["messages"][2]["content"].get<std::string>().find("Your code is correct"), std::string::npos);
}

TEST_F(TurnLoopTest, EarlyStopEndsTheChain) {
  transcript({kGood, kGood, kGood});
  RunConfig c = config(", early_stop_speedup: 0.0001");
  run(c);
  auto r = results();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0]["stop_reason"], "early_stop");
}

// A conversation that outgrew the context window ends its chain with that
// outcome stored (a rerun does not send it again); every HTTP attempt of
// the turn is in calls.jsonl, the rate-limited one included. A refusal is
// an outcome too.
TEST_F(TurnLoopTest, ContextOverflowAndRefusalAreStoredOutcomes) {
  test_support::FakeHttpServer server;
  server.enqueue({429, {{"Retry-After", "0"}}, R"({"error": {"message": "Rate limit reached", "code": "rate_limit_exceeded"}})",
                  std::chrono::milliseconds(0)});
  // https://platform.openai.com/docs/guides/error-codes (context_length_exceeded)
  server.enqueue_json(400, R"({"error": {"message": "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.",
      "type": "invalid_request_error", "code": "context_length_exceeded"}})");
  // https://platform.openai.com/docs/api-reference/chat/object (message.refusal)
  server.enqueue_json(200, R"({"choices": [{"finish_reason": "stop", "message": {"content": null, "refusal": "I can't help with that."}}],
      "usage": {"prompt_tokens": 50, "completion_tokens": 7}})");
  std::ofstream(dir_ / "run.yaml") << "name: t\nruns_dir: runs\nproblems: {names: [19_ReLU, 23_Softmax]}\n"
                                      "provider: {kind: openai, model: m, base_url: " +
                                          server.base_url() + "/v1, concurrency: 1}\n"
                                      "scaffold: {kind: iterative, turns: 3}\nparallel_chains: 1\n";
  RunConfig c = load_run_config((dir_ / "run.yaml").string());
  LoopSummary s = run(c);
  ASSERT_TRUE(s.fatal_error.empty()) << s.fatal_error;
  auto r = results();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0]["problem"], "19_ReLU");
  EXPECT_EQ(r[0]["verdict"], "context_overflow");
  EXPECT_TRUE(r[0]["chain_done"]);
  EXPECT_EQ(r[0]["stop_reason"], "context_overflow");
  EXPECT_NE(r[0]["message"].get<std::string>().find("context window"), std::string::npos) << r[0].dump();
  const std::string calls = read_file((dir_ / "runs/t/attempts/19_ReLU/sample0/turn1/calls.jsonl").string());
  ASSERT_EQ(std::count(calls.begin(), calls.end(), '\n'), 2) << calls;
  EXPECT_NE(calls.find("\"status\":429"), std::string::npos) << calls;
  EXPECT_NE(calls.find("\"error_class\":\"context_overflow\""), std::string::npos) << calls;
  EXPECT_EQ(r[1]["problem"], "23_Softmax");
  EXPECT_EQ(r[1]["verdict"], "refused");
  EXPECT_EQ(r[1]["stop_reason"], "refused");
  EXPECT_NE(r[1]["message"].get<std::string>().find("I can't help with that."), std::string::npos);
  EXPECT_EQ(r[1]["input_tokens"], 50);
  EXPECT_EQ(server.requests().size(), 3u);
  // Nothing is sent again.
  LoopSummary again = run(c);
  EXPECT_EQ(again.attempts_run, 0);
  EXPECT_EQ(server.requests().size(), 3u);
}

TEST_F(TurnLoopTest, RejectedKeyStopsTheRunAtOnce) {
  test_support::FakeHttpServer server;
  server.enqueue_json(401, R"({"error": {"message": "Incorrect API key provided"}})");
  setenv("KLOOP_TEST_FAKE_KEY", "sk-test-secret-123", 1);
  std::ofstream(dir_ / "run.yaml") << "name: t\nruns_dir: runs\nproblems: {names: [19_ReLU, 23_Softmax]}\n"
                                      "provider: {kind: openai, model: m, api_key_env: KLOOP_TEST_FAKE_KEY, base_url: " +
                                          server.base_url() + "/v1, concurrency: 1}\n"
                                      "scaffold: {kind: best_of_k, samples: 3}\n";
  RunConfig c = load_run_config((dir_ / "run.yaml").string());
  LoopSummary s = run(c);
  EXPECT_NE(s.fatal_error.find("401"), std::string::npos) << s.fatal_error;
  EXPECT_NE(s.fatal_error.find("KLOOP_TEST_FAKE_KEY"), std::string::npos) << s.fatal_error;
  EXPECT_EQ(s.fatal_error.find("sk-test-secret-123"), std::string::npos) << "the key must never be shown";
  EXPECT_EQ(server.requests().size(), 1u) << "six chains, but the first refusal stops them all";
  EXPECT_TRUE(results().empty());
  EXPECT_EQ(read_file((dir_ / "runs/t/config.json").string()).find("sk-test-secret-123"), std::string::npos);
}

TEST_F(TurnLoopTest, ConfigErrorsNameTheField) {
  std::ofstream(dir_ / "bad.yaml") << "name: x\nprovider: {kind: replay, transcript: t.jsonl}\n"
                                      "scaffold: {kind: iterative, turns: 3, feedback: [compiler, profilr]}\n";
  try {
    load_run_config((dir_ / "bad.yaml").string());
    FAIL();
  } catch (const std::invalid_argument& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("bad.yaml"), std::string::npos) << m;
    EXPECT_NE(m.find("scaffold.feedback"), std::string::npos) << m;
    EXPECT_NE(m.find("profilr"), std::string::npos) << m;
  }
  std::ofstream(dir_ / "bad2.yaml") << "name: x\nprovider: {kind: replay, transcript: t.jsonl}\nscafold: {}\n";
  EXPECT_THROW(load_run_config((dir_ / "bad2.yaml").string()), std::invalid_argument);
}

// Numbers are not rounded, a problem is not listed twice, level and names do
// not mix, and an unknown protocol or a device this build cannot use is found
// at load time, before any request or run folder.
TEST_F(TurnLoopTest, ConfigValuesAreCheckedBeforeAnyRequest) {
  const std::string head = "name: x\nprovider: {kind: replay, transcript: t.jsonl}\n";
  config_error(head + "scaffold: {kind: best_of_k, samples: 1.5}\n", "scaffold.samples", "whole number");
  config_error(head + "seed: -3\n", "seed", ">= 0");
  config_error(head + "problems: {names: [19_ReLU, 23_Softmax, 19_ReLU]}\n", "problems.names", "listed twice");
  config_error(head + "problems: {level: 1, names: [19_ReLU]}\n", "problems", "not both");
  config_error(head + "protocol: kernelbnch\n", "protocol", "unknown protocol 'kernelbnch'");
  config_error(head + "device: gpu\n", "device", "cpu, cuda or cuda:N");
  config_error(head + "compile_jobs: -2\n", "compile_jobs", "positive number");
#ifndef KLOOP_WITH_CUDA
  config_error(head + "device: cuda\n", "device", "built without CUDA");
#endif
  EXPECT_FALSE(fs::exists(dir_ / "runs"));
}

// Tasks the protocol excludes are said once, never sent to the model and
// not counted (the replay transcript has no answer for them: a request
// would fail the chain).
TEST_F(TurnLoopTest, ExcludedTasksAreNeverRequested) {
  transcript({kGood});
  RunConfig c = config_with("kind: one_shot", "names: [19_ReLU, 94_MSELoss]");
  LoopSummary s = run(c);
  EXPECT_TRUE(s.errors.empty()) << s.errors.front();
  EXPECT_EQ(s.chains_incomplete, 0);
  EXPECT_EQ(s.problems, 1);
  EXPECT_EQ(s.excluded, std::vector<std::string>{"94_MSELoss"});
  EXPECT_NE(progress_.str().find("excluded by the strict protocol"), std::string::npos) << progress_.str();
  EXPECT_NE(format_summary(s).find("94_MSELoss"), std::string::npos);
  ASSERT_EQ(results().size(), 1u);
  EXPECT_FALSE(fs::exists(dir_ / "runs/t/attempts/94_MSELoss"));
}

// More turns, samples or problems extend a run: every stored attempt is
// reused and only the new ones are asked for. What would change earlier
// attempts is refused, with every field that differs.
TEST_F(TurnLoopTest, ExtendingARunReusesEveryStoredAttempt) {
  {
    std::ofstream out(dir_ / "t.jsonl");
    for (int sample : {0, 1}) {
      for (int turn : {1, 2}) {
        for (const char* problem : {"19_ReLU", "23_Softmax"}) {
          out << json{{"problem", problem}, {"sample", sample}, {"turn", turn}, {"response", turn == 1 ? kHack : kGood}}.dump()
              << "\n";
        }
      }
    }
  }
  LoopSummary first = run(config_with("kind: iterative, turns: 1"));
  EXPECT_EQ(first.attempts_run, 1);
  LoopSummary more_turns = run(config_with("kind: iterative, turns: 2"));
  EXPECT_EQ(more_turns.attempts_resumed, 1);
  EXPECT_EQ(more_turns.attempts_run, 1);
  ASSERT_EQ(results().size(), 2u);
  EXPECT_EQ(results()[1]["verdict"], "correct");
  LoopSummary more = run(config_with("kind: iterative, turns: 2, samples: 2", "names: [19_ReLU, 23_Softmax]"));
  EXPECT_EQ(more.attempts_resumed, 2);
  EXPECT_EQ(more.attempts_run, 6);  // ReLU sample 1, Softmax samples 0 and 1: two turns each
  EXPECT_EQ(results().size(), 8u);
  EXPECT_EQ(run(config_with("kind: iterative, turns: 2, samples: 2", "names: [19_ReLU, 23_Softmax]")).attempts_run, 0);
  try {
    run(config_with("kind: iterative, turns: 2, context: last", "names: [19_ReLU]", "verified"));
    FAIL() << "a run resumed under another protocol and context";
  } catch (const std::runtime_error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("'protocol'"), std::string::npos) << m;
    EXPECT_NE(m.find("'scaffold.context'"), std::string::npos) << m;
    EXPECT_NE(m.find("another --name"), std::string::npos) << m;
  }
  EXPECT_EQ(results().size(), 8u);
}

// Two drivers on one run: the second refuses, naming the first; a lock left
// by a driver that died is taken over with a note.
// A run split into shards by problem: each shard's driver runs only its
// problems, into the same run folder, its records in a file of its own;
// together they are the whole run, which then has nothing left to do.
TEST_F(TurnLoopTest, ShardsRunTheirProblemsIntoOneRun) {
  {
    std::ofstream out(dir_ / "t.jsonl");
    out << json{{"problem", "19_ReLU"}, {"sample", 0}, {"turn", 1}, {"response", kGood}}.dump() << "\n"
        << json{{"problem", "23_Softmax"}, {"sample", 0}, {"turn", 1}, {"response", kHack}}.dump() << "\n";
  }
  const RunConfig c = config_with("kind: iterative, turns: 1", "names: [19_ReLU, 23_Softmax]");
  auto provider = make_provider(c.provider);
  {
    TurnLoop whole(c, *provider, progress_);
    EXPECT_EQ(whole.shards_with_work(2), (std::vector<int>{0, 1})) << "no run yet: every shard has work";
  }
  auto run_shard = [&](int index) {
    TurnLoop loop(c, *provider, progress_);
    loop.set_shard({index, 2});
    return loop.run();
  };
  LoopSummary s0 = run_shard(0);
  ASSERT_TRUE(s0.errors.empty()) << s0.errors.front();
  EXPECT_EQ(s0.problems, 1);
  EXPECT_EQ(s0.attempts_run, 1);
  EXPECT_EQ(s0.shard, "0/2");
  EXPECT_TRUE(fs::exists(dir_ / "runs/t/results.shard-0.jsonl"));
  EXPECT_FALSE(fs::exists(dir_ / "runs/t/results.jsonl"));
  EXPECT_TRUE(fs::exists(dir_ / "runs/t/attempts/19_ReLU/sample0/turn1/verdict.json"));
  EXPECT_FALSE(fs::exists(dir_ / "runs/t/attempts/23_Softmax"));
  {
    TurnLoop whole(c, *provider, progress_);
    EXPECT_EQ(whole.shards_with_work(2), (std::vector<int>{1}));
  }
  LoopSummary s1 = run_shard(1);
  EXPECT_EQ(s1.attempts_run, 1);
  const auto records = RunStore((dir_ / "runs").string(), "t").load_results();
  ASSERT_EQ(records.size(), 2u);
  std::map<std::string, std::string> verdict;
  for (const auto& r : records) verdict[r.problem] = outcome_name(r.outcome);
  EXPECT_EQ(verdict["19_ReLU"], "correct");
  EXPECT_EQ(verdict["23_Softmax"], "integrity_violation");  // returns its input
  {
    TurnLoop whole(c, *provider, progress_);
    EXPECT_TRUE(whole.shards_with_work(2).empty());
  }
  // The whole run resumes every shard's attempts and makes none; a rerun
  // of a finished shard makes none either.
  LoopSummary whole = run(c);
  EXPECT_EQ(whole.attempts_run, 0);
  EXPECT_EQ(whole.attempts_resumed, 2);
  EXPECT_EQ(run_shard(0).attempts_run, 0);
  // The split is the run's: another number of shards is refused.
  TurnLoop other(c, *provider, progress_);
  other.set_shard({0, 3});
  EXPECT_THROW(other.run(), std::runtime_error);
}

// Two CPU evaluation queues: every evaluation goes to one of them, the
// records say which, and the summary accounts for each queue.
TEST_F(TurnLoopTest, SeveralCpuQueuesShareTheEvaluations) {
  {
    std::ofstream out(dir_ / "t.jsonl");
    for (int s = 0; s < 4; ++s) {
      out << json{{"problem", "19_ReLU"}, {"sample", s}, {"turn", 1}, {"response", s % 2 ? kHack : kGood}}.dump()
          << "\n";
    }
  }
  std::ofstream(dir_ / "run.yaml") << "name: t\nruns_dir: runs\nproblems: {names: [19_ReLU]}\n"
                                      "device: cpu\ndevices: 2\nprotocol: strict\n"
                                      "provider: {kind: replay, model: scripted, transcript: t.jsonl}\n"
                                      "scaffold: {kind: best_of_k, samples: 4}\n"
                                      "evaluation: {timeout_s: 30, max_timing_seconds: 0.05}\n";
  const RunConfig c = load_run_config((dir_ / "run.yaml").string());
  EXPECT_EQ(evaluation_devices(c), (std::vector<std::string>{"cpu", "cpu"}));
  LoopSummary s = run(c);
  ASSERT_TRUE(s.errors.empty()) << s.errors.front();
  ASSERT_EQ(s.queues.size(), 2u);
  EXPECT_EQ(s.queues[0].evaluations + s.queues[1].evaluations, 4);
  const auto r = results();
  ASSERT_EQ(r.size(), 4u);
  for (const auto& x : r) {
    EXPECT_EQ(x["device"], "cpu");
    EXPECT_TRUE(x["queue"] == 0 || x["queue"] == 1) << x.dump();
    // The wait for a free queue is recorded apart, inside the attempt's eval time.
    ASSERT_TRUE(x.contains("queue_seconds")) << x.dump();
    EXPECT_GE(x["queue_seconds"].get<double>(), 0.0);
    EXPECT_LE(x["compile_seconds"].get<double>() + x["queue_seconds"].get<double>(), x["eval_seconds"].get<double>());
    EXPECT_EQ(x["verdict"], x["sample"].get<int>() % 2 ? "integrity_violation" : "correct") << x.dump();
  }
  EXPECT_NE(format_summary(s).find("queue 1 (cpu)"), std::string::npos) << format_summary(s);
}

TEST_F(TurnLoopTest, DevicesAreCheckedAndResolvedFromWhatCudaSees) {
  const std::string head = "name: t\nproblems: {names: [19_ReLU]}\nprovider: {kind: replay, model: m, transcript: t.jsonl}\n";
  config_error(head + "device: cpu\ndevices: all\n", "devices", "number of CPU queues");
  config_error(head + "device: cpu\ndevices: [0, 1]\n", "devices", "number of CPU queues");
  config_error(head + "device: cpu\ndevices: 0\n", "devices", "expected 1 or more");
  config_error(head + "device: cpu\ndevices: {a: 1}\n", "devices", "expected all");
  // GPU selections resolve against CUDA_VISIBLE_DEVICES (as Slurm sets it),
  // with no GPU needed to check them.
  const char* saved = std::getenv("CUDA_VISIBLE_DEVICES");
  const std::string restore = saved ? saved : "";
  setenv("CUDA_VISIBLE_DEVICES", "3,5", 1);
  RunConfig c;
  c.path = "x.yaml";
  c.device = "cuda";
  EXPECT_EQ(evaluation_devices(c), (std::vector<std::string>{"cuda:0", "cuda:1"}));
  c.devices = 1;
  EXPECT_EQ(evaluation_devices(c), (std::vector<std::string>{"cuda:0"}));
  c.devices = json::array({1});
  EXPECT_EQ(evaluation_devices(c), (std::vector<std::string>{"cuda:1"}));
  c.devices = 3;
  try {
    evaluation_devices(c);
    ADD_FAILURE() << "3 of 2 GPUs accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("CUDA_VISIBLE_DEVICES=3,5"), std::string::npos) << e.what();
  }
  EXPECT_EQ(nvidia_smi_device_id("cuda:1"), "5") << "nvidia-smi ignores CUDA_VISIBLE_DEVICES";
  setenv("CUDA_VISIBLE_DEVICES", "", 1);
  c.devices = nullptr;
  EXPECT_THROW(evaluation_devices(c), std::invalid_argument);
  c.device = "cuda:2";
  EXPECT_EQ(evaluation_devices(c), (std::vector<std::string>{"cuda:2"}));
  if (saved) {
    setenv("CUDA_VISIBLE_DEVICES", restore.c_str(), 1);
  } else {
    unsetenv("CUDA_VISIBLE_DEVICES");
  }
}

TEST_F(TurnLoopTest, ASecondDriverOnTheSameRunRefuses) {
  transcript({kGood});
  RunConfig c = config_with("kind: one_shot");
  fs::create_directories(dir_ / "runs/t");
  {
    std::ostringstream notes;
    RunLock held((dir_ / "runs/t").string(), notes);
    try {
      run(c);
      FAIL() << "two drivers ran the same run";
    } catch (const std::runtime_error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("in use by pid " + std::to_string(getpid())), std::string::npos) << m;
      EXPECT_NE(m.find("another --name"), std::string::npos) << m;
    }
    EXPECT_TRUE(results().empty());
  }
  std::ofstream(dir_ / "runs/t/lock") << "pid 999999 on host gone since 2026-01-01T00:00:00Z\n";
  LoopSummary s = run(c);
  EXPECT_EQ(s.attempts_run, 1);
  EXPECT_NE(progress_.str().find("taking over the run's lock from pid 999999"), std::string::npos) << progress_.str();
  EXPECT_EQ(read_file((dir_ / "runs/t/lock").string()), "") << "a clean exit clears the lock";
  // What the run was made with: kloop's build and the machine, in the
  // config and (the build half) in each verdict.
  const json cfg = json::parse(read_file((dir_ / "runs/t/config.json").string()));
  EXPECT_FALSE(cfg["environment"]["build"].value("kloop_commit", "").empty()) << cfg["environment"].dump(2);
  EXPECT_FALSE(cfg["environment"]["build"].value("libtorch", "").empty());
  EXPECT_FALSE(cfg["environment"]["machine"].value("cpu", "").empty());
  EXPECT_EQ(cfg["provider"].value("max_retries", -1), c.provider.max_retries);
  const json verdict = json::parse(read_file((dir_ / "runs/t/attempts/19_ReLU/sample0/turn1/verdict.json").string()));
  EXPECT_EQ(verdict["environment"].value("kloop_commit", ""), cfg["environment"]["build"].value("kloop_commit", "x"));
}

// kloop run --check: the problems after exclusions, the prompt, the device,
// the provider (its model list: one GET, no tokens), the requests still to
// send and the cost ceiling; no request for a completion, no run folder.
TEST_F(TurnLoopTest, CheckSaysWhatARunWouldDoAndSendsNothing) {
  test_support::FakeHttpServer server;
  server.enqueue_json(200, R"({"object": "list", "data": [{"id": "m"}, {"id": "other"}]})");
  setenv("KLOOP_TEST_FAKE_KEY", "sk-test-secret-456", 1);
  std::ofstream(dir_ / "run.yaml") << "name: t\nruns_dir: runs\nproblems: {names: [19_ReLU, 23_Softmax, 94_MSELoss]}\n"
                                      "provider: {kind: openai, model: m, api_key_env: KLOOP_TEST_FAKE_KEY, base_url: " +
                                          server.base_url() + "/v1, max_tokens: 1000, prices: {input: 2, output: 8}}\n"
                                      "scaffold: {kind: iterative, samples: 2, turns: 3}\n";
  RunConfig c = load_run_config((dir_ / "run.yaml").string());
  auto provider = make_provider(c.provider);
  std::ostringstream out, notes;
  TurnLoop loop(c, *provider, notes);
  loop.set_provider_check(true);
  EXPECT_EQ(loop.check(out), 0) << out.str();
  const std::string text = out.str();
  EXPECT_NE(text.find("problems: 2 (19_ReLU, 23_Softmax)"), std::string::npos) << text;
  EXPECT_NE(text.find("94_MSELoss"), std::string::npos) << text;
  EXPECT_NE(text.find("rendered for 19_ReLU"), std::string::npos) << text;
  EXPECT_NE(text.find("device: cpu usable"), std::string::npos) << text;
  EXPECT_NE(text.find("model 'm' listed"), std::string::npos) << text;
  EXPECT_NE(text.find("requests: 12 to send"), std::string::npos) << text;
  EXPECT_NE(text.find("cost ceiling: $"), std::string::npos) << text;
  EXPECT_EQ(text.find("sk-test-secret-456"), std::string::npos) << text;
  ASSERT_EQ(server.requests().size(), 1u);
  EXPECT_EQ(server.requests()[0].method, "GET");
  EXPECT_EQ(server.requests()[0].path, "/v1/models");
  EXPECT_FALSE(fs::exists(dir_ / "runs"));
}

// A key the provider refuses is found by the check before the first request:
// the run stops with nothing sent for a completion and no run folder.
TEST_F(TurnLoopTest, ARefusedKeyStopsTheRunBeforeAnyCompletionRequest) {
  test_support::FakeHttpServer server;
  server.enqueue_json(401, R"({"error": {"message": "Incorrect API key provided"}})");
  server.enqueue_json(401, R"({"error": {"message": "Incorrect API key provided"}})");
  setenv("KLOOP_TEST_FAKE_KEY", "sk-test-secret-789", 1);
  std::ofstream(dir_ / "run.yaml") << "name: t\nruns_dir: runs\nproblems: {names: [19_ReLU]}\n"
                                      "provider: {kind: openai, model: m, api_key_env: KLOOP_TEST_FAKE_KEY, base_url: " +
                                          server.base_url() + "/v1}\n"
                                      "scaffold: {kind: one_shot}\n";
  RunConfig c = load_run_config((dir_ / "run.yaml").string());
  auto provider = make_provider(c.provider);
  std::ostringstream out, notes;
  TurnLoop loop(c, *provider, notes);
  loop.set_provider_check(true);
  EXPECT_EQ(loop.check(out), 2) << out.str();
  EXPECT_NE(out.str().find("was refused (HTTP 401)"), std::string::npos) << out.str();
  LoopSummary s = loop.run();
  EXPECT_NE(s.fatal_error.find("KLOOP_TEST_FAKE_KEY was refused"), std::string::npos) << s.fatal_error;
  EXPECT_EQ(s.fatal_error.find("sk-test-secret-789"), std::string::npos);
  ASSERT_EQ(server.requests().size(), 2u);
  for (const auto& r : server.requests()) EXPECT_EQ(r.method, "GET");
  EXPECT_FALSE(fs::exists(dir_ / "runs"));
}

// An OpenAI chat completion whose answer is `content`.
std::string openai_answer(const std::string& content) {
  return json{{"choices", {{{"index", 0}, {"finish_reason", "stop"},
                            {"message", {{"role", "assistant"}, {"content", content}}}}}},
              {"usage", {{"prompt_tokens", 10}, {"completion_tokens", 20}}}}
      .dump();
}

// Attack: model-written code gets the API key, a provider header value and a
// credential from the environment into its compile log (here by a
// static_assert whose message the compiler prints joined from pieces, so the
// model's own answer never holds them whole). The feedback turn must not
// carry them back to the provider, and no file of the run may hold them.
TEST_F(TurnLoopTest, SecretsInACompileLogReachNeitherThePromptNorTheRunFolder) {
  const std::string key = "sk-test-leak-key-1234", header = "team-header-secret-5678",
                    env_secret = "env-password-9012";
  test_support::FakeHttpServer server;
  const std::string leak = std::string("```cpp\n#include <kloop/kernel_api.h>\n") +
                           "static_assert(sizeof(int) == 0, \"sk-test-\" \"leak-key-1234 team-header-\" "
                           "\"secret-5678 env-password-\" \"9012\");\n"
                           "struct ModelNew {\n  explicit ModelNew(const kloop::ModuleInit&) {}\n"
                           "  at::Tensor forward(const at::Tensor& x) { return x; }\n};\n"
                           "KLOOP_REGISTER_CANDIDATE(ModelNew)\n```\n";
  server.enqueue_json(200, openai_answer(leak));
  server.enqueue_json(200, openai_answer(kProse));
  setenv("KLOOP_TEST_LEAK_KEY", key.c_str(), 1);
  setenv("KLOOP_TEST_DB_PASSWORD", env_secret.c_str(), 1);
  std::ofstream(dir_ / "run.yaml") << "name: t\nruns_dir: runs\nproblems: {names: [19_ReLU]}\ndevice: cpu\n"
                                      "provider: {kind: openai, model: m, api_key_env: KLOOP_TEST_LEAK_KEY, base_url: " +
                                          server.base_url() + "/v1, headers: {X-Team-Token: " + header + "}}\n"
                                      "scaffold: {kind: iterative, turns: 2}\n"
                                      "evaluation: {timeout_s: 30, max_timing_seconds: 0.05, threads: 1}\n";
  LoopSummary s = run(load_run_config((dir_ / "run.yaml").string()));
  unsetenv("KLOOP_TEST_LEAK_KEY");
  unsetenv("KLOOP_TEST_DB_PASSWORD");
  ASSERT_TRUE(s.fatal_error.empty()) << s.fatal_error;
  ASSERT_TRUE(s.errors.empty()) << s.errors.front();
  auto r = results();
  ASSERT_EQ(r.size(), 2u);
  ASSERT_EQ(r[0]["verdict"], "compile_error") << r[0].dump();

  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].headers.at("x-team-token"), header) << "the header still goes to the provider";
  const std::string& body = requests[1].body;
  EXPECT_NE(body.find("static assertion failed: [REDACTED]"), std::string::npos)
      << "the compile log reached the feedback turn, redacted: " << body;
  for (const std::string& secret : {key, header, env_secret}) {
    EXPECT_EQ(body.find(secret), std::string::npos) << secret << " sent to the provider: " << body;
    for (const auto& f : fs::recursive_directory_iterator(dir_ / "runs" / "t")) {
      if (!f.is_regular_file()) continue;
      EXPECT_EQ(read_file(f.path().string()).find(secret), std::string::npos) << secret << " stored in " << f.path();
    }
  }
}

}  // namespace
}  // namespace kloop
