// The command-line habits of a KernelBench user (issue 53), through the
// kloop binary as a user runs it: `--set FIELD=VALUE` and `--problems
// L1:1-20,...` for `kloop run`, `problems list` within 100 columns with
// excluded tasks marked and an error on an empty selection, every changed
// field named when a resume is refused, a sweep's totals in `--check`, the
// pointer to `kloop report` at the end of a run and what Ctrl-C kept. The
// model is a replayed transcript that answers without code, so no candidate
// is built and each run takes about a second.
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "evaluator/problem/registry.h"
#include "tests/support/shell.h"

namespace kloop {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using test::shell;

class CliHabitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kloop-habits-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream t(dir_ / "t.jsonl");
    for (const char* p : {"19_ReLU", "20_LeakyReLU", "21_Sigmoid"}) {
      for (int turn = 1; turn <= 3; ++turn) {
        t << json{{"problem", p}, {"sample", 0}, {"turn", turn}, {"response", "No code today."}}.dump() << "\n";
      }
    }
  }
  void TearDown() override { fs::remove_all(dir_); }

  void write(const std::string& name, const std::string& yaml) { std::ofstream(dir_ / name) << yaml; }
  // kloop with `args`, in the test's folder; stdout and stderr together.
  test::ShellResult kloop(const std::string& args, const std::string& env = "") {
    return shell("cd " + dir_.string() + " && " + env + " " + KLOOP_TEST_BINARY + " " + args + " 2>&1");
  }
  json stored_config(const std::string& run) {
    std::ifstream in(dir_ / "runs" / run / "config.json");
    return json::parse(in);
  }

  fs::path dir_;
};

const char* kConfig =
    "name: habits\nruns_dir: runs\nproblems: {suite: kernelbench, names: [19_ReLU]}\ndevice: cpu\n"
    "provider: {kind: replay, model: r, transcript: t.jsonl}\nscaffold: {kind: iterative, turns: 2}\n"
    "evaluation: {timeout_s: 30}\n";

