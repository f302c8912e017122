// Parsing and validation of NAME.yaml problem specs. Every error names the
// file, the line, the field and what was expected, because spec authors fix
// them by hand.
#include "evaluator/problem/spec.h"

#include "evaluator/problem/yaml_input.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include "base/settings.h"
#include "evaluator/runtime/generator.h"

namespace kloop {
namespace {

namespace fs = std::filesystem;

const std::set<std::string> kKnownKeys = {
    "name",    "level",    "suite",  "provenance", "description", "dims",       "cpu",
    "args",    "inputs",   "outputs", "flops",     "bytes",       "variants",   "weights",
    "deviations", "excluded_from", "audit", "notes", "centered_inputs", "upstream_init_draws", "precisions"};

const std::map<std::string, std::vector<std::string>> kDistParams = {
    {"rand", {}},          {"randn", {}},           {"uniform", {"low", "high"}},
    {"normal", {"mean", "std"}}, {"randint", {"low", "high"}}, {"ones", {}},
    {"zeros", {}},         {"bernoulli", {"p"}},    {"sign", {}}};
// Parameters a distribution may leave out (sign's p: 0.5).
const std::map<std::string, std::vector<std::string>> kOptionalDistParams = {{"sign", {"p"}}};

class SpecReader {
 public:
  explicit SpecReader(std::string path) : path_(std::move(path)) {}

  [[noreturn]] void fail(const YAML::Node& node, const std::string& field,
                         const std::string& what) const {
    throw SpecError(settings_error(path_, node && node.Mark().line >= 0 ? node.Mark().line + 1 : 0, field, what));
  }
  [[noreturn]] void fail_top(const std::string& field, const std::string& what) const {
    throw SpecError(settings_error(path_, 0, field, what));
  }

  YAML::Node require(const YAML::Node& parent, const char* key, const std::string& field,
                     const std::string& expected) const {
    YAML::Node node = parent[key];
    if (!node || node.IsNull()) fail(parent, field, "missing; expected " + expected);
    return node;
  }

  std::string scalar(const YAML::Node& node, const std::string& field) const {
    if (!node.IsScalar()) fail(node, field, "expected a scalar value");
    return node.Scalar();
  }

  long long integer(const YAML::Node& node, const std::string& field) const {
    if (!node.IsScalar()) fail(node, field, "expected an integer");
    try {
      std::size_t used = 0;
      long long v = std::stoll(node.Scalar(), &used);
      if (used != node.Scalar().size()) throw std::invalid_argument("trailing");
      return v;
    } catch (const std::exception&) {
      fail(node, field, "expected an integer, got '" + node.Scalar() + "'");
    }
  }

  // A scalar that is an expression (or a plain number) kept as text.
  std::string expression(const YAML::Node& node, const std::string& field) const {
    if (!node.IsScalar()) fail(node, field, "expected a number or an expression of dims");
    return node.Scalar();
  }

  DimValues dim_map(const YAML::Node& node, const std::string& field) const {
    if (!node.IsMap()) fail(node, field, "expected a map of dim name to non-negative integer");
    DimValues out;
    for (const auto& kv : node) {
      std::string key = kv.first.Scalar();
      long long v = integer(kv.second, field + "." + key);
      // Zero is allowed: paddings and output paddings are dims too.
      if (v < 0) fail(kv.second, field + "." + key, "expected a non-negative integer, got " + std::to_string(v));
      out[key] = v;
    }
    return out;
  }

