// RunStore: the folder of one run (runs/NAME). It holds the resolved config,
// one folder per attempt (prompt, raw response, extracted code, build log,
// verdict, feedback) and results.jsonl, an append-only file with one record
// per (problem, sample, turn). A killed run resumes from it without losing
// or repeating finished attempts.
//
// Each record carries a MAC, and each attempt folder a seal (seal.json: the
// SHA-256 of every file that enters a verdict or a rescore, under a MAC),
// both under the user's run key, which lives outside every run folder
// (RunStore::user_key_path: beside the build cache's key), so code that
// could write a run folder still cannot sign. signing.json in the run names
// the run's own random id, which every MAC covers (a record or a file
// copied from another run does not verify), and the key's id. A record or
// file the run's driver did not write (appended by model-written code, or
// edited) is rejected with a warning. Runs made before records were signed
// have no key: their records load, with one "unverified" warning; runs
// signed with the older key inside the folder (run.key) still verify, with
// a warning that whoever could write the folder could re-sign them; a run
// signed under another user's key (a copied run) loads unverified.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <map>

#include "agent/store/outcome.h"
#include "evaluator/build/integrity.h"

namespace kloop {

// An attempt of a problem, by where it is recorded.
struct AttemptRef {
  int sample = 0;
  int turn = 1;
  bool operator==(const AttemptRef& o) const { return sample == o.sample && turn == o.turn; }
  bool operator<(const AttemptRef& o) const { return turn != o.turn ? turn < o.turn : sample < o.sample; }
};

// One line of results.jsonl.
struct AttemptRecord {
  std::string run;
  std::string problem;
  int level = 0;
  int sample = 0;
  int turn = 1;
  Outcome outcome = Outcome::kRuntimeError;  // stored as "verdict"
  std::optional<double> speedup;
  // Against each baseline the run asks for besides the protocol's
  // (evaluation.baselines): eager, eager-tf32, compile-default, ...
  std::map<std::string, double> speedups;
  std::string message;
  std::string protocol;
  std::string device;  // where it was evaluated: cpu, cuda:N (the run's evaluation queues, one per device)
  int queue = 0;       // which of the run's evaluation queues (several CPU queues share the device name cpu)
  std::string gpu;     // the GPU's model ("NVIDIA H200"), from the verdict; "" on CPU
  std::string model;
  long long input_tokens = 0;
  long long output_tokens = 0;
  long long reasoning_tokens = 0;
  long long cached_input_tokens = 0;  // of input_tokens, read from the provider's prompt cache
  long long cache_write_tokens = 0;   // of input_tokens, written to it
  int provider_attempts = 0;          // HTTP attempts of the call (calls.jsonl has each)
  double cost_usd = 0;
  double llm_seconds = 0;
  double eval_seconds = 0;     // compiling and evaluating the candidate
  double compile_seconds = 0;  // of which compiling (the turn's one build; ~0 when cached)
  double queue_seconds = 0;    // of which waiting for a free device (the evaluation queue)
  bool build_cached = false;   // the evaluation found that build in the cache (it always should)
  std::string finish_reason;
  bool chain_done = false;  // no further turn follows in this chain
  std::string stop_reason;  // "turns", "early_stop" when chain_done
  // What the attempt was made from: the earlier attempts of its problem its
  // prompt showed (a chain's previous turn; a beam member; an evolve child's
  // parents), and how ("fresh", "refine", "mutate", "crossover"). A run's
  // search tree is rebuilt from these.
  std::vector<AttemptRef> parents;
  std::string step;
  std::string attempt_dir;  // relative to the run folder
  std::string timestamp;    // UTC, ISO 8601

  nlohmann::json to_json() const;
  static AttemptRecord from_json(const nlohmann::json& j);
  // The chain stopped here for good (early stop, refusal, context overflow):
  // a run extended to more turns does not go on from it, as it does from a
  // chain that ended on its turn budget.
  bool ends_chain_for_good() const { return chain_done && stop_reason != "turns"; }
};

// A run's lock: runs/NAME/lock names the driver (pid, host, start) under an
// flock held while it lives, so a second driver on the same run refuses,
// naming the holder; a lock left by a driver that died is taken over with a
// note on `notes`. Released (and cleared) on destruction.
//
// A shard's driver (kloop run --shards N, one Slurm array task) holds `lock`
// shared and lock.shard-K exclusively: the shards of a run go on side by
// side, each shard has one driver, and a driver of the whole run waits for
// none of them (it refuses while any shard runs).
class RunLock {
 public:
  RunLock(const std::string& run_path, std::ostream& notes, std::optional<int> shard = std::nullopt);
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

  // Whether a driver holds shard K's lock now (false when none does, or the
  // run has no such lock file).
  static bool shard_running(const std::string& run_path, int shard);

 private:
  std::string path_;
  int fd_ = -1;
  int run_fd_ = -1;  // `lock`, held shared by a shard's driver
};

// What is wrong with `name` as a run's name, or "" when nothing is: a
// run's name becomes a folder under runs_dir, a Slurm job name on a
// #SBATCH line and a word of a job script, so it is plain data: parts of
// letters, digits and . _ - + = (a sweep's runs join parts with '/'), none
// of them "." or "..", at most 200 characters.
std::string run_name_problem(const std::string& name);

class RunStore {
 public:
  // Creates runs_dir/name when missing.
  RunStore(const std::string& runs_dir, const std::string& name);

