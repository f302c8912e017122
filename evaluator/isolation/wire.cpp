// The JSON forms of wire.h's commands and replies: the only place either
// side spells a field's name. Each type is one declaration below (its
// fields, in order, each required or optional); to_json and from_json are
// written from it.
#include "evaluator/isolation/wire.h"

#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>
#include <tuple>
#include <type_traits>

namespace kloop::wire {
namespace {

// One field of a struct S on the wire: its key, its member, and whether a
// reader must find it (an absent optional field keeps its default).
template <class S, class M>
struct Field {
  const char* key;
  M S::*member;
  bool required;
};
template <class S, class M>
constexpr Field<S, M> field(const char* key, M S::*member, bool required) {
  return {key, member, required};
}

template <class T>
struct IsOptional : std::false_type {};
template <class T>
struct IsOptional<std::optional<T>> : std::true_type {};
template <class T>
struct IsContainer : std::false_type {};
template <class T>
struct IsContainer<std::vector<T>> : std::true_type {};
template <class K, class V>
struct IsContainer<std::map<K, V>> : std::true_type {};
template <>
struct IsContainer<std::string> : std::true_type {};

// Written: an unset optional and an empty optional string or list stay off
// the wire; a non-finite number travels as null (JSON has no NaN).
template <class M>
void put(json& j, const char* key, const M& v, bool required) {
  if constexpr (IsOptional<M>::value) {
    if (v) put(j, key, *v, true);
  } else if constexpr (std::is_floating_point_v<M>) {
    if (std::isfinite(v)) {
      j[key] = v;
    } else {
      j[key] = nullptr;
    }
  } else if constexpr (IsContainer<M>::value) {
    if (required || !v.empty()) j[key] = v;
  } else {
    j[key] = v;
  }
}

// Read: null is an unset optional and, for a number, NaN; any other value
// of the wrong type throws json's own exception (read_reply's MalformedReply).
template <class M>
void get(const json& value, M& v) {
  if constexpr (IsOptional<M>::value) {
    if (value.is_null()) {
      v.reset();
    } else {
      typename M::value_type inner{};
      get(value, inner);
      v = std::move(inner);
    }
  } else if constexpr (std::is_floating_point_v<M>) {
    v = value.is_null() ? std::numeric_limits<M>::quiet_NaN() : value.get<M>();
  } else if constexpr (std::is_same_v<M, json>) {
    v = value;
  } else {
    value.get_to(v);
  }
}

template <class S, class Fields>
void write_fields(json& j, const S& v, const Fields& fields) {
  j = json::object();
  std::apply([&](const auto&... f) { (put(j, f.key, v.*(f.member), f.required), ...); }, fields);
}

template <class S, class Fields>
void read_fields(const json& j, S& v, const Fields& fields) {
  if (!j.is_object()) j.at("an object");  // throws json's type error
  auto one = [&](const auto& f) {
    const auto it = j.find(f.key);
    if (it == j.end()) {
      if (f.required) j.at(f.key);  // throws json's out_of_range, naming the key
      return;
    }
    get(*it, v.*(f.member));
  };
  std::apply([&](const auto&... f) { (one(f), ...); }, fields);
}

}  // namespace

// REQ / OPT: a field under its member's name; *_AS: under another key.
#define REQ(m) field(#m, &S::m, true)
#define OPT(m) field(#m, &S::m, false)
#define REQ_AS(m, key) field(key, &S::m, true)
#define OPT_AS(m, key) field(key, &S::m, false)
#define KLOOP_WIRE(T, ...)                                                       \
  static auto fields_of(const T*) {                                              \
    using S = T;                                                                 \
    return std::make_tuple(__VA_ARGS__);                                         \
  }                                                                              \
  void to_json(json& j, const T& v) { write_fields(j, v, fields_of(&v)); }       \
  void from_json(const json& j, T& v) { read_fields(j, v, fields_of(&v)); }
#define KLOOP_WIRE_EMPTY(T)                                                      \
  void to_json(json& j, const T&) { j = json::object(); }                        \
  void from_json(const json&, T&) {}

// A case's construction as a word; any other word is an error, not a default.
void to_json(json& j, const Construction& v) { j = v == Construction::kSeeded ? "seeded" : "drawn"; }
void from_json(const json& j, Construction& v) {
  const std::string word = j.get<std::string>();
  if (word != "drawn" && word != "seeded") {
    throw std::invalid_argument("a case's construction is 'drawn' or 'seeded', not '" + word + "'");
  }
  v = word == "seeded" ? Construction::kSeeded : Construction::kDrawn;
}

KLOOP_WIRE(Draw, REQ(kind), OPT(params), OPT(structure))
KLOOP_WIRE(InitDraw, REQ(dist), REQ(shape))
KLOOP_WIRE(Arg, REQ(name), REQ(type), REQ(value))
KLOOP_WIRE(InputSpec, REQ(name), REQ(dtype), REQ(shape), REQ(dist))
KLOOP_WIRE(Case, REQ(id), REQ(seed), OPT(weight_seed), OPT(scale), REQ(args), REQ(inputs), OPT(calls),
           OPT(weight_overrides), OPT(randomize_identity_params), OPT(construction), OPT(precision), OPT(init_draws))
KLOOP_WIRE_EMPTY(NoReply)

KLOOP_WIRE(Load, REQ(library), REQ(role), OPT(device), OPT(threads), OPT(arity), OPT(entry), OPT(python_host),
           OPT(python_path))
KLOOP_WIRE(LoadReply, OPT(arity), OPT(api_version), OPT(device))
KLOOP_WIRE(Calibrate, OPT(device), OPT(copy_bytes), OPT(gemm_size))
KLOOP_WIRE(CalibrateReply, OPT(device), OPT(copy_bytes), OPT(copy_seconds), OPT(dram_bytes_per_s), OPT(gemm_size),
           OPT(fp32_flops_per_s), OPT(tf32_flops_per_s), OPT(bf16_flops_per_s), OPT(small_kernel_seconds))

KLOOP_WIRE(GeneratedCase, OPT(id), OPT(output_shapes), OPT(parameters))
KLOOP_WIRE(Generate, REQ(dir), REQ(cases), OPT(weights_and_inputs))
KLOOP_WIRE(GenerateReply, OPT(cases))
KLOOP_WIRE(Prepare, REQ(dir), REQ_AS(c, "case"), OPT(write_weights))
KLOOP_WIRE(PrepareReply, OPT(parameters), OPT(norm_layers))
KLOOP_WIRE(Expect, REQ(dir), REQ_AS(c, "case"), REQ(call), OPT(retain), OPT(fp64), OPT(publish_inputs))
KLOOP_WIRE(ExpectReply, REQ(output_shapes), OPT(inputs_exchange), OPT(inputs_exchange_error))

KLOOP_WIRE(ErrorAnalysisRow, OPT(output), OPT(max_abs_fp64), OPT(rms_fp64), OPT(candidate_max_abs_error),
           OPT(candidate_rms_error), OPT(reference_max_abs_error), OPT(reference_rms_error))
KLOOP_WIRE(Judge, REQ(exchange), REQ(tolerance), OPT(post), OPT(keep_for_next_call), OPT(error_analysis),
           OPT(exact_allowance), OPT(identity), OPT(defer_analysis))
KLOOP_WIRE(JudgeReply, REQ(outputs), REQ(output_count), REQ(expected_count), OPT(mutated_inputs),
           OPT(error_analysis), OPT(fp64_unavailable), OPT(same_as_previous_call), OPT(expected_same_as_previous_call),
           OPT(identical), OPT(fp64_deferred), OPT(matches_previous_expected))
KLOOP_WIRE(DeferredAnalysis, REQ_AS(case_id, "case"), REQ(call), OPT(error_analysis), OPT(fp64_unavailable), OPT(identical))
KLOOP_WIRE(AnalyzeDeferredReply, REQ(calls))
KLOOP_WIRE_EMPTY(AnalyzeDeferred)

KLOOP_WIRE(Alias, REQ(output), REQ(input))
KLOOP_WIRE(WrongDevice, REQ(output), REQ(device))
KLOOP_WIRE(Run, REQ(dir), OPT(out_dir), REQ_AS(c, "case"), REQ(call), OPT(transport), OPT(inputs_exchange))
KLOOP_WIRE(RunReply, OPT(seconds), OPT(aliases), OPT(wrong_device), OPT(exchange), OPT(norm_layers),
           OPT(runtime_builds))
KLOOP_WIRE(Export, REQ(transport))
KLOOP_WIRE(ExchangeReply, OPT(exchange))

KLOOP_WIRE(Conditioning, REQ_AS(c, "case"), REQ(tolerance))
KLOOP_WIRE(ConditioningReply, OPT(finite), OPT(fp64_unavailable), OPT(within_half), OPT(max_abs_error))
KLOOP_WIRE(Audit, REQ(cases), REQ(tolerance), OPT(pairs), OPT(conditioning))
KLOOP_WIRE(AuditReply, OPT(parameters), OPT(zeros_pass), OPT(constant), OPT(max_abs_output), OPT(elements),
           REQ(same), OPT(conditioning))

KLOOP_WIRE(TimeSetup, REQ(dir), REQ_AS(c, "case"), REQ(rules), OPT(tf32), OPT(post_case), OPT(warmup_first_call))
KLOOP_WIRE(TimeSetupReply, OPT(sets), OPT(output_bytes))
KLOOP_WIRE(TimePost, OPT(out_dir), OPT(transport), OPT(name), OPT(call))
KLOOP_WIRE(TimeLoopReply, REQ(timing), OPT(wall), OPT(throttled_discarded), OPT(clock_monitor),
           OPT(persisting_l2_limit), OPT(persisting_l2_window_bytes))
KLOOP_WIRE(Baseline, REQ_AS(c, "case"), REQ(rules))
KLOOP_WIRE(BaselineReply, OPT(parameters), OPT(input_bytes), OPT(device), REQ(fp32), OPT(tf32))

KLOOP_WIRE(Profile, REQ(dir), REQ_AS(c, "case"), OPT(counters), OPT(calls), OPT(first_call))
KLOOP_WIRE(ProfileReply, OPT(flush_bytes), OPT(own_objects), OPT(trace), OPT(stream_done_ns), OPT(trace_unavailable),
           OPT(metrics))
KLOOP_WIRE_EMPTY(Exit)
KLOOP_WIRE_EMPTY(Ready)

KLOOP_WIRE(TensorSlot, REQ(dtype), REQ(shape), REQ(offset), REQ(bytes))
KLOOP_WIRE(TimerLayout, REQ(inputs), REQ(outputs), REQ(bytes), OPT(seal))
KLOOP_WIRE(TimerFloors, OPT(prep), OPT(copy), OPT(window), OPT(tail), OPT(prep_switch), OPT(capture_switch), OPT(resolution), OPT(between), OPT(outside_noise))
KLOOP_WIRE(TimerCalibrate, REQ_AS(c, "case"), OPT(l2_flush), OPT(samples))
KLOOP_WIRE(TimerCalibrateReply, REQ(floors), REQ(control_bytes))
KLOOP_WIRE(TimerHandoff, REQ(samples), REQ(first), OPT(deadline_ms), OPT(candidate_pid), OPT(work))
KLOOP_WIRE(TimerHandoffReply, REQ(floors), OPT(window), OPT(tail), OPT(prep), OPT(capture), OPT(between), OPT(alone_copy))
KLOOP_WIRE(TimerOpen, REQ_AS(c, "case"))
KLOOP_WIRE(TimerOpenReply, REQ(layout))
KLOOP_WIRE(TimedSample, REQ(seconds), OPT(window), OPT(tail), OPT(prep), OPT(outside), OPT(capture), OPT(between), OPT(throttled), OPT(unwatched))
KLOOP_WIRE(TimedCheck, REQ(sample), REQ(passed), OPT(message), OPT(outputs), OPT(error_analysis), OPT(fp64_unavailable))
KLOOP_WIRE(TimerBatch, REQ(samples), REQ(first), OPT(l2_flush), OPT(check), OPT(precision), OPT(tolerance),
           OPT(candidate_pid), OPT(threads), OPT(deadline_ms))
KLOOP_WIRE(TimerBatchReply, REQ(samples), OPT(checks), OPT(aborted), OPT(clock_monitor), OPT(check_seconds), OPT(processes_ended), OPT(ended_process), OPT(unsettled), OPT(forged))
KLOOP_WIRE_EMPTY(TimerClose)
KLOOP_WIRE(TimerAttach, REQ(block), OPT(device), REQ(bytes), OPT(layout))
KLOOP_WIRE(TimerServe, REQ(samples), REQ(first), OPT(empty), OPT(work))
KLOOP_WIRE(TimerServeReply, REQ(served), OPT(note), OPT(persisting_l2_limit), OPT(persisting_l2_window_bytes))

#undef KLOOP_WIRE_EMPTY
#undef KLOOP_WIRE
#undef OPT_AS
#undef REQ_AS
#undef OPT
#undef REQ

json ok_json(const json& payload) {
  json j = payload.is_object() ? payload : json::object();
  j["ok"] = true;
  return j;
}

json failure_json(const Status& s) { return {{"ok", false}, {"error_class", s.error_class}, {"message", s.message}}; }

Status read_failure(const json& j) {
  Status s;
  const auto message = j.find("message");
  s.message = message != j.end() && message->is_string() ? message->get<std::string>() : "failed";
  const auto error_class = j.find("error_class");
  s.error_class =
      error_class != j.end() && error_class->is_string() ? error_class->get<std::string>() : "runtime_error";
  return s;
}

std::string weights_file(const std::string& dir, int case_id) {
  return dir + "/case" + std::to_string(case_id) + ".weights.safetensors";
}

}  // namespace kloop::wire
