// A table of one JSON row per task that a long command (kloop baseline,
// kloop audit, kloop problems parity) writes as it goes (--json)
// and a later run continues (--resume): the earlier table's rows are kept
// as they are and their tasks not done again, so a run cut short by a time
// limit loses nothing.
#pragma once

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

namespace kloop::cli {

class ResumableTable {
 public:
  // Rows of `resume` (when it names an existing file) are kept by their
  // `key` field where `keep(row)` says so (all, without `keep`); `what`
  // names the table in errors ("a baseline table written by --json").
  ResumableTable(std::string json_out, const std::string& resume, std::string key, const std::string& what,
                 const std::function<bool(const nlohmann::json&)>& keep = nullptr);

  // The kept row of `task`, or nullptr.
  const nlohmann::json* earlier(const std::string& task) const;

  // Appends a row and rewrites the --json file, if any.
  void add(nlohmann::json row);
  const nlohmann::json& rows() const { return rows_; }

 private:
  std::string json_out_;
  std::string key_;
  std::map<std::string, nlohmann::json> earlier_;
  nlohmann::json rows_ = nlohmann::json::array();
};

}  // namespace kloop::cli
