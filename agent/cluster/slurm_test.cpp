#include "agent/cluster/slurm.h"

#include <gtest/gtest.h>
#include <stdlib.h>

namespace kloop {
namespace {

TEST(SlurmTest, ArrayRangesAreCompact) {
  EXPECT_EQ(array_ranges({0, 1, 2, 3}), "0-3");
  EXPECT_EQ(array_ranges({5, 0, 2, 3, 9, 8, 7}), "0,2-3,5,7-9");
  EXPECT_EQ(array_ranges({4}), "4");
  EXPECT_EQ(array_ranges({1, 1, 2}), "1-2");
}

TEST(SlurmTest, TheScriptRunsTheShardCommandWithEveryWordQuoted) {
  SlurmArray a;
  a.run_path = "/shared/runs/exp one";
  a.run_name = "exp";
  a.shards = 4;
  a.tasks = {1, 3};
  a.command = {"/opt/kloop/bin/kloop", "run", "/shared/cfg's.yaml", "--shards", "4"};
  a.cuda = true;
  SlurmOptions o;
  o.partition = "gpu";
  o.time = "04:00:00";
  o.extra = {"--account=abc"};
  const std::string s = slurm_script(a, o);
  EXPECT_NE(s.find("#SBATCH --array=1,3\n"), std::string::npos) << s;
  EXPECT_NE(s.find("#SBATCH --job-name=kloop-exp\n"), std::string::npos) << s;
  EXPECT_NE(s.find("#SBATCH --partition=gpu\n"), std::string::npos) << s;
  EXPECT_NE(s.find("#SBATCH --time=04:00:00\n"), std::string::npos) << s;
  EXPECT_NE(s.find("#SBATCH --gpus-per-task=1\n"), std::string::npos) << "a CUDA run gets a GPU per task:\n" << s;
  EXPECT_NE(s.find("#SBATCH --account=abc\n"), std::string::npos) << s;
  EXPECT_NE(s.find("#SBATCH --requeue\n"), std::string::npos) << s;
  EXPECT_NE(s.find("--output=/shared/runs/exp one/slurm/shard-%a.log"), std::string::npos) << s;
  EXPECT_NE(s.find("exec /opt/kloop/bin/kloop run '/shared/cfg'\\''s.yaml' --shards 4\n"), std::string::npos) << s;
  a.cuda = false;
  EXPECT_EQ(slurm_script(a, o).find("--gpus-per-task"), std::string::npos) << "no GPU for a CPU run";
  o.time = "1:00\n#SBATCH --uid=0";
  EXPECT_THROW(slurm_script(a, o), std::invalid_argument) << "a value cannot add a header line";
  // Attack (issue 48): a run named "x --hold" once held its job; a blank in
  // a one-word value would start another option on its #SBATCH line.
  o.time = "04:00:00";
  a.run_name = "x --hold";
  EXPECT_THROW(slurm_script(a, o), std::invalid_argument) << "a blank in the job name";
  a.run_name = "exp";
  o.partition = "gpu --hold";
  EXPECT_THROW(slurm_script(a, o), std::invalid_argument) << "a blank in the partition";
}

TEST(SlurmTest, TheShardComesFromTheFlagOrFromSlurm) {
  unsetenv("SLURM_ARRAY_TASK_ID");
  EXPECT_EQ(shard_index(2, 4), 2);
  EXPECT_THROW(shard_index(std::nullopt, 4), std::invalid_argument);
  EXPECT_THROW(shard_index(4, 4), std::invalid_argument);
  setenv("SLURM_ARRAY_TASK_ID", "3", 1);
  EXPECT_EQ(shard_index(std::nullopt, 4), 3);
  EXPECT_EQ(shard_index(1, 4), 1) << "the flag wins";
  setenv("SLURM_ARRAY_TASK_ID", "7", 1);
  EXPECT_THROW(shard_index(std::nullopt, 4), std::invalid_argument);
  setenv("SLURM_ARRAY_TASK_ID", "x", 1);
  EXPECT_THROW(shard_index(std::nullopt, 4), std::invalid_argument);
  unsetenv("SLURM_ARRAY_TASK_ID");
}

}  // namespace
}  // namespace kloop
