#include "agent/cli/resumable_table.h"

#include <filesystem>
#include <fstream>
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
    throw std::invalid_argument(resume + ": not " + what + " (not a JSON array); pass such a file to --resume, or leave "
                                "--resume out");
  }
  for (const auto& row : old) {
    if (row.is_object() && row.contains(key_) && row[key_].is_string() && (!keep || keep(row))) {
      earlier_[row[key_].get<std::string>()] = row;
    }
  }
}

const nlohmann::json* ResumableTable::earlier(const std::string& task) const {
  auto it = earlier_.find(task);
  return it == earlier_.end() ? nullptr : &it->second;
}

void ResumableTable::add(nlohmann::json row) {
  rows_.push_back(std::move(row));
  if (!json_out_.empty()) RunStore::write_text(json_out_, rows_.dump(2) + "\n");
}

}  // namespace kloop::cli
