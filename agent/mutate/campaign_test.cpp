// The campaign's pure logic: the fp64 oracle's rule (equivalent only with
// evidence for every call and output) and the floors check that CI keeps.
#include "agent/mutate/campaign.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace kloop::mutate {
namespace {

using nlohmann::json;

Verdict analyzed_verdict(int calls, double candidate_max, double candidate_rms) {
  Verdict v;
  v.verdict = VerdictClass::kCorrect;
  for (int c = 0; c < calls; ++c) {
    TestOutcome t;
    t.label = "case " + std::to_string(c);
    t.passed = true;
    t.outputs.push_back(TensorComparison{});
    v.tests.push_back(t);
  }
  v.error_analysis = json::array();
  for (int c = 0; c < calls; ++c) {
    v.error_analysis.push_back({{"output", 0},
                                {"case", "case " + std::to_string(c)},
                                {"max_abs_fp64", 8.0},
                                {"rms_fp64", 4.0},
                                {"candidate_max_abs_error", candidate_max},
                                {"candidate_rms_error", candidate_rms},
                                {"reference_max_abs_error", 1e-6},
                                {"reference_rms_error", 2e-7}});
  }
  return v;
}

TEST(MutationOracle, WithinTheFp32ReferencesOwnErrorIsEquivalent) {
  EXPECT_EQ(judge_equivalence(analyzed_verdict(4, 1.5e-6, 3e-7), 2.0).first, Equivalence::kEquivalent);
  // Bit-exact, where the reference is exact too: the floor (4 fp32 units of
  // the output) keeps a one-unit difference equivalent.
  Verdict exact = analyzed_verdict(2, 4e-7, 1e-7);
  for (auto& r : exact.error_analysis) r["reference_max_abs_error"] = r["reference_rms_error"] = 0.0;
  EXPECT_EQ(judge_equivalence(exact, 2.0).first, Equivalence::kEquivalent);
}

TEST(MutationOracle, HeldToTheSeedsOwnErrorWhereTheSeedRoundsDifferently) {
  // The correct seed sums in another order than the reference: 4x its
  // error. A mutant that changes nothing keeps the seed's error and is
  // equivalent; held to the reference's error alone it would not be.
  const Verdict seed = analyzed_verdict(4, 4e-6, 8e-7);
  const Verdict mutant = analyzed_verdict(4, 4.2e-6, 8.1e-7);
  EXPECT_EQ(judge_equivalence(mutant, 2.0).first, Equivalence::kDistinct);
  EXPECT_EQ(judge_equivalence(mutant, 2.0, seed_errors(seed)).first, Equivalence::kEquivalent);
  // A real fault stays distinct whatever the seed's error.
  EXPECT_EQ(judge_equivalence(analyzed_verdict(4, 1e-4, 8e-7), 2.0, seed_errors(seed)).first, Equivalence::kDistinct);
}

TEST(MutationOracle, OneCallBeyondTheBoundIsDistinct) {
  Verdict v = analyzed_verdict(4, 1e-6, 2e-7);
  v.error_analysis[3]["candidate_max_abs_error"] = 5e-4;  // the tail of one case
  const auto [e, why] = judge_equivalence(v, 2.0);
  EXPECT_EQ(e, Equivalence::kDistinct);
  EXPECT_NE(why.find("case 3"), std::string::npos) << why;
}

TEST(MutationOracle, MissingEvidenceIsDistinct) {
  Verdict v = analyzed_verdict(4, 1e-6, 2e-7);
  v.error_analysis.erase(v.error_analysis.end() - 1);  // a call without fp64 figures
  EXPECT_EQ(judge_equivalence(v, 2.0).first, Equivalence::kDistinct);
  Verdict nan = analyzed_verdict(2, 1e-6, 2e-7);
  nan.error_analysis[0]["candidate_rms_error"] = nullptr;
  EXPECT_EQ(judge_equivalence(nan, 2.0).first, Equivalence::kDistinct);
  Verdict crashed = analyzed_verdict(2, 0, 0);
  crashed.verdict = VerdictClass::kRuntimeError;
  EXPECT_EQ(judge_equivalence(crashed, 2.0).first, Equivalence::kDistinct);
  Verdict none;
  none.verdict = VerdictClass::kCorrect;
  EXPECT_EQ(judge_equivalence(none, 2.0).first, Equivalence::kDistinct);
}

// A static output buffer sized by the first call (H100, 2026-12-07): the
// oracle's own strict run refused the shape variant's output, and the
// oracle called the mutant equivalent from the calls that passed. The
// seed passed that run cleanly, so a finding there is the mutant's.
TEST(MutationOracle, AFindingInTheOraclesOwnRunIsDistinct) {
  Verdict v = analyzed_verdict(4, 1e-6, 2e-7);
  v.verdict = VerdictClass::kIntegrityViolation;
  v.integrity.push_back({"protocol_violation", "its published tensors are unreadable"});
  const auto [e, why] = judge_equivalence(v, 2.0);
  EXPECT_EQ(e, Equivalence::kDistinct);
  EXPECT_NE(why.find("the oracle's run found protocol_violation"), std::string::npos) << why;
}

// An uninitialised accumulator (H100, 2026-12-07): right on the oracle's
// calls, wrong after the timed repetitions (corrupt_after_repeat under
// verified and strict); the report called those kills false alarms.
TEST(MutationOracle, AKillAfterTheTimedRepetitionsIsNoFalseAlarm) {
  MutantOutcome o;
  o.verdict = {{"kernelbench", "correct"}, {"strict", "integrity_violation"}};
  o.message = {{"kernelbench", "5 test calls passed"},
               {"strict", "corrupt_after_repeat: the output was correct at first but wrong after the timed repetitions"}};
  const auto why = evidence_beyond_the_oracle(o);
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("killed by strict with corrupt_after_repeat"), std::string::npos) << *why;
  // Kills the oracle's calls can weigh (an output compared on its calls) are
  // still the oracle's to judge.
  o.message["strict"] = "timed_call_incorrect: a timed call, on inputs of its own, gave a wrong result (precision)";
  EXPECT_FALSE(evidence_beyond_the_oracle(o).has_value());
}

