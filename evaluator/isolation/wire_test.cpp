// The wire codec: every command and reply reads back as it was written, a
// failure reads as its status, and a reply of the wrong form (what a
// candidate's process could send) is MalformedReply, never a crash or a
// silently defaulted field that matters.
#include "evaluator/isolation/wire.h"

#include <gtest/gtest.h>

#include <cmath>

namespace kloop::wire {
namespace {

Case sample_case() {
  Case c;
  c.id = 3;
  c.seed = 0xfeedfacecafebeefULL;  // above 2^63: must survive as unsigned
  c.weight_seed = 7;
  c.scale = 1e-3;
  c.args = {{"dim", "int", 4096}, {"eps", "float", 1e-5}, {"sizes", "ints", {1, 2}}};
  c.inputs = {{"x", "float32", {16, 4096}, {"randn", {}, ""}},
              {"m", "int64", {16}, {"randint", {{"low", 0}, {"high", 9}}, ""}},
              {"a", "float32", {8, 8}, {"rand", {}, "symmetric"}}};
  c.calls = 2;
  c.weight_overrides = {{"weight", {"ones", {}, ""}}};
  c.randomize_identity_params = true;
  c.construction = Construction::kSeeded;
  c.init_draws = {{"randn", {8, 256}}};
  return c;
}

template <class T>
T round_trip(const T& v) {
  return json::parse(json(v).dump()).get<T>();
}

TEST(WireTest, CasesAndCommandsReadBackAsWritten) {
  const Case c = round_trip(sample_case());
  EXPECT_EQ(json(c), json(sample_case()));
  EXPECT_EQ(c.seed, 0xfeedfacecafebeefULL);
  EXPECT_EQ(c.inputs[1].dist.params.at("high"), 9);
  EXPECT_EQ(c.inputs[2].dist.structure, "symmetric");
  EXPECT_EQ(c.construction, Construction::kSeeded);
  ASSERT_EQ(c.init_draws.size(), 1u);
  EXPECT_EQ(c.init_draws[0].shape, (std::vector<int64_t>{8, 256}));
  EXPECT_EQ(c.construction_seed(), sample_case().construction_seed());
  EXPECT_LT(c.construction_seed(), uint64_t{1} << 32) << "torch's CPU generator keeps 32 bits of a seed";
  json unknown = json(c);
  unknown["construction"] = "loaded";
  EXPECT_THROW(unknown.get<Case>(), std::invalid_argument);

  Expect e{"/w/shared", sample_case(), 5, true, true, "cuda_ipc"};
  const json sent = command_json(e);
  EXPECT_EQ(sent.at("op"), "expect");
  const Expect back = sent.get<Expect>();
  EXPECT_EQ(json(back), json(e));

  TimePost p;
  p.out_dir = "/w/sandbox";
  EXPECT_FALSE(json(p).contains("call")) << "unset optionals stay off the wire";
  EXPECT_FALSE(round_trip(p).call.has_value());
  p.call = int64_t{1} << 41;
  EXPECT_EQ(round_trip(p).call, p.call);

  TimerBatch b;
  b.samples = 3;
  b.first = 0xfffffff0u;
  b.check = {0, 2};
  const TimerBatch bb = round_trip(b);
  EXPECT_EQ(bb.check, b.check);
  EXPECT_EQ(bb.first, b.first);
  EXPECT_TRUE(json(TimerBatch{}).contains("samples")) << "required fields are always written";

  Load l;
  l.library = "/x.so";
  l.role = "reference";
  EXPECT_FALSE(json(l).contains("entry"));
  l.entry = "e3";
  EXPECT_EQ(round_trip(l).entry, "e3");
}

TEST(WireTest, RepliesReadBackWithTheirOptionalParts) {
  JudgeReply j;
  j.outputs = {{{"passed", true}}};
  j.output_count = j.expected_count = 1;
  j.mutated_inputs = std::vector<std::size_t>{0};
  j.error_analysis = std::vector<ErrorAnalysisRow>{{0, 1, 2, 3, std::nan(""), 5, 6}};
  const auto out = read_reply<JudgeReply>(ok_json(json(j)));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out.reply.mutated_inputs, j.mutated_inputs);
  EXPECT_FALSE(out.reply.same_as_previous_call.has_value());
  ASSERT_EQ(out.reply.error_analysis->size(), 1u);
  EXPECT_TRUE(std::isnan(out.reply.error_analysis->at(0).candidate_rms_error)) << "NaN travels as null";
  EXPECT_EQ(out.reply.error_analysis->at(0).reference_rms_error, 6);

