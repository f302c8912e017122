#include "agent/cluster/slurm.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include "agent/store/run_store.h"
#include "base/process.h"

namespace kloop {
namespace {

namespace fs = std::filesystem;

// One word for bash, whatever it holds.
std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.,/:=+@%") ==
                        std::string::npos) {
    return s;
  }
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// An sbatch option value on a #SBATCH line: no newline may end the header,
// and (`one_word`) no blank may start another option on the line (a run
// named "x --hold" held its job).
std::string header_value(const std::string& what, const std::string& v, bool one_word = true) {
  if (v.find_first_of("\n\r") != std::string::npos) {
    throw std::invalid_argument(what + ": '" + v + "' holds a line break; give it on one line");
  }
  if (one_word && v.find_first_of(" \t\v\f") != std::string::npos) {
    throw std::invalid_argument(what + ": '" + v + "' holds a blank, which would start another #SBATCH option; give "
                                "it without one");
  }
  return v;
}

}  // namespace

std::string slurm_job_name(const std::string& run_name) { return "kloop-" + run_name; }

std::string array_ranges(const std::vector<int>& tasks) {
  std::vector<int> t(tasks);
  std::sort(t.begin(), t.end());
  t.erase(std::unique(t.begin(), t.end()), t.end());
  std::string out;
  for (std::size_t i = 0; i < t.size();) {
    std::size_t j = i;
    while (j + 1 < t.size() && t[j + 1] == t[j] + 1) ++j;
    out += (out.empty() ? "" : ",") + std::to_string(t[i]) + (j > i ? "-" + std::to_string(t[j]) : "");
    i = j + 1;
  }
  return out;
}

std::string slurm_script(const SlurmArray& a, const SlurmOptions& o) {
  std::ostringstream s;
  s << "#!/bin/bash\n"
    << "# Written by `kloop run --slurm`: run '" << a.run_name << "' in " << a.shards
    << " shard(s), one array task each, every task writing its own records\n"
    << "# (results.shard-K.jsonl) into the run folder. Submitting with the same command again sends the\n"
    << "# shards with work left; each resumes where it stopped.\n"
    << "#SBATCH --job-name=" << header_value("job name", slurm_job_name(a.run_name)) << "\n"
    << "#SBATCH --array=" << array_ranges(a.tasks) << "\n"
    << "#SBATCH --ntasks=1\n"
    << "#SBATCH --output=" << header_value("run folder", (fs::path(a.run_path) / "slurm" / "shard-%a.log").string(), false)
    << "\n"
    << "#SBATCH --open-mode=append\n"
    << "#SBATCH --requeue\n";
  if (!o.partition.empty()) s << "#SBATCH --partition=" << header_value("--partition", o.partition) << "\n";
  if (!o.time.empty()) s << "#SBATCH --time=" << header_value("--time", o.time) << "\n";
  const int gpus = o.gpus_per_task.value_or(a.cuda ? 1 : 0);
  if (gpus > 0) s << "#SBATCH --gpus-per-task=" << gpus << "\n";
  if (o.cpus_per_task > 0) s << "#SBATCH --cpus-per-task=" << o.cpus_per_task << "\n";
  if (!o.mem.empty()) s << "#SBATCH --mem=" << header_value("--mem", o.mem) << "\n";
  for (const auto& x : o.extra) s << "#SBATCH " << header_value("--sbatch-arg", x, false) << "\n";
  s << "set -euo pipefail\n"
    << "echo \"kloop: array task ${SLURM_ARRAY_TASK_ID} of job ${SLURM_ARRAY_JOB_ID} on $(hostname) "
       "(CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-unset}) at $(date -u +%FT%TZ)\"\n"
    << "exec";
  for (const auto& w : a.command) s << " " << shell_quote(w);
  s << "\n";
  return s.str();
}

std::optional<std::vector<int>> slurm_queued_tasks(const std::string& job_name) {
  // -r: one line per array task, pending ones too.
  const CommandResult r =
      run_process({"squeue", "-h", "-r", "--name=" + job_name, "-o", "%K %T"}, std::chrono::seconds(60));
  if (!r.status.exited || r.status.code != 0) return std::nullopt;
  std::set<int> out;
  std::istringstream lines(r.output);
  std::string task, state;
  while (lines >> task >> state) {
    if (state == "COMPLETED" || state == "FAILED" || state == "CANCELLED" || state == "TIMEOUT") continue;
    try {
      out.insert(std::stoi(task));
    } catch (const std::exception&) {
      // "N/A": not an array task
    }
  }
  return std::vector<int>(out.begin(), out.end());
}

SlurmSubmission submit_slurm_array(const SlurmArray& a, const SlurmOptions& o, bool dry_run) {
  SlurmSubmission sub;
  const fs::path dir = fs::path(a.run_path) / "slurm";
  fs::create_directories(dir);
  sub.script_path = (dir / "kloop.sbatch").string();
  RunStore::write_text(sub.script_path, slurm_script(a, o));
  fs::permissions(sub.script_path, fs::perms::owner_exec | fs::perms::group_exec, fs::perm_options::add);
  if (dry_run) return sub;
  std::vector<std::string> argv = {"sbatch", "--parsable"};
  if (o.wait) argv.push_back("--wait");
  argv.push_back(sub.script_path);
  // With --wait sbatch returns when the last task has: no limit of ours.
  const CommandResult r = run_process(argv, o.wait ? std::chrono::hours(24 * 365) : std::chrono::minutes(5));
  sub.output = r.output;
  sub.exit_code = r.status.exited ? r.status.code : 128 + r.status.signal;
  std::istringstream first(r.output);
  std::string line;
  while (std::getline(first, line)) {
    const std::string id = line.substr(0, line.find(';'));
    if (!id.empty() && id.find_first_not_of("0123456789") == std::string::npos) {
      sub.job_id = id;
      break;
    }
  }
  if (sub.job_id.empty()) {
    throw std::runtime_error("sbatch " + sub.script_path + " failed" +
                             (r.status.exited ? " (exit " + std::to_string(r.status.code) + ")" : "") + ": " +
                             r.output.substr(0, 2000));
  }
  const nlohmann::json entry = {{"job_id", sub.job_id},       {"array", array_ranges(a.tasks)},
                                {"shards", a.shards},         {"script", sub.script_path},
                                {"submitted_at", utc_timestamp()}};
  std::ofstream(dir / "submissions.jsonl", std::ios::app) << entry.dump() << "\n";
  return sub;
}

int shard_index(std::optional<int> given, int count) {
  int index = 0;
  if (given) {
    index = *given;
  } else if (const char* env = std::getenv("SLURM_ARRAY_TASK_ID"); env && *env) {
    try {
      std::size_t used = 0;
      index = std::stoi(env, &used);
      if (env[used] != '\0') throw std::invalid_argument(env);
    } catch (const std::exception&) {
      throw std::invalid_argument(std::string("SLURM_ARRAY_TASK_ID='") + env + "' is not a task number");
    }
  } else {
    throw std::invalid_argument("--shards " + std::to_string(count) +
                                ": which shard? give --shard K (0 to " + std::to_string(count - 1) +
                                "), or run inside a Slurm array task (SLURM_ARRAY_TASK_ID); --slurm submits one");
  }
  if (index < 0 || index >= count) {
    throw std::invalid_argument("shard " + std::to_string(index) + " is not one of the run's " +
                                std::to_string(count) + " shards (0 to " + std::to_string(count - 1) + ")");
  }
  return index;
}

}  // namespace kloop
