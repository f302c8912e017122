// Protocol: a named preset of correctness and timing rules (docs/protocols.md).
// Stored with every verdict so a run can be rescored under another one.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "evaluator/check/compare.h"
#include "evaluator/problem/spec.h"
#include "evaluator/runtime/dtype.h"
#include "evaluator/timing/sample_stats.h"

namespace kloop {

// A hidden-test input distribution: floating-point inputs are multiplied by
// `scale` (×3, ×0.01, ×−1 in the verified protocol). `centered` (strict)
// shifts each floating-point input's distribution to mean zero first
// (centered_draw), so long sums no longer grow with their length and
// reduced-precision arithmetic stands out against fp32's rounding.
struct InputScaling {
  std::string name;
  double scale = 1.0;
  bool centered = false;
};

// A floating-point input's distribution (kind and evaluated params, as the
// workers take it) shifted to mean zero: rand becomes uniform(-1, 1),
// uniform(low, high) uniform(low - m, high - m), normal(mean, std)
// normal(0, std); a constant (low == high), randn and discrete draws stay.
nlohmann::json centered_draw(const nlohmann::json& dist);
// Whether a centered case would change any of the spec's inputs.
bool has_centerable_input(const ProblemSpec& spec);

// KernelBench's precisions (its eval's `precision`: fp32, fp16, bf16): the
// dtype of a run's floating-point inputs, weights, reference and baseline.
// Integer and bool inputs keep their dtype.
enum class Precision { kFp32, kFp16, kBf16 };
const char* precision_name(Precision precision);  // fp32, fp16, bf16
// fp32, fp16 or bf16 (also float32, float16, bfloat16); nullopt otherwise.
std::optional<Precision> parse_precision(const std::string& name);
// "fp32, fp16 or bf16", for messages.
const char* precision_choices();
DType precision_dtype(Precision precision);
// The precision's unit roundoff: 2^-24 (fp32), 2^-11 (fp16), 2^-8 (bf16).
double precision_unit(Precision precision);
// KernelBench's tolerance (atol = rtol) for a precision in its current eval
// (eval.py's get_tolerance_for_precision, after torchbench): 1e-4 for fp32,
// 1e-2 for fp16 and bf16.
double kernelbench_tolerance(Precision precision);
// Whether the audit's `centered_ill_conditioned` flag is decided by a rule
// at this precision rather than by the spec (fp16 and bf16: every
// protocol's tolerance there is at least KernelBench's own, and strict
// passes the zero-mean case within it of the reference's outputs or within
// it plus the reference's own error of the fp64 twin's, so a candidate it
// fails is beyond the tolerance from the reference too: problems/README.md).
bool conditioning_decided_by_rule(Precision precision);

// The spec with its floating-point inputs in `precision` (ProblemSpec::
// precision says which): the cases generate_case makes from it draw them in
// that dtype, and the workers convert the modules' floating-point
// parameters and buffers to it (wire::Case::precision).
ProblemSpec spec_at_precision(const ProblemSpec& spec, Precision precision);

constexpr double kPrecisionFactor = 16;
constexpr double kPrecisionFloorUlps = 64;
// The floor at fp16 and bf16, in units of that precision: one unit of the
// output's RMS. A reference that is exact there (ReLU, a copy, a max)
// leaves the floor as the whole bound, and a computation through a
// narrower type (bf16 inside an fp16 run: about 2.3 fp16 units RMS) must
// not pass under it; an honest half-precision kernel that rounds once is
// at about 0.3 units.
constexpr double kReducedPrecisionFloorUnits = 1;

struct Protocol {
  std::string name;
  std::string description;
  // The protocol whose measurements this one takes (itself, or strict for
  // strict-libraries): the tasks it leaves out are that one's, and a
  // verdict under either is re-judged under the other from what it observed
  // (same_measurements).
  std::string measures_as;
  Tolerance tolerance;
  int seeds = 5;                             // correctness seeds at scale ×1
  std::vector<InputScaling> extra_scalings;  // one seed each
  bool hidden_shapes = false;                // also test the spec's variants
  bool randomize_identity_params = false;    // norm weights/biases not 1/0
  bool tf32_baseline = false;                // GPU: baseline with TF32 on
  bool integrity_checks = true;              // input mutation, aliasing, stale output
  bool exclude_degenerate = false;           // skip tasks whose spec excludes this protocol
  bool require_custom_kernels = false;       // GPU: cuBLAS/cuDNN/CUTLASS/ATen kernels in the candidate violate
  bool speed_of_light_floor = false;         // GPU: a time below the physical floor violates
  // An fp64 twin of the reference judges the precision of the first call of
  // the first test case and of the centered case:
  // the candidate's RMS error against it may be at most
  // kPrecisionFactor x the fp32 reference's own, or kPrecisionFloorUlps
  // fp32 units of the output's RMS, whichever is larger (docs/protocols.md).
  bool precision_check = false;
  int calls_per_case = 2;                    // forward calls per model instance
  // The run's precision (at_precision); tolerance is the one for it.
  Precision precision = Precision::kFp32;
  // KernelBench's current eval: atol = rtol = kernelbench_tolerance(precision).
  bool per_precision_tolerance = false;
  TimingRules cpu_timing;
  TimingRules gpu_timing;

