// ResumableTable: the --json file of a run that continues an earlier table
// (--resume) holds, at every moment it may be cut short, the rows done so
// far and the earlier rows of the tasks not reached yet.
#include "agent/cli/resumable_table.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace kloop::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::vector<std::string> problems_in(const std::string& path) {
  std::vector<std::string> out;
  for (const auto& row : json::parse(std::ifstream(path))) out.push_back(row["problem"]);
  return out;
}

ProblemEntry entry(const std::string& name) { return {"kernelbench", 1, name, ""}; }

// The same file as --resume and --json, as scripts/gpu-check's parity steps
// use it: cut short after its first new row, the run must keep the earlier
// rows of the tasks after it, or the next run does them again.
TEST(ResumableTableTest, ACutShortRunKeepsTheEarlierRowsItHasNotReached) {
  const fs::path dir = fs::temp_directory_path() / ("kloop-resumable-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string table_file = (dir / "table.json").string();
  std::ofstream(table_file) << json::array({{{"problem", "1_A"}, {"status", "match"}},
                                            {{"problem", "3_C"}, {"status", "match"}},
                                            {{"problem", "4_D"}, {"status", "match"}},
                                            {{"problem", "9_Gone"}, {"status", "match"}}})
                                   .dump();
  ResumableTable table(table_file, table_file, "problem", "a test table");
  table.only({entry("1_A"), entry("2_B"), entry("3_C"), entry("4_D")});  // 9_Gone is not in this run
  ASSERT_NE(table.earlier("1_A"), nullptr);
  EXPECT_EQ(table.earlier("2_B"), nullptr);
  EXPECT_EQ(table.earlier("9_Gone"), nullptr);
  table.add(*table.earlier("1_A"));
  table.add({{"problem", "2_B"}, {"status", "mismatch"}});
  // Cut short here.
  EXPECT_EQ(problems_in(table_file), (std::vector<std::string>{"1_A", "2_B", "3_C", "4_D"}));
  table.add(*table.earlier("3_C"));
  table.add(*table.earlier("4_D"));
  EXPECT_EQ(problems_in(table_file), (std::vector<std::string>{"1_A", "2_B", "3_C", "4_D"}));
  EXPECT_EQ(table.rows().size(), 4u);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kloop::cli