  const std::string& path() const { return path_; }
  const std::string& name() const { return name_; }

  // Stores the resolved config (and makes the run's key when the run is
  // new). When the run already has one whose `identity` fields (top-level
  // names or dotted paths such as "scaffold.kind") differ, throws
  // std::runtime_error listing every one that does: resuming a run with
  // another model, prompt or protocol would mix results. A field the stored
  // config lacks (an older kloop's) is not compared.
  void write_config(const nlohmann::json& resolved, const std::vector<std::string>& identity_fields);
  // What write_config would refuse, in its words; "" when it would not.
  std::string config_conflict(const nlohmann::json& resolved, const std::vector<std::string>& identity_fields) const;

  // Every complete record; a torn last line (the run was killed mid-write)
  // is skipped. Later duplicates of a (problem, sample, turn) are dropped.
  // Records whose MAC is missing or wrong are dropped with one warning on
  // stderr naming the file and how many; without a run key (a run made
  // before records were signed) records load with an "unverified" warning.
  // `file` is results.jsonl, or another record file of the run in the same
  // format (rescore-<protocol>.jsonl, written by `kloop rescore`). The
  // records of `file` include its shards' (results.shard-K.jsonl beside
  // results.jsonl: one file per shard, so no two nodes append to one file).
  std::vector<AttemptRecord> load_results(const std::string& file = kResultsFile) const;
  // The files load_results(file) reads that exist: `file` and its shards'.
  std::vector<std::string> record_files(const std::string& file = kResultsFile) const;

  // A run split into shards keeps their number (shards.json): a problem's
  // shard depends on it. Records `count` when the run has none; throws
  // std::runtime_error naming the file and the count to use when it has
  // another.
  void check_shard_count(int count);
  // The recorded number of shards; nullopt for a run never split.
  std::optional<int> shard_count() const;

  // This driver runs shard `index` of the run: its records go to
  // results.shard-<index>.jsonl (and rescore files' likewise).
  void set_shard(int index) { shard_ = index; }
  std::optional<int> shard() const { return shard_; }
  // The file a record of `file` goes to from shard `index`.
  static std::string shard_file(const std::string& file, int index);

  // runs/NAME/attempts/<problem>/sample<k>/turn<t>, created on demand.
  std::string attempt_dir(const std::string& problem, int sample, int turn) const;
  std::string relative_attempt_dir(const std::string& problem, int sample, int turn) const;
  static void write_text(const std::string& path, const std::string& text);

  // The folder a record's attempt_dir names, checked to stay inside the
  // run: relative, no "." or ".." part, no link on the way (a record is
  // data, and rescore compiles and writes where it points). Throws
  // std::runtime_error naming the run and the path otherwise.
  std::string attempt_path(const std::string& relative) const;
  // Seals the files `names` of the folder `relative` ("" = the run's own
  // folder) that exist: their digests under the run key, bound to the run
  // and the folder, in RELATIVE/seal.json (replacing an earlier seal's
  // entries of the same names).
  void seal_files(const std::string& relative, const std::vector<std::string>& names) const;
  // The bytes of `name` in folder `relative`, as sealed. Throws
  // std::runtime_error naming the file when the run is signed and the file
  // is missing from the seal, differs from it, or the seal does not verify;
  // a run that cannot be verified here (no key, another user's) gives the
  // bytes with one "unverified" warning. At most `max_bytes`.
  std::string read_sealed(const std::string& relative, const std::string& name, uint64_t max_bytes = 256ull << 20) const;

  // Whether this run's records and sealed files can be verified here (a run
  // signed with the user's key; not an unsigned, run.key or another user's).
  bool verifiable() const;

  // Where the user's run key lives: $KLOOP_RUN_KEY, else run-records.key in
  // the build cache's folder ($KLOOP_CACHE_DIR, ~/.cache/kloop).
  static std::string user_key_path();

  // Appends one record durably (O_APPEND, fsync) to `file`, signed with the
  // run's key (made here when the run has no record yet). Thread-safe.
  void append(const AttemptRecord& record, const std::string& file = kResultsFile);

  // The same for any JSON object (the stage records, stages.jsonl): one
  // signed line, durably, in this driver's shard's file. Thread-safe.
  void append_line(const nlohmann::json& line, const std::string& file);
  // Every whole, signed line of `file` and its shards', in file order,
  // without its "mac" and with "_file" and "_line" saying where it was
  // read; lines whose MAC is missing or wrong are dropped with one
  // warning, as load_results drops records.
  std::vector<nlohmann::json> load_lines(const std::string& file) const;

  static constexpr const char* kResultsFile = "results.jsonl";
  static constexpr const char* kSigningFile = "signing.json";
  static constexpr const char* kSealFile = "seal.json";
  // The key older kloops kept inside the run folder (still read, never made).
  static constexpr const char* kStagesFile = "stages.jsonl";
  static constexpr const char* kKeyFile = "run.key";

 private:
  // How this run's records and files are signed.
  struct Signing {
    std::optional<IntegrityKey> key;  // none: unverifiable here (see `unverified`)
    std::string run_id;               // "" for a run.key run (format 1)
    std::string unverified;           // why nothing can be verified, when key is none
  };
  // Made (signing.json) when `create` and the run has no record yet.
  Signing signing(bool create) const;
  bool has_records() const;

  std::string path_;
  std::string name_;
  std::optional<int> shard_;
  std::mutex mutex_;
};

std::string utc_timestamp();

}  // namespace kloop
