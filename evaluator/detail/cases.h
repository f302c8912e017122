// What the driver sends its workers to make a case: the inputs' and
// weights' draws, the constructor arguments, the load command, and the
// reference's generated cases. Shared by evaluate.cpp and
// reference_checks.cpp; not part of the evaluator's API.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator/detail/worker_session.h"
#include "evaluator/protocol.h"
#include "evaluator/runtime/host_tensor.h"

namespace kloop::detail {

// One case of the reference worker's `generate` command: a model instance
// built from `weight_seed` at `dims`, called `calls` times on inputs drawn
// from `seed` (shifted to mean zero when `centered`) and multiplied by `scale`;
// its weights drawn or seeded (`construction`, wire::Construction).
wire::Case generate_case(const ProblemSpec& spec, const DimValues& dims, int id, uint64_t seed, uint64_t weight_seed,
                         double scale, int calls, bool randomize_identity_params, bool centered = false,
                         wire::Construction construction = wire::Construction::kDrawn);

// True when no floating-point output holds a NaN or an Inf.
bool all_finite(const std::vector<HostTensor>& tensors);

// The worker's `load` command.
wire::Load load_command(const std::string& library, const std::string& role, const ProblemSpec& spec,
                        const EvalOptions& o);
// The load command of a built reference (its bundle entry named, if any).
wire::Load load_command(const BuildResult& reference, const std::string& role, const ProblemSpec& spec,
                        const EvalOptions& o);

// The protocol's timing rules for the device, capped by --max-timing.
TimingRules timing_rules(const Protocol& protocol, bool cpu, const EvalOptions& options);


std::string build_failure_text(const BuildResult& rb);

}  // namespace kloop::detail
