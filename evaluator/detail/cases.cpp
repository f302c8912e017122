// The case helpers of cases.h.
#include "evaluator/detail/cases.h"

#include "evaluator/build/python_env.h"

#include <algorithm>
#include <cmath>

#include "evaluator/build/diagnostics.h"
#include "evaluator/problem/expr.h"

namespace kloop::detail {
namespace {

wire::Draw draw_of(const Distribution& d, const DimValues& dims) {
  wire::Draw out{d.kind, {}, d.structure};
  for (const auto& [k, e] : d.params) out.params[k] = eval_expr(e, dims);
  return out;
}

std::vector<wire::Arg> args_of(const ProblemSpec& spec, const DimValues& dims) {
  std::vector<wire::Arg> out;
  for (const auto& a : spec.resolve_args(dims)) {
    json v;
    switch (a.type) {
      case ArgType::kInt: v = a.int_value; break;
      case ArgType::kFloat: v = a.float_value; break;
      case ArgType::kBool: v = a.bool_value; break;
      case ArgType::kInts: v = a.ints; break;
      case ArgType::kString: v = a.string_value; break;
    }
    out.push_back({a.name, arg_type_name(a.type), v});
  }
  return out;
}

}  // namespace

// One case of the reference worker's `generate` command: a model instance
// built from `weight_seed` at `dims`, called `calls` times on inputs drawn
// from `seed` (shifted to mean zero when `centered`) and multiplied by `scale`;
// its weights drawn or seeded (`construction`, wire::Construction).
wire::Case generate_case(const ProblemSpec& spec, const DimValues& dims, int id, uint64_t seed, uint64_t weight_seed,
                         double scale, int calls, bool randomize_identity_params, bool centered,
                         wire::Construction construction) {
  wire::Case c;
  c.id = id;
  c.seed = seed;
  c.weight_seed = weight_seed;
  c.scale = scale;
  c.args = args_of(spec, dims);
  for (const auto& in : spec.inputs) {
    wire::Draw dist = draw_of(in.dist, dims);
    if (centered && dtype_is_floating(in.dtype)) dist = centered_draw(json(dist)).get<wire::Draw>();
    const auto shape = spec.resolve_shape(in, dims);
    c.inputs.push_back({in.name, dtype_name(in.dtype), std::vector<int64_t>(shape.begin(), shape.end()), dist});
  }
  c.calls = calls;
  for (const auto& [name, d] : spec.weights) c.weight_overrides[name] = draw_of(d, dims);
  c.randomize_identity_params = randomize_identity_params;
  c.construction = construction;
  if (spec.precision != DType::kFloat32) c.precision = dtype_name(spec.precision);
  for (const auto& d : spec.upstream_init_draws) {
    wire::InitDraw draw{d.dist, {}};
    for (const auto& e : d.shape) draw.shape.push_back(eval_int_expr(e, dims));
    c.init_draws.push_back(draw);
  }
  return c;
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
wire::Load load_command(const std::string& library, const std::string& role, const ProblemSpec& spec,
                        const EvalOptions& o) {
  wire::Load load;
  load.library = library;
  load.role = role;
  load.device = o.device;
  load.threads = o.threads;
  load.arity = static_cast<int>(spec.inputs.size());
  if (is_python_module(library)) {
    load.python_host = python_host_library(o.worker_path);
    load.python_path = python_environment().sys_path;
  }
  return load;
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

wire::Load load_command(const BuildResult& reference, const std::string& role, const ProblemSpec& spec,
                        const EvalOptions& o) {
  wire::Load cmd = load_command(reference.library_path, role, spec, o);
  cmd.entry = reference.entry;
  return cmd;
}

std::string build_failure_text(const BuildResult& rb) {
  return "does not build:\n" + summarize_diagnostics(rb.diagnostics, 10) + (rb.diagnostics.empty() ? rb.log : "");
}

}  // namespace kloop::detail
