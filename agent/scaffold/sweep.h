// Sweeps: a config's `sweep:` block, a matrix over config fields, expanded
// into one run per point. Each key is a field's dotted path (provider,
// provider.model, scaffold, scaffold.feedback, protocol, seed, ...), each
// value the list of values it takes; a point sets one value of every key.
// The point's run is named NAME/<key>=<label>/..., a folder under the
// sweep's own (runs/NAME/), which holds sweep.json listing its runs so that
// `kloop report runs/NAME` shows them side by side.
//
//   sweep:
//     provider.model: [gpt-5, o3]
//     scaffold.feedback: [[compiler], [compiler, correctness], [compiler, correctness, timing, profiler]]
//
// A label is the value itself (lists joined by '+', [] as "none"); a map
// (a whole provider or scaffold block) is labelled by its `label` field
// (removed before use), else its model, else its kind.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "agent/scaffold/run_config.h"

namespace kloop {

struct SweepRun {
  std::string point;  // "model=gpt-5/feedback=compiler"; "" for a config without a sweep
  RunConfig config;   // named NAME/<point>
};

// The runs a config file stands for: one for a plain config, one per point
// of its sweep. Throws std::invalid_argument naming the file, the field
// (sweep.<key>, or the point's own field) and the fix. `overrides` (kloop
// run's --set and --problems) are applied to every run, after its point's
// values; one that sets a field the sweep varies is refused.
std::vector<SweepRun> load_run_configs(const std::string& path, const ConfigOverrides& overrides = {});

// The sweep's folder (RUNS_DIR/NAME) and its list of runs (sweep.json), for
// `kloop report` of the parent folder. Written before the first run starts.
void write_sweep_index(const std::vector<SweepRun>& runs);
// The run folders a sweep folder lists that exist; empty when `dir` holds
// no sweep.json.
std::vector<std::string> sweep_runs(const std::string& dir);

}  // namespace kloop
