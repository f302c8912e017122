// Text reports of one or more run views, for the terminal (aligned columns)
// or as Markdown (pipe tables). They only format: the figures come from
// compute_metrics.
#pragma once

#include <string>
#include <vector>

#include "agent/report/metrics.h"
#include "agent/report/run_view.h"

namespace kloop::report {

enum class TextFormat { kTerminal, kMarkdown };

// `metrics[i]` belongs to `views[i]`. With several views the report opens
// with a comparison table (models x scaffolds x protocols side by side).
std::string render_text_report(const std::vector<RunView>& views, const std::vector<RunMetrics>& metrics,
                               TextFormat format);

}  // namespace kloop::report
