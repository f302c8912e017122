// Reports and exports of a synthetic run store (tests/support/synthetic_run.h):
// the selection is the denominator, text and Markdown show one-shot against
// iterative, a rescored protocol sits beside the run's own, and the kloop
// binary writes every format.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "agent/report/metrics.h"
#include "agent/report/report_export.h"
#include "agent/report/report_text.h"
#include "agent/report/run_view.h"
#include "agent/store/run_store.h"
#include "evaluator/problem/registry.h"
#include "tests/support/shell.h"
#include "tests/support/synthetic_run.h"

namespace kloop::report {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

class ReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    runs_ = fs::temp_directory_path() / ("kloop-report-" + std::to_string(getpid()));
    fs::remove_all(runs_);
    run_ = testing::write_synthetic_run(runs_.string(), "synth");
  }
  void TearDown() override { fs::remove_all(runs_); }

  RunView view(const std::string& protocol = "") { return load_run_view(run_, protocol, &registry_); }
  static RunMetrics metrics_of(const RunView& v) {
    MetricOptions o;
    o.bootstrap_resamples = 200;
    return compute_metrics(v.problems, v.attempts, v.turns, v.samples, o);
  }
  static std::string read(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  // Runs the kloop binary; returns its exit code and puts stdout and stderr in `out`.
  static int kloop(const std::string& args, std::string* out) {
    const kloop::test::ShellResult r = kloop::test::shell(std::string(KLOOP_TEST_BINARY) + " " + args + " 2>&1");
    *out += r.output;
    return r.code;
  }

  ProblemRegistry registry_{ProblemRegistry::default_root()};
  fs::path runs_;
  std::string run_;
};

// Attempts evaluated on several GPUs: each section says where, and results
// from two GPU models are flagged at the top (their timings do not compare).
TEST_F(ReportTest, SeveralGpuModelsAreSaid) {
  RunView h200 = view();
  for (std::size_t i = 0; i < h200.attempts.size(); ++i) {
    h200.attempts[i].record.device = i % 2 ? "cuda:1" : "cuda:0";
    h200.attempts[i].record.gpu = "NVIDIA H200";
  }
  const std::string one = render_text_report({h200}, {metrics_of(h200)}, TextFormat::kMarkdown);
  EXPECT_NE(one.find("evaluated on cuda:0 (NVIDIA H200): 5, cuda:1 (NVIDIA H200): 4"), std::string::npos) << one;
  EXPECT_EQ(one.find("WARNING"), std::string::npos) << one;
  RunView h100 = view();
  for (auto& a : h100.attempts) {
    a.record.device = "cuda:0";
    a.record.gpu = "NVIDIA H100 80GB HBM3";
  }
  const std::string both = render_text_report({h200, h100}, {metrics_of(h200), metrics_of(h100)}, TextFormat::kMarkdown);
  EXPECT_NE(both.find("WARNING: these results come from 2 GPU models (NVIDIA H200, NVIDIA H100 80GB HBM3)"),
            std::string::npos)
      << both;
  const nlohmann::json summary = summary_json({h200, h100}, {metrics_of(h200), metrics_of(h100)});
  EXPECT_EQ(summary["gpu_models"].size(), 2u) << summary["gpu_models"].dump();
  const std::string csv = attempts_csv({h100});
  EXPECT_NE(csv.find(",cuda:0,NVIDIA H100 80GB HBM3,\n"), std::string::npos) << csv;  // then speedups (none)
}

