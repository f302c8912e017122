// Every shipped problem: the spec parses, the reference builds and runs at
// its cpu dims, returns the declared number of finite outputs, and the same
// seed gives bitwise-identical outputs.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "evaluator/build/content_hash.h"
#include "evaluator/check/compare.h"
#include "evaluator/detail/cases.h"
#include "evaluator/detail/worker_session.h"
#include "evaluator/evaluate.h"
#include "evaluator/problem/registry.h"
#include "evaluator/problem/spec.h"
#include "evaluator/runtime/host_tensor.h"

namespace kloop {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// The shipped problems in the groups `kloop problems build` compiles them
// in (reference_bundle_members): one test per bundle, whose references
// are checked one after another in one worker process.
struct ReferenceGroup {
  std::string name;  // "level1_bundle2_of_4"
  std::vector<std::string> problems;  // "kernelbench/level1/19_ReLU"
};

void PrintTo(const ReferenceGroup& g, std::ostream* os) { *os << g.name << " (" << g.problems.size() << " problems)"; }

std::vector<ReferenceGroup> reference_groups() {
  std::vector<ReferenceGroup> groups;
  std::map<std::vector<std::string>, std::size_t> index;  // bundle members -> group
  for (const auto& e : ProblemRegistry(ProblemRegistry::default_root()).list()) {
    std::size_t at = 0;
    const auto members =
        reference_bundle_members(fs::path(e.spec_path).replace_extension(".cpp").string(), kReferenceBundleSize, at);
    auto [it, added] = index.emplace(members, groups.size());
    if (added) groups.push_back({e.suite + "_level" + std::to_string(e.level), {}});
    groups[it->second].problems.push_back(e.suite + "/level" + std::to_string(e.level) + "/" + e.name);
  }
  std::map<std::string, int> per_level, seen;
  for (const auto& g : groups) per_level[g.name]++;
  for (auto& g : groups) {
    const int k = ++seen[g.name];
    g.name += "_bundle" + std::to_string(k) + "_of_" + std::to_string(per_level[g.name]);
  }
  return groups;
}

class ReferenceTest : public ::testing::TestWithParam<ReferenceGroup> {};

TEST_P(ReferenceTest, RunsAtCpuDims) {
  ProblemRegistry reg(ProblemRegistry::default_root());
  std::vector<ProblemSpec> specs;
  for (const auto& name : GetParam().problems) {
    SCOPED_TRACE(name);
    ProblemSpec spec;
    try {
      spec = reg.load(name);
    } catch (const std::exception& e) {
      ADD_FAILURE() << e.what();
      continue;
    }
    // Level 3 networks are expensive to vary; the level-3 issue asks for one.
    const std::size_t min_variants = spec.level >= 3 ? 1 : 2;
    EXPECT_GE(spec.variants.size(), min_variants) << "too few hidden shape variants";
    for (const auto& v : spec.variants) EXPECT_TRUE(v.cpu.has_value()) << v.name << " needs cpu dims";
    if (!spec.cpu_dims.has_value()) {
      ADD_FAILURE() << "no cpu dims";
      continue;
    }
    EXPECT_GT(spec.flop_count(spec.resolve_dims(false)), 0);
    EXPECT_GT(spec.byte_count(spec.resolve_dims(false)), 0);
    specs.push_back(std::move(spec));
  }

  Builder builder(BuilderConfig::from_environment());
  EvalOptions opts;
  opts.worker_path = KLOOP_TEST_WORKER;
  opts.measure_time = false;
  opts.threads = 2;
  // Built in its folder's bundle, as `kloop problems build` (the suite's
  // first test) built them; one worker checks the bundle's references.
  opts.reference_bundle = kReferenceBundleSize;
  Evaluator ev(builder, opts);
  const std::vector<ReferenceReport> reports = ev.check_references(specs);
  ASSERT_EQ(reports.size(), specs.size());
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const ProblemSpec& spec = specs[i];
    const ReferenceReport& r = reports[i];
    SCOPED_TRACE(spec.name);
    EXPECT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.outputs, spec.outputs);
    EXPECT_TRUE(r.finite);
    EXPECT_TRUE(r.deterministic);
    EXPECT_EQ(r.variants_checked, static_cast<int>(spec.variants.size())) << "every variant runs at its cpu dims";
  }
}

