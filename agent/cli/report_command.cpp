// kloop report RUN [RUN ...]: metrics of finished runs in the terminal or as
// Markdown, an HTML page, and JSON/CSV exports. Each run is shown under
// every protocol it has results for (its own, and each `kloop rescore`),
// side by side.
#include <filesystem>
#include <iostream>
#include <memory>

#include "agent/cli/commands.h"
#include "agent/report/metrics.h"
#include "agent/report/report_export.h"
#include "agent/report/report_html.h"
#include "agent/report/report_text.h"
#include "agent/report/run_view.h"
#include "agent/scaffold/sweep.h"
#include "agent/store/run_store.h"
#include "evaluator/problem/registry.h"

namespace kloop::cli {
namespace {

namespace fs = std::filesystem;

// RUN is a run folder, a sweep's folder (its runs, side by side), or either
// by name under --runs-dir.
std::vector<std::string> resolve_run(const std::string& run, const std::string& runs_dir) {
  for (const fs::path& dir : {fs::path(run), fs::path(runs_dir) / run}) {
    if (fs::exists(dir / "config.json")) return {dir.string()};
    if (fs::exists(dir / "sweep.json")) {
      std::vector<std::string> runs = sweep_runs(dir.string());
      if (runs.empty()) {
        throw std::invalid_argument((dir / "sweep.json").string() +
                                    ": the sweep has no run with results yet (kloop run CONFIG runs them)");
      }
      return runs;
    }
  }
  throw std::invalid_argument(run + ": not a run folder (no config.json) and no run of that name in " + runs_dir +
                              "; give the folder kloop run wrote, e.g. runs/demo (or a sweep's, runs/NAME)");
}

void write_file(const std::string& path, const std::string& text, const char* what) {
  const fs::path p(path);
  if (p.has_parent_path()) fs::create_directories(p.parent_path());
  RunStore::write_text(path, text);
  std::cerr << "kloop: wrote " << what << " " << path << "\n";
}

}  // namespace

Runner add_report_command(CLI::App& app, const GlobalOptions& global) {
  struct State {
    std::vector<std::string> runs;
    std::vector<std::string> protocols;
    std::string runs_dir = "runs";
    std::string format = "text";
    std::string markdown, html, json, csv;
    std::vector<double> ps = {0, 0.5, 0.8, 1, 1.5, 2};
    int bootstrap = 1000;
    uint64_t seed = 1;
  };
  auto st = std::make_shared<State>();
  app.add_option("runs", st->runs, "run folders (runs/NAME) or run names under --runs-dir")->required();
  app.add_option("--protocol", st->protocols,
                 "show the runs under these protocols (default: every protocol each run has results for: its own "
                 "and each `kloop rescore`)")
      ->delimiter(',');
  app.add_option("--runs-dir", st->runs_dir, "where run names are looked up")->capture_default_str();
  app.add_option("--format", st->format, "what to print: text (aligned tables) or markdown")
      ->capture_default_str()
      ->check(CLI::IsMember({"text", "markdown"}));
  app.add_option("--markdown", st->markdown, "also write the Markdown report to this file");
  app.add_option("--html", st->html, "write the HTML report (one self-contained file) here");
  app.add_option("--json", st->json, "write the JSON summary here");
  app.add_option("--csv", st->csv, "write one CSV row per attempt here");
  app.add_option("--p", st->ps, "fast_p thresholds (speedup > p)")->delimiter(',')->capture_default_str();
  app.add_option("--bootstrap", st->bootstrap, "bootstrap resamples for the 95% intervals (0: none)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--seed", st->seed, "seed of the bootstrap resamples")->capture_default_str();
  return [st, &global]() {
    // The registry counts a selection by suite and level; a run selecting
    // by names can still be reported without it.
    std::unique_ptr<ProblemRegistry> registry;
    try {
      registry = std::make_unique<ProblemRegistry>(global.problems_dir);
    } catch (const std::exception& e) {
      std::cerr << "kloop: " << e.what() << "; problem levels come from the records\n";
    }
    report::MetricOptions options;
    options.ps = st->ps;
    options.bootstrap_resamples = st->bootstrap;
    options.bootstrap_seed = st->seed;
    std::vector<report::RunView> views;
    std::vector<report::RunMetrics> metrics;
    for (const auto& run : st->runs) {
      for (const std::string& dir : resolve_run(run, st->runs_dir)) {
        const std::vector<std::string> protocols = st->protocols.empty() ? report::run_protocols(dir) : st->protocols;
        for (const auto& p : protocols) {
          views.push_back(report::load_run_view(dir, p, registry.get()));
          const auto& v = views.back();
          metrics.push_back(report::compute_metrics(v.problems, v.attempts, v.turns, v.samples, options));
        }
      }
    }
    const auto format = st->format == "markdown" ? report::TextFormat::kMarkdown : report::TextFormat::kTerminal;
    std::cout << report::render_text_report(views, metrics, format);
    if (!st->markdown.empty()) {
      write_file(st->markdown, report::render_text_report(views, metrics, report::TextFormat::kMarkdown), "Markdown");
    }
    if (!st->html.empty()) {
      const fs::path page_dir = fs::absolute(st->html).parent_path();
      write_file(st->html, report::render_html_report(views, metrics, page_dir.string()), "HTML");
    }
    if (!st->json.empty()) write_file(st->json, report::summary_json(views, metrics).dump(2) + "\n", "JSON summary");
    if (!st->csv.empty()) write_file(st->csv, report::attempts_csv(views), "CSV");
    return 0;
  };
}

}  // namespace kloop::cli
