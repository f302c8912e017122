// The HTML report: self-contained, safe against text that looks like HTML,
// and, in headless Chromium, drawn without script errors with the expected
// series (the page marks what it drew in <body data-rendered> and records
// errors in <html data-errors>). The Chromium tests skip when no browser is
// installed; they also leave a screenshot in KLOOP_TEST_ARTIFACTS.
#include "agent/report/report_html.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <set>
#include <sstream>

#include "agent/report/metrics.h"
#include "agent/report/report_text.h"
#include "agent/report/run_view.h"
#include "agent/store/run_store.h"
#include "evaluator/problem/registry.h"
#include "tests/support/synthetic_run.h"

namespace kloop::report {
namespace {

namespace fs = std::filesystem;

// $KLOOP_CHROMIUM, else the first of the usual names on the PATH; "" if none.
std::string find_chromium() {
  if (const char* env = std::getenv("KLOOP_CHROMIUM"); env && *env) return env;
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    for (const char* name : {"chromium", "chromium-browser", "google-chrome"}) {
      const fs::path p = fs::path(dir) / name;
      if (access(p.c_str(), X_OK) == 0) return p.string();
    }
  }
  return "";
}

// The start tag of element `name` in a dumped DOM, e.g. <body data-rendered="...">; "" if absent.
std::string start_tag(const std::string& dom, const std::string& name) {
  const auto open = dom.find("<" + name);
  if (open == std::string::npos) return "";
  return dom.substr(open, dom.find('>', open) - open + 1);
}

class ReportHtmlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    runs_ = fs::temp_directory_path() / ("kloop-report-html-" + std::to_string(getpid()));
    fs::remove_all(runs_);
    run_ = testing::write_synthetic_run(runs_.string(), "synth");
    testing::write_synthetic_rescore(run_);
  }
  void TearDown() override { fs::remove_all(runs_); }

  // The page of the run under strict and kernelbench, written to runs/report.html.
  fs::path write_page() {
    ProblemRegistry registry(ProblemRegistry::default_root());
    std::vector<RunView> views = {load_run_view(run_, "strict", &registry),
                                  load_run_view(run_, "kernelbench", &registry)};
    std::vector<RunMetrics> metrics;
    MetricOptions o;
    o.bootstrap_resamples = 200;
    for (const auto& v : views) metrics.push_back(compute_metrics(v.problems, v.attempts, v.turns, v.samples, o));
    const fs::path page = runs_ / "report.html";
    RunStore::write_text(page.string(), render_html_report(views, metrics, runs_.string()));
    return page;
  }

  static std::string read(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  // Runs headless Chromium on `page` with `mode` (--dump-dom or
  // --screenshot=...) under a time limit, so a hung browser fails the test
  // instead of stalling CI. Returns stdout.
  std::string chromium(const std::string& binary, const fs::path& page, const std::string& mode) {
    const fs::path profile = runs_ / ("profile-" + std::to_string(++profiles_));  // fresh per run
    const std::string cmd = "timeout -k 5 60 " + binary +
                            " --headless --no-sandbox --disable-gpu --disable-quic --no-first-run"
                            " --disable-background-networking --disable-component-update --disable-sync"
                            " --user-data-dir=" +
                            profile.string() + " " + mode + " file://" + page.string() + " 2>" +
                            (runs_ / "chromium.log").string();
    std::string out;
    FILE* pipe = popen(cmd.c_str(), "r");
    if (!pipe) return out;
    char buf[4096];
    std::size_t n;
    while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
    pclose(pipe);
    return out;
  }

  fs::path runs_;
  std::string run_;
  int profiles_ = 0;
};