TEST_F(ReportTest, SelectionFromConfigIsTheDenominator) {
  const RunView v = view();
  EXPECT_EQ(v.label(), "synth [strict]");
  ASSERT_EQ(v.problems.size(), 4u);  // 21_Sigmoid has no record but is selected
  EXPECT_EQ(v.problems[1].name, "21_Sigmoid");
  EXPECT_EQ(v.problems[1].level, 1);
  EXPECT_EQ(v.problems[3].level, 2);
  EXPECT_EQ(v.attempts.size(), 9u);
  EXPECT_EQ(v.attempts[0].code_file, "attempts/19_ReLU/sample0/turn1/candidate.cpp");
  EXPECT_EQ(v.attempts[0].failure_kind, "output_aliases_input");
  EXPECT_EQ(v.attempts[3].failure_kind, "hidden_shape");

  const RunMetrics m = metrics_of(v);
  ASSERT_EQ(m.groups.size(), 3u);  // level 1, level 2, all
  const GroupMetrics& all = m.groups.back();
  EXPECT_EQ(all.problems, 4);
  EXPECT_EQ(all.problems_with_results, 3);
  EXPECT_DOUBLE_EQ(all.by_turn[0].correctness.value, 0.0);
  EXPECT_DOUBLE_EQ(all.by_turn[0].compile_rate.value, 0.5);
  EXPECT_DOUBLE_EQ(all.by_turn[1].fast_p[3].value, 0.25);
  EXPECT_DOUBLE_EQ(all.by_turn[2].fast_p[3].value, 0.75);
  EXPECT_DOUBLE_EQ(all.by_turn[2].fast_p[5].value, 0.25);
  EXPECT_NEAR(all.by_turn[2].geomean_speedup.value, std::cbrt(1.6 * 1.2 * 2.5), 1e-9);
  EXPECT_NEAR(m.groups[0].by_turn[2].correctness.value, 2.0 / 3, 1e-12);  // level 1: Sigmoid missing
  EXPECT_EQ(m.cost.input_tokens, 9000);
}

TEST_F(ReportTest, TasksTheProtocolExcludesLeaveTheDenominator) {
  // A problems folder where 19_ReLU is a degenerate task that strict skips.
  const fs::path suite = runs_ / "problems" / "kernelbench" / "level1";
  fs::create_directories(suite);
  const fs::path source = fs::path(ProblemRegistry::default_root()) / "kernelbench" / "level1";
  fs::copy_file(source / "19_ReLU.cpp", suite / "19_ReLU.cpp");
  std::ofstream(suite / "19_ReLU.yaml") << read(source / "19_ReLU.yaml") << "\nexcluded_from: [verified, strict]\n";
  const ProblemRegistry registry((runs_ / "problems").string());
  const RunView v = load_run_view(run_, "", &registry);
  EXPECT_EQ(v.excluded, (std::vector<std::string>{"19_ReLU"}));
  ASSERT_EQ(v.problems.size(), 3u);
  const RunMetrics m = metrics_of(v);
  EXPECT_EQ(m.groups.back().problems, 3);
  EXPECT_EQ(m.records_outside_selection, 3);  // ReLU's attempts no longer count
  const std::string text = render_text_report({v}, {m}, TextFormat::kTerminal);
  EXPECT_NE(text.find("1 excluded by strict as degenerate (19_ReLU)"), std::string::npos) << text;
}

