#include "agent/cli/resumable_table.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>

#include "agent/store/run_store.h"

namespace kloop::cli {

ResumableTable::ResumableTable(std::string json_out, const std::string& resume, std::string key,
                               const std::string& what, const std::function<bool(const nlohmann::json&)>& keep)
    : json_out_(std::move(json_out)), key_(std::move(key)) {
  if (resume.empty() || !std::filesystem::exists(resume)) return;
  nlohmann::json old;
  try {
    old = nlohmann::json::parse(std::ifstream(resume));
  } catch (const std::exception& e) {
    throw std::invalid_argument(resume + ": not " + what + " (" + e.what() +
                                "); pass such a file to --resume, or leave --resume out");
  }
  if (!old.is_array()) {
    throw std::invalid_argument(resume + ": not " + what +
                                " (not a JSON array); pass such a file to --resume, or leave "
                                "--resume out");
  }
  for (const auto& row : old) {
    if (row.is_object() && row.contains(key_) && row[key_].is_string() && (!keep || keep(row))) {
      const std::string task = row[key_].get<std::string>();
      if (!earlier_.count(task)) not_reached_.push_back(task);
      earlier_[task] = row;
    }
  }
}

void ResumableTable::only(const std::vector<ProblemEntry>& tasks) {
  std::set<std::string> wanted;
  for (const ProblemEntry& e : tasks) wanted.insert(e.name);
  std::vector<std::string> order;
  for (const std::string& task : not_reached_) {
    if (wanted.count(task)) {
      order.push_back(task);
    } else {
      earlier_.erase(task);
    }
  }
  not_reached_ = std::move(order);
}

const nlohmann::json* ResumableTable::earlier(const std::string& task) const {
  auto it = earlier_.find(task);
  return it == earlier_.end() ? nullptr : &it->second;
}

void ResumableTable::add(nlohmann::json row) {
  if (row.is_object() && row.contains(key_) && row[key_].is_string()) {
    not_reached_.erase(std::remove(not_reached_.begin(), not_reached_.end(), row[key_].get<std::string>()),
                       not_reached_.end());
  }
  rows_.push_back(std::move(row));
  if (json_out_.empty()) return;
  nlohmann::json file = rows_;
  for (const std::string& task : not_reached_) file.push_back(earlier_.at(task));
  RunStore::write_text(json_out_, file.dump(2) + "\n");
}

}  // namespace kloop::cli
