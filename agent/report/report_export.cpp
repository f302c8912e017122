// JSON summary and per-attempt CSV.
#include "agent/report/report_export.h"

#include <fmt/format.h>

#include <cstdio>
#include <sstream>

namespace kloop::report {
namespace {

using json = nlohmann::json;

// Failed attempts' counts under the outcomes' names, as results.jsonl
// spells them: a correct attempt is no failure (the Markdown and HTML
// failures tables leave it out too; the headline tables count it).
json failures_by_name(const std::map<Outcome, int>& counts) {
  json j = json::object();
  for (const auto& [o, n] : counts) {
    if (o != Outcome::kCorrect) j[outcome_name(o)] = n;
  }
  return j;
}

json estimate_json(const Estimate& e) {
  if (!e.defined) return nullptr;
  return {{"value", e.value}, {"lo", e.lo}, {"hi", e.hi}};
}

// The final turn against each baseline the run asked for besides its
// protocol's: {name: {timed, fast_p: [{p, value}], geomean_speedup}}.
json baselines_json(const RunView& v, const RunMetrics& m) {
  json out = json::object();
  for (const auto& b : baseline_metrics(v.problems, v.attempts, m.turns, m.samples, options_of(m), v.baselines)) {
    json fast = json::array();
    for (std::size_t i = 0; i < m.ps.size(); ++i) {
      fast.push_back({{"p", m.ps[i]}, {"value", estimate_json(b.final_turn.fast_p[i])}});
    }
    out[b.baseline] = {{"timed", b.timed}, {"fast_p", fast}, {"geomean_speedup", estimate_json(b.final_turn.geomean_speedup)}};
  }
  return out;
}

json turn_json(const TurnMetrics& t, const std::vector<double>& ps) {
  json fast = json::array();
  for (std::size_t i = 0; i < ps.size(); ++i) {
    json e = estimate_json(t.fast_p[i]);
    e["p"] = ps[i];
    e["count"] = t.fast_p_count[i];
    fast.push_back(e);
  }
  return {{"turn", t.turn},
          {"compile_rate", estimate_json(t.compile_rate)},
          {"correctness", estimate_json(t.correctness)},
          {"fast_p", fast},
          {"geomean_speedup", estimate_json(t.geomean_speedup)},
          {"compiled", t.compiled},
          {"correct", t.correct}};
}

json group_json(const GroupMetrics& g, const std::vector<double>& ps) {
  json by_turn = json::array();
  for (const auto& t : g.by_turn) by_turn.push_back(turn_json(t, ps));
  json one_sample = json::array();
  for (std::size_t i = 0; i < ps.size(); ++i) {
    json e = estimate_json(g.fast_p_one_sample[i]);
    e["p"] = ps[i];
    one_sample.push_back(e);
  }
  json pass = json::array();
  for (const auto& p : g.pass_at_k) pass.push_back({{"k", p.k}, {"estimate", estimate_json(p.value)}});
  return {{"name", g.name},
          {"level", g.level},
          {"problems", g.problems},
          {"problems_with_results", g.problems_with_results},
          {"samples", g.samples},
          {"by_turn", by_turn},
          {"fast_p_one_sample", one_sample},
          {"pass_at_k", pass}};
}

json provider_json(const RunView& v, const ProviderSummary& p) {
  const ProviderCallLog& calls = v.provider_calls;
  return {{"finish_reasons", p.finish_reasons},
          {"refused", p.refused},
          {"context_overflow", p.context_overflow},
          {"retried_attempts", p.retried_attempts},
          {"retries", p.retries},
          {"calls",
           {{"files", calls.files},
            {"records", calls.calls},
            {"unreadable_lines", calls.unreadable_lines},
            {"errors_by_class", calls.errors_by_class},
            {"turns_without_record", calls.turns_without_record}}},
          {"incomplete_chains", v.unfinished_chains}};
}

// The provider's bill from the run's ledger; null for a run without one.
json bill_json(const RunView& v) {
  if (!v.ledger.read) return nullptr;
  const CallLedger& l = v.ledger.ledger;
  return {{"cost_usd", l.cost_usd},
          {"calls", l.calls},
          {"billed_calls", l.billed_calls},
          {"requests", l.requests},
          {"transport_faults", l.transport_faults},
          {"transport_fault_cost_usd", l.transport_fault_cost_usd},
          {"estimated_calls", l.estimated_calls},
          {"in_flight_at_stop", l.in_flight_at_stop},
          {"answered_not_recorded", l.answered_not_recorded},
          {"kloop_errors_pending", l.kloop_errors_pending}};
}

json view_json(const RunView& v, const RunMetrics& m) {
  json groups = json::array();
  for (const auto& g : m.groups) groups.push_back(group_json(g, m.ps));
  const FailureTaxonomy& f = m.failures;
  const CostSummary& c = m.cost;
  const std::optional<double> saving = cache_saving_usd(c, v.prices);
  return {{"label", v.label()},
          {"run", v.run_name},
          {"run_dir", v.run_dir},
          {"protocol", v.protocol},
          {"rescored", v.rescored},
          {"results_file", v.results_file},
          {"model", v.model},
          {"scaffold", v.scaffold},
          {"scaffold_kind", v.scaffold_kind},
          {"device", v.device},
          {"turns", m.turns},
          {"samples", m.samples},
          {"ps", m.ps},
          {"bootstrap", {{"resamples", m.bootstrap_resamples}, {"confidence", m.confidence}}},
          {"groups", groups},
          {"baselines", baselines_json(v, m)},
          {"failures",
           {{"attempts", f.attempts},
            {"by_verdict", failures_by_name(f.by_outcome)},
            {"incorrect_by_kind", f.incorrect_by_kind},
            {"integrity_by_check", f.integrity_by_check}}},
          {"cost",
           {{"attempts", c.attempts},
            {"input_tokens", c.input_tokens},
            {"cached_input_tokens", c.cached_input_tokens},
            {"cache_write_tokens", c.cache_write_tokens},
            {"uncached_input_tokens", c.uncached_input_tokens},
            {"cache_saving_usd", saving ? json(*saving) : json(nullptr)},
            {"output_tokens", c.output_tokens},
            {"reasoning_tokens", c.reasoning_tokens},
            {"cost_usd", c.cost_usd},
            {"llm_seconds", c.llm_seconds},
            {"eval_seconds", c.eval_seconds},
            {"wall_seconds", c.wall_seconds},
            {"provider_bill", bill_json(v)}}},
          {"provider", provider_json(v, m.provider)},
          {"excluded_problems", v.excluded},
          {"chains", v.chains},
          {"unfinished_chains", v.unfinished_chains},
          {"attempts_not_rescored", v.attempts_not_rescored},
          {"duplicate_records", m.duplicate_records},
          {"records_outside_selection", m.records_outside_selection}};
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string number(double v) {
  const std::string buf = fmt::format("{:.6g}", v);
  return buf;
}

}  // namespace

json summary_json(const std::vector<RunView>& views, const std::vector<RunMetrics>& metrics) {
  json out = {{"format", "kloop-report-summary/1"}, {"views", json::array()}};
  // Legends and table rows show the labels that tell the views apart.
  const std::vector<std::string> short_labels = distinct_labels(views);
  for (std::size_t i = 0; i < views.size(); ++i) {
    out["views"].push_back(view_json(views[i], metrics[i]));
    out["views"].back()["short_label"] = short_labels[i];
  }
  // More than one: the views' timings do not compare with each other.
  out["gpu_models"] = gpu_models(views);
  // Each view's results at equal spend per problem, on one grid per axis.
  if (!views.empty()) {
    std::vector<std::vector<Attempt>> runs;
    for (const auto& v : views) runs.push_back(v.attempts);
    const MetricOptions options = options_of(metrics.front());
    json curves = json::object();
    for (BudgetAxis axis : {BudgetAxis::kCalls, BudgetAxis::kOutputTokens, BudgetAxis::kDollars}) {
      const std::vector<double> grid = budget_grid(axis, runs);
      json per_view = json::array();
      for (std::size_t i = 0; i < views.size(); ++i) {
        const RunView& v = views[i];
        json points = json::array();
        for (const auto& p : budget_curve(v.problems, v.attempts, axis, grid, options)) {
          json t = turn_json(p.metrics, options.ps);
          t.erase("turn");
          t["budget"] = p.budget;
          points.push_back(t);
        }
        per_view.push_back({{"label", v.label()}, {"short_label", short_labels[i]}, {"points", points}});
      }
      curves[budget_axis_name(axis)] = {{"budgets", grid}, {"views", per_view}};
    }
    out["budget_curves"] = curves;
  }
  return out;
}

std::string attempts_csv(const std::vector<RunView>& views) {
  std::ostringstream out;
  out << "run,protocol,rescored,model,device,problem,level,sample,turn,verdict,failure_kind,compiled,correct,speedup,"
         "input_tokens,output_tokens,reasoning_tokens,cost_usd,llm_seconds,eval_seconds,finish_reason,timestamp,"
         "attempt_dir,code_file,message,cached_input_tokens,cache_write_tokens,provider_attempts,evaluated_on,gpu,"
         "speedups\n";
  for (const auto& v : views) {
    for (const auto& a : selected_attempts(v.problems, v.attempts)) {
      const AttemptRecord& r = a.record;
      // Against the run's other baselines: "eager=1.2;compile-default=0.8".
      std::string speedups;
      for (const auto& [name, x] : r.speedups) speedups += (speedups.empty() ? "" : ";") + name + "=" + number(x);
      // New columns go last, so that older column positions hold.
      const std::vector<std::string> row = {v.run_name,
                                            v.protocol,
                                            v.rescored ? "1" : "0",
                                            v.model,
                                            v.device,
                                            r.problem,
                                            std::to_string(r.level),
                                            std::to_string(r.sample),
                                            std::to_string(r.turn),
                                            outcome_name(r.outcome),
                                            a.failure_kind,
                                            compiled(r.outcome) ? "1" : "0",
                                            r.outcome == Outcome::kCorrect ? "1" : "0",
                                            r.speedup ? number(*r.speedup) : "",
                                            std::to_string(r.input_tokens),
                                            std::to_string(r.output_tokens),
                                            std::to_string(r.reasoning_tokens),
                                            number(r.cost_usd),
                                            number(r.llm_seconds),
                                            number(r.eval_seconds),
                                            r.finish_reason,
                                            r.timestamp,
                                            r.attempt_dir,
                                            a.code_file,
                                            r.message,
                                            std::to_string(r.cached_input_tokens),
                                            std::to_string(r.cache_write_tokens),
                                            std::to_string(r.provider_attempts),
                                            r.device,
                                            r.gpu,
                                            speedups};
      for (std::size_t i = 0; i < row.size(); ++i) out << (i ? "," : "") << csv_field(row[i]);
      out << "\n";
    }
  }
  return out.str();
}

}  // namespace kloop::report
