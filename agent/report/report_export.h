// Machine-readable exports of a report: a JSON summary of every view's
// metrics, and a CSV with one row per attempt (for pandas, R, spreadsheets).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "agent/report/metrics.h"
#include "agent/report/run_view.h"

namespace kloop::report {

// `metrics[i]` belongs to `views[i]`. Rates are fractions in [0, 1]; every
// estimate is {value, lo, hi}, or null when undefined.
nlohmann::json summary_json(const std::vector<RunView>& views, const std::vector<RunMetrics>& metrics);

// One row per attempt of each view's selection (duplicates dropped), with a
// header row; fields quoted as RFC 4180 asks.
std::string attempts_csv(const std::vector<RunView>& views);

}  // namespace kloop::report
