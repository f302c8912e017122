// Metrics of one run: best so far per chain and problem, then rates over
// the whole selection with bootstrap intervals over problems.
#include "agent/report/metrics.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <map>
#include <random>
#include <set>
#include <stdexcept>
#include <tuple>

namespace kloop::report {
namespace {

// Resamples problems with replacement once per group, so that every
// statistic of the group is judged on the same resamples.
class Bootstrap {
 public:
  Bootstrap(int n, const MetricOptions& o) : confidence_(o.confidence) {
    if (n == 0) return;
    std::mt19937_64 rng(o.bootstrap_seed);
    std::uniform_int_distribution<int> pick(0, n - 1);
    resamples_.resize(static_cast<std::size_t>(std::max(0, o.bootstrap_resamples)));
    for (auto& r : resamples_) {
      r.resize(static_cast<std::size_t>(n));
      for (auto& i : r) i = pick(rng);
    }
  }

  Estimate mean(const std::vector<double>& values) const {
    auto stat = [&](const std::vector<int>* idx) {
      double sum = 0;
      const std::size_t n = idx ? idx->size() : values.size();
      for (std::size_t i = 0; i < n; ++i) sum += values[idx ? (*idx)[i] : i];
      return n ? std::optional<double>(sum / static_cast<double>(n)) : std::nullopt;
    };
    return estimate(stat);
  }

  // Over the problems that have a value (a correct, timed result).
  Estimate geomean(const std::vector<std::optional<double>>& speedups) const {
    auto stat = [&](const std::vector<int>* idx) -> std::optional<double> {
      double log_sum = 0;
      int count = 0;
      const std::size_t n = idx ? idx->size() : speedups.size();
      for (std::size_t i = 0; i < n; ++i) {
        const auto& s = speedups[idx ? (*idx)[i] : i];
        if (!s) continue;
        log_sum += std::log(*s);
        ++count;
      }
      if (count == 0) return std::nullopt;
      return std::exp(log_sum / count);
    };
    return estimate(stat);
  }

 private:
  template <typename Stat>
  Estimate estimate(const Stat& stat) const {
    Estimate e;
    std::optional<double> value = stat(nullptr);
    if (!value) {
      e.defined = false;
      return e;
    }
    e.value = e.lo = e.hi = *value;
    std::vector<double> stats;
    stats.reserve(resamples_.size());
    for (const auto& r : resamples_) {
      // A resample without any value (no correct problem drawn) has no
      // geomean; the interval is taken over those that have one.
      if (auto s = stat(&r)) stats.push_back(*s);
    }
    if (stats.empty()) return e;
    std::sort(stats.begin(), stats.end());
    const double tail = (1 - confidence_) / 2;
    e.lo = quantile(stats, tail);
    e.hi = quantile(stats, 1 - tail);
    return e;
  }

  static double quantile(const std::vector<double>& sorted, double q) {
    const double pos = q * static_cast<double>(sorted.size() - 1);
    const std::size_t below = static_cast<std::size_t>(std::floor(pos));
    const std::size_t above = std::min(below + 1, sorted.size() - 1);
    return sorted[below] + (pos - static_cast<double>(below)) * (sorted[above] - sorted[below]);
  }

