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

// An imported run's published figures (its own protocol,
// kernelbench_published) beside what kloop measured (its rescores among
// `views`), one row per task of the whole levels imported; `notes` say
// which measured side is a partial rescore. One per imported run.
struct PublishedVsMeasured {
  std::string title;
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> notes;
};
std::vector<PublishedVsMeasured> published_vs_measured_tables(const std::vector<RunView>& views);

// `metrics[i]` belongs to `views[i]`. With several views the report opens
// with a comparison table (models x scaffolds x protocols side by side).
std::string render_text_report(const std::vector<RunView>& views, const std::vector<RunMetrics>& metrics,
                               TextFormat format);

}  // namespace kloop::report
