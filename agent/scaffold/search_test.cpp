#include "agent/scaffold/search.h"

#include <gtest/gtest.h>

#include "evaluator/build/environment.h"

namespace kloop {
namespace {

SearchNode node(int sample, int turn, const std::string& verdict, std::optional<double> speedup = std::nullopt,
                std::vector<AttemptRef> parents = {}) {
  SearchNode n;
  n.at = {sample, turn};
  n.outcome = outcome_from_name(verdict).value();
  n.speedup = speedup;
  n.response = "answer " + std::to_string(sample) + "/" + std::to_string(turn);
  n.code = "code " + std::to_string(sample) + "/" + std::to_string(turn);
  n.feedback = "feedback " + std::to_string(sample) + "/" + std::to_string(turn);
  n.parents = std::move(parents);
  return n;
}

class SearchTest : public ::testing::Test {
 protected:
  SearchTest() : prompts_(settings()) {}
  static PromptSettings settings() {
    PromptSettings s;
    s.dir = data_dir() + "/prompts";
    return s;
  }
  static ScaffoldConfig beam(int width, int expand, const std::string& select = "correct_then_speedup") {
    ScaffoldConfig c;
    c.kind = "beam";
    c.width = width;
    c.expand = expand;
    c.samples = width * expand;
    c.turns = 3;
    c.select = select;
    return c;
  }
  PromptBuilder prompts_;
};

TEST_F(SearchTest, RankingPutsCorrectFastOnesFirstAndBreaksTiesByAge) {
  const std::vector<SearchNode> nodes = {node(0, 1, "compile_error"), node(1, 1, "correct", 1.2),
                                         node(2, 1, "incorrect"),     node(3, 1, "correct", 2.0),
                                         node(0, 2, "correct", 1.2),  node(1, 2, "correct", 9.0)};
  const auto ranked = rank_nodes(nodes, 2, "correct_then_speedup");
  ASSERT_EQ(ranked.size(), 4u) << "round 2's own attempts are not ranked for round 2";
  EXPECT_EQ(ranked[0]->at, (AttemptRef{3, 1}));
  EXPECT_EQ(ranked[1]->at, (AttemptRef{1, 1}));
  EXPECT_EQ(ranked[2]->at, (AttemptRef{2, 1})) << "one that ran beats one that did not compile";
  EXPECT_EQ(ranked[3]->at, (AttemptRef{0, 1}));
  const auto at3 = rank_nodes(nodes, 3, "speedup");
  ASSERT_EQ(at3.size(), 4u) << "speedup keeps only correct attempts";
  EXPECT_EQ(at3[0]->at, (AttemptRef{1, 2}));
  EXPECT_EQ(at3[2]->at, (AttemptRef{1, 1})) << "equal speedups: the earlier attempt first";
}

TEST_F(SearchTest, ABeamRefinesItsBestMembersWithTheirOwnHistory) {
  const ScaffoldConfig c = beam(2, 2);
  const auto first = plan_round(c, 1, {}, "the task", prompts_);
  ASSERT_EQ(first.size(), 4u);
  for (int s = 0; s < 4; ++s) {
    EXPECT_EQ(first[s].at, (AttemptRef{s, 1}));
    EXPECT_EQ(first[s].step, "fresh");
    EXPECT_TRUE(first[s].parents.empty());
    ASSERT_EQ(first[s].messages.size(), 1u);
    EXPECT_EQ(first[s].messages[0].content, "the task");
  }
  std::vector<SearchNode> nodes = {node(0, 1, "incorrect"), node(1, 1, "correct", 1.5), node(2, 1, "compile_error"),
                                   node(3, 1, "correct", 0.8)};
  const auto second = plan_round(c, 2, nodes, "the task", prompts_);
  ASSERT_EQ(second.size(), 4u);
  // Members 1/1 (1.5x) and 3/1 (0.8x), two refinements each.
  EXPECT_EQ(second[0].parents, (std::vector<AttemptRef>{{1, 1}}));
  EXPECT_EQ(second[1].parents, (std::vector<AttemptRef>{{1, 1}}));
  EXPECT_EQ(second[2].parents, (std::vector<AttemptRef>{{3, 1}}));
  EXPECT_EQ(second[3].parents, (std::vector<AttemptRef>{{3, 1}}));
  EXPECT_EQ(second[0].step, "refine");
  ASSERT_EQ(second[0].messages.size(), 3u);
  EXPECT_EQ(second[0].messages[1].content, "answer 1/1");
  EXPECT_EQ(second[0].messages[2].content, "feedback 1/1");
  // Round 3: the member from round 2 carries its parent's history too.
  nodes.push_back(node(0, 2, "correct", 3.0, {{1, 1}}));
  nodes.push_back(node(1, 2, "incorrect", std::nullopt, {{1, 1}}));
  nodes.push_back(node(2, 2, "incorrect", std::nullopt, {{3, 1}}));
  nodes.push_back(node(3, 2, "incorrect", std::nullopt, {{3, 1}}));
  const auto third = plan_round(c, 3, nodes, "the task", prompts_);
  EXPECT_EQ(third[0].parents, (std::vector<AttemptRef>{{0, 2}}));
  ASSERT_EQ(third[0].messages.size(), 5u);
  EXPECT_EQ(third[0].messages[1].content, "answer 1/1");
  EXPECT_EQ(third[0].messages[3].content, "answer 0/2");
  EXPECT_EQ(third[2].parents, (std::vector<AttemptRef>{{1, 1}})) << "the second best of all rounds so far";
  // Planning is a function of the attempts: the same nodes, the same round.
  const auto again = plan_round(c, 3, nodes, "the task", prompts_);
  for (std::size_t i = 0; i < third.size(); ++i) EXPECT_EQ(again[i].parents, third[i].parents);
  // context: last shows the member alone.
  ScaffoldConfig last = c;
  last.context = "last";
  EXPECT_EQ(plan_round(last, 3, nodes, "the task", prompts_)[0].messages.size(), 3u);
}

TEST_F(SearchTest, SelectSpeedupRestartsSlotsWithoutACorrectMember) {
  const ScaffoldConfig c = beam(2, 1, "speedup");
  const std::vector<SearchNode> nodes = {node(0, 1, "correct", 1.1), node(1, 1, "incorrect")};
  const auto second = plan_round(c, 2, nodes, "the task", prompts_);
  ASSERT_EQ(second.size(), 2u);
  EXPECT_EQ(second[0].parents, (std::vector<AttemptRef>{{0, 1}}));
  EXPECT_EQ(second[1].step, "fresh") << "no second correct member: a fresh attempt";
  EXPECT_TRUE(second[1].parents.empty());
}

TEST_F(SearchTest, EvolveShowsRotatingParentsAndAsksToCombineOrImprove) {
  ScaffoldConfig c;
  c.kind = "evolve";
  c.samples = 3;
  c.turns = 2;
  c.parents = 2;
  const std::vector<SearchNode> nodes = {node(0, 1, "correct", 1.0), node(1, 1, "correct", 2.0),
                                         node(2, 1, "compile_error")};
  const auto second = plan_round(c, 2, nodes, "the task", prompts_);
  ASSERT_EQ(second.size(), 3u);
  EXPECT_EQ(second[0].parents, (std::vector<AttemptRef>{{1, 1}, {0, 1}}));
  EXPECT_EQ(second[1].parents, (std::vector<AttemptRef>{{0, 1}, {2, 1}}));
  EXPECT_EQ(second[2].parents, (std::vector<AttemptRef>{{2, 1}, {1, 1}}));
  EXPECT_EQ(second[0].step, "crossover");
  ASSERT_EQ(second[0].messages.size(), 1u);
  const std::string& prompt = second[0].messages[0].content;
  EXPECT_EQ(prompt.rfind("the task", 0), 0u) << prompt;
  EXPECT_NE(prompt.find("code 1/1"), std::string::npos) << prompt;
  EXPECT_NE(prompt.find("2.000x"), std::string::npos) << prompt;
  EXPECT_NE(prompt.find("feedback 0/1"), std::string::npos) << prompt;
  EXPECT_NE(prompt.find("combines"), std::string::npos) << prompt;
  c.crossover = false;
  c.parents = 1;
  c.mutate_prompt = "Make it use shared memory.";
  const auto mutated = plan_round(c, 2, nodes, "the task", prompts_);
  EXPECT_EQ(mutated[0].step, "mutate");
  EXPECT_EQ(mutated[0].parents.size(), 1u);
  EXPECT_NE(mutated[0].messages[0].content.find("Make it use shared memory."), std::string::npos);
  EXPECT_EQ(mutated[0].messages[0].content.find("combines"), std::string::npos);
}

}  // namespace
}  // namespace kloop
