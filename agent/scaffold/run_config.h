// RunConfig: an experiment as a YAML file (configs/*.yaml): which problems,
// which provider and model, which scaffold, which protocol and device.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/llm/provider.h"
#include "agent/prompt/prompt_builder.h"
#include "evaluator/eval_defaults.h"

namespace kloop {

// How attempts are chained (the KernelBench paper's one-shot, best-of-k and
// iterative refinement, with its feedback ablations).
//
// The search scaffolds go in rounds, every attempt of a round made from
// what the earlier rounds found; `samples` is then the attempts per round
// (a round's slots) and `turns` the rounds, so that a run of any scaffold
// has samples x turns attempts per problem, recorded as (sample, turn):
//   beam    round 1: width x expand fresh attempts; each later round keeps
//           the `width` best attempts so far and asks for `expand`
//           refinements of each, with that attempt's own history of
//           answers and feedback (its ancestors').
//   evolve  generation 1: `population` fresh attempts; each later one
//           `population` children, each prompted with `parents` of the best
//           attempts so far (verdicts, timings, code) and asked to combine
//           them (`crossover`) or to improve on one.
// `select` ranks attempts: correct_then_speedup (correct ones by speedup,
// then those that ran, then those that compiled) or speedup (only correct
// ones are kept; missing beam members or parents become fresh attempts).
struct ScaffoldConfig {
  std::string kind = "iterative";  // one_shot | best_of_k | iterative | beam | evolve
  int samples = 1;                 // independent chains per problem (k); a search's attempts per round
  int turns = 1;                   // attempts per chain (T); a search's rounds
  int width = 2;                   // beam: attempts kept per round
  int expand = 2;                  // beam: refinements asked of each
  int population = 4;              // evolve: attempts per generation
  int parents = 2;                 // evolve: candidates shown per prompt
  bool crossover = true;           // evolve: ask to combine the parents (false: improve on one)
  std::string mutate_prompt;       // evolve: the instruction when improving on one ("" = prompts/evolve_mutate.txt)
  std::string select = "correct_then_speedup";
  std::set<FeedbackKind> feedback = {FeedbackKind::kCompiler, FeedbackKind::kCorrectness, FeedbackKind::kTiming,
                                     FeedbackKind::kProfiler};
  std::string context = "full";  // full: whole history; last: the task plus the last (or best) attempt
  bool keep_best = false;        // with context "last": show the best correct attempt, not the latest
  std::optional<double> early_stop_speedup;  // end a chain once a correct attempt reaches this speedup
};

struct ProblemSelection {
  std::string suite;
  std::optional<int> level;
  std::vector<std::string> names;  // empty: everything matching suite and level
  // By level and KernelBench number ("L1:1-20,L2:5"; registry.h:
  // parse_numbered_selection); not together with level or names.
  std::string select;
};

struct RunConfig {
  std::string path;  // the YAML file
  std::string name;
  std::string runs_dir = "runs";
  std::string problems_dir;
  ProblemSelection problems;
  std::string device = "cpu";
  // The evaluation queues, one per device (`devices` in the config): "all"
  // (the default for device cuda: every GPU this process sees, i.e. after
  // CUDA_VISIBLE_DEVICES), a count (the first N; on cpu, N CPU queues side
  // by side), or a list of GPU indices. Resolved by evaluation_devices().
  nlohmann::json devices;  // null: one queue, or every GPU for device cuda
  std::string protocol = "strict";
  // KernelBench's precision (evaluator/protocol.h): fp32, fp16 or bf16.
  std::string precision = "fp32";
  // What the model writes: cpp (kloop's kernel API) or kernelbench_python
  // (KernelBench's Python ModelNew, run by the Python host; docs/kernelbench.md).
  std::string candidate_format = "cpp";
  unsigned long long seed = 1;
  ProviderConfig provider;
  ScaffoldConfig scaffold;
  PromptSettings prompts;
  double eval_timeout_s = kDefaultRunTimeoutSeconds;
  double max_timing_seconds = 0;  // 0: the protocol's budget
  int threads = 0;
  std::string isolation = "strict";  // the candidate's sandbox: strict or weak (evaluator/isolation/sandbox.h)
  bool activity_audit = true;  // GPU: trace the candidate's kernels (false: timings stand unaudited)
  // The baselines each correct attempt's speedup is also reported against
  // (evaluation.baselines; run_baselines.h): eager, eager-tf32,
  // compile-default, compile-reduce-overhead. The protocol's own baseline
  // stays the headline speedup. torch.compile ones compile the upstream
  // task (evaluation.upstream, a KernelBench checkout) with
  // evaluation.python (torch >= 2.0; "" = $KLOOP_PYTHON or python3).
  std::vector<std::string> baselines;
  std::string upstream;
  std::string python;
  // Evaluations made again when the machine, not the candidate, may be at
  // fault (environment_retry.h): a worker that could not start, the
  // reference out of memory beside the candidate, a fork that failed.
  int environment_retries = 2;
  int parallel_chains = 0;  // 0: the provider's concurrency
  int compile_jobs = 0;     // compiles at once; 0: the cores this process may run on
  // The command line's changes to the file (--set FIELD=VALUE, --problems),
  // as given; stored with the config so a run says how it was made.
  std::vector<std::string> overrides;

  // The resolved config as stored in the run folder (no secrets: only the
  // name of the key's environment variable).
  nlohmann::json to_json() const;
};

// The devices a run evaluates on, one queue each ("cuda:0", "cuda:1"; "cpu"
// once per CPU queue). Throws std::invalid_argument naming the config, the
// field and the fix when the machine has fewer GPUs than asked for.
std::vector<std::string> evaluation_devices(const RunConfig& config);

// Loads and checks a config. Relative paths are taken from the config's
// folder. Errors name the file, the field and the fix.
RunConfig load_run_config(const std::string& path);
// The two halves of load_run_config: the YAML file as JSON (a map), and the
// checked config from it (`path` for messages and relative paths).
// (evaluator/problem/yaml_input.h's limits: size, alias expansion, depth;
// `follow_links` false for a file in a folder someone else made.)
nlohmann::json read_config_json(const std::string& path, bool follow_links = true);
RunConfig run_config_from_json(const nlohmann::json& j, const std::string& path);

// What `kloop run` changes in a config file before reading it: `--set
// FIELD=VALUE` (a dotted path into the config, the value read as YAML:
// `scaffold.turns=5`, `provider.model=gpt-5`, `scaffold.feedback=[compiler]`)
// and `--problems SELECTION` (problems.select, replacing the file's level,
// names and select). Applied after a sweep's point, so they win.
struct ConfigOverrides {
  std::vector<std::string> sets;
  std::string problems;
  bool empty() const { return sets.empty() && problems.empty(); }
  // As given on the command line, for the stored config.
  std::vector<std::string> describe() const;
};
// Applies them to a config's JSON. Throws std::invalid_argument naming the
// --set, the field and the fix (no '=', an unknown top-level field, a path
// through a value that is not a map, a value that is not YAML).
void apply_overrides(nlohmann::json& config, const ConfigOverrides& o);
// The dotted fields --set names ("scaffold.turns"), and "problems" for --problems.
std::vector<std::string> overridden_fields(const ConfigOverrides& o);

}  // namespace kloop
