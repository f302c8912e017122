// Reading the calls.jsonl files of a run's attempt folders.
#include "agent/report/provider_calls.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <system_error>

namespace kloop::report {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kCallsFile = "calls.jsonl";

// Adds one calls.jsonl to `log`; false when the file cannot be opened.
bool read_calls_file(const fs::path& file, ProviderCallLog& log) {
  std::ifstream in(file);
  if (!in) return false;
  std::string line;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const json call = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!call.is_object()) {
      ++log.unreadable_lines;
      continue;
    }
    ++log.calls;
    const auto cls = call.find("error_class");
    if (cls != call.end() && cls->is_string() && !cls->get<std::string>().empty()) {
      ++log.errors_by_class[cls->get<std::string>()];
    }
  }
  return true;
}

}  // namespace

ProviderCallLog read_provider_calls(const std::string& run_dir, const std::vector<std::string>& problems,
                                    const std::set<std::string>& recorded_attempt_dirs) {
  ProviderCallLog log;
  for (const auto& problem : problems) {
    const fs::path base = fs::path(run_dir) / "attempts" / problem;
    std::error_code ec;
    fs::recursive_directory_iterator it(base, fs::directory_options::skip_permission_denied, ec);
    for (const fs::recursive_directory_iterator end; !ec && it != end; it.increment(ec)) {
      std::error_code type_ec;
      if (it->path().filename() != kCallsFile || !it->is_regular_file(type_ec)) continue;
      if (!read_calls_file(it->path(), log)) continue;
      ++log.files;
      const std::string dir =
          "attempts/" + problem + "/" + it->path().parent_path().lexically_relative(base).generic_string();
      if (!recorded_attempt_dirs.count(dir)) ++log.turns_without_record;
    }
  }
  return log;
}

}  // namespace kloop::report
