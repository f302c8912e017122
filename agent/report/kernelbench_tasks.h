// Which kloop task a published KernelBench kernel was written against,
// told by the reference source it came with (or by the file of the
// KernelBench version it was made with), never by its number alone: level
// 1's 50 and 97 and level 3's 32-42 are other tasks in other versions. A
// kloop KernelBench spec records the hash of the upstream file its port
// follows (provenance.reference_hash, evaluator/problem/reference_source.h);
// a reference with another Model is listed with the reason and never judged
// against kloop's task of that number.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "evaluator/problem/registry.h"

namespace kloop::report {

struct IdentifiedTask {
  std::optional<ProblemEntry> task;  // none: skip it, `why` says why
  std::string why;
  std::string note;  // with a task: its version draws inputs otherwise
};

class KernelBenchTasks {
 public:
  // The registry's kernelbench specs and their recorded reference hashes.
  explicit KernelBenchTasks(const ProblemRegistry& registry);

  // kloop's task numbered `number` in `level` when its reference has
  // `reference_source`'s Model; else none, and why.
  IdentifiedTask identify(int level, int number, const std::string& reference_source) const;

  // Every kloop task of these levels: an import's denominator, as
  // KernelBench's analysis counts a whole level (a missing kernel fails).
  std::vector<std::string> whole_levels(const std::vector<int>& levels) const;

 private:
  struct Task {
    ProblemEntry entry;
    int number = 0;
    std::string reference_hash;  // "" when the spec records none
    std::string inputs_hash;
  };
  std::vector<Task> tasks_;
};

// The file of KernelBench version `checkout` (a checkout holding
// KernelBench/levelL/, or the KernelBench folder itself) for task `number`
// of `level`: levelL/NUMBER_*.py; "" when it has none.
std::string kernelbench_version_file(const std::string& checkout, int level, int number);

}  // namespace kloop::report