TEST_F(CliHabitsTest, SetChangesFieldsAndTheRunRecordsThem) {
  write("c.yaml", kConfig);
  const auto r = kloop("run c.yaml --set scaffold.kind=one_shot --set scaffold.turns=1 --set seed=7");
  ASSERT_EQ(r.code, 0) << r.output;
  const json c = stored_config("habits");
  EXPECT_EQ(c["scaffold"]["kind"], "one_shot");
  EXPECT_EQ(c["seed"], 7);
  EXPECT_EQ(c["overrides"], json::array({"--set scaffold.kind=one_shot", "--set scaffold.turns=1", "--set seed=7"}));
  // One turn made, not the file's two; the summary points at the report.
  EXPECT_NE(r.output.find("1 attempt(s) run now"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("`kloop report runs/habits`"), std::string::npos) << r.output;
}

TEST_F(CliHabitsTest, ABadSetNamesTheFieldAndTheFix) {
  write("c.yaml", kConfig);
  const auto unknown = kloop("run c.yaml --set scaffold.turnz=5 --check --no-provider-check");
  EXPECT_EQ(unknown.code, 2) << unknown.output;
  EXPECT_NE(unknown.output.find("field 'scaffold.turnz': unknown field"), std::string::npos) << unknown.output;
  EXPECT_NE(unknown.output.find("(set on the command line: --set scaffold.turnz)"), std::string::npos) << unknown.output;
  const auto top = kloop("run c.yaml --set turns=5 --check --no-provider-check");
  EXPECT_EQ(top.code, 2) << top.output;
  EXPECT_NE(top.output.find("--set turns=5: field 'turns' is not a field of a run config"), std::string::npos)
      << top.output;
  const auto no_value = kloop("run c.yaml --set seed --check --no-provider-check");
  EXPECT_EQ(no_value.code, 2) << no_value.output;
  EXPECT_NE(no_value.output.find("--set seed: expected FIELD=VALUE"), std::string::npos) << no_value.output;
  const auto through = kloop("run c.yaml --set scaffold.kind.x=1 --check --no-provider-check");
  EXPECT_EQ(through.code, 2) << through.output;
  EXPECT_NE(through.output.find("field 'scaffold.kind' is \"iterative\", not a map"), std::string::npos)
      << through.output;
  const auto wrong_type = kloop("run c.yaml --set scaffold.turns=two --check --no-provider-check");
  EXPECT_EQ(wrong_type.code, 2) << wrong_type.output;
  EXPECT_NE(wrong_type.output.find("field 'scaffold.turns'"), std::string::npos) << wrong_type.output;
  EXPECT_NE(wrong_type.output.find("--set scaffold.turns"), std::string::npos) << wrong_type.output;
  EXPECT_FALSE(fs::exists(dir_ / "runs")) << "nothing was run";
}

TEST_F(CliHabitsTest, ProblemsPicksByLevelAndNumber) {
  write("c.yaml", kConfig);
  const auto r = kloop("run c.yaml --problems 'L1:19-20,21' --check --no-provider-check");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("problems: 3 (19_ReLU, 20_LeakyReLU, 21_Sigmoid)"), std::string::npos) << r.output;

  const auto none = kloop("run c.yaml --problems L1:900-910 --check --no-provider-check");
  EXPECT_EQ(none.code, 2) << none.output;
  EXPECT_NE(none.output.find("L1:900-910 picks no problem"), std::string::npos) << none.output;
  EXPECT_NE(none.output.find("holds numbers 1 to 100"), std::string::npos) << none.output;
  const auto no_level = kloop("run c.yaml --problems 19 --check --no-provider-check");
  EXPECT_EQ(no_level.code, 2) << no_level.output;
  EXPECT_NE(no_level.output.find("'19' has no level before it"), std::string::npos) << no_level.output;
  EXPECT_NE(no_level.output.find("kloop --problems DIR run"), std::string::npos) << "a folder given here" << no_level.output;

  // Run and stored: the selection is the report's denominator.
  const auto run = kloop("run c.yaml --problems L1:20 --set scaffold.kind=one_shot --set scaffold.turns=1");
  ASSERT_EQ(run.code, 0) << run.output;
  const json c = stored_config("habits");
  EXPECT_EQ(c["problems"]["select"], "L1:20");
  EXPECT_TRUE(c["problems"]["names"].empty()) << c["problems"];
  const auto report = kloop("report runs/habits --format markdown --bootstrap 0");
  ASSERT_EQ(report.code, 0) << report.output;
  EXPECT_NE(report.output.find("20_LeakyReLU"), std::string::npos) << report.output;
  EXPECT_EQ(report.output.find("19_ReLU"), std::string::npos) << report.output;
}

TEST(NumberedSelectionTest, ParsesLevelsRangesAndContinuations) {
  const auto parts = parse_numbered_selection("L1:1-20,L2:5,7-9,l3");
  ASSERT_EQ(parts.size(), 4u);
  EXPECT_EQ(parts[0].level, 1);
  EXPECT_EQ(parts[0].lo, 1);
  EXPECT_EQ(parts[0].hi, 20);
  EXPECT_EQ(parts[1].level, 2);
  EXPECT_EQ(parts[1].lo, 5);
  EXPECT_EQ(parts[2].level, 2);
  EXPECT_EQ(parts[2].hi, 9);
  EXPECT_EQ(parts[3].level, 3);
  EXPECT_EQ(parts[3].lo, 0);
  for (const char* bad : {"", "L1:", "L1:5-2", "L0", "Lx:1", "1-3", "L1:,", "L1:1-2-3", "L1:0"}) {
    EXPECT_THROW(parse_numbered_selection(bad), std::invalid_argument) << bad;
  }
  const ProblemRegistry reg(KLOOP_TEST_PROBLEMS);
  const auto picked = reg.select_numbered("L1:19,21,L2:1", "kernelbench");
  ASSERT_EQ(picked.size(), 3u);
  EXPECT_EQ(picked[0].name, "19_ReLU");
  EXPECT_EQ(picked[1].name, "21_Sigmoid");
  EXPECT_EQ(picked[2].level, 2);
  EXPECT_EQ(reg.select_numbered("L1", "").size(), reg.list("", 1).size());
}

