// The HTML report: one self-contained page (inline CSS, JS and SVG, the data
// embedded as JSON, nothing fetched) with fast_p-versus-p curves per turn,
// fast_p by turn, the speedup distribution, a problem x turn grid of
// verdicts and speedups, and links to every attempt's files.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "agent/report/metrics.h"
#include "agent/report/run_view.h"

namespace kloop::report {

// The data the page draws: summary_json plus, per view, the curves, the
// speedups and the grid. Links are relative to `page_dir`, the folder the
// page will be written to, so they work when the folder tree is copied.
nlohmann::json html_report_data(const std::vector<RunView>& views, const std::vector<RunMetrics>& metrics,
                                const std::string& page_dir);

// The page itself.
std::string render_html_report(const std::vector<RunView>& views, const std::vector<RunMetrics>& metrics,
                               const std::string& page_dir);

}  // namespace kloop::report