  double confidence_;
  std::vector<std::vector<int>> resamples_;
};

std::vector<double> indicator(const std::vector<ProblemBest>& bests, const std::vector<int>& members,
                              bool (*test)(const ProblemBest&, double), double p) {
  std::vector<double> v;
  v.reserve(members.size());
  for (int i : members) v.push_back(test(bests[i], p) ? 1.0 : 0.0);
  return v;
}

bool compiled_test(const ProblemBest& b, double) { return b.compiled(); }
bool passes_test(const ProblemBest& b, double p) { return passes(b, p); }

int count_ones(const std::vector<double>& v) { return static_cast<int>(std::count(v.begin(), v.end(), 1.0)); }

TurnMetrics turn_metrics(int turn, const std::vector<ProblemBest>& bests, const std::vector<int>& members,
                         const Bootstrap& boot, const MetricOptions& o) {
  TurnMetrics m;
  m.turn = turn;
  const auto compiled = indicator(bests, members, compiled_test, 0);
  const auto correct = indicator(bests, members, passes_test, 0);
  m.compile_rate = boot.mean(compiled);
  m.correctness = boot.mean(correct);
  m.compiled = count_ones(compiled);
  m.correct = count_ones(correct);
  for (double p : o.ps) {
    const auto pass = indicator(bests, members, passes_test, p);
    m.fast_p.push_back(boot.mean(pass));
    m.fast_p_count.push_back(count_ones(pass));
  }
  std::vector<std::optional<double>> speedups;
  for (int i : members) speedups.push_back(bests[i].correct() ? bests[i].speedup() : std::nullopt);
  m.geomean_speedup = boot.geomean(speedups);
  return m;
}

std::vector<int> pass_at_k_ks(int samples) {
  std::vector<int> ks;
  for (int k = 1; k < samples; k *= 2) ks.push_back(k);
  ks.push_back(samples);
  return ks;
}

GroupMetrics group_metrics(const std::string& name, int level, const std::vector<int>& members,
                           const std::vector<std::vector<ProblemBest>>& table,
                           const std::set<std::string>& with_results, const std::vector<SelectedProblem>& problems,
                           int samples, const MetricOptions& o) {
  GroupMetrics g;
  g.name = name;
  g.level = level;
  g.problems = static_cast<int>(members.size());
  g.samples = samples;
  for (int i : members) g.problems_with_results += with_results.count(problems[i].name) ? 1 : 0;
  const Bootstrap boot(g.problems, o);
  for (std::size_t t = 0; t < table.size(); ++t) {
    g.by_turn.push_back(turn_metrics(static_cast<int>(t) + 1, table[t], members, boot, o));
  }
  const auto& final_bests = table.back();
  for (double p : o.ps) {
    std::vector<double> per_problem;
    for (int i : members) {
      double sum = 0;
      for (const auto& c : final_bests[i].chains) sum += passes(c, p) ? 1 : 0;
      per_problem.push_back(sum / samples);
    }
    g.fast_p_one_sample.push_back(boot.mean(per_problem));
  }
  for (int k : pass_at_k_ks(samples)) {
    std::vector<double> per_problem;
    for (int i : members) per_problem.push_back(pass_at_k(samples, final_bests[i].correct_chains(), k));
    g.pass_at_k.push_back({k, boot.mean(per_problem)});
  }
  return g;
}

// Seconds since the epoch of "YYYY-MM-DDTHH:MM:SSZ"; nullopt when malformed.
std::optional<double> parse_utc(const std::string& s) {
  std::tm tm{};
  if (s.size() < 19 || !strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm)) return std::nullopt;
  return static_cast<double>(timegm(&tm));
}

CostSummary cost_summary(const std::vector<Attempt>& attempts) {
  CostSummary c;
  std::optional<double> first_start, last_end;
  for (const auto& a : attempts) {
    const AttemptRecord& r = a.record;
    ++c.attempts;
    c.input_tokens += r.input_tokens;
    c.cached_input_tokens += r.cached_input_tokens;
    c.cache_write_tokens += r.cache_write_tokens;
    c.output_tokens += r.output_tokens;
    c.reasoning_tokens += r.reasoning_tokens;
    c.cost_usd += r.cost_usd;
    c.llm_seconds += r.llm_seconds;
    c.eval_seconds += r.eval_seconds;
    // The timestamp is taken when the attempt is recorded, after its LLM call
    // and evaluation.
    if (auto end = parse_utc(r.timestamp)) {
      const double start = *end - r.llm_seconds - r.eval_seconds;
      first_start = first_start ? std::min(*first_start, start) : start;
      last_end = last_end ? std::max(*last_end, *end) : *end;
    }
  }
  if (first_start && last_end) c.wall_seconds = std::max(0.0, *last_end - *first_start);
  c.uncached_input_tokens = std::max(0LL, c.input_tokens - c.cached_input_tokens);
  return c;
}


// The normalised finish reasons by name; every "other:<raw>" is "other".
std::string finish_reason_kind(const std::string& reason) {
  for (const char* known : {"stop", "length", "content_filter", "context_overflow", "interrupted"}) {
    if (reason == known) return known;
  }
  return "other";
}

ProviderSummary provider_summary(const std::vector<Attempt>& attempts) {
  ProviderSummary p;
  for (const auto& a : attempts) {
    const AttemptRecord& r = a.record;
    if (!r.finish_reason.empty()) ++p.finish_reasons[finish_reason_kind(r.finish_reason)];
    if (r.outcome == Outcome::kRefused) ++p.refused;
    if (r.outcome == Outcome::kContextOverflow) ++p.context_overflow;
    if (r.provider_attempts > 1) {
      ++p.retried_attempts;
      p.retries += r.provider_attempts - 1;
    }
  }
  return p;
}

FailureTaxonomy failure_taxonomy(const std::vector<Attempt>& attempts) {
  FailureTaxonomy f;
  for (const auto& a : attempts) {
    ++f.attempts;
    const Outcome v = a.record.outcome;
    ++f.by_outcome[v];
    const std::string kind = a.failure_kind.empty() ? "unclassified" : a.failure_kind;
    if (v == Outcome::kIncorrect) ++f.incorrect_by_kind[kind];
    if (v == Outcome::kIntegrityViolation) ++f.integrity_by_check[kind];
  }
  return f;
}

}  // namespace