TEST_F(ReportTest, TerminalAndMarkdownShowOneShotAgainstIterative) {
  const RunView v = view();
  const std::vector<RunView> views = {v};
  const std::vector<RunMetrics> metrics = {metrics_of(v)};
  const std::string text = render_text_report(views, metrics, TextFormat::kTerminal);
  EXPECT_NE(text.find("synth [strict]"), std::string::npos) << text;
  EXPECT_NE(text.find("one-shot (turn 1)"), std::string::npos) << text;
  EXPECT_NE(text.find("final (turn 3)"), std::string::npos) << text;
  EXPECT_NE(text.find("+75.0 pt"), std::string::npos) << text;  // fast_1: 0% -> 75%
  EXPECT_NE(text.find("level 2"), std::string::npos) << text;
  EXPECT_NE(text.find("hidden_shape"), std::string::npos) << text;
  EXPECT_NE(text.find("output_aliases_input"), std::string::npos) << text;
  EXPECT_NE(text.find("$0.0900"), std::string::npos) << text;
  // 21_Sigmoid's chain has no attempt yet; no cache, retry or error to speak of.
  EXPECT_NE(text.find("\n  provider: finish stop 9; 1 incomplete chain\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("prompt cache"), std::string::npos) << text;
  EXPECT_EQ(text.find("| metric"), std::string::npos) << text;

  const std::string md = render_text_report(views, metrics, TextFormat::kMarkdown);
  EXPECT_EQ(md.rfind("# kloop report", 0), 0u) << md;
  EXPECT_NE(md.find("| metric | one-shot (turn 1) | final (turn 3) | diff |"), std::string::npos) << md;
  EXPECT_NE(md.find("|---|--:|"), std::string::npos) << md;
  EXPECT_NE(md.find("| fast_1 | 0.0% [0.0, 0.0] | 75.0% ["), std::string::npos) << md;
}

// A run that asked for other baselines (evaluation.baselines): each correct
// attempt's speedup against each is in its record, and the report shows
// fast_p and the geomean against each beside the protocol's headline.
TEST_F(ReportTest, SpeedupsAgainstEachBaselineTheRunAskedFor) {
  RunView v = view();
  // The synthetic run's correct attempts: against eager they are 2x what
  // the protocol's baseline gives; the torch.compile baseline is measured
  // for 19_ReLU only.
  int correct = 0;
  for (auto& a : v.attempts) {
    AttemptRecord& r = a.record;
    if (r.outcome != Outcome::kCorrect || !r.speedup) continue;
    ++correct;
    r.speedups["eager"] = 2 * *r.speedup;
    if (r.problem == "19_ReLU") r.speedups["compile-default"] = *r.speedup / 4;
  }
  ASSERT_GT(correct, 0);
  const std::vector<RunView> views = {v};
  const std::vector<RunMetrics> metrics = {metrics_of(v)};
  const std::vector<BaselineMetrics> bs =
      baseline_metrics(v.problems, v.attempts, v.turns, v.samples, options_of(metrics[0]));
  ASSERT_EQ(bs.size(), 2u);
  EXPECT_EQ(bs[0].baseline, "compile-default");
  EXPECT_EQ(bs[1].baseline, "eager");
  EXPECT_EQ(bs[1].timed, correct);
  // The problems and the correct ones are the protocol's; only the speedups differ.
  const TurnMetrics& own = metrics[0].groups.back().by_turn.back();
  EXPECT_DOUBLE_EQ(bs[1].final_turn.correctness.value, own.correctness.value);
  EXPECT_NEAR(bs[1].final_turn.geomean_speedup.value, 2 * own.geomean_speedup.value, 1e-9);
  // Against compile-default only 19_ReLU (best 1.6x -> 0.4x) is timed: fast_1 is 0.
  const std::size_t p1 = std::find(metrics[0].ps.begin(), metrics[0].ps.end(), 1.0) - metrics[0].ps.begin();
  EXPECT_DOUBLE_EQ(bs[0].final_turn.fast_p[p1].value, 0.0);
  const std::string md = render_text_report(views, metrics, TextFormat::kMarkdown);
  EXPECT_NE(md.find("final turn against each baseline the run asked for"), std::string::npos) << md;
  EXPECT_NE(md.find("| compile-default |"), std::string::npos) << md;
  EXPECT_NE(md.find("| eager | " + std::to_string(correct) + " |"), std::string::npos) << md;
  // In the terminal each baseline's row is one line within 100 columns (no intervals there).
  const std::string text = render_text_report(views, metrics, TextFormat::kTerminal);
  EXPECT_TRUE(std::regex_search(text, std::regex("\n  eager +" + std::to_string(correct) +
                                                 "( +[0-9.]+%){5} +[0-9.]+x\n")))
      << text;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) EXPECT_LE(line.size(), 100u) << line;
  const json s = summary_json(views, metrics);
  EXPECT_TRUE(s["views"][0]["baselines"].contains("eager")) << s["views"][0]["baselines"].dump();
  EXPECT_EQ(s["views"][0]["baselines"]["eager"]["timed"], correct);
  // The CSV's last column: "compile-default=0.4;eager=3.2" on 19_ReLU's third turn.
  EXPECT_NE(attempts_csv(views).find(",compile-default=0.4;eager=3.2\n"), std::string::npos) << attempts_csv(views);
  // A run without other baselines has no such table.
  const RunView plain = view();
  EXPECT_EQ(render_text_report({plain}, {metrics_of(plain)}, TextFormat::kMarkdown).find("against each baseline"),
            std::string::npos);
}

TEST_F(ReportTest, RescoredProtocolSitsBesideTheRunsOwn) {
  EXPECT_THROW(view("kernelbench"), std::runtime_error);  // not rescored yet: the error names kloop rescore
  testing::write_synthetic_rescore(run_);
  EXPECT_EQ(run_protocols(run_), (std::vector<std::string>{"strict", "kernelbench"}));
  const std::vector<RunView> views = {view("strict"), view("kernelbench")};
  EXPECT_TRUE(views[1].rescored);
  EXPECT_EQ(views[1].results_file, "rescore-kernelbench.jsonl");
  const std::vector<RunMetrics> metrics = {metrics_of(views[0]), metrics_of(views[1])};
  EXPECT_DOUBLE_EQ(metrics[1].groups.back().by_turn[0].correctness.value, 0.25);
  const std::string text = render_text_report(views, metrics, TextFormat::kTerminal);
  EXPECT_NE(text.find("side by side"), std::string::npos) << text;
  EXPECT_NE(text.find("synth [kernelbench]"), std::string::npos) << text;
  EXPECT_NE(text.find("(rescored)"), std::string::npos) << text;
}

// A run still under way (21_Sigmoid has no attempt) and a rescore older
// than the run (an attempt added after it) are said in the header.
TEST_F(ReportTest, UnfinishedRunAndPartialRescoreAreSaid) {
  testing::write_synthetic_rescore(run_);
  RunView own = view();
  EXPECT_EQ(own.chains, 4);
  EXPECT_EQ(own.unfinished_chains, 1);
  EXPECT_EQ(view("kernelbench").attempts_not_rescored, 0);
  const fs::path folder(run_);
  RunStore store(folder.parent_path().string(), folder.filename().string());
  AttemptRecord later;
  later.run = "synth";
  later.problem = "21_Sigmoid";
  later.level = 1;
  later.turn = 1;
  later.outcome = Outcome::kCorrect;
  later.protocol = "strict";
  later.attempt_dir = store.relative_attempt_dir("21_Sigmoid", 0, 1);
  store.append(later);
  const std::vector<RunView> views = {view(), view("kernelbench")};
  EXPECT_EQ(views[1].attempts_not_rescored, 1);
  const std::string text =
      render_text_report(views, {metrics_of(views[0]), metrics_of(views[1])}, TextFormat::kTerminal);
  EXPECT_NE(text.find("UNFINISHED: 1 of 4 chains"), std::string::npos) << text;
  EXPECT_NE(text.find("PARTIAL RESCORE: 1 of the run's attempts"), std::string::npos) << text;
}

// The terminal report fits 100 columns (the side-by-side tables put the
// model and scaffold above them) and has a row per selected problem.
TEST_F(ReportTest, TerminalReportFitsHundredColumnsAndListsEveryProblem) {
  testing::write_synthetic_rescore(run_);
  const std::vector<RunView> views = {view(), view("kernelbench")};
  const std::string text =
      render_text_report(views, {metrics_of(views[0]), metrics_of(views[1])}, TextFormat::kTerminal);
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) EXPECT_LE(line.size(), 100u) << line;
  EXPECT_NE(text.find("problems (4)"), std::string::npos) << text;
  // 12_Gemm: correct at turn 3 only, 2.50x; 21_Sigmoid: never attempted.
  const std::size_t gemm = text.find("\n  12_Gemm_Multiply_LeakyReLU ");
  ASSERT_NE(gemm, std::string::npos) << text;
  const std::string row = text.substr(gemm + 1, text.find('\n', gemm + 1) - gemm - 1);
  for (const char* cell : {" 2 ", " correct ", " 2.50x ", " turn 3 "}) EXPECT_NE(row.find(cell), std::string::npos) << row;
  EXPECT_NE(text.find("21_Sigmoid"), std::string::npos);
  EXPECT_NE(text.find("(no attempt)"), std::string::npos) << text;
  const std::string md = render_text_report(views, {metrics_of(views[0]), metrics_of(views[1])}, TextFormat::kMarkdown);
  EXPECT_NE(md.find("| model |"), std::string::npos) << md;
}