TEST_F(ReportHtmlTest, PageIsSelfContainedWithRelativeLinks) {
  const std::string html = read(write_page());
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(html.find(" src="), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  // The only http:// is the SVG namespace, which is a name, not a fetch.
  std::size_t http = 0, count = 0;
  while ((http = html.find("http://", http)) != std::string::npos) {
    EXPECT_EQ(html.compare(http, 26, "http://www.w3.org/2000/svg"), 0);
    ++http;
    ++count;
  }
  EXPECT_EQ(count, 1u);
  EXPECT_NE(html.find("\"synth/attempts/19_ReLU/sample0/turn1/candidate.cpp\""), std::string::npos);
  EXPECT_NE(html.find("\"synth/attempts/19_ReLU/sample0/turn1/feedback.txt\""), std::string::npos);
}

TEST_F(ReportHtmlTest, AttemptViewCarriesTheProfileDigest) {
  RunStore store(runs_.string(), "synth");
  bool placed = false;
  for (const auto& r : store.load_results()) {
    if (r.outcome != Outcome::kCorrect || r.attempt_dir.empty()) continue;
    const fs::path verdict = fs::path(run_) / r.attempt_dir / "verdict.json";
    nlohmann::json v = nlohmann::json::object();
    if (std::ifstream in(verdict); in) v = nlohmann::json::parse(in);
    v["profile_digest"] = "1. relu [custom]: 1.53 us per forward (100% of GPU time), 1 launch";
    RunStore::write_text(verdict.string(), v.dump(2) + "\n");
    placed = true;
    break;
  }
  ASSERT_TRUE(placed) << "the synthetic run needs a correct attempt";
  const std::string html = read(write_page());
  EXPECT_NE(html.find("1. relu [custom]: 1.53 us per forward"), std::string::npos);
}

TEST_F(ReportHtmlTest, TextThatLooksLikeHtmlCannotEndTheDataScript) {
  // A model's message that closes the script tag must stay data.
  RunStore store(runs_.string(), "synth");
  AttemptRecord r = store.load_results().front();
  r.turn = 4;
  r.message = "</script><script>throw 1</script>";
  store.append(r);
  const std::string html = read(write_page());
  EXPECT_EQ(html.find("</script><script>throw 1"), std::string::npos);
  EXPECT_NE(html.find("\\u003c/script\\u003e"), std::string::npos);
}

TEST_F(ReportHtmlTest, DrawsEverySeriesInHeadlessChromium) {
  const std::string binary = find_chromium();
  if (binary.empty()) GTEST_SKIP() << "no chromium on the PATH (scripts/setup installs it; or set KLOOP_CHROMIUM)";
  const fs::path page = write_page();
  const std::string dom = chromium(binary, page, "--dump-dom");
  const std::string body = start_tag(dom, "body");
  ASSERT_NE(body.find("data-rendered=\""), std::string::npos)
      << "the page did not finish drawing; chromium log: " << read(runs_ / "chromium.log") << "\n"
      << dom.substr(0, 2000);
  EXPECT_EQ(start_tag(dom, "html").find("data-errors"), std::string::npos) << start_tag(dom, "html");
  for (const char* series :
       {"v0:fast_p-vs-p:turn 1", "v0:fast_p-vs-p:turn 3", "v0:fast_p-by-turn:fast_0", "v0:fast_p-by-turn:fast_1",
        "v0:speedups:one-shot", "v0:speedups:final", "v0:grid", "v0:provider", "v1:fast_p-vs-p:turn 1",
        "compare:fast_p-vs-p:synth [kernelbench]", "compare:correct-by-turn:synth [strict]",
        "compare:budget-calls:synth [strict]", "compare:budget-calls:synth [kernelbench]",
        "compare:budget-output_tokens:synth [strict]", "compare:budget-dollars:synth [kernelbench]"}) {
    EXPECT_NE(body.find(series), std::string::npos) << "missing series " << series << " in " << body;
  }
  // A curve is a real path, not an empty element.
  EXPECT_NE(dom.find("d=\"M"), std::string::npos);
  EXPECT_NE(dom.find("data-series=\"v0:fast_p-vs-p:turn 3\""), std::string::npos);
  EXPECT_NE(dom.find("href=\"synth/attempts/23_Softmax/sample0/turn1/candidate.cpp\""), std::string::npos);
  // The run is unfinished (21_Sigmoid has no attempt), the interval bars have
  // a legend, and the fast_p axis reaches past the best speedup (2.5x).
  EXPECT_NE(dom.find("UNFINISHED: 1 of 4 chains"), std::string::npos);
  // 21_Sigmoid has no attempt: named under the grid, not an empty row of it.
  EXPECT_NE(dom.find(">no attempt (1): 21_Sigmoid<"), std::string::npos);
  EXPECT_EQ(dom.find("<td>21_Sigmoid</td>"), std::string::npos);
  EXPECT_NE(dom.find(">no kernelbench record (no attempt, or not rescored) (1): 21_Sigmoid<"), std::string::npos);
  EXPECT_NE(dom.find("bars: 95% interval"), std::string::npos);
  EXPECT_NE(dom.find(">2.5</text>"), std::string::npos) << "an x tick at 2.5 at least";

  const char* artifacts = KLOOP_TEST_ARTIFACTS;
  fs::create_directories(artifacts);
  const fs::path shot = fs::path(artifacts) / "report.png";
  fs::remove(shot);
  chromium(binary, page, "--screenshot=" + shot.string() + " --window-size=1280,2600");
  ASSERT_TRUE(fs::exists(shot)) << read(runs_ / "chromium.log");
  EXPECT_EQ(read(shot).substr(1, 3), "PNG");
  EXPECT_GT(fs::file_size(shot), 20000u);  // a drawn page, not a blank one
  std::cout << "screenshot: " << shot.string() << "\n";
}

// A search's page draws its tree: a node per attempt coloured by verdict,
// a line from each parent.
TEST_F(ReportHtmlTest, ASearchRunDrawsItsTree) {
  const std::string binary = find_chromium();
  if (binary.empty()) GTEST_SKIP() << "no chromium on the PATH (scripts/setup installs it; or set KLOOP_CHROMIUM)";
  ProblemRegistry registry(ProblemRegistry::default_root());
  RunView v = load_run_view(run_, "strict", &registry);
  v.scaffold_kind = "beam";
  int linked = 0;
  for (auto& a : v.attempts) {
    if (a.record.problem == "19_ReLU" && a.record.turn > 1) {
      a.record.parents = {{0, a.record.turn - 1}};
      a.record.step = "refine";
      ++linked;
    }
  }
  ASSERT_EQ(linked, 2);
  MetricOptions o;
  o.bootstrap_resamples = 0;
  const RunMetrics m = compute_metrics(v.problems, v.attempts, v.turns, v.samples, o);
  const fs::path page = runs_ / "tree.html";
  RunStore::write_text(page.string(), render_html_report({v}, {m}, runs_.string()));
  const std::string dom = chromium(binary, page, "--dump-dom");
  EXPECT_EQ(start_tag(dom, "html").find("data-errors"), std::string::npos) << start_tag(dom, "html");
  EXPECT_NE(start_tag(dom, "body").find("v0:tree"), std::string::npos) << start_tag(dom, "body");
  const std::size_t tree = dom.find("data-series=\"v0:tree:19_ReLU\"");
  ASSERT_NE(tree, std::string::npos) << dom.substr(0, 3000);
  const std::string svg = dom.substr(tree, dom.find("</svg>", tree) - tree);
  std::size_t lines = 0, nodes = 0;
  for (std::size_t at = svg.find("<line"); at != std::string::npos; at = svg.find("<line", at + 1)) ++lines;
  for (std::size_t at = svg.find("class=\"node "); at != std::string::npos; at = svg.find("class=\"node ", at + 1)) ++nodes;
  EXPECT_EQ(lines, 2u) << svg;
  EXPECT_EQ(nodes, 3u) << svg;
  EXPECT_NE(svg.find("node v-integrity_violation"), std::string::npos) << svg;
  EXPECT_NE(svg.find("1.60x"), std::string::npos) << svg;
}

TEST_F(ReportHtmlTest, ScriptErrorsShowInTheDom) {
  const std::string binary = find_chromium();
  if (binary.empty()) GTEST_SKIP() << "no chromium on the PATH (scripts/setup installs it; or set KLOOP_CHROMIUM)";
  // Broken data must be reported by the page, or "no script errors" above proves nothing.
  const fs::path page = write_page();
  std::string html = read(page);
  const std::string open = "<script id=\"report-data\" type=\"application/json\">";
  html.insert(html.find(open) + open.size(), "{");
  RunStore::write_text(page.string(), html);
  const std::string dom = chromium(binary, page, "--dump-dom");
  EXPECT_NE(start_tag(dom, "html").find("data-errors=\""), std::string::npos) << dom.substr(0, 2000);
  EXPECT_EQ(start_tag(dom, "body").find("data-rendered"), std::string::npos);
}


// Three points of a sweep share the sweep's name: every legend and the
// side-by-side table must still tell them apart (issue 53: the legends were
// cut to "one-shot-vs-iterative" at the chart's edge); a rescore the run
// has outgrown is flagged beside its row; correct attempts are no failures.
class ReportLabelsTest : public ReportHtmlTest {
 protected:
  // `page` drawn in headless Chromium (`binary`) into `dom`: it must have
  // finished drawing (a fatal failure otherwise), without script errors,
  // and have measured its legends as none cut by its chart's edge and none
  // read alike.
  void draw(const std::string& binary, const fs::path& page, std::string* dom) {
    *dom = chromium(binary, page, "--window-size=1280,2000 --dump-dom");
    const std::string body = start_tag(*dom, "body");
    ASSERT_NE(body.find("data-rendered=\""), std::string::npos) << read(runs_ / "chromium.log") << dom->substr(0, 2000);
    EXPECT_EQ(start_tag(*dom, "html").find("data-errors"), std::string::npos) << start_tag(*dom, "html");
    EXPECT_EQ(body.find("data-legend-clipped"), std::string::npos) << body;
    EXPECT_EQ(body.find("data-legend-alike"), std::string::npos) << body;
  }
  std::vector<RunView> sweep_views() {
    ProblemRegistry registry(ProblemRegistry::default_root());
    std::vector<RunView> views;
    for (const char* point : {"scaffold=one_shot", "scaffold=best_of_k", "scaffold=iterative"}) {
      const std::string dir = testing::write_synthetic_run(runs_.string(), std::string(kSweep) + "/" + point);
      views.push_back(load_run_view(dir, "strict", &registry));
    }
    // The last point was rescored under kernelbench, then the run went on (a turn 4).
    testing::write_synthetic_rescore(views.back().run_dir);
    RunStore store(runs_.string(), std::string(kSweep) + "/scaffold=iterative");
    AttemptRecord extra = store.load_results().front();
    extra.turn = 4;
    store.append(extra);
    views.push_back(load_run_view(views.back().run_dir, "kernelbench", &registry));
    return views;
  }
  fs::path write_sweep_page(const std::vector<RunView>& views) {
    std::vector<RunMetrics> metrics;
    MetricOptions o;
    o.bootstrap_resamples = 0;
    for (const auto& v : views) metrics.push_back(compute_metrics(v.problems, v.attempts, v.turns, v.samples, o));
    const fs::path page = runs_ / "sweep.html";
    RunStore::write_text(page.string(), render_html_report(views, metrics, runs_.string()));
    return page;
  }
  static constexpr const char* kSweep = "one-shot-vs-iterative";

  // The sweep with other baselines asked for (evaluation.baselines) by two
  // of its points: the first times against eager (each correct attempt 2x
  // the protocol's figure) and compile-default (19_ReLU only, a quarter),
  // the second against eager; the third asked for none; the last (a
  // rescore) asked for eager in its config but has no attempt timed
  // against it.
  std::vector<RunView> sweep_views_with_baselines() {
    std::vector<RunView> views = sweep_views();
    views[3].baselines = {"eager"};
    for (std::size_t i : {0, 1}) {
      for (auto& a : views[i].attempts) {
        AttemptRecord& r = a.record;
        if (r.outcome != Outcome::kCorrect || !r.speedup) continue;
        r.speedups["eager"] = 2 * *r.speedup;
        if (i == 0 && r.problem == "19_ReLU") r.speedups["compile-default"] = *r.speedup / 4;
      }
    }
    return views;
  }
  // The rows of the table whose element carries data-chart="`chart`", each
  // as its cells' text joined by '|'.
  static std::vector<std::string> table_rows(const std::string& dom, const std::string& chart) {
    const std::size_t at = dom.find("data-chart=\"" + chart + "\"");
    if (at == std::string::npos) return {};
    const std::string t = dom.substr(at, dom.find("</table>", at) - at);
    std::vector<std::string> rows;
    for (std::size_t r = t.find("<tr"); r != std::string::npos; r = t.find("<tr", r + 1)) {
      std::string row = t.substr(r, t.find("</tr>", r) - r);
      row = std::regex_replace(row, std::regex("</t[dh]>"), "|");
      rows.push_back(std::regex_replace(row, std::regex("<[^>]*>"), ""));
    }
    return rows;
  }
};

TEST_F(ReportLabelsTest, SweepPointsHaveDistinctShortLabels) {
  const std::vector<RunView> views = sweep_views();
  const std::vector<std::string> labels = distinct_labels(views);
  ASSERT_EQ(labels.size(), 4u);
  EXPECT_EQ(labels[0], "scaffold=one_shot [strict]");
  EXPECT_EQ(labels[3], "scaffold=iterative [kernelbench]");
  EXPECT_EQ(std::set<std::string>(labels.begin(), labels.end()).size(), labels.size());
  EXPECT_EQ(views[3].attempts_not_rescored, 1);
  // Two views alike but for their folders: numbered.
  std::vector<RunView> twins = {views[0], views[0]};
  const std::vector<std::string> numbered = distinct_labels(twins);
  EXPECT_NE(numbered[0], numbered[1]);
  EXPECT_EQ(numbered[0].rfind("#1 ", 0), 0u) << numbered[0];
  // The page's data carries them, budget curves included.
  const std::string html = read(write_sweep_page(views));
  EXPECT_NE(html.find("\"short_label\":\"scaffold=best_of_k [strict]\""), std::string::npos);
}

TEST_F(ReportLabelsTest, TextReportMarksAStaleRescoreAndListsNoCorrectFailures) {
  const std::vector<RunView> views = sweep_views();
  std::vector<RunMetrics> metrics;
  MetricOptions o;
  o.bootstrap_resamples = 0;
  for (const auto& v : views) metrics.push_back(compute_metrics(v.problems, v.attempts, v.turns, v.samples, o));
  for (TextFormat f : {TextFormat::kMarkdown, TextFormat::kTerminal}) {
    const std::string text = render_text_report(views, metrics, f);
    // Markdown rows carry the labels; a terminal's narrow rows are numbered, the list above says which
    // (+: the synthetic run is unfinished, 21_Sigmoid has no record).
    EXPECT_NE(text.find(f == TextFormat::kMarkdown ? "| scaffold=iterative [kernelbench] * + |" : "\n  #4 * +  "),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("* one-shot-vs-iterative/scaffold=iterative [kernelbench]: PARTIAL RESCORE: 1"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("scaffold=best_of_k [strict]"), std::string::npos) << text;
    // The failures tables: verdicts of failed attempts, no "correct" row.
    for (std::size_t at = text.find("failures ("); at != std::string::npos; at = text.find("failures (", at + 1)) {
      const std::string section = text.substr(at, text.find("cost", at) - at);
      EXPECT_FALSE(std::regex_search(section, std::regex(R"((^|\n)[| ]*correct[ |])"))) << section;
      EXPECT_NE(section.find("integrity_violation"), std::string::npos) << section;
    }
  }
}

TEST_F(ReportLabelsTest, EveryLegendTellsTheSweepsRunsApartInHeadlessChromium) {
  const std::string binary = find_chromium();
  if (binary.empty()) GTEST_SKIP() << "no chromium on the PATH (scripts/setup installs it; or set KLOOP_CHROMIUM)";
  const fs::path page = write_sweep_page(sweep_views());
  std::string dom;
  draw(binary, page, &dom);
  if (HasFatalFailure()) return;
  const std::string body = start_tag(dom, "body");
  for (const char* label : {">scaffold=one_shot [strict]<", ">scaffold=best_of_k [strict]<",
                            ">scaffold=iterative [strict]<", ">scaffold=iterative [kernelbench]<"}) {
    std::size_t n = 0;
    for (std::size_t at = dom.find(label); at != std::string::npos; at = dom.find(label, at + 1)) ++n;
    // The table row, and the legends of the two comparison charts and three budget charts.
    EXPECT_GE(n, 6u) << label;
  }
  const std::size_t compare = dom.find("<section id=\"compare\"");
  ASSERT_NE(compare, std::string::npos);
  const std::string table = dom.substr(compare, dom.find("</table>", compare) - compare);
  EXPECT_NE(table.find("PARTIAL RESCORE: 1 attempts without a kernelbench record"), std::string::npos) << table;
  EXPECT_NE(table.find("runs of one-shot-vs-iterative"), std::string::npos) << table;
  // No failures table lists correct attempts.
  for (std::size_t at = dom.find(">failures ("); at != std::string::npos; at = dom.find(">failures (", at + 1)) {
    const std::string section = dom.substr(at, dom.find("</table>", at) - at);
    EXPECT_EQ(section.find(">correct<"), std::string::npos) << section;
    EXPECT_NE(section.find(">integrity_violation<"), std::string::npos) << section;
  }
  const char* artifacts = KLOOP_TEST_ARTIFACTS;
  fs::create_directories(artifacts);
  const fs::path shot = fs::path(artifacts) / "report-sweep.png";
  fs::remove(shot);
  chromium(binary, page, "--screenshot=" + shot.string() + " --window-size=1280,2400");
  ASSERT_TRUE(fs::exists(shot)) << read(runs_ / "chromium.log");
  std::cout << "screenshot: " << shot.string() << "\n";
}

// The page's data has each baseline's final-turn fast_p curve, the
// protocol's own first, on one p axis, for the runs that asked for other
// baselines; a run that asked for none has an empty list (its page is as
// before).
TEST_F(ReportLabelsTest, PageDataHasACurvePerBaselineOnlyWhereTheRunAskedForOthers) {
  const std::vector<RunView> views = sweep_views_with_baselines();
  std::vector<RunMetrics> metrics;
  MetricOptions o;
  o.bootstrap_resamples = 0;
  for (const auto& v : views) metrics.push_back(compute_metrics(v.problems, v.attempts, v.turns, v.samples, o));
  const nlohmann::json data = html_report_data(views, metrics, runs_.string());
  const nlohmann::json& first = data["views"][0]["baseline_curves"];
  ASSERT_EQ(first.size(), 3u) << first.dump();
  EXPECT_EQ(first[0]["name"], "own");
  EXPECT_EQ(first[0]["label"], "strict's own (the headline)");
  EXPECT_EQ(first[1]["name"], "compile-default");
  EXPECT_EQ(first[2]["name"], "eager");
  EXPECT_EQ(first[0]["timed"], 5);  // every correct attempt
  EXPECT_EQ(first[1]["timed"], 2);  // 19_ReLU's two
  // One p axis; the step down to 0 at each curve's fastest problem: 2.5x
  // (12_Gemm_Multiply_LeakyReLU) for the protocol's, 5x against eager.
  EXPECT_EQ(first[0]["points"].back()[0], first[2]["points"].back()[0]);
  auto last_drop = [](const nlohmann::json& points) {
    double at = 0;
    for (std::size_t i = 1; i < points.size(); ++i) {
      if (points[i][1].get<double>() < points[i - 1][1].get<double>()) at = points[i][0].get<double>();
    }
    return at;
  };
  EXPECT_DOUBLE_EQ(last_drop(first[0]["points"]), 2.5);
  EXPECT_DOUBLE_EQ(last_drop(first[2]["points"]), 5.0);
  EXPECT_DOUBLE_EQ(last_drop(first[1]["points"]), 0.4);
  EXPECT_EQ(data["views"][1]["baseline_curves"].size(), 2u);
  EXPECT_TRUE(data["views"][2]["baseline_curves"].empty());
  EXPECT_EQ(data["views"][3]["baseline_curves"].size(), 2u);  // asked for in its config, none timed
  EXPECT_EQ(data["views"][3]["baselines"]["eager"]["timed"], 0);
}

// Each baseline a run asked for gets its row of fast_p and geomean, and its
// curve, under distinct labels; runs side by side get a table and a chart
// per baseline over the runs that asked for it; a run that asked for none
// has no such section.
TEST_F(ReportLabelsTest, EachBaselineHasItsTableAndCurvesInHeadlessChromium) {
  const std::string binary = find_chromium();
  if (binary.empty()) GTEST_SKIP() << "no chromium on the PATH (scripts/setup installs it; or set KLOOP_CHROMIUM)";
  const fs::path page = write_sweep_page(sweep_views_with_baselines());
  std::string dom;
  draw(binary, page, &dom);
  if (HasFatalFailure()) return;
  const std::string body = start_tag(dom, "body");
  for (const char* series :
       {"v0:baselines", "v0:baselines-fast_p-vs-p:own", "v0:baselines-fast_p-vs-p:eager",
        "v0:baselines-fast_p-vs-p:compile-default", "v1:baselines-fast_p-vs-p:eager",
        "compare:baseline-eager:one-shot-vs-iterative/scaffold=one_shot [strict]",
        "compare:baseline-eager:one-shot-vs-iterative/scaffold=best_of_k [strict]",
        "compare:baseline-compile-default:one-shot-vs-iterative/scaffold=one_shot [strict]"}) {
    EXPECT_NE(body.find(series), std::string::npos) << "missing series " << series << " in " << body;
  }
  EXPECT_EQ(body.find("v2:baselines"), std::string::npos) << body;
  // Asked for, nothing timed against it: correct attempts count for fast_0 only.
  const std::vector<std::string> last = table_rows(dom, "v3:baselines");
  ASSERT_EQ(last.size(), 3u);
  EXPECT_EQ(last[1].rfind("kernelbench's own (the headline)|", 0), 0u) << last[1];
  EXPECT_EQ(last[2], "eager|0|0.0%|0.0%|0.0%|0.0%|0.0%|-|");
  EXPECT_EQ(body.find("compare:baseline-compile-default:one-shot-vs-iterative/scaffold=best_of_k"), std::string::npos)
      << body;
  // The first run's table: the protocol's own row first. Final turn bests
  // 1.6x, 1.2x, 2.5x of 4 problems; against eager twice that; against
  // compile-default 19_ReLU alone at 0.4x (fast_p for p = 0.5 .. 2).
  EXPECT_EQ(table_rows(dom, "v0:baselines"),
            (std::vector<std::string>{
                "baseline|correct, timed against it|fast_0.5|fast_0.8|fast_1|fast_1.5|fast_2|geomean speedup|",
                "strict's own (the headline)|5|75.0%|75.0%|75.0%|50.0%|25.0%|1.69x|",
                "compile-default|2|0.0%|0.0%|0.0%|0.0%|0.0%|0.40x|",
                "eager|5|75.0%|75.0%|75.0%|75.0%|75.0%|3.37x|"}));
  // Side by side: a table per baseline, one row per run that asked for it.
  const std::vector<std::string> eager = table_rows(dom, "compare:baseline-eager");
  ASSERT_EQ(eager.size(), 4u);
  // (Each synthetic run is unfinished: 21_Sigmoid has no attempt; flagged as in the side-by-side table.)
  EXPECT_EQ(eager[1], "scaffold=one_shot [strict]UNFINISHED: 1 of 4 chains|5|75.0%|75.0%|75.0%|75.0%|75.0%|3.37x|");
  EXPECT_EQ(eager[2].rfind("scaffold=best_of_k [strict]UNFINISHED: 1 of 4 chains|5|", 0), 0u) << eager[2];
  EXPECT_EQ(table_rows(dom, "compare:baseline-compile-default").size(), 2u);
  // The rescore the run has outgrown is flagged here too.
  EXPECT_EQ(eager[3].rfind("scaffold=iterative [kernelbench]PARTIAL RESCORE: 1 attempts without a kernelbench "
                           "record; UNFINISHED: 1 of 4 chains|0|",
                           0),
            0u)
      << eager[3];
  EXPECT_NE(dom.find(">final turn against eager (the 3 of 4 runs that asked for it)<"), std::string::npos);
  // A run keeps its colour in a chart that draws only some of the runs.
  auto stroke = [&](const std::string& series) {
    const std::size_t at = dom.find("data-series=\"" + series + "\"");
    if (at == std::string::npos) return std::string("(no " + series + ")");
    const std::size_t path = dom.rfind("<path", at);
    const std::size_t s = dom.find("stroke=\"", path) + 8;
    return dom.substr(s, dom.find('"', s) - s);
  };
  const std::string rescore_run = "one-shot-vs-iterative/scaffold=iterative [kernelbench]";
  EXPECT_EQ(stroke("compare:baseline-eager:" + rescore_run), stroke("compare:fast_p-vs-p:" + rescore_run));
  EXPECT_NE(stroke("compare:baseline-eager:" + rescore_run),
            stroke("compare:baseline-eager:one-shot-vs-iterative/scaffold=one_shot [strict]"));
  // Every baseline's legend entry reads as its name.
  for (const char* label : {">strict's own (the headline)<", ">eager<", ">compile-default<"}) {
    EXPECT_NE(dom.find(label), std::string::npos) << label;
  }
}

}  // namespace
}  // namespace kloop::report