bool ProblemBest::compiled() const {
  return std::any_of(chains.begin(), chains.end(), [](const ChainBest& c) { return c.compiled; });
}

bool ProblemBest::correct() const { return correct_chains() > 0; }

int ProblemBest::correct_chains() const {
  return static_cast<int>(std::count_if(chains.begin(), chains.end(), [](const ChainBest& c) { return c.correct; }));
}

std::optional<double> ProblemBest::speedup() const {
  std::optional<double> best;
  for (const auto& c : chains) {
    if (c.correct && c.speedup && (!best || *c.speedup > *best)) best = c.speedup;
  }
  return best;
}

bool passes(const ChainBest& best, double p) {
  if (!best.correct) return false;
  return best.speedup ? *best.speedup > p : p <= 0;
}

bool passes(const ProblemBest& best, double p) {
  return std::any_of(best.chains.begin(), best.chains.end(), [p](const ChainBest& c) { return passes(c, p); });
}

std::vector<Attempt> selected_attempts(const std::vector<SelectedProblem>& problems,
                                       const std::vector<Attempt>& attempts, RunMetrics* stats) {
  std::set<std::string> names;
  for (const auto& p : problems) names.insert(p.name);
  std::set<std::tuple<std::string, int, int>> seen;
  std::vector<Attempt> out;
  for (const auto& a : attempts) {
    const AttemptRecord& r = a.record;
    if (!names.count(r.problem)) {
      if (stats) ++stats->records_outside_selection;
      continue;
    }
    if (!seen.insert({r.problem, r.sample, r.turn}).second) {
      if (stats) ++stats->duplicate_records;
      continue;
    }
    out.push_back(a);
  }
  return out;
}

std::vector<std::vector<ProblemBest>> best_so_far(const std::vector<SelectedProblem>& problems,
                                                  const std::vector<Attempt>& attempts, int turns, int samples) {
  std::map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < problems.size(); ++i) index[problems[i].name] = i;
  ProblemBest empty;
  empty.chains.resize(static_cast<std::size_t>(samples));
  std::vector<std::vector<ProblemBest>> table(static_cast<std::size_t>(turns),
                                              std::vector<ProblemBest>(problems.size(), empty));
  for (const auto& a : attempts) {
    const AttemptRecord& r = a.record;
    auto it = index.find(r.problem);
    if (it == index.end() || r.sample < 0 || r.sample >= samples || r.turn < 1) continue;
    // An attempt at turn t improves the chain's best at every turn from t on.
    for (int t = r.turn; t <= turns; ++t) {
      ChainBest& c = table[t - 1][it->second].chains[r.sample];
      c.compiled = c.compiled || compiled(r.outcome);
      if (r.outcome != Outcome::kCorrect) continue;
      c.correct = true;
      if (r.speedup && (!c.speedup || *r.speedup > *c.speedup)) c.speedup = r.speedup;
    }
  }
  return table;
}

double pass_at_k(int n, int c, int k) {
  if (n <= 0 || k <= 0) return 0;
  if (n - c < k) return 1;
  double fail = 1;  // C(n - c, k) / C(n, k) as a product, stable for large n
  for (int i = n - c + 1; i <= n; ++i) fail *= 1.0 - static_cast<double>(k) / i;
  return 1 - fail;
}