TEST_F(ReportTest, JsonSummaryAndCsv) {
  const std::vector<RunView> views = {view()};
  const std::vector<RunMetrics> metrics = {metrics_of(views[0])};
  const json s = summary_json(views, metrics);
  const json& all = s["views"][0]["groups"].back();
  EXPECT_EQ(all["name"], "all");
  EXPECT_EQ(all["problems"], 4);
  EXPECT_DOUBLE_EQ(all["by_turn"][2]["fast_p"][3]["value"].get<double>(), 0.75);
  EXPECT_EQ(all["by_turn"][2]["fast_p"][3]["p"], 1.0);
  EXPECT_TRUE(all["by_turn"][0]["geomean_speedup"].is_null());
  EXPECT_EQ(s["views"][0]["failures"]["incorrect_by_kind"]["hidden_shape"], 1);
  // Failures only: the run's correct attempts are not among them.
  const json& by_verdict = s["views"][0]["failures"]["by_verdict"];
  EXPECT_FALSE(by_verdict.empty());
  EXPECT_FALSE(by_verdict.contains("correct")) << by_verdict.dump();
  EXPECT_GT(metrics[0].failures.by_outcome.count(Outcome::kCorrect), 0u);  // there were some to leave out

  const std::string csv = attempts_csv(views);
  std::istringstream lines(csv);
  std::string header, line;
  std::getline(lines, header);
  EXPECT_EQ(header.rfind("run,protocol,rescored,model,device,problem,level,sample,turn,verdict,failure_kind", 0), 0u);
  int rows = 0;
  while (std::getline(lines, line)) ++rows;
  EXPECT_EQ(rows, 9);
  // A message with a comma and quotes is one quoted field.
  EXPECT_NE(csv.find("\"8 of 24 test calls failed; first: seed 9, inputs x1, shape variant 'odd': output0 differs\""),
            std::string::npos);
}