  j.fp64_deferred = "out of memory";
  EXPECT_EQ(read_reply<JudgeReply>(ok_json(json(j))).reply.fp64_deferred, j.fp64_deferred);

  AnalyzeDeferredReply d;
  d.calls.push_back({3, 1, std::vector<ErrorAnalysisRow>{{0, 1, 2, 3, 4, 5, 6}}, std::nullopt, true});
  d.calls.push_back({8, 0, std::nullopt, "the reference does not run in fp64", std::nullopt});
  const auto dr = read_reply<AnalyzeDeferredReply>(ok_json(json(d)));
  ASSERT_EQ(dr.reply.calls.size(), 2u);
  EXPECT_EQ(dr.reply.calls[0].case_id, 3);
  EXPECT_EQ(dr.reply.calls[0].call, 1);
  EXPECT_EQ(dr.reply.calls[0].identical, true);
  EXPECT_FALSE(dr.reply.calls[1].identical.has_value());
  ASSERT_TRUE(dr.reply.calls[0].error_analysis.has_value());
  EXPECT_EQ(dr.reply.calls[0].error_analysis->at(0).candidate_rms_error, 4);
  EXPECT_EQ(dr.reply.calls[1].fp64_unavailable, d.calls[1].fp64_unavailable);

  AuditReply a;
  a.same = {true, false, true};
  a.conditioning = ConditioningReply{false, "no fp64", std::nullopt, std::nullopt};
  const auto ar = read_reply<AuditReply>(ok_json(json(a)));
  EXPECT_EQ(ar.reply.same, a.same);
  ASSERT_TRUE(ar.reply.conditioning.has_value());
  EXPECT_FALSE(ar.reply.conditioning->finite);
  EXPECT_FALSE(ar.reply.conditioning->within_half.has_value());
}

TEST(WireTest, AFailureReadsAsItsStatus) {
  const auto out = read_reply<RunReply>(failure_json({"load_error", "no module"}));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.error_class(), "load_error");
  EXPECT_EQ(out.message(), "no module");
  // A failure with fields of the wrong type is still a failure, said plainly.
  const auto odd = read_reply<RunReply>(json{{"ok", false}, {"message", 42}});
  ASSERT_FALSE(odd.ok());
  EXPECT_EQ(odd.error_class(), "runtime_error");
}

// What a candidate could write on the channel in the worker's place.
TEST(WireTest, RepliesOfTheWrongFormAreMalformed) {
  EXPECT_THROW(read_reply<RunReply>(json::object()), MalformedReply) << "no ok";
  EXPECT_THROW(read_reply<RunReply>(json{{"ok", "yes"}}), MalformedReply) << "ok not a boolean";
  EXPECT_THROW(read_reply<RunReply>(json{{"ok", true}, {"aliases", "none"}}), MalformedReply);
  EXPECT_THROW(read_reply<RunReply>(json::parse(R"({"ok": true, "aliases": [{"output": 0}]})")), MalformedReply)
      << "an alias without its input";
  EXPECT_THROW(read_reply<TimerServeReply>(json::parse(R"({"ok": true, "served": "all"})")), MalformedReply)
      << "a count that is not a number";
  EXPECT_THROW(read_reply<TimerServeReply>(json::parse(R"({"ok": true})")), MalformedReply)
      << "a serve reply without its count";
  EXPECT_THROW(read_reply<JudgeReply>(json{{"ok", true}, {"outputs", json::array()}}), MalformedReply);
  EXPECT_THROW(read_reply<ExchangeReply>(json{{"ok", true}, {"exchange", nullptr}}).reply.exchange.value(),
               std::bad_optional_access)
      << "a null exchange is no exchange";
}

}  // namespace
}  // namespace kloop::wire