  Distribution distribution(const YAML::Node& node, const std::string& field) const {
    Distribution d;
    if (node.IsScalar()) {
      d.kind = node.Scalar();
    } else if (node.IsMap()) {
      // The kind is spelled `kind:` or, in `weights:` entries, `dist:`.
      const char* kind_key = node["kind"] ? "kind" : "dist";
      if (!node[kind_key]) fail(node, field + ".kind", "missing; expected one of " + dist_choices());
      d.kind = scalar(node[kind_key], field + "." + kind_key);
      for (const auto& kv : node) {
        std::string key = kv.first.Scalar();
        if (key == kind_key) continue;
        if (key == "structure") {
          d.structure = scalar(kv.second, field + ".structure");
          if (!is_distribution_structure(d.structure)) {
            fail(kv.second, field + ".structure",
                 "unknown structure '" + d.structure + "'; expected one of " + distribution_structures());
          }
          continue;
        }
        d.params[key] = expression(kv.second, field + "." + key);
      }
    } else {
      fail(node, field, "expected a distribution name or a map with 'kind'");
    }
    auto it = kDistParams.find(d.kind);
    if (it == kDistParams.end()) {
      fail(node, field, "unknown distribution '" + d.kind + "'; expected one of " + dist_choices());
    }
    for (const auto& p : it->second) {
      if (!d.params.count(p)) fail(node, field + "." + p, "missing; '" + d.kind + "' needs it");
    }
    for (const auto& [k, v] : d.params) {
      bool known = false;
      for (const auto& p : it->second) known |= (p == k);
      if (auto opt = kOptionalDistParams.find(d.kind); opt != kOptionalDistParams.end()) {
        for (const auto& p : opt->second) known |= (p == k);
      }
      if (!known) fail(node, field + "." + k, "'" + d.kind + "' takes no parameter '" + k + "'");
    }
    return d;
  }