// The provider section of a run with a refusal, a context overflow, retried
// calls, call errors (and a torn calls.jsonl line), cached tokens and two
// incomplete chains (tests/support/synthetic_run.h has the plan).
TEST_F(ReportTest, ProviderSectionCountsWhatTheProviderDid) {
  const std::string run = testing::write_synthetic_provider_run(runs_.string(), "prov");
  const RunView v = load_run_view(run, "", &registry_);
  const ProviderCallLog& calls = v.provider_calls;
  EXPECT_EQ(calls.files, 6);
  EXPECT_EQ(calls.calls, 10);            // the blank line is neither a call nor unreadable
  EXPECT_EQ(calls.unreadable_lines, 1);  // the torn one
  EXPECT_EQ(calls.errors_by_class,
            (std::map<std::string, int>{
                {"transient", 4}, {"quota", 1}, {"context_overflow", 1}, {"content_policy", 1}, {"malformed", 1}}));
  EXPECT_EQ(calls.turns_without_record, 2);  // Sigmoid turn 2, Gemm turn 1
  EXPECT_EQ(v.chains, 4);
  EXPECT_EQ(v.unfinished_chains, 2);  // the refused and the overflowed chains ended

  const RunMetrics m = metrics_of(v);
  const ProviderSummary& p = m.provider;
  EXPECT_EQ(p.finish_reasons,
            (std::map<std::string, int>{{"stop", 1}, {"length", 1}, {"content_filter", 1}, {"context_overflow", 1}}));
  EXPECT_EQ(p.refused, 1);
  EXPECT_EQ(p.context_overflow, 1);
  EXPECT_EQ(p.retried_attempts, 2);
  EXPECT_EQ(p.retries, 3);  // ReLU's 3 HTTP attempts, Sigmoid's 2
  EXPECT_EQ(m.cost.input_tokens, 2200);
  EXPECT_EQ(m.cost.cached_input_tokens, 600);
  EXPECT_EQ(m.cost.cache_write_tokens, 600);
  EXPECT_EQ(m.cost.uncached_input_tokens, 1600);
  EXPECT_EQ(m.failures.by_outcome.at(Outcome::kRefused), 1);
  EXPECT_EQ(m.failures.by_outcome.at(Outcome::kContextOverflow), 1);
  // Compiled at turn 1: ReLU only (the refusal had no code; Sigmoid did not compile).
  EXPECT_DOUBLE_EQ(m.groups.back().by_turn[0].compile_rate.value, 0.25);
  EXPECT_DOUBLE_EQ(m.groups.back().by_turn[1].correctness.value, 0.25);

  // Every zero count left out; a line breaks between groups, not inside a count.
  const std::string text = render_text_report({v}, {m}, TextFormat::kTerminal);
  const std::string block =
      "  600 of 2200 input tokens (27.3%) read from the provider's prompt cache; 600 written to it; the\n"
      "    cache saved $0.0012 at the run's prices\n"
      "  provider: finish stop 1, length 1, content_filter 1, context_overflow 1;\n"
      "    refused 1, context_overflow 1; retried calls 2 (3 retries);\n"
      "    errors: transient 4, quota 1, context_overflow 1, content_policy 1, malformed 1;\n"
      "    1 unreadable calls.jsonl line; 2 incomplete chains (2 stopped at a failed provider call)\n";
  const std::size_t cost = text.find("\ncost\n");
  ASSERT_NE(cost, std::string::npos) << text;
  EXPECT_NE(text.find(block, cost), std::string::npos) << text;
  const std::size_t softmax = text.find("\n  23_Softmax ");
  ASSERT_NE(softmax, std::string::npos) << text;
  EXPECT_NE(text.substr(softmax, text.find('\n', softmax + 1) - softmax).find(" refused "), std::string::npos)
      << "a refused problem's best verdict is refused\n"
      << text;
  for (const char* row :
       {"\n  refused                        1  25.0%\n", "\n  context_overflow               1  25.0%\n"}) {
    EXPECT_NE(text.find(row), std::string::npos) << text;
  }
  // Markdown: the same counts on one line.
  const std::string md = render_text_report({v}, {m}, TextFormat::kMarkdown);
  EXPECT_NE(
      md.find("\n  provider: finish stop 1, length 1, content_filter 1, context_overflow 1; refused 1, "
              "context_overflow 1; retried calls 2 (3 retries); errors: transient 4, quota 1, context_overflow 1, "
              "content_policy 1, malformed 1; 1 unreadable calls.jsonl line; 2 incomplete chains (2 stopped at a "
              "failed provider call)\n"),
      std::string::npos)
      << md;

  const json s = summary_json({v}, {m});
  const json& provider = s["views"][0]["provider"];
  EXPECT_EQ(provider["finish_reasons"],
            json({{"stop", 1}, {"length", 1}, {"content_filter", 1}, {"context_overflow", 1}}));
  EXPECT_EQ(provider["refused"], 1);
  EXPECT_EQ(provider["context_overflow"], 1);
  EXPECT_EQ(provider["retried_attempts"], 2);
  EXPECT_EQ(provider["retries"], 3);
  EXPECT_EQ(provider["calls"]["errors_by_class"]["transient"], 4);
  EXPECT_EQ(provider["calls"]["unreadable_lines"], 1);
  EXPECT_EQ(provider["calls"]["turns_without_record"], 2);
  EXPECT_EQ(provider["incomplete_chains"], 2);
  EXPECT_EQ(s["views"][0]["cost"]["cached_input_tokens"], 600);
  EXPECT_EQ(s["views"][0]["cost"]["cache_write_tokens"], 600);
  EXPECT_EQ(s["views"][0]["cost"]["uncached_input_tokens"], 1600);
  // 600 read at $0.3 instead of $3, 600 written at $3.75 instead of $3 (per million).
  EXPECT_NEAR(s["views"][0]["cost"]["cache_saving_usd"].get<double>(), (600 * 2.7 - 600 * 0.75) / 1e6, 1e-12);

  // CSV: the new columns close the row; a refusal did not compile.
  const std::string csv = attempts_csv({v});
  EXPECT_NE(csv.find(",message,cached_input_tokens,cache_write_tokens,provider_attempts,evaluated_on,gpu,speedups\n"),
            std::string::npos)
      << csv;
  EXPECT_NE(csv.find(",stop,2026-01-01T00:01:01Z,attempts/19_ReLU/sample0/turn1,,,0,600,3,cpu,,\n"), std::string::npos)
      << csv;
  EXPECT_NE(csv.find("prov,strict,0,replay:synthetic,cpu,23_Softmax,1,0,1,refused,,0,0,"), std::string::npos) << csv;
}

