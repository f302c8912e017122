// A table of one JSON row per task that a long command (kloop baseline,
// kloop audit, kloop problems parity) writes as it goes (--json)
// and a later run continues (--resume): the earlier table's rows are kept
// as they are and their tasks not done again, so a run cut short by a time
// limit loses nothing. Each write holds the rows added so far, then the
// kept rows not reached yet: --json may name the --resume file itself, and
// a run cut short there must not drop the kept rows after its cut.
#pragma once

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "evaluator/problem/registry.h"

namespace kloop::cli {

class ResumableTable {
 public:
  // Rows of `resume` (when it names an existing file) are kept by their
  // `key` field where `keep(row)` says so (all, without `keep`); `what`
  // names the table in errors ("a baseline table written by --json").
  ResumableTable(std::string json_out, const std::string& resume, std::string key, const std::string& what,
                 const std::function<bool(const nlohmann::json&)>& keep = nullptr);

  // Keeps only the rows of these tasks (this run's selection): the others
  // are neither done nor written.
  void only(const std::vector<ProblemEntry>& tasks);

  // The kept row of `task`, or nullptr.
  const nlohmann::json* earlier(const std::string& task) const;

  // Appends a row (a task's kept row, or a new one for a task without) and
  // rewrites the --json file, if any.
  void add(nlohmann::json row);
  const nlohmann::json& rows() const { return rows_; }

 private:
  std::string json_out_;
  std::string key_;
  std::map<std::string, nlohmann::json> earlier_;
  std::vector<std::string> not_reached_;  // kept rows not added yet, in the earlier table's order
  nlohmann::json rows_ = nlohmann::json::array();
};

}  // namespace kloop::cli