std::vector<std::pair<double, double>> fast_p_curve(const std::vector<ProblemBest>& bests, double p_max) {
  std::vector<std::pair<double, double>> points;
  if (bests.empty()) return points;
  const double n = static_cast<double>(bests.size());
  std::vector<double> speedups;
  int correct = 0;
  for (const auto& b : bests) {
    if (!b.correct()) continue;
    ++correct;
    if (auto s = b.speedup()) speedups.push_back(*s);
  }
  std::sort(speedups.begin(), speedups.end());
  points.push_back({0.0, correct / n});
  std::size_t above = speedups.size();
  // Correct results without a timing count at p = 0 only.
  if (static_cast<int>(above) != correct) points.push_back({0.0, above / n});
  for (std::size_t i = 0; i < speedups.size() && speedups[i] <= p_max; ++i) {
    --above;
    if (i + 1 < speedups.size() && speedups[i + 1] == speedups[i]) continue;  // one step per distinct value
    points.push_back({speedups[i], above / n});
  }
  points.push_back({p_max, points.back().second});
  return points;
}

RunMetrics compute_metrics(const std::vector<SelectedProblem>& problems, const std::vector<Attempt>& attempts,
                           int turns, int samples, const MetricOptions& options) {
  for (double p : options.ps) {
    if (!(p >= 0)) throw std::invalid_argument("fast_p threshold " + std::to_string(p) + " must be >= 0");
  }
  RunMetrics m;
  m.ps = options.ps;
  m.bootstrap_resamples = options.bootstrap_resamples;
  m.bootstrap_seed = options.bootstrap_seed;
  m.confidence = options.confidence;
  const std::vector<Attempt> kept = selected_attempts(problems, attempts, &m);
  m.turns = std::max(1, turns);
  m.samples = std::max(1, samples);
  std::set<std::string> with_results;
  for (const auto& a : kept) {
    m.turns = std::max(m.turns, a.record.turn);
    m.samples = std::max(m.samples, a.record.sample + 1);
    with_results.insert(a.record.problem);
  }
  const auto table = best_so_far(problems, kept, m.turns, m.samples);

  std::map<int, std::vector<int>> by_level;
  std::vector<int> all;
  for (std::size_t i = 0; i < problems.size(); ++i) {
    by_level[problems[i].level].push_back(static_cast<int>(i));
    all.push_back(static_cast<int>(i));
  }
  for (const auto& [level, members] : by_level) {
    const std::string name = level > 0 ? "level " + std::to_string(level) : "level unknown";
    m.groups.push_back(group_metrics(name, level, members, table, with_results, problems, m.samples, options));
  }
  if (!all.empty()) m.groups.push_back(group_metrics("all", 0, all, table, with_results, problems, m.samples, options));
  m.failures = failure_taxonomy(kept);
  m.cost = cost_summary(kept);
  m.provider = provider_summary(kept);
  return m;
}

std::optional<double> cache_saving_usd(const CostSummary& c, const TokenPriceTable& prices) {
  if (prices.input <= 0 || (!prices.cached_input && !prices.cache_write)) return std::nullopt;
  // Against every input token at the input price: reads cost less, writes more.
  return (static_cast<double>(c.cached_input_tokens) * (prices.input - prices.cached_input.value_or(prices.input)) -
          static_cast<double>(c.cache_write_tokens) * (prices.cache_write.value_or(prices.input) - prices.input)) /
         1e6;
}

}  // namespace kloop::report