TEST_F(ReportTest, CommandWritesEveryFormat) {
  testing::write_synthetic_rescore(run_);
  const fs::path out = runs_ / "out";
  std::string output;
  const int rc = kloop("report " + run_ + " --format markdown --bootstrap 100 --html " + (out / "r.html").string() +
                           " --json " + (out / "r.json").string() + " --csv " + (out / "r.csv").string() +
                           " --markdown " + (out / "r.md").string(),
                       &output);
  ASSERT_EQ(rc, 0) << output;
  EXPECT_NE(output.find("# kloop report"), std::string::npos) << output;
  EXPECT_NE(output.find("synth [kernelbench]"), std::string::npos) << output;
  EXPECT_NE(read(out / "r.html").find("<script id=\"report-data\""), std::string::npos);
  EXPECT_EQ(json::parse(read(out / "r.json"))["views"].size(), 2u);
  EXPECT_NE(read(out / "r.csv").find("kernelbench"), std::string::npos);
  EXPECT_NE(read(out / "r.md").find("## synth [strict]"), std::string::npos);
}

TEST_F(ReportTest, CommandErrorsNameTheFileAndTheFix) {
  std::string output;
  EXPECT_EQ(kloop("report " + runs_.string(), &output), 2);
  EXPECT_NE(output.find("not a run folder (no config.json)"), std::string::npos) << output;
  output.clear();
  EXPECT_EQ(kloop("report " + run_ + " --protocol verified", &output), 2);
  EXPECT_NE(output.find("rescore-verified.jsonl: not found; run 'kloop rescore"), std::string::npos) << output;
}