// The reference check draws weights straight into the module's CPU
// parameters and writes only the expected outputs; an evaluation draws them
// into the weights file (prepare) and keeps its expected outputs in the
// worker (expect), as a held case does. Both must give the same outputs, bit
// for bit, or the check would vouch for weights no evaluation uses.
TEST(ReferenceCheckTest, InPlaceWeightsGiveTheOutputsOfTheWeightsFile) {
  ProblemRegistry reg(ProblemRegistry::default_root());
  const ProblemSpec spec = reg.load("kernelbench/level2/1_Conv2D_ReLU_BiasAdd");
  const fs::path root = fs::temp_directory_path() / ("kloop-refcheck-" + std::to_string(getpid()));
  fs::remove_all(root);
  fs::create_directories(root / "work");
  Builder builder(BuilderConfig::from_environment());
  EvalOptions opts;
  opts.worker_path = KLOOP_TEST_WORKER;
  opts.measure_time = false;
  opts.work_root = (root / "work").string();
  opts.keep_work_dir = true;
  Evaluator ev(builder, opts);
  const auto held = ev.hold_reference_case(spec);
  const ReferenceReport checked = ev.check_reference(spec);
  ASSERT_TRUE(checked.ok) << checked.error;
  std::vector<std::string> in_place;
  for (const auto& e : fs::recursive_directory_iterator(root / "work")) {
    if (e.path().filename() == "case0.call0.expected.safetensors") in_place.push_back(e.path().string());
  }
  ASSERT_FALSE(in_place.empty());
  for (const auto& path : in_place) {
    const HeldJudgement j = held->judge(path, protocol_by_name("strict").tolerance);
    ASSERT_EQ(j.output_count, j.expected_count) << path;
    ASSERT_EQ(j.identical.size(), j.expected_count) << path;
    for (const bool same : j.identical) EXPECT_TRUE(same) << path;
  }
  fs::remove_all(root);
}

// Reference bundles, on copies of three references in a folder of their
// own (so the bundle is theirs alone, and small).
class ReferenceBundleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("kloop-bundle-" + std::to_string(getpid()) + "-" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_ / "level1");
    for (const char* name : {"19_ReLU", "20_LeakyReLU", "21_Sigmoid"}) add(name);
  }
  void TearDown() override { fs::remove_all(root_); }
  void add(const std::string& name) {
    const fs::path shipped = fs::path(ProblemRegistry::default_root()) / "kernelbench" / "level1";
    for (const char* ext : {".cpp", ".yaml"}) fs::copy_file(shipped / (name + ext), root_ / "level1" / (name + ext));
  }
  ProblemSpec spec(const std::string& name) const {
    return load_problem_spec((root_ / "level1" / (name + ".yaml")).string(), "bundle-test");
  }
  EvalOptions options(const std::string& work) const {
    EvalOptions opts;
    opts.worker_path = KLOOP_TEST_WORKER;
    opts.measure_time = false;
    opts.reference_bundle = kReferenceBundleSize;
    opts.work_root = work;
    opts.keep_work_dir = true;
    fs::create_directories(work);
    return opts;
  }
  // Case 0's expected outputs of the one check run under `work`.
  static std::string checked_outputs(const fs::path& work) {
    for (const auto& e : fs::recursive_directory_iterator(work)) {
      if (e.path().filename() == "case0.call0.expected.safetensors") return e.path().string();
    }
    ADD_FAILURE() << "no case 0 under " << work;
    return "";
  }
  fs::path root_;
};

// Each member of a bundle is loaded by its own entry: its check gives, bit
// for bit, the outputs of the same reference built alone. Three members
// whose outputs differ (ReLU, LeakyReLU, Sigmoid of the same inputs), so
// a member loaded under another's entry fails.
TEST_F(ReferenceBundleTest, EachMemberRunsItsOwnReference) {
  Builder builder(BuilderConfig::from_environment());
  std::string first_key;
  for (const char* name : {"19_ReLU", "20_LeakyReLU", "21_Sigmoid"}) {
    SCOPED_TRACE(name);
    const ProblemSpec s = spec(name);
    std::size_t index = 99;
    const auto members = reference_bundle_members(s.reference_path, kReferenceBundleSize, index);
    ASSERT_EQ(members.size(), 3u);
    EXPECT_EQ(members.at(index), s.reference_path);
    const fs::path work = root_ / "work" / name;
    Evaluator bundled(builder, options(work.string()));
    const BuildResult rb = bundled.build_reference(s, /*bundled=*/true);
    ASSERT_TRUE(rb.ok) << rb.log;
    EXPECT_EQ(rb.entry, "e" + std::to_string(index));
    if (first_key.empty()) first_key = rb.key;
    EXPECT_EQ(rb.key, first_key) << "one bundle for the three";
    const ReferenceReport r = bundled.check_reference(s);
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_TRUE(r.seed_sensitive);

    EvalOptions alone_opts = options((root_ / "alone" / name).string());
    alone_opts.reference_bundle = 0;
    Evaluator alone(builder, alone_opts);
    const BuildResult single = alone.build_reference(s, /*bundled=*/true);
    EXPECT_TRUE(single.entry.empty());
    EXPECT_NE(single.key, rb.key);
    const auto held = alone.hold_reference_case(s);
    const HeldJudgement j = held->judge(checked_outputs(work), protocol_by_name("strict").tolerance);
    ASSERT_EQ(j.output_count, j.expected_count);
    ASSERT_EQ(j.identical.size(), j.expected_count);
    for (const bool same : j.identical) EXPECT_TRUE(same);
  }
  // The worker loads only what the bundle exports, and only for a reference.
  Evaluator ev(builder, options((root_ / "work" / "loads").string()));
  const BuildResult rb = ev.build_reference(spec("20_LeakyReLU"), /*bundled=*/true);
  // The worker's answer to `cmd`: "ok", or what it said went wrong.
  auto answer = [](detail::WorkerSession& w, const auto& cmd) {
    const auto reply = w.call(cmd, std::chrono::seconds(60));
    return reply ? reply->ok() ? std::string("ok") : reply->message() : w.failure();
  };
  auto load_command = [&](const std::string& role, const std::string& entry) {
    BuildResult b = rb;
    b.entry = entry;
    return detail::load_command(b, role, spec("20_LeakyReLU"), ev.options());
  };
  auto load = [&](const std::string& role, const std::string& entry) {  // in a worker of its own
    detail::WorkDir work((root_ / "work").string(), false);
    detail::WorkerSession w(KLOOP_TEST_WORKER, role, work);
    return answer(w, load_command(role, entry));
  };
  EXPECT_EQ(load("reference", "e2"), "ok");
  EXPECT_NE(load("reference", "e3").find("registers no reference"), std::string::npos);
  EXPECT_NE(load("reference", "e1_create").find("not a reference bundle's entry tag"), std::string::npos);
  EXPECT_NE(load("candidate", "e1").find("not a reference bundle's entry tag"), std::string::npos);

  // One process loads entry after entry of its bundle while it has only
  // generated cases (a bundle's check); after any other op, nothing more.
  detail::WorkDir work((root_ / "work").string(), false);
  detail::WorkerSession w(KLOOP_TEST_WORKER, "reference", work);
  auto load_entry = [&](const std::string& entry) { return answer(w, load_command("reference", entry)); };
  EXPECT_EQ(load_entry("e0"), "ok");
  EXPECT_EQ(load_entry("e1"), "ok");
  EXPECT_NE(answer(w, wire::Run{}), "ok");  // any op but generate, even a failed one
  EXPECT_NE(load_entry("e2").find("already loaded"), std::string::npos);
}