  static std::string dist_choices() {
    std::string s;
    for (const auto& [k, v] : kDistParams) s += (s.empty() ? "" : ", ") + k;
    return s;
  }

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

ArgType parse_arg_type(const SpecReader& r, const YAML::Node& node, const std::string& field) {
  std::string t = r.scalar(node, field);
  if (t == "int") return ArgType::kInt;
  if (t == "float") return ArgType::kFloat;
  if (t == "bool") return ArgType::kBool;
  if (t == "ints") return ArgType::kInts;
  if (t == "string") return ArgType::kString;
  r.fail(node, field, "unknown type '" + t + "'; expected one of int, float, bool, ints, string");
}

void check_dims_known(const SpecReader& r, const YAML::Node& node, const DimValues& overrides,
                      const DimValues& dims, const std::string& field) {
  for (const auto& [k, v] : overrides) {
    if (!dims.count(k)) {
      r.fail(node, field + "." + k, "not a dim declared under 'dims'");
    }
  }
}

// A list of strings; none when the node is absent or null.
std::vector<std::string> string_list(const SpecReader& r, const YAML::Node& node, const std::string& field) {
  std::vector<std::string> out;
  if (!node || node.IsNull()) return out;
  if (!node.IsSequence()) r.fail(node, field, "expected a list of strings");
  for (std::size_t i = 0; i < node.size(); ++i) out.push_back(r.scalar(node[i], field));
  return out;
}

// The decisions of an `audit:` list (`field`): an `exclude` needs the task
// left out of verified and strict at that precision (`excluded`), which
// `fix` says how to write.
std::vector<AuditDecision> audit_decisions(const SpecReader& r, const YAML::Node& list, const std::string& field,
                                           const std::vector<std::string>& excluded, const std::string& fix) {
  if (!list.IsSequence()) r.fail(list, field, "expected a list of {flag, decision, note}");
  static const std::set<std::string> kFlags = {"zeros_pass", "constant_output", "seed_invariant", "input_independent",
                                               "weight_independent"};
  static const std::set<std::string> kDecisions = {"exclude", "fixed", "accept"};
  std::vector<AuditDecision> out;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string f = field + "[" + std::to_string(i) + "]";
    AuditDecision d;
    d.flag = r.scalar(r.require(list[i], "flag", f + ".flag", "the audit flag decided on"), f + ".flag");
    if (!kFlags.count(d.flag)) {
      r.fail(list[i]["flag"], f + ".flag",
             "unknown flag '" + d.flag +
                 "'; expected zeros_pass, constant_output, seed_invariant, input_independent or weight_independent");
    }
    d.decision = r.scalar(r.require(list[i], "decision", f + ".decision", "exclude, fixed or accept"), f + ".decision");
    if (!kDecisions.count(d.decision)) {
      r.fail(list[i]["decision"], f + ".decision", "unknown decision '" + d.decision + "'; expected exclude, fixed or accept");
    }
    d.note = r.scalar(r.require(list[i], "note", f + ".note", "why, in one sentence"), f + ".note");
    if (d.decision == "exclude") {
      for (const char* p : {"verified", "strict"}) {
        if (std::find(excluded.begin(), excluded.end(), p) == excluded.end()) {
          r.fail(list[i]["decision"], f + ".decision",
                 std::string("'exclude' needs the task excluded from ") + p + " (add " + fix + ")");
        }
      }
    }
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace

const char* arg_type_name(ArgType type) {
  switch (type) {
    case ArgType::kInt: return "int";
    case ArgType::kFloat: return "float";
    case ArgType::kBool: return "bool";
    case ArgType::kInts: return "ints";
    case ArgType::kString: return "string";
  }
  return "?";
}

DimValues ProblemSpec::resolve_dims(bool cpu, const ShapeVariant* variant) const {
  DimValues out = dims;
  if (cpu) {
    if (!cpu_dims) throw SpecError(spec_path + ": field 'cpu': missing; CPU runs need small cpu dims");
    for (const auto& [k, v] : *cpu_dims) out[k] = v;
  }
  if (variant) {
    if (cpu) {
      if (!variant->cpu) {
        throw SpecError(spec_path + ": field 'variants." + variant->name +
                        ".cpu': missing; CPU runs need small cpu dims for this variant");
      }
      for (const auto& [k, v] : *variant->cpu) out[k] = v;
    } else {
      for (const auto& [k, v] : variant->dims) out[k] = v;
    }
  }
  return out;
}

std::vector<ArgValue> ProblemSpec::resolve_args(const DimValues& d) const {
  std::vector<ArgValue> out;
  for (const auto& a : args) {
    ArgValue v;
    v.name = a.name;
    v.type = a.type;
    const std::string& first = a.values.empty() ? std::string() : a.values.front();
    switch (a.type) {
      case ArgType::kInt: v.int_value = eval_int_expr(first, d); break;
      case ArgType::kFloat: v.float_value = eval_expr(first, d); break;
      case ArgType::kBool: v.bool_value = (first == "true" || first == "True" || first == "1"); break;
      case ArgType::kInts:
        for (const auto& e : a.values) v.ints.push_back(eval_int_expr(e, d));
        break;
      case ArgType::kString: v.string_value = first; break;
    }
    out.push_back(std::move(v));
  }
  return out;
}

std::vector<long long> ProblemSpec::resolve_shape(const InputSpec& input, const DimValues& d) const {
  std::vector<long long> shape;
  for (const auto& e : input.shape) shape.push_back(eval_int_expr(e, d));
  return shape;
}

double ProblemSpec::flop_count(const DimValues& d) const { return eval_expr(flops, d); }
double ProblemSpec::byte_count(const DimValues& d) const {
  // `bytes` counts fp32 elements; at fp16/bf16 every one is taken at the
  // narrower size (integer data too: a lower bound stays a lower bound).
  const double scale = precision == DType::kFloat32 ? 1.0 : static_cast<double>(dtype_size(precision)) / 4.0;
  return eval_expr(bytes, d) * scale;
}

std::vector<std::string> ProblemSpec::excluded_from_at(DType at) const {
  std::vector<std::string> out = excluded_from;
  const auto it = precisions.find(at);
  if (it == precisions.end()) return out;
  for (const auto& p : it->second.excluded_from) {
    if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
  }
  return out;
}

const AuditDecision* ProblemSpec::audit_decision(const std::string& flag, DType at) const {
  const auto same = [&](const AuditDecision& d) { return d.flag == flag; };
  if (const auto it = precisions.find(at); it != precisions.end()) {
    const auto d = std::find_if(it->second.audit.begin(), it->second.audit.end(), same);
    if (d != it->second.audit.end()) return &*d;
  }
  const auto d = std::find_if(audit.begin(), audit.end(), same);
  return d == audit.end() ? nullptr : &*d;
}

std::vector<AuditDecision> ProblemSpec::audit_at(DType at) const {
  std::vector<AuditDecision> out;
  if (const auto it = precisions.find(at); it != precisions.end()) out = it->second.audit;
  for (const auto& d : audit) {
    if (audit_decision(d.flag, at) == &d) out.push_back(d);
  }
  return out;
}

ProblemSpec load_problem_spec(const std::string& yaml_path, const std::string& suite) {
  SpecReader r(yaml_path);
  YAML::Node root;
  try {
    root = load_yaml_file(yaml_path);
  } catch (const YamlInputError& e) {
    throw SpecError(e.what());
  }
  if (!root.IsMap()) throw SpecError(yaml_path + ": expected a YAML map at the top level");

  ProblemSpec s;
  s.spec_path = yaml_path;
  s.suite = suite;
  for (const auto& kv : root) {
    std::string key = kv.first.Scalar();
    if (!kKnownKeys.count(key)) {
      r.fail(kv.first, key, "unknown field; known fields are name, level, suite, provenance, description, "
                            "dims, cpu, args, inputs, outputs, flops, bytes, variants, weights, "
                            "deviations, excluded_from, audit, precisions, notes, centered_inputs, "
                            "upstream_init_draws");
    }
  }

  s.name = r.scalar(r.require(root, "name", "name", "the task name (the file name without .yaml)"), "name");
  std::string stem = std::filesystem::path(yaml_path).stem().string();
  if (s.name != stem) r.fail(root["name"], "name", "'" + s.name + "' must equal the file name '" + stem + "'");
  s.level = static_cast<int>(r.integer(r.require(root, "level", "level", "an integer level"), "level"));
  if (root["description"]) s.description = r.scalar(root["description"], "description");
  if (root["provenance"]) {
    if (!root["provenance"].IsMap()) r.fail(root["provenance"], "provenance", "expected a map");
    for (const auto& kv : root["provenance"]) s.provenance[kv.first.Scalar()] = r.scalar(kv.second, "provenance." + kv.first.Scalar());
  }
  s.dims = r.dim_map(r.require(root, "dims", "dims", "a map of dim name to positive integer"), "dims");
  if (root["cpu"]) {
    s.cpu_dims = r.dim_map(root["cpu"], "cpu");
    check_dims_known(r, root["cpu"], *s.cpu_dims, s.dims, "cpu");
  }

  if (root["args"] && !root["args"].IsNull()) {
    const YAML::Node& args = root["args"];
    if (!args.IsSequence()) r.fail(args, "args", "expected a list of {name, type, value}");
    for (std::size_t i = 0; i < args.size(); ++i) {
      std::string f = "args[" + std::to_string(i) + "]";
      const YAML::Node a = args[i];
      if (!a.IsMap()) r.fail(a, f, "expected a map {name, type, value}");
      ArgSpec spec;
      spec.name = r.scalar(r.require(a, "name", f + ".name", "the argument name"), f + ".name");
      spec.type = parse_arg_type(r, r.require(a, "type", f + ".type", "int, float, bool, ints or string"), f + ".type");
      const YAML::Node& value = r.require(a, "value", f + ".value", "a literal or an expression of dims");
      if (spec.type == ArgType::kInts) {
        if (!value.IsSequence()) r.fail(value, f + ".value", "expected a list for type 'ints'");
        for (std::size_t j = 0; j < value.size(); ++j) spec.values.push_back(r.expression(value[j], f + ".value"));
      } else {
        spec.values.push_back(r.scalar(value, f + ".value"));
      }
      s.args.push_back(std::move(spec));
    }
  }

  const YAML::Node& inputs = r.require(root, "inputs", "inputs", "a list of {name, shape, dtype, dist}");
  if (!inputs.IsSequence() || inputs.size() == 0) r.fail(inputs, "inputs", "expected a non-empty list");
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    std::string f = "inputs[" + std::to_string(i) + "]";
    const YAML::Node in = inputs[i];
    if (!in.IsMap()) r.fail(in, f, "expected a map {name, shape, dtype, dist}");
    InputSpec spec;
    spec.name = r.scalar(r.require(in, "name", f + ".name", "the forward argument's name"), f + ".name");
    const YAML::Node& shape = r.require(in, "shape", f + ".shape", "a list of dims or expressions");
    if (!shape.IsSequence()) r.fail(shape, f + ".shape", "expected a list of dims or expressions ([] for a scalar)");
    for (std::size_t j = 0; j < shape.size(); ++j) spec.shape.push_back(r.expression(shape[j], f + ".shape"));
    std::string dt = in["dtype"] ? r.scalar(in["dtype"], f + ".dtype") : "float32";
    auto dtype = parse_dtype(dt);
    if (!dtype) r.fail(in["dtype"], f + ".dtype", "unknown dtype '" + dt + "'; expected one of " + dtype_choices());
    spec.dtype = *dtype;
    if (in["dist"]) spec.dist = r.distribution(in["dist"], f + ".dist");
    if (!spec.dist.structure.empty() && spec.shape.size() < 2) {
      r.fail(in["dist"], f + ".dist.structure",
             "'" + spec.dist.structure + "' is a structure of matrices (the last two dimensions), but the shape has " +
                 std::to_string(spec.shape.size()));
    }
    if (!dtype_is_floating(spec.dtype) && (spec.dist.kind == "rand" || spec.dist.kind == "randn" ||
                                           spec.dist.kind == "normal" || spec.dist.kind == "uniform")) {
      r.fail(in["dist"] ? in["dist"] : in, f + ".dist",
             "'" + spec.dist.kind + "' draws floats but dtype is " + dt + "; use randint, bernoulli, ones or zeros");
    }
    s.inputs.push_back(std::move(spec));
  }

  if (root["outputs"]) {
    s.outputs = static_cast<int>(r.integer(root["outputs"], "outputs"));
    if (s.outputs < 1) r.fail(root["outputs"], "outputs", "expected a positive integer");
  }
  s.flops = r.expression(r.require(root, "flops", "flops", "an expression of dims counting floating-point operations"), "flops");
  s.bytes = r.expression(r.require(root, "bytes", "bytes", "an expression of dims counting unavoidable DRAM bytes"), "bytes");

  if (root["variants"] && !root["variants"].IsNull()) {
    const YAML::Node& vars = root["variants"];
    if (!vars.IsSequence()) r.fail(vars, "variants", "expected a list of {name, dims, cpu}");
    for (std::size_t i = 0; i < vars.size(); ++i) {
      std::string f = "variants[" + std::to_string(i) + "]";
      const YAML::Node v = vars[i];
      ShapeVariant sv;
      sv.name = r.scalar(r.require(v, "name", f + ".name", "a variant name"), f + ".name");
      sv.dims = r.dim_map(r.require(v, "dims", f + ".dims", "a map of dim overrides"), f + ".dims");
      check_dims_known(r, v["dims"], sv.dims, s.dims, f + ".dims");
      if (v["cpu"]) {
        sv.cpu = r.dim_map(v["cpu"], f + ".cpu");
        check_dims_known(r, v["cpu"], *sv.cpu, s.dims, f + ".cpu");
      }
      s.variants.push_back(std::move(sv));
    }
  }
  if (root["weights"] && !root["weights"].IsNull()) {
    if (!root["weights"].IsMap()) r.fail(root["weights"], "weights", "expected a map of parameter name to distribution");
    for (const auto& kv : root["weights"]) {
      s.weights[kv.first.Scalar()] = r.distribution(kv.second, "weights." + kv.first.Scalar());
      if (!s.weights[kv.first.Scalar()].structure.empty()) {
        r.fail(kv.second, "weights." + kv.first.Scalar() + ".structure", "weights take no structure (inputs do)");
      }
    }
  }
  if (root["upstream_init_draws"] && !root["upstream_init_draws"].IsNull()) {
    const YAML::Node& draws = root["upstream_init_draws"];
    if (!draws.IsSequence()) r.fail(draws, "upstream_init_draws", "expected a list of {shape, dist}");
    for (std::size_t i = 0; i < draws.size(); ++i) {
      const std::string f = "upstream_init_draws[" + std::to_string(i) + "]";
      const YAML::Node& d = draws[i];
      if (!d.IsMap()) r.fail(d, f, "expected a map {shape: [dims], dist: randn or rand}");
      InitDraw draw;
      draw.dist = r.scalar(r.require(d, "dist", f + ".dist", "randn or rand"), f + ".dist");
      if (draw.dist != "randn" && draw.dist != "rand") {
        r.fail(d["dist"], f + ".dist", "expected randn or rand (what upstream's __init__ draws), got '" + draw.dist + "'");
      }
      const YAML::Node& shape = r.require(d, "shape", f + ".shape", "a list of dims");
      if (!shape.IsSequence()) r.fail(shape, f + ".shape", "expected a list of dims");
      for (std::size_t j = 0; j < shape.size(); ++j) draw.shape.push_back(r.expression(shape[j], f + ".shape"));
      s.upstream_init_draws.push_back(draw);
    }
  }
  if (root["centered_inputs"] && !root["centered_inputs"].IsNull()) {
    const std::string v = r.scalar(root["centered_inputs"], "centered_inputs");
    if (v != "true" && v != "false") {
      r.fail(root["centered_inputs"], "centered_inputs", "expected true or false, got '" + v + "'");
    }
    s.centered_inputs = v == "true";
  }
  for (const char* key : {"deviations", "excluded_from"}) {
    (std::string(key) == "deviations" ? s.deviations : s.excluded_from) = string_list(r, root[key], key);
  }
  if (root["audit"] && !root["audit"].IsNull()) {
    s.audit = audit_decisions(r, root["audit"], "audit", s.excluded_from, "excluded_from: [verified, strict]");
  }
  if (root["precisions"] && !root["precisions"].IsNull()) {
    const YAML::Node& block = root["precisions"];
    if (!block.IsMap()) r.fail(block, "precisions", "expected a map from fp16 or bf16 to {excluded_from, audit}");
    for (const auto& kv : block) {
      const std::string name = kv.first.Scalar();
      const std::string field = "precisions." + name;
      const std::optional<DType> dtype = name == "fp16" ? std::optional<DType>(DType::kFloat16)
                                         : name == "bf16" ? std::optional<DType>(DType::kBFloat16)
                                                          : std::nullopt;
      if (!dtype) {
        r.fail(kv.first, field,
               name == "fp32" ? "fp32's decisions are the top-level excluded_from and audit; this block is for fp16 "
                                "or bf16"
                              : "unknown precision '" + name + "'; expected fp16 or bf16");
      }
      if (!kv.second.IsMap()) r.fail(kv.second, field, "expected a map with excluded_from and audit");
      for (const auto& inner : kv.second) {
        const std::string key = inner.first.Scalar();
        if (key != "excluded_from" && key != "audit") {
          r.fail(inner.first, field + "." + key, "unknown field; expected excluded_from or audit");
        }
      }
      PrecisionDecisions& d = s.precisions[*dtype];
      d.excluded_from = string_list(r, kv.second["excluded_from"], field + ".excluded_from");
      std::vector<std::string> excluded = s.excluded_from;  // fp32's exclusions hold at every precision
      excluded.insert(excluded.end(), d.excluded_from.begin(), d.excluded_from.end());
      if (kv.second["audit"] && !kv.second["audit"].IsNull()) {
        d.audit = audit_decisions(r, kv.second["audit"], field + ".audit", excluded,
                                  field + ".excluded_from: [verified, strict]");
      }
    }
  }

  for (const auto& v : s.variants) {
    if (v.cpu && !s.cpu_dims) {
      r.fail_top("cpu", "missing; variant '" + v.name + "' has cpu dims, so the task needs top-level cpu dims too");
    }
  }
  // Every expression must evaluate at every set of dims the spec declares.
  std::vector<std::pair<std::string, DimValues>> dim_sets = {{"dims", s.resolve_dims(false)}};
  if (s.cpu_dims) dim_sets.push_back({"cpu", s.resolve_dims(true)});
  for (const auto& v : s.variants) {
    dim_sets.push_back({"variants." + v.name, s.resolve_dims(false, &v)});
    if (v.cpu) dim_sets.push_back({"variants." + v.name + ".cpu", s.resolve_dims(true, &v)});
  }
  for (const auto& [where, d] : dim_sets) {
    auto check = [&](const std::string& field, auto&& fn) {
      try {
        fn();
      } catch (const std::invalid_argument& e) {
        r.fail_top(field, std::string(e.what()) + " (with the dims of '" + where + "')");
      }
    };
    for (std::size_t i = 0; i < s.inputs.size(); ++i) {
      check("inputs[" + std::to_string(i) + "].shape", [&] {
        for (long long n : s.resolve_shape(s.inputs[i], d)) {
          if (n < 0) throw std::invalid_argument("a negative size");
        }
      });
      for (const auto& [p, e] : s.inputs[i].dist.params) {
        check("inputs[" + std::to_string(i) + "].dist." + p, [&] { eval_expr(e, d); });
      }
    }
    for (std::size_t i = 0; i < s.upstream_init_draws.size(); ++i) {
      check("upstream_init_draws[" + std::to_string(i) + "].shape", [&] {
        for (const auto& e : s.upstream_init_draws[i].shape) {
          if (eval_int_expr(e, d) < 0) throw std::invalid_argument("a negative size");
        }
      });
    }
    check("args", [&] { s.resolve_args(d); });
    check("flops", [&] { s.flop_count(d); });
    check("bytes", [&] { s.byte_count(d); });
  }

  fs::path ref = fs::path(yaml_path).replace_extension(".cpp");
  if (!fs::exists(ref)) {
    throw SpecError(yaml_path + ": the reference " + ref.string() + " is missing; every spec needs NAME.cpp beside it");
  }
  s.reference_path = ref.string();
  return s;
}

}  // namespace kloop