TEST_F(CliHabitsTest, ProblemsListFitsMarksExclusionsAndRefusesAnEmptySelection) {
  const auto r = kloop("problems list --level 1");
  ASSERT_EQ(r.code, 0) << r.output;
  std::istringstream lines(r.output);
  std::string line, softmax;
  int rows = 0;
  while (std::getline(lines, line)) {
    EXPECT_LE(line.size(), 100u) << line;
    if (line.find("23_Softmax") != std::string::npos) softmax = line;
    ++rows;
  }
  EXPECT_GT(rows, 100);
  EXPECT_NE(softmax.find(" verified "), std::string::npos) << "excluded from verified: " << softmax;
  EXPECT_NE(r.output.find("excluded from a protocol"), std::string::npos) << r.output;

  // Exclusions are per precision (the specs' precisions: blocks, from the
  // audit in fp16 and bf16): 100_HingeLoss's loss barely moves at 1e-2,
  // 4_Matrix_vector_multiplication_'s bf16 reference is a constant, and
  // its fp16 one at upstream size (the GPU audit).
  auto row = [](const std::string& out, const std::string& name) {
    const auto at = out.find(" " + name + " ");
    return at == std::string::npos ? std::string() : out.substr(at, out.find('\n', at) - at);
  };
  EXPECT_NE(row(r.output, "100_HingeLoss").find(" (fp16,bf16) "), std::string::npos) << row(r.output, "100_HingeLoss");
  EXPECT_NE(row(r.output, "4_Matrix_vector_multiplication_").find(" (fp16,bf16) "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\n3 more excluded only at the precisions in parentheses"), std::string::npos) << r.output;
  const auto bf16 = kloop("problems list --level 1 --precision bf16");
  ASSERT_EQ(bf16.code, 0) << bf16.output;
  for (const char* name : {"100_HingeLoss", "4_Matrix_vector_multiplication_", "94_MSELoss"}) {
    EXPECT_NE(row(bf16.output, name).find(" verified,strict "), std::string::npos) << row(bf16.output, name);
  }
  EXPECT_NE(bf16.output.find("9 excluded from a protocol at bf16"), std::string::npos) << bf16.output;
  const auto fp16 = kloop("problems list --level 1 --precision fp16 --json");
  ASSERT_EQ(fp16.code, 0) << fp16.output;
  for (const auto& j : nlohmann::json::parse(fp16.output)) {
    if (j["name"] == "100_HingeLoss") {
      EXPECT_EQ(j["excluded_from"].size(), 2u) << j.dump();
    }
    if (j["name"] == "4_Matrix_vector_multiplication_") {
      EXPECT_EQ(j["excluded_from"].size(), 2u) << j.dump();
      EXPECT_EQ(j["excluded_from_by_precision"]["bf16"].size(), 2u) << j.dump();
    }
    if (j["name"] == "19_ReLU") {
      EXPECT_TRUE(j["excluded_from"].empty()) << j.dump();
    }
  }
  EXPECT_EQ(kloop("problems list --precision fp8").code, 2);

  const auto some = kloop("problems list --problems 'L1:19-21'");
  ASSERT_EQ(some.code, 0) << some.output;
  EXPECT_NE(some.output.find("3 problem(s)"), std::string::npos) << some.output;
  const auto empty = kloop("problems list --suite nope");
  EXPECT_EQ(empty.code, 2) << empty.output;
  EXPECT_NE(empty.output.find("no problem matches suite 'nope'"), std::string::npos) << empty.output;
}

TEST_F(CliHabitsTest, ARefusedResumeNamesEveryChangedField) {
  write("c.yaml", kConfig);
  ASSERT_EQ(kloop("run c.yaml --set scaffold.turns=1").code, 0);
  const auto r = kloop("run c.yaml --set scaffold.turns=1 --set seed=9 --set protocol=verified --set scaffold.context=last");
  EXPECT_EQ(r.code, 2) << r.output;
  for (const char* field : {"'protocol' (\"strict\" vs \"verified\")", "'seed' (1 vs 9)", "'scaffold.context'"}) {
    EXPECT_NE(r.output.find(field), std::string::npos) << field << " in " << r.output;
  }
  // --check says the same before anything is sent.
  const auto check = kloop("run c.yaml --set seed=9 --set protocol=verified --check --no-provider-check");
  EXPECT_EQ(check.code, 2) << check.output;
  EXPECT_NE(check.output.find("'protocol'"), std::string::npos) << check.output;
  EXPECT_NE(check.output.find("'seed'"), std::string::npos) << check.output;
}

TEST_F(CliHabitsTest, NamedProblemsMustBeInTheGivenSuite) {
  write("c.yaml", "name: s\nruns_dir: runs\nproblems: {suite: nope, names: [19_ReLU]}\ndevice: cpu\n"
                  "provider: {kind: replay, model: r, transcript: t.jsonl}\nscaffold: {kind: one_shot}\n");
  const auto r = kloop("run c.yaml");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("'19_ReLU' is in suite 'kernelbench', not in problems.suite 'nope'"), std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(dir_ / "runs/s/results.jsonl")) << "no request was made";
}

TEST_F(CliHabitsTest, ASweepsCheckEndsWithItsTotals) {
  write("s.yaml", std::string(kConfig) +
                      "sweep:\n  seed: [1, 2, 3]\n");
  const auto r = kloop("run s.yaml --problems 'L1:19-20' --check --no-provider-check");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("sweep total: 3 run(s), 3 ready; 6 problem(s) over the runs; 12 request(s) to send"),
            std::string::npos)
      << r.output;
  const auto varied = kloop("run s.yaml --set seed=4 --check --no-provider-check");
  EXPECT_EQ(varied.code, 2) << varied.output;
  EXPECT_NE(varied.output.find("field 'sweep.seed': the sweep varies it"), std::string::npos) << varied.output;
}