// One member that does not compile fails its bundle; every member then
// builds alone: the others pass, and the broken one gets its own
// diagnostics, pointing at its own file.
TEST_F(ReferenceBundleTest, AMemberThatDoesNotCompileLeavesTheOthersToBuildAlone) {
  const fs::path sigmoid = root_ / "level1" / "21_Sigmoid.cpp";
  std::ofstream(sigmoid, std::ios::app) << "\nint broken_here = ;\n";
  const std::string text = read_file(sigmoid.string());
  const auto broken_line = std::count(text.begin(), text.end(), '\n');  // the last line
  Builder builder(BuilderConfig::from_environment());
  Evaluator ev(builder, options((root_ / "work").string()));
  const ReferenceReport relu = ev.check_reference(spec("19_ReLU"));
  EXPECT_TRUE(relu.ok) << relu.error;
  EXPECT_TRUE(ev.build_reference(spec("20_LeakyReLU"), /*bundled=*/true).entry.empty()) << "built alone";
  const ReferenceReport broken = ev.check_reference(spec("21_Sigmoid"));
  EXPECT_FALSE(broken.ok);
  // Its own build's diagnostics: its compile copy is reference.cpp.
  EXPECT_NE(broken.error.find("reference.cpp:" + std::to_string(broken_line) + ":"), std::string::npos)
      << broken.error;
  EXPECT_EQ(broken.error.find("19_ReLU"), std::string::npos) << "another member's text in its diagnostics:\n"
                                                              << broken.error;
}

// What cannot share a file (a #define would reach the members after it)
// is not bundled: reference_bundle_source says so, and each builds alone.
TEST_F(ReferenceBundleTest, AMemberWithADefineIsNotBundled) {
  const fs::path relu = root_ / "level1" / "19_ReLU.cpp";
  std::vector<std::string> paths = {relu.string(), (root_ / "level1" / "20_LeakyReLU.cpp").string()};
  const auto text = reference_bundle_source(paths);
  ASSERT_TRUE(text.has_value());
  EXPECT_NE(text->find("kloop_bundle_e1"), std::string::npos);
  EXPECT_NE(text->find("KLOOP_DETAIL_EXPORT(reference_e1,"), std::string::npos);
  const std::string include = "#include <kloop/reference_api.h>";
  EXPECT_LT(text->find(include), text->find("namespace kloop_bundle_e0")) << "hoisted";
  EXPECT_EQ(text->find(include, text->find(include) + 1), std::string::npos) << "and written once";
  const std::string original = read_file(relu.string());
  std::ofstream(relu) << "#define KLOOP_ANSWER 42\n" << original;
  EXPECT_FALSE(reference_bundle_source(paths).has_value());
  Builder builder(BuilderConfig::from_environment());
  Evaluator ev(builder, options((root_ / "work").string()));
  const BuildResult rb = ev.build_reference(spec("19_ReLU"), /*bundled=*/true);
  ASSERT_TRUE(rb.ok) << rb.log;
  EXPECT_TRUE(rb.entry.empty());
}

INSTANTIATE_TEST_SUITE_P(Shipped, ReferenceTest, ::testing::ValuesIn(reference_groups()),
                         [](const ::testing::TestParamInfo<ReferenceGroup>& info) { return info.param.name; });

}  // namespace
}  // namespace kloop
