// The JSON forms of wire.h's commands and replies: the only place either
// side spells a field's name.
#include "evaluator/isolation/wire.h"

#include <limits>

namespace kloop::wire {
namespace {

// `key`'s value into `v` when present (else `v` keeps its default).
template <class T>
void get_or(const json& j, const char* key, T& v) {
  if (auto it = j.find(key); it != j.end()) it->get_to(v);
}
template <class T>
void get_opt(const json& j, const char* key, std::optional<T>& v) {
  v.reset();
  if (auto it = j.find(key); it != j.end() && !it->is_null()) v = it->get<T>();
}
template <class T>
void put_opt(json& j, const char* key, const std::optional<T>& v) {
  if (v) j[key] = *v;
}

}  // namespace

void to_json(json& j, const Draw& v) { j = {{"kind", v.kind}, {"params", v.params}}; }
void from_json(const json& j, Draw& v) {
  j.at("kind").get_to(v.kind);
  get_or(j, "params", v.params);
}

void to_json(json& j, const Arg& v) { j = {{"name", v.name}, {"type", v.type}, {"value", v.value}}; }
void from_json(const json& j, Arg& v) {
  j.at("name").get_to(v.name);
  j.at("type").get_to(v.type);
  v.value = j.at("value");
}

void to_json(json& j, const InputSpec& v) {
  j = {{"name", v.name}, {"dtype", v.dtype}, {"shape", v.shape}, {"dist", v.dist}};
}
void from_json(const json& j, InputSpec& v) {
  j.at("name").get_to(v.name);
  j.at("dtype").get_to(v.dtype);
  j.at("shape").get_to(v.shape);
  j.at("dist").get_to(v.dist);
}

void to_json(json& j, const Case& v) {
  j = {{"id", v.id},
       {"seed", v.seed},
       {"weight_seed", v.weight_seed},
       {"scale", v.scale},
       {"args", v.args},
       {"inputs", v.inputs},
       {"calls", v.calls},
       {"weight_overrides", v.weight_overrides},
       {"randomize_identity_params", v.randomize_identity_params}};
}
void from_json(const json& j, Case& v) {
  j.at("id").get_to(v.id);
  j.at("seed").get_to(v.seed);
  v.weight_seed = v.seed;
  get_or(j, "weight_seed", v.weight_seed);
  get_or(j, "scale", v.scale);
  j.at("args").get_to(v.args);
  j.at("inputs").get_to(v.inputs);
  get_or(j, "calls", v.calls);
  get_or(j, "weight_overrides", v.weight_overrides);
  get_or(j, "randomize_identity_params", v.randomize_identity_params);
}

void to_json(json& j, const NoReply&) { j = json::object(); }
void from_json(const json&, NoReply&) {}

void to_json(json& j, const Load& v) {
  j = {{"library", v.library}, {"role", v.role}, {"device", v.device}, {"threads", v.threads}, {"arity", v.arity}};
  if (!v.entry.empty()) j["entry"] = v.entry;
  if (!v.python_host.empty()) {
    j["python_host"] = v.python_host;
    j["python_path"] = v.python_path;
  }
}
void from_json(const json& j, Load& v) {
  j.at("library").get_to(v.library);
  j.at("role").get_to(v.role);
  get_or(j, "device", v.device);
  get_or(j, "threads", v.threads);
  get_or(j, "arity", v.arity);
  get_or(j, "entry", v.entry);
  get_or(j, "python_host", v.python_host);
  get_or(j, "python_path", v.python_path);
}
void to_json(json& j, const LoadReply& v) {
  j = {{"arity", v.arity}, {"api_version", v.api_version}, {"device", v.device}};
}
void from_json(const json& j, LoadReply& v) {
  get_or(j, "arity", v.arity);
  get_or(j, "api_version", v.api_version);
  v.device = j.value("device", json::object());
}

void to_json(json& j, const Calibrate& v) {
  j = {{"device", v.device}};
  put_opt(j, "copy_bytes", v.copy_bytes);
  put_opt(j, "gemm_size", v.gemm_size);
}
void from_json(const json& j, Calibrate& v) {
  get_or(j, "device", v.device);
  get_opt(j, "copy_bytes", v.copy_bytes);
  get_opt(j, "gemm_size", v.gemm_size);
}
void to_json(json& j, const CalibrateReply& v) {
  j = {{"device", v.device},
       {"copy_bytes", v.copy_bytes},
       {"copy_seconds", v.copy_seconds},
       {"dram_bytes_per_s", v.dram_bytes_per_s},
       {"gemm_size", v.gemm_size},
       {"fp32_flops_per_s", v.fp32_flops_per_s},
       {"tf32_flops_per_s", v.tf32_flops_per_s},
       {"bf16_flops_per_s", v.bf16_flops_per_s},
       {"small_kernel_seconds", v.small_kernel_seconds}};
}
void from_json(const json& j, CalibrateReply& v) {
  v.device = j.value("device", json::object());
  get_or(j, "copy_bytes", v.copy_bytes);
  get_or(j, "copy_seconds", v.copy_seconds);
  get_or(j, "dram_bytes_per_s", v.dram_bytes_per_s);
  get_or(j, "gemm_size", v.gemm_size);
  get_or(j, "fp32_flops_per_s", v.fp32_flops_per_s);
  get_or(j, "tf32_flops_per_s", v.tf32_flops_per_s);
  get_or(j, "bf16_flops_per_s", v.bf16_flops_per_s);
  get_or(j, "small_kernel_seconds", v.small_kernel_seconds);
}

void to_json(json& j, const GeneratedCase& v) {
  j = {{"id", v.id}, {"output_shapes", v.output_shapes}, {"parameters", v.parameters}};
}
void from_json(const json& j, GeneratedCase& v) {
  get_or(j, "id", v.id);
  get_or(j, "output_shapes", v.output_shapes);
  get_or(j, "parameters", v.parameters);
}
void to_json(json& j, const Generate& v) {
  j = {{"dir", v.dir}, {"cases", v.cases}, {"weights_and_inputs", v.weights_and_inputs}};
}
void from_json(const json& j, Generate& v) {
  j.at("dir").get_to(v.dir);
  j.at("cases").get_to(v.cases);
  get_or(j, "weights_and_inputs", v.weights_and_inputs);
}
void to_json(json& j, const GenerateReply& v) { j = {{"cases", v.cases}}; }
void from_json(const json& j, GenerateReply& v) { get_or(j, "cases", v.cases); }

void to_json(json& j, const Prepare& v) { j = {{"dir", v.dir}, {"case", v.c}}; }
void from_json(const json& j, Prepare& v) {
  j.at("dir").get_to(v.dir);
  j.at("case").get_to(v.c);
}
void to_json(json& j, const PrepareReply& v) { j = {{"parameters", v.parameters}}; }
void from_json(const json& j, PrepareReply& v) { get_or(j, "parameters", v.parameters); }

void to_json(json& j, const Expect& v) {
  j = {{"dir", v.dir}, {"case", v.c}, {"call", v.call}, {"retain", v.retain}, {"fp64", v.fp64}};
  if (!v.publish_inputs.empty()) j["publish_inputs"] = v.publish_inputs;
}
void from_json(const json& j, Expect& v) {
  j.at("dir").get_to(v.dir);
  j.at("case").get_to(v.c);
  j.at("call").get_to(v.call);
  get_or(j, "retain", v.retain);
  get_or(j, "fp64", v.fp64);
  get_or(j, "publish_inputs", v.publish_inputs);
}
void to_json(json& j, const ExpectReply& v) {
  j = {{"output_shapes", v.output_shapes}};
  put_opt(j, "inputs_exchange", v.inputs_exchange);
  put_opt(j, "inputs_exchange_error", v.inputs_exchange_error);
}
void from_json(const json& j, ExpectReply& v) {
  j.at("output_shapes").get_to(v.output_shapes);
  get_opt(j, "inputs_exchange", v.inputs_exchange);
  get_opt(j, "inputs_exchange_error", v.inputs_exchange_error);
}

void to_json(json& j, const ErrorAnalysisRow& v) {
  j = {{"output", v.output},
       {"max_abs_fp64", v.max_abs_fp64},
       {"rms_fp64", v.rms_fp64},
       {"candidate_max_abs_error", v.candidate_max_abs_error},
       {"candidate_rms_error", v.candidate_rms_error},
       {"reference_max_abs_error", v.reference_max_abs_error},
       {"reference_rms_error", v.reference_rms_error}};
}
// A non-finite figure travels as null (JSON has no NaN) and reads back as NaN.
void from_json(const json& j, ErrorAnalysisRow& v) {
  auto num = [&](const char* key) {
    const auto it = j.find(key);
    return it != j.end() && it->is_number() ? it->get<double>() : std::numeric_limits<double>::quiet_NaN();
  };
  get_or(j, "output", v.output);
  v.max_abs_fp64 = num("max_abs_fp64");
  v.rms_fp64 = num("rms_fp64");
  v.candidate_max_abs_error = num("candidate_max_abs_error");
  v.candidate_rms_error = num("candidate_rms_error");
  v.reference_max_abs_error = num("reference_max_abs_error");
  v.reference_rms_error = num("reference_rms_error");
}

void to_json(json& j, const Judge& v) {
  j = {{"exchange", v.exchange},
       {"tolerance", v.tolerance},
       {"post", v.post},
       {"keep_for_next_call", v.keep_for_next_call},
       {"error_analysis", v.error_analysis},
       {"exact_allowance", v.exact_allowance},
       {"identity", v.identity},
       {"defer_analysis", v.defer_analysis}};
}
void from_json(const json& j, Judge& v) {
  v.exchange = j.at("exchange");
  v.tolerance = j.at("tolerance");
  get_or(j, "post", v.post);
  get_or(j, "keep_for_next_call", v.keep_for_next_call);
  get_or(j, "error_analysis", v.error_analysis);
  get_or(j, "exact_allowance", v.exact_allowance);
  get_or(j, "identity", v.identity);
  get_or(j, "defer_analysis", v.defer_analysis);
}
void to_json(json& j, const JudgeReply& v) {
  j = {{"outputs", v.outputs}, {"output_count", v.output_count}, {"expected_count", v.expected_count}};
  put_opt(j, "mutated_inputs", v.mutated_inputs);
  put_opt(j, "error_analysis", v.error_analysis);
  put_opt(j, "fp64_unavailable", v.fp64_unavailable);
  put_opt(j, "same_as_previous_call", v.same_as_previous_call);
  put_opt(j, "expected_same_as_previous_call", v.expected_same_as_previous_call);
  put_opt(j, "identical", v.identical);
  put_opt(j, "fp64_deferred", v.fp64_deferred);
}
void from_json(const json& j, JudgeReply& v) {
  j.at("outputs").get_to(v.outputs);
  j.at("output_count").get_to(v.output_count);
  j.at("expected_count").get_to(v.expected_count);
  get_opt(j, "mutated_inputs", v.mutated_inputs);
  get_opt(j, "error_analysis", v.error_analysis);
  get_opt(j, "fp64_unavailable", v.fp64_unavailable);
  get_opt(j, "same_as_previous_call", v.same_as_previous_call);
  get_opt(j, "expected_same_as_previous_call", v.expected_same_as_previous_call);
  get_opt(j, "identical", v.identical);
  get_opt(j, "fp64_deferred", v.fp64_deferred);
}

void to_json(json& j, const DeferredAnalysis& v) {
  j = {{"case", v.case_id}, {"call", v.call}};
  put_opt(j, "error_analysis", v.error_analysis);
  put_opt(j, "fp64_unavailable", v.fp64_unavailable);
}
void from_json(const json& j, DeferredAnalysis& v) {
  j.at("case").get_to(v.case_id);
  j.at("call").get_to(v.call);
  get_opt(j, "error_analysis", v.error_analysis);
  get_opt(j, "fp64_unavailable", v.fp64_unavailable);
}
void to_json(json& j, const AnalyzeDeferredReply& v) { j = {{"calls", v.calls}}; }
void from_json(const json& j, AnalyzeDeferredReply& v) { j.at("calls").get_to(v.calls); }
void to_json(json& j, const AnalyzeDeferred&) { j = json::object(); }
void from_json(const json&, AnalyzeDeferred&) {}

void to_json(json& j, const Alias& v) { j = {{"output", v.output}, {"input", v.input}}; }
void from_json(const json& j, Alias& v) {
  j.at("output").get_to(v.output);
  j.at("input").get_to(v.input);
}
void to_json(json& j, const WrongDevice& v) { j = {{"output", v.output}, {"device", v.device}}; }
void from_json(const json& j, WrongDevice& v) {
  j.at("output").get_to(v.output);
  j.at("device").get_to(v.device);
}
void to_json(json& j, const Run& v) {
  j = {{"dir", v.dir}, {"out_dir", v.out_dir}, {"case", v.c}, {"call", v.call}, {"transport", v.transport}};
  put_opt(j, "inputs_exchange", v.inputs_exchange);
}
void from_json(const json& j, Run& v) {
  j.at("dir").get_to(v.dir);
  get_or(j, "out_dir", v.out_dir);
  j.at("case").get_to(v.c);
  j.at("call").get_to(v.call);
  get_or(j, "transport", v.transport);
  get_opt(j, "inputs_exchange", v.inputs_exchange);
}
void to_json(json& j, const RunReply& v) {
  j = {{"seconds", v.seconds}, {"aliases", v.aliases}, {"wrong_device", v.wrong_device}};
  put_opt(j, "exchange", v.exchange);
}
void from_json(const json& j, RunReply& v) {
  get_or(j, "seconds", v.seconds);
  get_or(j, "aliases", v.aliases);
  get_or(j, "wrong_device", v.wrong_device);
  get_opt(j, "exchange", v.exchange);
}

void to_json(json& j, const Export& v) { j = {{"transport", v.transport}}; }
void from_json(const json& j, Export& v) { j.at("transport").get_to(v.transport); }
void to_json(json& j, const ExchangeReply& v) {
  j = json::object();
  put_opt(j, "exchange", v.exchange);
}
void from_json(const json& j, ExchangeReply& v) { get_opt(j, "exchange", v.exchange); }

void to_json(json& j, const Conditioning& v) { j = {{"case", v.c}, {"tolerance", v.tolerance}}; }
void from_json(const json& j, Conditioning& v) {
  j.at("case").get_to(v.c);
  v.tolerance = j.at("tolerance");
}
void to_json(json& j, const ConditioningReply& v) {
  j = {{"finite", v.finite}};
  put_opt(j, "fp64_unavailable", v.fp64_unavailable);
  put_opt(j, "within_half", v.within_half);
  put_opt(j, "max_abs_error", v.max_abs_error);
}
void from_json(const json& j, ConditioningReply& v) {
  get_or(j, "finite", v.finite);
  get_opt(j, "fp64_unavailable", v.fp64_unavailable);
  get_opt(j, "within_half", v.within_half);
  get_opt(j, "max_abs_error", v.max_abs_error);
}
void to_json(json& j, const Audit& v) {
  j = {{"cases", v.cases}, {"tolerance", v.tolerance}, {"pairs", v.pairs}};
  put_opt(j, "conditioning", v.conditioning);
}
void from_json(const json& j, Audit& v) {
  j.at("cases").get_to(v.cases);
  v.tolerance = j.at("tolerance");
  get_or(j, "pairs", v.pairs);
  get_opt(j, "conditioning", v.conditioning);
}
void to_json(json& j, const AuditReply& v) {
  j = {{"parameters", v.parameters},         {"zeros_pass", v.zeros_pass}, {"constant", v.constant},
       {"max_abs_output", v.max_abs_output}, {"elements", v.elements},     {"same", v.same}};
  put_opt(j, "conditioning", v.conditioning);
}
void from_json(const json& j, AuditReply& v) {
  get_or(j, "parameters", v.parameters);
  get_or(j, "zeros_pass", v.zeros_pass);
  get_or(j, "constant", v.constant);
  get_or(j, "max_abs_output", v.max_abs_output);
  get_or(j, "elements", v.elements);
  j.at("same").get_to(v.same);
  get_opt(j, "conditioning", v.conditioning);
}

void to_json(json& j, const TimeSetup& v) {
  j = {{"dir", v.dir}, {"case", v.c}, {"rules", v.rules}, {"tf32", v.tf32}};
  put_opt(j, "post_case", v.post_case);
  put_opt(j, "warmup_first_call", v.warmup_first_call);
}
void from_json(const json& j, TimeSetup& v) {
  j.at("dir").get_to(v.dir);
  j.at("case").get_to(v.c);
  v.rules = j.at("rules");
  get_or(j, "tf32", v.tf32);
  get_opt(j, "post_case", v.post_case);
  get_opt(j, "warmup_first_call", v.warmup_first_call);
}
void to_json(json& j, const TimeSetupReply& v) { j = {{"sets", v.sets}, {"output_bytes", v.output_bytes}}; }
void from_json(const json& j, TimeSetupReply& v) {
  get_or(j, "sets", v.sets);
  get_or(j, "output_bytes", v.output_bytes);
}

void to_json(json& j, const TimeBatch& v) {
  j = {{"samples", v.samples}, {"l2_flush", v.l2_flush}};
  if (!v.sets.empty()) j["sets"] = v.sets;
  put_opt(j, "first_call", v.first_call);
}
void from_json(const json& j, TimeBatch& v) {
  j.at("samples").get_to(v.samples);
  get_or(j, "l2_flush", v.l2_flush);
  get_or(j, "sets", v.sets);
  get_opt(j, "first_call", v.first_call);
}
void to_json(json& j, const TimeBatchReply& v) {
  j = {{"samples", v.samples},
       {"wall", v.wall},
       {"throttled", v.throttled},
       {"persisting_l2_limit", v.persisting_l2_limit},
       {"persisting_l2_window_bytes", v.persisting_l2_window_bytes},
       {"clock_monitor", v.clock_monitor}};
}
void from_json(const json& j, TimeBatchReply& v) {
  j.at("samples").get_to(v.samples);
  j.at("wall").get_to(v.wall);
  j.at("throttled").get_to(v.throttled);
  get_or(j, "persisting_l2_limit", v.persisting_l2_limit);
  get_or(j, "persisting_l2_window_bytes", v.persisting_l2_window_bytes);
  v.clock_monitor = j.value("clock_monitor", json());
}
void to_json(json& j, const SampleDone& v) { j = {{"sample_done", v.index}}; }
void from_json(const json& j, SampleDone& v) {
  const json& i = j.at("sample_done");
  if (!i.is_number_integer()) throw MalformedReply("a sample stop whose index is not an integer");
  i.get_to(v.index);
}
void to_json(json& j, const Next&) { j = json::object(); }
void from_json(const json&, Next&) {}

void to_json(json& j, const TimeCheck& v) {
  j = {{"kept", v.kept}, {"out_dir", v.out_dir}, {"name", v.name}, {"transport", v.transport}};
}
void from_json(const json& j, TimeCheck& v) {
  j.at("kept").get_to(v.kept);
  get_or(j, "out_dir", v.out_dir);
  j.at("name").get_to(v.name);
  get_or(j, "transport", v.transport);
}
void to_json(json& j, const TimePost& v) {
  j = {{"out_dir", v.out_dir}, {"transport", v.transport}};
  put_opt(j, "name", v.name);
  put_opt(j, "call", v.call);
}
void from_json(const json& j, TimePost& v) {
  get_or(j, "out_dir", v.out_dir);
  get_or(j, "transport", v.transport);
  get_opt(j, "name", v.name);
  get_opt(j, "call", v.call);
}

void to_json(json& j, const TimingFloor& v) {
  j = {{"samples", v.samples}, {"l2_flush", v.l2_flush}};
  put_opt(j, "case", v.c);
  put_opt(j, "first_call", v.first_call);
}
void from_json(const json& j, TimingFloor& v) {
  j.at("samples").get_to(v.samples);
  get_or(j, "l2_flush", v.l2_flush);
  get_opt(j, "case", v.c);
  get_opt(j, "first_call", v.first_call);
}
void to_json(json& j, const TimingFloorReply& v) { j = {{"samples", v.samples}}; }
void from_json(const json& j, TimingFloorReply& v) { get_or(j, "samples", v.samples); }

void to_json(json& j, const TimeLoopReply& v) {
  j = {{"timing", v.timing},
       {"wall", v.wall},
       {"throttled_discarded", v.throttled_discarded},
       {"clock_monitor", v.clock_monitor},
       {"persisting_l2_limit", v.persisting_l2_limit},
       {"persisting_l2_window_bytes", v.persisting_l2_window_bytes}};
}
void from_json(const json& j, TimeLoopReply& v) {
  v.timing = j.at("timing");
  v.wall = j.value("wall", json());
  get_or(j, "throttled_discarded", v.throttled_discarded);
  v.clock_monitor = j.value("clock_monitor", json());
  get_or(j, "persisting_l2_limit", v.persisting_l2_limit);
  get_or(j, "persisting_l2_window_bytes", v.persisting_l2_window_bytes);
}
void to_json(json& j, const Baseline& v) { j = {{"case", v.c}, {"rules", v.rules}}; }
void from_json(const json& j, Baseline& v) {
  j.at("case").get_to(v.c);
  v.rules = j.at("rules");
}
void to_json(json& j, const BaselineReply& v) {
  j = {{"parameters", v.parameters}, {"input_bytes", v.input_bytes}, {"device", v.device}, {"fp32", v.fp32}};
  put_opt(j, "tf32", v.tf32);
}
void from_json(const json& j, BaselineReply& v) {
  get_or(j, "parameters", v.parameters);
  get_or(j, "input_bytes", v.input_bytes);
  v.device = j.value("device", json::object());
  j.at("fp32").get_to(v.fp32);
  get_opt(j, "tf32", v.tf32);
}

void to_json(json& j, const Profile& v) {
  j = {{"dir", v.dir}, {"case", v.c}, {"counters", v.counters}};
  put_opt(j, "calls", v.calls);
  put_opt(j, "first_call", v.first_call);
}
void from_json(const json& j, Profile& v) {
  j.at("dir").get_to(v.dir);
  j.at("case").get_to(v.c);
  get_or(j, "counters", v.counters);
  get_opt(j, "calls", v.calls);
  get_opt(j, "first_call", v.first_call);
}
void to_json(json& j, const ProfileReply& v) {
  j = {{"flush_bytes", v.flush_bytes}, {"own_objects", v.own_objects}, {"stream_done_ns", v.stream_done_ns}};
  put_opt(j, "trace", v.trace);
  put_opt(j, "trace_unavailable", v.trace_unavailable);
  put_opt(j, "metrics", v.metrics);
}
void from_json(const json& j, ProfileReply& v) {
  get_or(j, "flush_bytes", v.flush_bytes);
  get_or(j, "own_objects", v.own_objects);
  get_opt(j, "trace", v.trace);
  get_or(j, "stream_done_ns", v.stream_done_ns);
  get_opt(j, "trace_unavailable", v.trace_unavailable);
  get_opt(j, "metrics", v.metrics);
}

void to_json(json& j, const Exit&) { j = json::object(); }
void from_json(const json&, Exit&) {}

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
