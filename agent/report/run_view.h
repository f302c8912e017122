// RunView: one run under one protocol, loaded from its folder for a report.
// The selection in config.json is the denominator; the records come from
// results.jsonl (the run's own protocol) or rescore-<protocol>.jsonl
// (written by `kloop rescore`); each attempt carries its files' paths.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "agent/report/metrics.h"
#include "agent/report/provider_calls.h"
#include "agent/scaffold/stage_journal.h"
#include "evaluator/problem/registry.h"
#include "evaluator/protocol.h"

namespace kloop::report {

struct RunView {
  std::string run_name;
  std::string run_dir;
  std::string protocol;
  std::string results_file;  // relative to run_dir
  std::vector<std::string> record_files;  // what was read: results_file and its shards' (results.shard-K.jsonl)
  std::string verdict_root;  // where this view's verdict.json files are, relative to run_dir ("" = the attempt folders)
  bool rescored = false;     // results of `kloop rescore`, not of the run itself
  std::string model;         // "openai:gpt-5"
  std::string scaffold;      // "iterative, 1 sample x 3 turns"
  std::string scaffold_kind;  // one_shot, best_of_k, iterative, beam, evolve
  std::string device;
  std::vector<std::string> baselines;  // evaluation.baselines: asked for besides the protocol's own
  int turns = 1;
  int samples = 1;
  std::vector<SelectedProblem> problems;  // the denominator
  std::vector<std::string> excluded;      // selected, but degenerate tasks this protocol skips (spec's excluded_from)
  std::vector<Attempt> attempts;
  // Chains (problem, sample) of the selection the run has not finished (its
  // own results.jsonl): the report is then of a run still under way or
  // stopped early, and says so.
  int chains = 0;
  int unfinished_chains = 0;
  // A rescore view: the run's own attempts (in the selection) it has no
  // record for: the run was resumed after the rescore, or the rescore
  // stopped part way; the report says so.
  int attempts_not_rescored = 0;
  // Every HTTP call of the selection's attempt folders (calls.jsonl): the
  // run's generations, whichever protocol the view scores them under.
  ProviderCallLog provider_calls;
  TokenPriceTable prices;  // the run's provider.prices, for what the cache saved
  // The run's ledger of provider calls (stages.jsonl): the provider's bill,
  // every call counted once, resends and broken streams included, and the
  // transport faults apart from the model's outcomes. Not read for runs
  // made before kloop kept one.
  RunLedger ledger;

  std::string label() const;  // "demo [strict]"
};

// Labels that tell the views apart where space is short (legends, table
// rows): each label without the run names' shared prefix up to a '/' (a
// sweep's NAME/), so that the sweep's points read "scaffold=one_shot
// [strict]", ...; numbered "#1 ..." when they would still collide. Every
// label differs from every other; one view keeps its whole label.
std::vector<std::string> distinct_labels(const std::vector<RunView>& views);
// The shared prefix distinct_labels() leaves out ("" when none).
std::string shared_label_prefix(const std::vector<RunView>& views);

// Where a report's attempts were evaluated: "cuda:1 (NVIDIA H200)" with how
// many; several GPU models in one report are said, since their timings do
// not compare.
struct DeviceUse {
  std::string device;
  std::string gpu;  // "" on CPU
  int attempts = 0;
};
std::vector<DeviceUse> device_use(const RunView& v);
// The GPU models of these views' attempts, each once.
std::vector<std::string> gpu_models(const std::vector<RunView>& views);

// Where `kloop rescore --protocol P` writes: records, and verdicts under
// rescore-<P>/attempts/... mirroring the attempt folders.
std::string rescore_results_file(const std::string& protocol);
std::string rescore_verdict_root(const std::string& protocol);

// The run's config.json; throws std::runtime_error naming the file and the
// fix when `run_dir` is not a run folder.
nlohmann::json load_run_config_json(const std::string& run_dir);

// The problems a run config selects (config.json's `problems`), levels from
// the registry. Without a registry (null) a selection by names takes levels
// from the records; a selection by suite and level needs the registry and
// throws naming `where` otherwise.
std::vector<SelectedProblem> selected_problems(const nlohmann::json& config, const ProblemRegistry* registry,
                                               const std::vector<AttemptRecord>& records, const std::string& where);

// The protocols a run has results for: its own first, then each rescore.
std::vector<std::string> run_protocols(const std::string& run_dir);

// excluded_by_protocol (evaluator/protocol.h) says which tasks a protocol leaves out.

// Loads a run under `protocol` ("" = the run's own). Problems the protocol
// excludes leave the denominator (needs the registry). Throws
// std::runtime_error naming the missing file and the command that writes it.
RunView load_run_view(const std::string& run_dir, const std::string& protocol, const ProblemRegistry* registry);

}  // namespace kloop::report