TEST_F(CliHabitsTest, CtrlCSaysWhatWasKept) {
  write("c.yaml", kConfig);
  const auto r = kloop("run c.yaml --problems 'L1:19-21'", "KLOOP_TEST_STOP_AT=recorded:1:INT");
  EXPECT_EQ(r.code, 130) << r.output;
  // (The note as the stop begins comes from a watcher that looks every 0.1 s: a run this short may end first.)
  // Requests go out side by side: those in flight finish and are recorded too.
  EXPECT_TRUE(std::regex_search(r.output, std::regex(R"(stopped \(interrupted\): [1-6] attempt\(s\) recorded in runs/habits)")))
      << r.output;
  EXPECT_NE(r.output.find("run the same command again to resume"), std::string::npos) << r.output;
  const auto again = kloop("run c.yaml --problems 'L1:19-21'");
  EXPECT_EQ(again.code, 0) << again.output;
  EXPECT_NE(again.output.find("resumed from the run store"), std::string::npos) << again.output;
}


// Every subcommand's --help names its docs/ page, the page exists, and
// every option the help lists is documented in README.md or docs/ (the
// README split must not lose a flag; a new flag needs its text).
// The torch version the machine's python3 has, "" when none imports.
std::string python_torch_version() {
  // As kloop finds it: python3 on the PATH, then /usr/bin/python3, that imports torch.
  const auto r = shell("python3 -c 'import torch; print(torch.__version__)' 2>/dev/null || "
                       "/usr/bin/python3 -c 'import torch; print(torch.__version__)' 2>/dev/null");
  return r.code == 0 ? r.output.substr(0, r.output.find_first_of("\n")) : "";
}

