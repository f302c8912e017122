// Arithmetic expressions over named dimensions, as written in problem specs
// ("2 * N * N * N", "(height - kernel_size) / stride + 1").
#pragma once

#include <map>
#include <string>

namespace kloop {

using DimValues = std::map<std::string, long long>;

// Evaluates `text` with the given dims. Throws std::invalid_argument with a
// message that points at the offending position or name.
double eval_expr(const std::string& text, const DimValues& dims);

// Like eval_expr, but the result must be an integer (within 1e-9).
long long eval_int_expr(const std::string& text, const DimValues& dims);

}  // namespace kloop
