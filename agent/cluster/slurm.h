// Slurm job arrays for a sharded run: `kloop run CONFIG --slurm` writes an
// sbatch script with one array task per shard, each running `kloop run
// CONFIG --shards N` into the same run folder on a shared filesystem (the
// task's shard is SLURM_ARRAY_TASK_ID, its GPUs CUDA_VISIBLE_DEVICES, both
// as Slurm sets them), and submits it with sbatch. Submitting again sends
// only the shards with work left that Slurm does not already hold.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace kloop {

struct SlurmOptions {
  std::string partition;
  std::string time;               // --time, e.g. 04:00:00
  std::optional<int> gpus_per_task;  // default: 1 for a CUDA run, none on cpu
  int cpus_per_task = 0;          // 0: Slurm's default
  std::string mem;                // --mem, e.g. 64G
  std::vector<std::string> extra;  // more sbatch options, as given (e.g. --account=abc)
  bool wait = false;              // sbatch --wait: return when every task has ended
};

struct SlurmArray {
  std::string run_path;    // the run folder (absolute)
  std::string run_name;
  int shards = 1;          // N of `--shards N`
  std::vector<int> tasks;  // the array's task ids: the shards to run
  std::vector<std::string> command;  // the kloop run command of every task
  bool cuda = false;
};

// "0-3,5,7-9".
std::string array_ranges(const std::vector<int>& tasks);
// The sbatch script's text (written to RUN/slurm/kloop.sbatch).
std::string slurm_script(const SlurmArray& array, const SlurmOptions& options);
// The array tasks Slurm holds (pending, running, requeued) under this job
// name, from squeue; nullopt when squeue cannot be asked.
std::optional<std::vector<int>> slurm_queued_tasks(const std::string& job_name);
std::string slurm_job_name(const std::string& run_name);

struct SlurmSubmission {
  std::string script_path;
  std::string job_id;
  int exit_code = 0;  // sbatch's (with --wait: the highest of the tasks')
  std::string output;
};
// Writes the script under RUN/slurm/ and, unless `dry_run`, submits it;
// each submission is appended to RUN/slurm/submissions.jsonl. Throws
// std::runtime_error with sbatch's words when it refuses.
SlurmSubmission submit_slurm_array(const SlurmArray& array, const SlurmOptions& options, bool dry_run);

// The shard this process runs under `--shards count`: `given` when set,
// else SLURM_ARRAY_TASK_ID. Throws std::invalid_argument naming the fix.
int shard_index(std::optional<int> given, int count);

}  // namespace kloop
