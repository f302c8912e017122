// ProblemSpec: the data half of a task (NAME.yaml), parsed and validated.
// See problems/README.md for the format.
#pragma once

#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "evaluator/problem/expr.h"
#include "evaluator/runtime/dtype.h"

namespace kloop {

// A spec that cannot be used. The message names the file, the line, the
// field and what was expected.
class SpecError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// How a tensor's values are drawn. Parameters are expressions of dims.
struct Distribution {
  std::string kind = "randn";  // rand randn uniform normal randint ones zeros bernoulli sign
  std::map<std::string, std::string> params;
  // "" or a structure over the last two dimensions: symmetric,
  // upper_triangular, lower_triangular (problems/README.md).
  std::string structure;
};

struct InputSpec {
  std::string name;
  std::vector<std::string> shape;  // each an expression of dims
  DType dtype = DType::kFloat32;
  Distribution dist;
};

enum class ArgType { kInt, kFloat, kBool, kInts, kString };

struct ArgSpec {
  std::string name;
  ArgType type = ArgType::kInt;
  std::vector<std::string> values;  // one expression, or several for kInts
};

// A constructor argument evaluated at concrete dims.
struct ArgValue {
  std::string name;
  ArgType type = ArgType::kInt;
  long long int_value = 0;
  double float_value = 0;
  bool bool_value = false;
  std::vector<long long> ints;
  std::string string_value;
};

struct ShapeVariant {
  std::string name;
  DimValues dims;                  // overrides of the default dims
  std::optional<DimValues> cpu;    // overrides used on CPU runs
};

// What the task's authors decided about one flag of `kloop audit`.
struct AuditDecision {
  std::string flag;      // zeros_pass, constant_output, seed_invariant, input_independent, weight_independent
  std::string decision;  // exclude (from verified and strict), fixed (the spec was changed), accept
  std::string note;      // why, in a sentence a reader can check
};

// The audit's findings at a reduced precision (the spec's `precisions:
// {fp16: ..., bf16: ...}`): zeros pass more tasks at fp16's and bf16's
// tolerance (1e-2), so a task sound in fp32 may be degenerate there.
struct PrecisionDecisions {
  std::vector<std::string> excluded_from;  // protocols that skip the task at this precision too
  std::vector<AuditDecision> audit;
};

// A tensor upstream's __init__ draws from torch's generator and the port
// does not keep (33_VanillaRNN's hidden state, drawn at the module-level
// batch size): under seeded construction it is drawn, in order, right
// before the port's constructor, so the port's own draws come from the
// same place in the stream as upstream's.
struct InitDraw {
  std::string dist;                // randn or rand
  std::vector<std::string> shape;  // expressions of dims
};

struct ProblemSpec {
  std::string name;
  std::string suite;
  int level = 0;
  std::string description;
  std::map<std::string, std::string> provenance;
  DimValues dims;
  std::optional<DimValues> cpu_dims;
  std::vector<ArgSpec> args;
  std::vector<InputSpec> inputs;
  int outputs = 1;
  std::string flops;
  std::string bytes;
  std::vector<ShapeVariant> variants;
  std::map<std::string, Distribution> weights;
  std::vector<InitDraw> upstream_init_draws;  // seeded construction only
  std::vector<std::string> deviations;
  std::vector<std::string> excluded_from;  // protocols that skip this task
  // Whether strict's zero-mean hidden inputs (InputScaling::centered) suit
  // the task; `centered_inputs: false` where negative or near-zero inputs
  // make no sense for it.
  bool centered_inputs = true;
  std::vector<AuditDecision> audit;        // decisions about `kloop audit` flags (fp32's)
  // float16/bfloat16: decisions and exclusions found at that precision, on
  // top of fp32's (a task degenerate in fp32 stays so at a looser tolerance).
  std::map<DType, PrecisionDecisions> precisions;
  // The run's floating-point dtype (spec_at_precision in protocol.h):
  // float32 as the task is written, or float16/bfloat16, in which the
  // floating-point inputs above are then declared.
  DType precision = DType::kFloat32;
  std::string spec_path;
  std::string reference_path;

  // The dims for a run: defaults, then the cpu overrides (when `cpu`), then
  // the variant's. Throws SpecError when a CPU run lacks cpu dims.
  DimValues resolve_dims(bool cpu, const ShapeVariant* variant = nullptr) const;
  std::vector<ArgValue> resolve_args(const DimValues& dims) const;
  std::vector<long long> resolve_shape(const InputSpec& input, const DimValues& dims) const;
  double flop_count(const DimValues& dims) const;
  // The spec's `bytes` (written for fp32 elements), at the spec's precision.
  double byte_count(const DimValues& dims) const;
  // The protocols that leave the task out in a run at `precision`:
  // excluded_from, and at fp16/bf16 that precision's too.
  std::vector<std::string> excluded_from_at(DType precision) const;
  // The decision on an audit flag at `precision`: that precision's own,
  // else fp32's (which holds at every precision); nullptr when none.
  const AuditDecision* audit_decision(const std::string& flag, DType precision) const;
  // Every decision that applies at `precision`: that precision's, then the
  // fp32 ones on flags it does not decide itself.
  std::vector<AuditDecision> audit_at(DType precision) const;
};

// Parses and validates one spec file; `suite` is recorded as given.
ProblemSpec load_problem_spec(const std::string& yaml_path, const std::string& suite);

const char* arg_type_name(ArgType type);

}  // namespace kloop
