// The candidate's GPU activity as the verdict judges it: profiler digests,
// the kernels and library calls the activity audit found, and the audit
// runs on the timing case and every hidden shape variant. For evaluate.cpp;
// not part of the evaluator's API.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator/check/activity_audit.h"
#include "evaluator/detail/worker_session.h"
#include "evaluator/judge.h"
#include "evaluator/protocol.h"

namespace kloop::detail {

// The candidate's activity audit (and, when asked, its counters and the two
// digests), after its timing. What the trace saw is returned for the judge
// (judge_activity: no kernel where the reference launches some, kernels on
// other streams, work still running after kloop's stream finished, library
// kernels where the protocol wants custom ones, event times far below the
// kernel time); the verdict gets what it describes (activity, libraries,
// the reference's kernels per call, digests).
ActivityObservation audit_candidate_activity(const ProblemSpec& spec, const DimValues& dims, WorkerSession& cand,
                                             const WorkDir& work, const wire::Case& run_case,
                                             const std::optional<wire::ProfileReply>& reference_profile,
                                             const json& device_info, const TimingRules& rules,
                                             const Protocol& protocol, const EvalOptions& options,
                                             const std::string& cache_dir, Verdict& v);

// Every shape variant's calls traced as well (under protocols that check
// integrity), for the judge, in order; the verdict gets each variant's
// activity and libraries.
std::vector<ActivityObservation> audit_shape_variants(const std::vector<TestCase>& tests,
                                                      const std::vector<wire::Case>& cases, WorkerSession& cand,
                                                      const WorkDir& work, const Protocol& protocol,
                                                      const EvalOptions& options, Verdict& v);

}  // namespace kloop::detail