// KernelBench's precision and the baselines beside the protocol's are
// fields of a run: checked with the file, stored in its config, part of
// what a resumed run must keep; a torch.compile baseline that cannot run
// stops the run before its first request. KernelBench's original protocol
// keeps its old name as an alias: a run started under `kernelbench`
// resumes under `kernelbench-v0.1`.
TEST_F(CliHabitsTest, PrecisionAndBaselinesAreFieldsOfARun) {
  write("c.yaml", kConfig);
  const auto bad = kloop("run c.yaml --set precision=fp8 --check --no-provider-check");
  EXPECT_EQ(bad.code, 2) << bad.output;
  EXPECT_NE(bad.output.find("field 'precision': 'fp8' is not a precision; use fp32, fp16 or bf16"), std::string::npos)
      << bad.output;
  const auto check = kloop("run c.yaml --set precision=bf16 --check --no-provider-check");
  EXPECT_EQ(check.code, 0) << check.output;
  EXPECT_NE(check.output.find("precision bf16"), std::string::npos) << check.output;
  ASSERT_EQ(kloop("run c.yaml --set precision=bf16 --set scaffold.turns=1").code, 0);
  EXPECT_EQ(stored_config("habits")["precision"], "bf16");
  // A task degenerate only in bf16 (its spec's precisions.bf16) is left out of a strict run in bf16 alone.
  const auto hinge = kloop("run c.yaml --name hinge --problems 'L1:19,100' --set precision=bf16 --check "
                           "--no-provider-check");
  EXPECT_EQ(hinge.code, 0) << hinge.output;
  EXPECT_NE(hinge.output.find("1 problem(s) excluded by the strict protocol at bf16, left out of the run: 100_HingeLoss"),
            std::string::npos)
      << hinge.output;
  const auto hinge32 = kloop("run c.yaml --name hinge --problems 'L1:19,100' --check --no-provider-check");
  EXPECT_EQ(hinge32.code, 0) << hinge32.output;
  EXPECT_EQ(hinge32.output.find("excluded by"), std::string::npos) << hinge32.output;
  const auto changed = kloop("run c.yaml --set precision=fp16 --set scaffold.turns=1");
  EXPECT_EQ(changed.code, 2) << changed.output;
  EXPECT_NE(changed.output.find("'precision' (\"bf16\" vs \"fp16\")"), std::string::npos) << changed.output;

  // The alias resumes what it names.
  ASSERT_EQ(kloop("run c.yaml --name kb --set protocol=kernelbench --set scaffold.turns=1").code, 0);
  const auto same = kloop("run c.yaml --name kb --set protocol=kernelbench-v0.1 --set scaffold.turns=1");
  EXPECT_EQ(same.code, 0) << same.output;
  const auto other = kloop("run c.yaml --name kb --set protocol=kernelbench-v0.2 --set scaffold.turns=1");
  EXPECT_EQ(other.code, 2) << other.output;

  const auto unknown = kloop("run c.yaml --set 'evaluation.baselines=[eager, compiled]' --check --no-provider-check");
  EXPECT_EQ(unknown.code, 2) << unknown.output;
  EXPECT_NE(unknown.output.find("'compiled' is not a baseline; use eager, eager-tf32, compile-default or "
                                "compile-reduce-overhead"),
            std::string::npos)
      << unknown.output;
  const auto no_upstream = kloop("run c.yaml --set 'evaluation.baselines=[compile-default]' --check --no-provider-check");
  EXPECT_EQ(no_upstream.code, 2) << no_upstream.output;
  EXPECT_NE(no_upstream.output.find("field 'evaluation.upstream': missing"), std::string::npos) << no_upstream.output;

  // torch.compile on a torch before 2.0 (Debian's 1.13): the run does not start.
  const std::string torch = python_torch_version();
  if (torch.empty() || torch[0] >= '2') GTEST_SKIP() << "python3's torch is '" << torch << "', not 1.x";
  const std::string upstream = (fs::path(KLOOP_TEST_FIXTURES) / "upstream").string();
  const std::string compiled = "--name compiled --set 'evaluation.baselines=[eager, compile-default]' --set "
                               "evaluation.upstream=" + upstream;
  const auto check_compiled = kloop("run c.yaml " + compiled + " --check --no-provider-check");
  EXPECT_EQ(check_compiled.code, 2) << check_compiled.output;
  EXPECT_NE(check_compiled.output.find("torch.compile needs torch >= 2.0; this torch is 1."), std::string::npos)
      << check_compiled.output;
  const auto run_compiled = kloop("run c.yaml " + compiled);
  EXPECT_EQ(run_compiled.code, 2) << run_compiled.output;
  EXPECT_NE(run_compiled.output.find("field 'evaluation.baselines': torch.compile needs torch >= 2.0; this torch is 1."),
            std::string::npos)
      << run_compiled.output;
  EXPECT_FALSE(fs::exists(dir_ / "runs/compiled/results.jsonl")) << "no request was made";
}