// Attack: records appended to results.jsonl by someone other than the run's
// driver (a "correct, 100x" for a problem never solved) are not counted by
// the report, which warns.
TEST_F(ReportTest, ForgedRecordsAreNotCounted) {
  json forged = {{"run", "synth"}, {"problem", "21_Sigmoid"}, {"level", 1}, {"sample", 0}, {"turn", 1},
                 {"verdict", "correct"}, {"speedup", 100.0}, {"protocol", "strict"}, {"attempt_dir", ""},
                 {"mac", std::string(64, '0')}};
  std::ofstream(fs::path(run_) / "results.jsonl", std::ios::app) << forged.dump() << "\n";
  forged.erase("mac");
  forged["problem"] = "23_Softmax";
  std::ofstream(fs::path(run_) / "results.jsonl", std::ios::app) << forged.dump() << "\n";

  ::testing::internal::CaptureStderr();
  const RunView v = view();
  const std::string warning = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(v.attempts.size(), 9u);
  EXPECT_EQ(metrics_of(v).groups.back().problems_with_results, 3) << "21_Sigmoid still has no result";
  EXPECT_NE(warning.find("2 of 11 line(s) rejected"), std::string::npos) << warning;

  std::string output;
  const fs::path summary_file = runs_ / "out" / "r.json";
  ASSERT_EQ(kloop("report " + run_ + " --bootstrap 0 --json " + summary_file.string(), &output), 0) << output;
  EXPECT_NE(output.find("results.jsonl: 2 of 11 line(s) rejected"), std::string::npos) << output;
  const json summary = json::parse(read(summary_file));
  EXPECT_EQ(summary["views"][0]["groups"].back()["problems_with_results"], 3) << output;
}

}  // namespace
}  // namespace kloop::report
