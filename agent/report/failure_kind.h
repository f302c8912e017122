// The kind of a failed attempt, for the failure taxonomy of a report:
// incorrect attempts by what went wrong, integrity violations by the check
// that fired.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "agent/store/outcome.h"

namespace kloop::report {

// Kinds of an incorrect attempt, most specific first:
//   output_count      forward returned too few or too many outputs, or on the wrong device
//   shape, dtype      an output of the wrong shape or dtype
//   non_finite        NaN or Inf where the reference is finite
//   constant_output   one value everywhere where the expected values vary (strict)
//   broadcast_output  the same along a dimension where the expected vary (strict)
//   wrong_values      wrong on the plain tests (seed inputs at x1, default shape)
//   input_scaling     right at x1, wrong on scaled inputs (x3, x0.01, x-1)
//   centered_inputs   right on those, wrong on strict's zero-mean inputs
//   hidden_shape      right at the default shape, wrong on a hidden shape variant
//   precision         within the tolerance everywhere, but its error against the
//                     fp64 reference far beyond fp32's (strict)
// For an integrity violation the kind is the check (output_aliases_input, ...).
// `verdict_json` is the attempt's verdict.json, or null when it has none;
// then the one-line message decides. "" for other verdicts, "unclassified"
// when neither tells.
std::string failure_kind(Outcome outcome, const std::string& message, const nlohmann::json* verdict_json);

}  // namespace kloop::report