MutantOutcome outcome(const std::string& cls, bool killed_strict, bool killed_kb) {
  MutantOutcome o;
  o.mutant.id = cls + std::to_string(killed_strict) + std::to_string(killed_kb);
  o.mutant.fault_class = cls;
  o.verdict["strict"] = killed_strict ? "incorrect" : "correct";
  o.verdict["kernelbench"] = killed_kb ? "incorrect" : "correct";
  o.message["strict"] = o.message["kernelbench"] = "";
  return o;
}

class FloorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = std::filesystem::temp_directory_path() / ("kloop-floors-" + std::to_string(getpid()) + ".json");
    report_.protocols = {"kernelbench", "strict"};
    report_.outcomes = {outcome("state", true, false), outcome("state", true, true),
                        outcome("precision", true, false), outcome("boundaries", true, true)};
  }
  void TearDown() override { std::filesystem::remove(path_); }
  std::vector<std::string> check(const json& floors) {
    std::ofstream(path_) << floors.dump();
    return check_floors(report_, path_.string());
  }
  std::filesystem::path path_;
  CampaignReport report_;
};

TEST_F(FloorsTest, MetFloorsGiveNoShortfall) {
  EXPECT_TRUE(check({{"generated", 4}, {"protocols", {{"strict", {{"functional", 1.0}, {"precision", 1.0}}},
                                                      {"kernelbench", {{"functional", 0.5}}}}}})
                  .empty());
}

TEST_F(FloorsTest, ASurvivorBelowAFloorIsAShortfall) {
  report_.outcomes[0].verdict["strict"] = "correct";  // the judge let a state mutant through
  const auto s = check({{"protocols", {{"strict", {{"functional", 1.0}, {"classes", {{"state", 1.0}}}}}}}});
  ASSERT_EQ(s.size(), 2u);
  const std::string all = s[0] + "\n" + s[1];
  EXPECT_NE(all.find("strict functional: kill rate 0.667 (2/3) below the floor 1.000"), std::string::npos) << all;
  EXPECT_NE(all.find("strict state: kill rate 0.500 (1/2)"), std::string::npos) << all;
}

TEST_F(FloorsTest, AChangedSetOrAnEmptyClassOrAMissingProtocolIsAShortfall) {
  EXPECT_EQ(check({{"generated", 5}, {"protocols", json::object()}}).size(), 1u);
  EXPECT_EQ(check({{"protocols", {{"strict", {{"indexing", 1.0}}}}}}).size(), 1u);  // no indexing mutants counted
  EXPECT_EQ(check({{"protocols", {{"verified", {{"functional", 1.0}}}}}}).size(), 1u);
  // Equivalent and stillborn mutants leave the denominator.
  report_.outcomes[2].equivalence = Equivalence::kEquivalent;
  EXPECT_EQ(check({{"protocols", {{"strict", {{"precision", 1.0}}}}}}).size(), 1u);
}

TEST_F(FloorsTest, AMalformedFileNamesTheField) {
  try {
    check({{"protocols", {{"strict", {{"functional", 1.5}}}}}});
    FAIL() << "a rate above 1 was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("protocols.strict.functional"), std::string::npos) << e.what();
  }
  EXPECT_THROW(check({{"protocols", {{"strict", {{"fastness", 1.0}}}}}}), std::invalid_argument);
}

}  // namespace
}  // namespace kloop::mutate