namespace kloop::report {
namespace {

double spend(const AttemptRecord& r, BudgetAxis axis) {
  switch (axis) {
    case BudgetAxis::kCalls:
      return 1;
    case BudgetAxis::kOutputTokens:
      return static_cast<double>(r.output_tokens);
    case BudgetAxis::kDollars:
      return r.cost_usd;
  }
  return 0;
}

// Per problem, its attempts in the order they were made.
std::map<std::string, std::vector<const AttemptRecord*>> in_call_order(const std::vector<Attempt>& attempts) {
  std::map<std::string, std::vector<const AttemptRecord*>> out;
  for (const auto& a : attempts) out[a.record.problem].push_back(&a.record);
  for (auto& [name, list] : out) {
    std::stable_sort(list.begin(), list.end(), [](const AttemptRecord* a, const AttemptRecord* b) {
      return a->turn != b->turn ? a->turn < b->turn : a->sample < b->sample;
    });
  }
  return out;
}

}  // namespace

std::vector<std::string> asked_baselines(const std::vector<Attempt>& attempts,
                                         const std::vector<std::string>& configured) {
  std::set<std::string> names(configured.begin(), configured.end());
  for (const auto& a : attempts) {
    for (const auto& [name, x] : a.record.speedups) names.insert(name);
  }
  return {names.begin(), names.end()};
}

std::vector<Attempt> attempts_against(const std::vector<Attempt>& attempts, const std::string& baseline) {
  std::vector<Attempt> against = attempts;
  for (auto& a : against) {
    const auto it = a.record.speedups.find(baseline);
    a.record.speedup = it == a.record.speedups.end() ? std::nullopt : std::optional<double>(it->second);
  }
  return against;
}

std::vector<BaselineMetrics> baseline_metrics(const std::vector<SelectedProblem>& problems,
                                              const std::vector<Attempt>& attempts, int turns, int samples,
                                              const MetricOptions& options,
                                              const std::vector<std::string>& configured) {
  std::vector<BaselineMetrics> out;
  for (const auto& name : asked_baselines(attempts, configured)) {
    BaselineMetrics b;
    b.baseline = name;
    const std::vector<Attempt> against = attempts_against(attempts, name);
    for (const auto& a : against) {
      if (a.record.outcome == Outcome::kCorrect && a.record.speedup) ++b.timed;
    }
    const RunMetrics m = compute_metrics(problems, against, turns, samples, options);
    if (m.groups.empty() || m.groups.back().by_turn.empty()) continue;
    b.final_turn = m.groups.back().by_turn.back();
    out.push_back(std::move(b));
  }
  return out;
}

MetricOptions options_of(const RunMetrics& m) {
  MetricOptions o;
  o.ps = m.ps;
  o.bootstrap_resamples = m.bootstrap_resamples;
  o.bootstrap_seed = m.bootstrap_seed;
  o.confidence = m.confidence;
  return o;
}

const char* budget_axis_name(BudgetAxis axis) {
  switch (axis) {
    case BudgetAxis::kCalls:
      return "calls";
    case BudgetAxis::kOutputTokens:
      return "output_tokens";
    case BudgetAxis::kDollars:
      return "dollars";
  }
  return "?";
}

std::vector<BudgetPoint> budget_curve(const std::vector<SelectedProblem>& problems,
                                      const std::vector<Attempt>& attempts, BudgetAxis axis,
                                      const std::vector<double>& budgets, const MetricOptions& options) {
  const std::vector<Attempt> selected = selected_attempts(problems, attempts);
  const auto ordered = in_call_order(selected);
  std::vector<int> members(problems.size());
  for (std::size_t i = 0; i < members.size(); ++i) members[i] = static_cast<int>(i);
  const Bootstrap boot(static_cast<int>(problems.size()), options);
  std::vector<BudgetPoint> out;
  for (double budget : budgets) {
    // One "chain" per problem: the best of what the budget bought.
    std::vector<ProblemBest> bests(problems.size());
    for (std::size_t i = 0; i < problems.size(); ++i) {
      ChainBest c;
      auto it = ordered.find(problems[i].name);
      double spent = 0;
      if (it != ordered.end()) {
        for (const AttemptRecord* r : it->second) {
          spent += spend(*r, axis);
          if (spent > budget * (1 + 1e-12)) break;
          c.compiled = c.compiled || compiled(r->outcome);
          if (r->outcome != Outcome::kCorrect) continue;
          c.correct = true;
          if (r->speedup && (!c.speedup || *r->speedup > *c.speedup)) c.speedup = r->speedup;
        }
      }
      bests[i].chains = {c};
    }
    out.push_back({budget, turn_metrics(0, bests, members, boot, options)});
  }
  return out;
}

std::vector<double> budget_grid(BudgetAxis axis, const std::vector<std::vector<Attempt>>& runs) {
  double largest = 0;
  for (const auto& attempts : runs) {
    std::map<std::string, double> per_problem;
    for (const auto& a : attempts) per_problem[a.record.problem] += spend(a.record, axis);
    for (const auto& [name, total] : per_problem) largest = std::max(largest, total);
  }
  std::vector<double> grid;
  if (largest <= 0) return grid;
  if (axis == BudgetAxis::kCalls) {
    for (double b = 1; b < largest; b *= 2) grid.push_back(b);
    grid.push_back(largest);
    return grid;
  }
  for (int step = 1; step <= 5; ++step) grid.push_back(largest * step / 5);
  return grid;
}

}  // namespace kloop::report