  nlohmann::json to_json() const;
};

// The protocol at a run's precision: fp32 leaves it as it is; at fp16 or
// bf16 its tolerance is KernelBench's for that precision (1e-2) where its
// own is tighter (no half-precision reference meets 1e-3 against another
// half-precision implementation), and the precision check's floor counts
// units of that precision. Under kernelbench-v0.2 the tolerance is
// KernelBench's for the precision whatever it is (1e-4 in fp32).
Protocol at_precision(Protocol protocol, Precision precision);

// The precision check on one output: empty when the candidate's RMS error
// against the fp64 reference (`candidate_rms`) is within the bound, else
// why not. `reference_rms` is the reference's error at the run's precision
// (fp32 unless `precision` says otherwise), `exact_rms` the fp64 output's
// RMS; non-finite figures (a NaN in an output, which the comparison
// judges) are not judged here.
std::string precision_failure(double candidate_rms, double reference_rms, double exact_rms,
                              Precision precision = Precision::kFp32);

// KernelBench's evals, each named for its KernelBench version
// (docs/protocols.md): the original (v0.1: atol = rtol = 1e-2, no L2
// flush; `kernelbench` is its alias, so older configs and runs still load)
// and the current one (v0.2: atol = rtol = 1e-4 in fp32 and 1e-2 in
// fp16/bf16, L2 flushed before each trial).
constexpr const char* kKernelBenchOriginal = "kernelbench-v0.1";
constexpr const char* kKernelBenchCurrent = "kernelbench-v0.2";
// The protocol a name stands for: an alias's target (kernelbench ->
// kernelbench-v0.1), any other name as it is.
std::string canonical_protocol_name(const std::string& name);

// kernelbench-v0.1 (alias kernelbench), kernelbench-v0.2, verified, strict or
// strict-libraries (strict, with vendor library kernels allowed in the
// forward); throws std::invalid_argument naming them. The protocol's name is
// the canonical one.
Protocol protocol_by_name(const std::string& name);
std::vector<std::string> protocol_names();
// "kernelbench-v0.1 (alias kernelbench), kernelbench-v0.2, verified, strict or strict-libraries", for messages.
std::string protocol_choices();

// Whether an evaluation under `a` runs and measures exactly what one under
// `b` does, so the two differ at most in judging rules (which library
// kernels are allowed, the speed-of-light floor): then a verdict under one
// is judged again under the other from its stored observations (judge.h:
// rejudge) instead of running the candidate again.
bool same_measurements(const Protocol& a, const Protocol& b);

// One correctness test: a model instance built from `seed` at `dims`, called
// calls_per_case times on fresh inputs.
struct TestCase {
  int id = 0;
  uint64_t seed = 0;
  double scale = 1.0;
  std::string scaling;  // "x1", "x3", ...
  std::string variant;  // "" for the default shape
  bool centered = false;  // inputs shifted to mean zero (InputScaling::centered)
  DimValues dims;
  std::string label() const;  // "seed 3, x-1, variant odd"
};

// The test plan of a protocol for a problem. `cpu` picks the cpu dims.
std::vector<TestCase> plan_tests(const ProblemSpec& spec, const Protocol& protocol, bool cpu,
                                 uint64_t base_seed);

// Whether `protocol` leaves this problem out in a run at `precision` (its
// spec's excluded_from, and at fp16/bf16 that precision's `precisions`
// entry, under a protocol that excludes degenerate tasks): never sent to a
// model, never evaluated, not in the denominator.
bool excluded_by_protocol(const ProblemSpec& spec, const std::string& protocol, Precision precision);

}  // namespace kloop
