// kloop rescore RUN --protocol P: a run's stored candidates evaluated again
// under another protocol, without calling any LLM; resumable.
#include <iostream>
#include <memory>

#include "agent/cli/commands.h"
#include "agent/report/rescore.h"

namespace kloop::cli {

Runner add_rescore_command(CLI::App& app, const GlobalOptions& global) {
  struct State {
    std::string run;
    std::string protocol;
    double max_timing_s = 0;
    double timeout_s = 0;
    int threads = -1;
  };
  auto st = std::make_shared<State>();
  app.add_option("run", st->run, "the run folder, e.g. runs/demo")->required()->check(CLI::ExistingDirectory);
  app.add_option("--protocol", st->protocol, protocol_choices() + " (not the run's own)")->required();
  app.add_option("--max-timing-seconds", st->max_timing_s, "cap on timing per candidate (default: the run's setting)");
  app.add_option("--timeout", st->timeout_s, "seconds per worker command (default: the run's setting)");
  app.add_option("--threads", st->threads, "intra-op threads (default: the run's setting)");
  return [st, &global]() {
    report::RescoreOptions o;
    o.protocol = st->protocol;  // as spelt: rescore-kernelbench.jsonl stays where older runs have it
    o.problems_dir = global.problems_dir;
    if (st->max_timing_s > 0) o.max_timing_seconds = st->max_timing_s;
    if (st->timeout_s > 0) o.timeout_s = st->timeout_s;
    if (st->threads >= 0) o.threads = st->threads;
    report::RescoreSummary s = report::rescore_run(st->run, o, std::cerr);
    std::cout << report::format_rescore_summary(s, st->run, st->protocol);
    return s.errors.empty() ? 0 : 1;
  };
}

}  // namespace kloop::cli
