// The case helpers of cases.h.
#include "evaluator/detail/cases.h"

#include <algorithm>
#include <cmath>

#include "evaluator/build/diagnostics.h"
#include "evaluator/problem/expr.h"

namespace kloop::detail {
namespace {

json draw_json(const Distribution& d, const DimValues& dims) {
  json params = json::object();
  for (const auto& [k, e] : d.params) params[k] = eval_expr(e, dims);
  return {{"kind", d.kind}, {"params", params}};
}

json args_json(const ProblemSpec& spec, const DimValues& dims) {
  json out = json::array();
  for (const auto& a : spec.resolve_args(dims)) {
    json v;
    switch (a.type) {
      case ArgType::kInt: v = a.int_value; break;
      case ArgType::kFloat: v = a.float_value; break;
      case ArgType::kBool: v = a.bool_value; break;
      case ArgType::kInts: v = a.ints; break;
      case ArgType::kString: v = a.string_value; break;
    }
    out.push_back({{"name", a.name}, {"type", arg_type_name(a.type)}, {"value", v}});
  }
  return out;
}

}  // namespace

// One case of the reference worker's `generate` command: a model instance
// built from `weight_seed` at `dims`, called `calls` times on inputs drawn
// from `seed` (shifted to mean zero when `centered`) and multiplied by `scale`.
json generate_case(const ProblemSpec& spec, const DimValues& dims, int id, uint64_t seed, uint64_t weight_seed,
                   double scale, int calls, bool randomize_identity_params, bool centered) {
  json inputs = json::array();
  for (const auto& in : spec.inputs) {
    const json dist = draw_json(in.dist, dims);
    inputs.push_back({{"name", in.name},
                      {"dtype", dtype_name(in.dtype)},
                      {"shape", spec.resolve_shape(in, dims)},
                      {"dist", centered && dtype_is_floating(in.dtype) ? centered_draw(dist) : dist}});
  }
  json overrides = json::object();
  for (const auto& [name, d] : spec.weights) overrides[name] = draw_json(d, dims);
  return {{"id", id},
          {"seed", seed},
          {"weight_seed", weight_seed},
          {"scale", scale},
          {"args", args_json(spec, dims)},
          {"inputs", inputs},
          {"calls", calls},
          {"weight_overrides", overrides},
          {"randomize_identity_params", randomize_identity_params}};
}

// True when no floating-point output holds a NaN or an Inf.
bool all_finite(const std::vector<HostTensor>& tensors) {
  for (const auto& t : tensors) {
    if (!dtype_is_floating(t.dtype)) continue;
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (!std::isfinite(t.at(static_cast<std::size_t>(i)))) return false;
    }
  }
  return true;
}

// The worker's `load` command.
json load_command(const std::string& library, const std::string& role, const ProblemSpec& spec,
                  const EvalOptions& o) {
  return {{"op", "load"},      {"library", library},   {"role", role},
          {"device", o.device}, {"threads", o.threads}, {"arity", static_cast<int>(spec.inputs.size())}};
}

// The protocol's timing rules for the device, capped by --max-timing.
TimingRules timing_rules(const Protocol& protocol, bool cpu, const EvalOptions& options) {
  TimingRules rules = cpu ? protocol.cpu_timing : protocol.gpu_timing;
  if (options.max_timing_seconds) {
    rules.max_seconds = std::min(rules.max_seconds, *options.max_timing_seconds);
    rules.min_seconds = std::min(rules.min_seconds, rules.max_seconds);
  }
  return rules;
}

json load_command(const BuildResult& reference, const std::string& role, const ProblemSpec& spec,
                  const EvalOptions& o) {
  json cmd = load_command(reference.library_path, role, spec, o);
  if (!reference.entry.empty()) cmd["entry"] = reference.entry;
  return cmd;
}

// Whether the candidate's forwards after its tests get inputs of their own
// (Protocol::fresh_timed_inputs).
bool fresh_timed_inputs(const Protocol& protocol, bool cpu, const EvalOptions& options) {
  return protocol.fresh_timed_inputs && (!cpu || options.fresh_inputs_on_cpu);
}

std::string build_failure_text(const BuildResult& rb) {
  return "does not build:\n" + summarize_diagnostics(rb.diagnostics, 10) + (rb.diagnostics.empty() ? rb.log : "");
}

}  // namespace kloop::detail
