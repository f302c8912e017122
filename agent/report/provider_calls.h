// The provider's HTTP calls of a run as its calls.jsonl files hold them (one
// file per turn folder, one line per HTTP attempt, failed ones included):
// errors by class, and the turns whose call failed before a record was made.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

namespace kloop::report {

struct ProviderCallLog {
  int files = 0;                               // calls.jsonl files read
  int calls = 0;                               // their readable lines: one HTTP attempt each
  int unreadable_lines = 0;                    // lines that are not a JSON object (a torn write, an edit)
  std::map<std::string, int> errors_by_class;  // calls with an error_class: transient, quota, ...
  // Turn folders with a calls.jsonl but no record: the call failed for good
  // and the chain stopped there (kloop run CONFIG resumes it).
  int turns_without_record = 0;
};

// Reads RUN/attempts/PROBLEM/**/calls.jsonl for each of `problems`.
// `recorded_attempt_dirs` are the run's records' attempt_dir values
// ("attempts/19_ReLU/sample0/turn1"). Never throws: a file or folder that
// cannot be read is skipped, a line that does not parse is counted.
ProviderCallLog read_provider_calls(const std::string& run_dir, const std::vector<std::string>& problems,
                                    const std::set<std::string>& recorded_attempt_dirs);

}  // namespace kloop::report