TEST(DocsTest, EveryHelpNamesAnExistingPageAndEveryFlagIsDocumented) {
  const fs::path source = fs::path(KLOOP_TEST_PROBLEMS).parent_path();
  std::string docs;
  for (const auto& f : fs::directory_iterator(source / "docs")) {
    std::ifstream in(f.path());
    docs += std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  {
    std::ifstream in(source / "README.md");
    const std::string readme((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_LE(readme.size(), 15u * 1024) << "the README stays a first day's read; the rest goes to docs/";
    docs += readme;
  }
  const std::vector<std::string> commands = {"problems", "problems list", "problems show", "problems check", "problems build",
                                             "problems parity", "eval", "demo", "run", "audit", "calibrate",
                                             "baseline", "report", "rescore", "import", "import kernelbench",
                                             "import release", "problems hash", ""};
  const std::regex page(R"(docs/[a-z-]+\.md)"), flag(R"((^|[\s,\[])(--[a-z][a-z0-9-]*))");
  for (const auto& command : commands) {
    const auto help = shell(std::string(KLOOP_TEST_BINARY) + " " + command + " --help 2>&1");
    ASSERT_EQ(help.code, 0) << command << ": " << help.output;
    if (command.find(' ') == std::string::npos || command.empty()) {
      std::smatch m;
      const std::string text = help.output;
      if (command != "demo") {
        ASSERT_TRUE(std::regex_search(text, m, page)) << command << " names no docs page:\n" << text;
        EXPECT_TRUE(fs::exists(source / m.str())) << m.str();
      }
    }
    for (auto it = std::sregex_iterator(help.output.begin(), help.output.end(), flag); it != std::sregex_iterator();
         ++it) {
      const std::string f = (*it)[2];
      if (f == "--help") continue;
      EXPECT_NE(docs.find(f), std::string::npos) << "kloop " << command << " " << f << " is in no docs page";
    }
  }
}

// kloop problems hash: the specs' recorded reference hashes are those of
// the KernelBench snapshot the ports follow; an older version's 19_ReLU has
// kloop's Model with other inputs, its 33_VanillaRNN another Model; --write
// records a file's hashes in the spec (a copy of the problems folder here).
TEST(ProblemsHashTest, RecordedHashesAreTheUpstreamFilesAndWriteRecordsThem) {
  const std::string versions = std::string(KLOOP_TEST_FIXTURES) + "/kernelbench/versions/";
  const std::string kloop = KLOOP_TEST_BINARY;
  const auto head = shell(kloop + " problems hash --upstream " + versions + "head 19_ReLU 20_LeakyReLU 33_VanillaRNN 2>&1");
  EXPECT_EQ(head.code, 0) << head.output;
  EXPECT_NE(head.output.find("3 task(s), 0 differ or unreadable, 0 written"), std::string::npos) << head.output;
  const auto old = shell(kloop + " problems hash --upstream " + versions + "v0 19_ReLU 33_VanillaRNN 2>&1");
  EXPECT_EQ(old.code, 1) << old.output;
  EXPECT_TRUE(std::regex_search(old.output, std::regex("19_ReLU +[0-9a-f]{16} +[0-9a-f]{16} +inputs differ")))
      << old.output;
  EXPECT_TRUE(std::regex_search(old.output, std::regex("33_VanillaRNN +[0-9a-f]{16} +[0-9a-f]{16} +DIFFERS")))
      << old.output;

  const fs::path problems = fs::temp_directory_path() / ("kloop-hash-" + std::to_string(getpid()));
  fs::remove_all(problems);
  fs::create_directories(problems / "kernelbench" / "level3");
  for (const char* ext : {".yaml", ".cpp"}) {
    fs::copy_file(std::string(KLOOP_TEST_PROBLEMS) + "/kernelbench/level3/33_VanillaRNN" + ext,
                  problems / "kernelbench" / "level3" / (std::string("33_VanillaRNN") + ext));
  }
  const std::string at = kloop + " --problems " + problems.string() + " problems hash --upstream " + versions + "v0";
  const auto write = shell(at + " --write 2>&1");
  EXPECT_EQ(write.code, 0) << write.output;
  EXPECT_NE(write.output.find("written"), std::string::npos) << write.output;
  const auto again = shell(at + " 2>&1");
  EXPECT_EQ(again.code, 0) << again.output;
  EXPECT_NE(again.output.find(" same"), std::string::npos) << again.output;
  fs::remove_all(problems);
}

}  // namespace
}  // namespace kloop
