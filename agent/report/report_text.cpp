// Terminal and Markdown reports: the same tables, two layouts.
#include "agent/report/report_text.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <sstream>

namespace kloop::report {
namespace {

// What a terminal report fits in.
constexpr std::size_t kTerminalColumns = 100;

// Lines longer than kTerminalColumns broken at spaces, the rest of a line
// indented under its start.
std::string wrap_lines(const std::string& text) {
  std::istringstream in(text);
  std::ostringstream out;
  std::string line;
  while (std::getline(in, line)) {
    const std::string indent(line.find_first_not_of(' ') == std::string::npos ? 0 : line.find_first_not_of(' '), ' ');
    while (line.size() > kTerminalColumns) {
      std::size_t cut = line.rfind(' ', kTerminalColumns);
      if (cut == std::string::npos || cut <= indent.size()) break;  // one unbreakable word
      out << line.substr(0, cut) << "\n";
      line = indent + "  " + line.substr(cut + 1);
    }
    out << line << "\n";
  }
  return out.str();
}

struct Table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::size_t text_columns = 1;  // leading columns of names, left-aligned; figures after them right-aligned
};

std::string render_table(const Table& t, TextFormat f) {
  std::ostringstream out;
  if (f == TextFormat::kMarkdown) {
    auto row = [&](const std::vector<std::string>& cells) {
      out << "|";
      for (const auto& c : cells) out << " " << c << " |";
      out << "\n";
    };
    row(t.header);
    out << "|";
    for (std::size_t i = 0; i < t.header.size(); ++i) out << (i < t.text_columns ? "---|" : "--:|");
    out << "\n";
    for (const auto& r : t.rows) row(r);
    return out.str();
  }
  std::vector<std::size_t> width(t.header.size(), 0);
  for (std::size_t i = 0; i < t.header.size(); ++i) width[i] = t.header[i].size();
  for (const auto& r : t.rows) {
    for (std::size_t i = 0; i < r.size() && i < width.size(); ++i) width[i] = std::max(width[i], r[i].size());
  }
  // Within kTerminalColumns: the first column (names) gives way, cut with "...".
  std::size_t total_width = 2;
  for (auto w : width) total_width += w + 2;
  if (total_width - 2 > kTerminalColumns && !width.empty()) {
    width[0] = std::max<std::size_t>(12, width[0] - std::min(width[0], total_width - 2 - kTerminalColumns));
  }
  // Cut in the middle: runs of one sweep differ in their tails.
  auto fit = [&](const std::string& cell, std::size_t w) {
    if (cell.size() <= w) return cell;
    const std::size_t head = (w - 3) / 3;
    return cell.substr(0, head) + "..." + cell.substr(cell.size() - (w - 3 - head));
  };
  auto row = [&](const std::vector<std::string>& raw) {
    std::vector<std::string> cells = raw;
    if (!cells.empty()) cells[0] = fit(cells[0], width[0]);
    std::string line;
    for (std::size_t i = 0; i < cells.size(); ++i) {
      const std::string pad(width[i] - std::min(width[i], cells[i].size()), ' ');
      line += (i ? "  " : "") + (i < t.text_columns ? cells[i] + pad : pad + cells[i]);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out << "  " << line << "\n";
  };
  row(t.header);
  std::size_t total = 0;
  for (auto w : width) total += w;
  out << "  " << std::string(total + 2 * (width.size() - 1), '-') << "\n";
  for (const auto& r : t.rows) row(r);
  return out.str();
}

std::string heading(const std::string& text, int level, TextFormat f) {
  if (f == TextFormat::kMarkdown) return std::string(static_cast<std::size_t>(level), '#') + " " + text + "\n\n";
  if (level <= 2) return text + "\n" + std::string(text.size(), level == 1 ? '=' : '-') + "\n";
  return text + "\n";
}

std::string p_name(double p) { return "fast_" + fmt::format("{:g}", p); }

std::string percent(const Estimate& e, bool interval) {
  if (!e.defined) return "-";
  std::string s = fmt::format("{:.1f}%", 100 * e.value);
  if (interval) s += " [" + fmt::format("{:.1f}", 100 * e.lo) + ", " + fmt::format("{:.1f}", 100 * e.hi) + "]";
  return s;
}

std::string speedup(const Estimate& e, bool interval) {
  if (!e.defined) return "-";
  std::string s = fmt::format("{:.2f}x", e.value);
  if (interval) s += " [" + fmt::format("{:.2f}", e.lo) + ", " + fmt::format("{:.2f}", e.hi) + "]";
  return s;
}

std::string percent_points(const Estimate& a, const Estimate& b) {
  if (!a.defined || !b.defined) return "-";
  return fmt::format("{:+.1f} pt", 100 * (b.value - a.value));
}

std::string speedup_change(const Estimate& a, const Estimate& b) {
  if (!a.defined || !b.defined) return "-";
  return fmt::format("{:+.2f}x", b.value - a.value);
}

std::string duration(double s) {
  if (s < 60) return fmt::format("{:.1f}s", s);
  std::string buf;
  const long long t = static_cast<long long>(s + 0.5);
  if (t < 3600) {
    buf = fmt::format("{}m {:02}s", t / 60, t % 60);
  } else {
    buf = fmt::format("{}h {:02}m", t / 3600, (t % 3600) / 60);
  }
  return buf;
}

// The groups worth a section: every level, and "all" only when it differs.
std::vector<const GroupMetrics*> shown_groups(const RunMetrics& m) {
  std::vector<const GroupMetrics*> out;
  for (const auto& g : m.groups) out.push_back(&g);
  if (out.size() == 2) out.pop_back();  // one level: "all" repeats it
  return out;
}

const GroupMetrics* overall(const RunMetrics& m) { return m.groups.empty() ? nullptr : &m.groups.back(); }

// speed_na: the view has no speed figure (no_published_speedups): fast_p
// above 0 and the geomean read n/a.
std::string one_shot_vs_final(const GroupMetrics& g, const RunMetrics& m, TextFormat f, bool speed_na) {
  const bool ci = m.bootstrap_resamples > 0;
  const TurnMetrics& a = g.by_turn.front();
  const TurnMetrics& b = g.by_turn.back();
  const bool iterative = g.by_turn.size() > 1;
  Table t;
  t.header = {"metric", "one-shot (turn 1)"};
  if (iterative) t.header.insert(t.header.end(), {"final (turn " + std::to_string(b.turn) + ")", "diff"});
  auto add = [&](const std::string& name, const Estimate& x, const Estimate& y, bool is_speedup,
                 bool needs_speed = false) {
    if (speed_na && (is_speedup || needs_speed)) {
      t.rows.push_back({name, "n/a"});
      if (iterative) t.rows.back().insert(t.rows.back().end(), {"n/a", "-"});
      return;
    }
    std::vector<std::string> row = {name, is_speedup ? speedup(x, ci) : percent(x, ci)};
    if (iterative) {
      row.push_back(is_speedup ? speedup(y, ci) : percent(y, ci));
      row.push_back(is_speedup ? speedup_change(x, y) : percent_points(x, y));
    }
    t.rows.push_back(row);
  };
  add("compile rate", a.compile_rate, b.compile_rate, false);
  add("correct (fast_0)", a.correctness, b.correctness, false);
  for (std::size_t i = 0; i < m.ps.size(); ++i) {
    if (m.ps[i] > 0) add(p_name(m.ps[i]), a.fast_p[i], b.fast_p[i], false, true);
  }
  add("geomean speedup (correct)", a.geomean_speedup, b.geomean_speedup, true);
  std::string title = g.name + ": one-shot" + (iterative ? " vs iterative" : "") + " (" + std::to_string(g.problems) +
                      " problems, " + std::to_string(g.problems_with_results) + " with results";
  if (g.samples > 1) title += "; best of " + std::to_string(g.samples) + " samples";
  title += ")";
  return heading(title, 3, f) + render_table(t, f);
}

std::string by_turn_table(const GroupMetrics& g, const RunMetrics& m, TextFormat f) {
  Table t;
  t.header = {"turn", "compile", "correct"};
  for (double p : m.ps) {
    if (p > 0) t.header.push_back(p_name(p));
  }
  t.header.push_back("geomean");
  for (const auto& tm : g.by_turn) {
    std::vector<std::string> row = {std::to_string(tm.turn), percent(tm.compile_rate, false),
                                    percent(tm.correctness, false)};
    for (std::size_t i = 0; i < m.ps.size(); ++i) {
      if (m.ps[i] > 0) row.push_back(percent(tm.fast_p[i], false));
    }
    row.push_back(speedup(tm.geomean_speedup, false));
    t.rows.push_back(row);
  }
  return heading(g.name + ": best so far by turn (over turns <= t and samples)", 3, f) + render_table(t, f);
}

// The final turn against each baseline the run asked for besides its
// protocol's (evaluation.baselines); nothing when it asked for none. The
// terminal's rows fit 100 columns: no intervals there (Markdown and
// --json have them).
std::string baselines_table(const RunView& v, const RunMetrics& m, TextFormat f) {
  const std::vector<BaselineMetrics> bs = baseline_metrics(v.problems, v.attempts, m.turns, m.samples, options_of(m), v.baselines);
  if (bs.empty()) return "";
  const bool terminal = f == TextFormat::kTerminal;
  const bool ci = m.bootstrap_resamples > 0 && !terminal;
  Table t;
  t.header = {"baseline", terminal ? "timed" : "correct, timed against it"};
  for (double p : m.ps) {
    if (p > 0) t.header.push_back(p_name(p));
  }
  t.header.push_back("geomean speedup");
  for (const auto& b : bs) {
    std::vector<std::string> row = {b.baseline, std::to_string(b.timed)};
    for (std::size_t i = 0; i < m.ps.size(); ++i) {
      if (m.ps[i] > 0) row.push_back(percent(b.final_turn.fast_p[i], ci));
    }
    row.push_back(speedup(b.final_turn.geomean_speedup, ci));
    t.rows.push_back(std::move(row));
  }
  return heading("all: final turn against each baseline the run asked for (the tables above use the protocol's, " +
                     std::string(v.protocol) + ")",
                 3, f) +
         render_table(t, f) +
         (terminal ? "  (timed: correct attempts timed against it; intervals in --format markdown and --json)\n" : "") +
         "\n";
}

std::string samples_table(const GroupMetrics& g, const RunMetrics& m, TextFormat f) {
  const bool ci = m.bootstrap_resamples > 0;
  Table pass;
  pass.header = {"k", "pass@k (correct)"};
  for (const auto& p : g.pass_at_k) pass.rows.push_back({std::to_string(p.k), percent(p.value, ci)});
  Table fast;
  fast.header = {"p", "one sample (mean over k)", "best of " + std::to_string(g.samples)};
  for (std::size_t i = 0; i < m.ps.size(); ++i) {
    fast.rows.push_back(
        {p_name(m.ps[i]), percent(g.fast_p_one_sample[i], ci), percent(g.by_turn.back().fast_p[i], ci)});
  }
  return heading(g.name + ": " + std::to_string(g.samples) + " samples per problem, final turn", 3, f) +
         render_table(pass, f) + "\n" + render_table(fast, f);
}

std::string failures_table(const FailureTaxonomy& ft, TextFormat f) {
  auto share = [&](int n) { return ft.attempts ? fmt::format("{:.1f}%", 100.0 * n / ft.attempts) : std::string("-"); };
  Table t;
  t.header = {"verdict", "kind", "attempts", "share"};
  t.text_columns = 2;
  for (const auto& [v, n] : ft.by_outcome) {  // in the enum's order
    if (v == Outcome::kCorrect) continue;  // not a failure; the headline tables count them
    t.rows.push_back({outcome_name(v), "", std::to_string(n), share(n)});
    const auto* kinds = v == Outcome::kIncorrect             ? &ft.incorrect_by_kind
                        : v == Outcome::kIntegrityViolation ? &ft.integrity_by_check
                                                            : nullptr;
    if (!kinds) continue;
    for (const auto& [kind, n] : *kinds) t.rows.push_back({"", kind, std::to_string(n), share(n)});
  }
  return heading("failures (" + std::to_string(ft.attempts) + " attempts)", 3, f) + render_table(t, f);
}

// From the furthest from correct to correct: a problem's best. An
// unevaluated import says nothing, so it is never a problem's best.
int outcome_rank(Outcome o) {
  switch (o) {
    case Outcome::kUnevaluated: return -1;
    case Outcome::kRefused: return 0;
    case Outcome::kContextOverflow: return 1;
    case Outcome::kNoCode: return 2;
    case Outcome::kCompileError: return 3;
    case Outcome::kLoadError: return 4;
    case Outcome::kTimeout: return 5;
    case Outcome::kRuntimeError: return 6;
    case Outcome::kIntegrityViolation: return 7;
    case Outcome::kIncorrect: return 8;
    case Outcome::kCorrect: return 9;
  }
  return -1;
}

// A problem's best over every sample and turn: its best verdict, the best
// speedup of a correct attempt, the turn of its first correct attempt and
// the last turn it reached.
struct ProblemRow {
  std::optional<Outcome> best;
  std::optional<double> speedup;
  int first_correct = 0, last_turn = 0, attempts = 0;
};

std::map<std::string, ProblemRow> problem_rows(const RunView& v) {
  std::map<std::string, ProblemRow> rows;
  for (const auto& a : v.attempts) {
    const AttemptRecord& r = a.record;
    ProblemRow& row = rows[r.problem];
    ++row.attempts;
    row.last_turn = std::max(row.last_turn, r.turn);
    if (outcome_rank(r.outcome) > (row.best ? outcome_rank(*row.best) : -1)) row.best = r.outcome;
    if (r.outcome == Outcome::kCorrect) {
      if (!row.first_correct || r.turn < row.first_correct) row.first_correct = r.turn;
      if (r.speedup && (!row.speedup || *r.speedup > *row.speedup)) row.speedup = r.speedup;
    }
  }
  return rows;
}

// A published view (kloop import) whose records carry no speedup: its fast_p
// above 0 and its geomean are unknown, not zero, and print as n/a.
bool no_published_speedups(const RunView& v) {
  if (v.protocol != "kernelbench_published") return false;
  for (const auto& a : v.attempts) {
    if (a.record.speedup) return false;
  }
  return true;
}

// One row per selected problem (problem_rows).
std::string problems_table(const RunView& v, TextFormat f) {
  using Row = ProblemRow;
  const std::map<std::string, Row> rows = problem_rows(v);
  Table t;
  t.header = {"problem", "level", "best verdict", "best speedup", "first correct", "turns", "attempts"};
  t.text_columns = 1;
  const std::size_t width = f == TextFormat::kTerminal ? 44 : 1000;
  for (const auto& p : v.problems) {
    const auto it = rows.find(p.name);
    const Row row = it == rows.end() ? Row{} : it->second;
    std::string name = p.name.size() > width ? p.name.substr(0, width - 3) + "..." : p.name;
    t.rows.push_back({name, std::to_string(p.level),
                      !row.attempts ? "(no attempt)"
                      : row.best    ? outcome_name(*row.best)
                                    : "-",
                      row.speedup ? fmt::format("{:.2f}x", *row.speedup) : "-",
                      row.first_correct ? "turn " + std::to_string(row.first_correct) : "-",
                      row.last_turn ? std::to_string(row.last_turn) : "-", std::to_string(row.attempts)});
  }
  return heading("problems (" + std::to_string(v.problems.size()) + ")", 3, f) + render_table(t, f);
}

// The provider's bill from the run's ledger: every call once, what broke
// in transport apart from what the model did, and what a stop left open.
std::string bill_lines(const RunView& v, TextFormat f) {
  if (!v.ledger.read) return "";
  const CallLedger& l = v.ledger.ledger;
  std::string out = (f == TextFormat::kMarkdown ? "\n  " : "  ") +
                    fmt::format("provider's bill: ${:.4f} for {} billed call(s) of {} request(s), every call once "
                                "(resends and broken streams included)",
                                l.cost_usd, l.billed_calls, l.requests);
  if (l.transport_faults) {
    out += fmt::format("; transport faults {} (${:.4f}): streams broken after HTTP 200, the provider's, not counted "
                       "as outcomes",
                       l.transport_faults, l.transport_fault_cost_usd);
  }
  if (l.estimated_calls) out += fmt::format("; {} call(s) costed from their length (no usage sent)", l.estimated_calls);
  if (l.in_flight_at_stop) {
    out += fmt::format("; {} request(s) in flight when a driver died (maybe billed, cost unknown)", l.in_flight_at_stop);
  }
  if (l.answered_not_recorded) {
    out += fmt::format("; {} answer(s) kept, not yet evaluated (the next run evaluates them without a request{})",
                       l.answered_not_recorded,
                       l.kloop_errors_pending ? fmt::format(", {} after an error of kloop's", l.kloop_errors_pending) : "");
  }
  return out + "\n";
}

std::string cost_table(const CostSummary& c, const TokenPriceTable& prices, TextFormat f) {
  Table t;
  t.header = {"attempts", "input tokens", "output tokens", "reasoning tokens",
              "cost",     "LLM time",     "eval time",     "wall time"};
  t.rows.push_back({std::to_string(c.attempts), std::to_string(c.input_tokens), std::to_string(c.output_tokens),
                    std::to_string(c.reasoning_tokens), fmt::format("${:.4f}", c.cost_usd), duration(c.llm_seconds),
                    duration(c.eval_seconds), duration(c.wall_seconds)});
  std::string out = heading("cost", 3, f) + render_table(t, f) + (f == TextFormat::kMarkdown ? "\n" : "") +
                    "  (LLM and eval times are summed over attempts; wall time runs from the first attempt's start to "
                    "the last one's end)\n";
  // The share the cache served, and with the run's cache prices what it saved.
  if (c.cached_input_tokens || c.cache_write_tokens) {
    const double share = c.input_tokens ? 100.0 * static_cast<double>(c.cached_input_tokens) / c.input_tokens : 0;
    const auto saved = cache_saving_usd(c, prices);
    out += (f == TextFormat::kMarkdown ? "\n  " : "  ") + std::to_string(c.cached_input_tokens) + " of " +
           std::to_string(c.input_tokens) + " input tokens (" + fmt::format("{:.1f}%", share) +
           ") read from the provider's prompt cache; " + std::to_string(c.cache_write_tokens) + " written to it" +
           (saved ? "; the cache saved " + fmt::format("${:.4f}", *saved) + " at the run's prices" : std::string()) +
           "\n";
  }
  return out;
}

// "name n" of the non-zero counts, in `order` first, then the rest by name.
std::vector<std::string> count_items(const std::map<std::string, int>& counts, const std::vector<std::string>& order) {
  std::vector<std::string> names = order;
  for (const auto& [name, n] : counts) {
    if (std::find(order.begin(), order.end(), name) == order.end()) names.push_back(name);
  }
  std::vector<std::string> items;
  for (const auto& name : names) {
    auto it = counts.find(name);
    if (it != counts.end() && it->second != 0) items.push_back(name + " " + std::to_string(it->second));
  }
  return items;
}

std::string plural(int n, const std::string& one, const std::string& many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

// What the provider did, its non-zero counts only: groups joined by "; ",
// their items by ", ". On a terminal a line breaks before a group that does
// not fit, or between items of one longer than a line, never inside an item,
// so a name keeps its count. "" when there is nothing to say.
std::string provider_block(const RunView& v, const ProviderSummary& p, TextFormat f) {
  std::vector<std::vector<std::string>> groups;
  auto add = [&](std::vector<std::string> items, const std::string& label = "") {
    if (items.empty()) return;
    items.front() = label + items.front();
    groups.push_back(std::move(items));
  };
  add(count_items(p.finish_reasons, {"stop", "length", "content_filter", "context_overflow", "interrupted", "other"}),
      "finish ");
  add(count_items({{"refused", p.refused}, {"context_overflow", p.context_overflow}}, {"refused", "context_overflow"}));
  if (p.retried_attempts) {
    add({"retried calls " + std::to_string(p.retried_attempts) + " (" + plural(p.retries, "retry", "retries") + ")"});
  }
  const ProviderCallLog& calls = v.provider_calls;
  add(count_items(calls.errors_by_class, {"transient", "quota", "context_overflow", "auth", "model", "bad_request",
                                          "content_policy", "server_refused", "malformed", "transport_fault",
                                          "interrupted"}),
      "errors: ");
  if (calls.unreadable_lines) {
    add({plural(calls.unreadable_lines, "unreadable calls.jsonl line", "unreadable calls.jsonl lines")});
  }
  if (v.unfinished_chains) {
    std::string chains = plural(v.unfinished_chains, "incomplete chain", "incomplete chains");
    if (calls.turns_without_record) {
      chains += " (" + std::to_string(calls.turns_without_record) + " stopped at a failed provider call)";
    }
    add({chains});
  }
  if (groups.empty()) return "";
  const bool wrap = f == TextFormat::kTerminal;
  const std::string indent = "   ";  // a continuation's first item starts 4 columns in, 2 more than "provider:"
  std::string out = f == TextFormat::kMarkdown ? "\n" : "";
  std::string line = "  provider:";
  bool fresh = true;  // no item on `line` yet: breaking would leave it bare
  auto fits = [&](const std::string& text) { return !wrap || line.size() + 1 + text.size() <= kTerminalColumns; };
  auto break_line = [&] {
    out += line + "\n";
    line = indent;
    fresh = true;
  };
  for (std::size_t g = 0; g < groups.size(); ++g) {
    std::vector<std::string> items = groups[g];
    const std::string group_end = g + 1 < groups.size() ? ";" : "";
    for (std::size_t i = 0; i < items.size(); ++i) items[i] += i + 1 < items.size() ? "," : group_end;
    std::string whole;
    for (const auto& item : items) whole += (whole.empty() ? "" : " ") + item;
    if (!fits(whole) && !fresh && indent.size() + 1 + whole.size() <= kTerminalColumns) break_line();
    for (const auto& item : items) {
      if (!fits(item) && !fresh) break_line();
      line += " " + item;
      fresh = false;
    }
  }
  return out + line + "\n";
}

std::string view_section(const RunView& v, const RunMetrics& m, TextFormat f) {
  std::ostringstream out;
  out << heading(v.label(), 2, f);
  out << "model " << v.model << "; scaffold " << v.scaffold << "; device " << v.device << "; protocol " << v.protocol
      << (v.rescored ? " (rescored)" : "") << "\n";
  const GroupMetrics* all = overall(m);
  out << (all ? all->problems : 0) << " problems selected, " << (all ? all->problems_with_results : 0)
      << " with results; " << m.failures.attempts << " attempts from " << v.results_file;
  if (v.record_files.size() > 1 || (v.record_files.size() == 1 && v.record_files[0] != v.results_file)) {
    out << " (" << v.record_files.size() << " files: " << v.record_files.front() << ", ..., the run's shards)";
  }
  const std::vector<DeviceUse> devices = device_use(v);
  if (devices.size() > 1 || (devices.size() == 1 && !devices[0].gpu.empty())) {
    out << "\nevaluated on";
    for (std::size_t i = 0; i < devices.size(); ++i) {
      out << (i ? ", " : " ") << devices[i].device << (devices[i].gpu.empty() ? "" : " (" + devices[i].gpu + ")")
          << ": " << devices[i].attempts;
    }
  }
  if (!v.excluded.empty()) {
    out << "\n" << v.excluded.size() << " excluded by " << v.protocol << " as degenerate (";
    for (std::size_t i = 0; i < v.excluded.size(); ++i) out << (i ? ", " : "") << v.excluded[i];
    out << ")";
  }
  if (m.duplicate_records) out << "\n" << m.duplicate_records << " duplicate records ignored";
  if (v.unfinished_chains) {
    out << "\nUNFINISHED: " << v.unfinished_chains << " of " << v.chains
        << " chains have not reached their last turn (kloop run CONFIG resumes the run)";
  }
  if (v.attempts_not_rescored) {
    out << "\nPARTIAL RESCORE: " << v.attempts_not_rescored << " of the run's attempts have no " << v.protocol
        << " record (the run went on after the rescore, or it stopped part way; kloop rescore " << v.run_dir
        << " --protocol " << v.protocol << " completes it)";
  }
  if (m.records_outside_selection)
    out << "\n" << m.records_outside_selection << " records outside the selection ignored";
  out << "\n";
  if (m.bootstrap_resamples > 0) {
    out << "[lo, hi]: " << fmt::format("{:g}", 100 * m.confidence) << "% bootstrap interval over problems ("
        << m.bootstrap_resamples << " resamples)\n";
  }
  out << "\n";
  for (const GroupMetrics* g : shown_groups(m)) {
    out << one_shot_vs_final(*g, m, f, no_published_speedups(v)) << "\n";
    if (g->by_turn.size() > 2) out << by_turn_table(*g, m, f) << "\n";
    // A search's attempts of a round are not independent samples.
    const bool search = v.scaffold_kind == "beam" || v.scaffold_kind == "evolve";
    if (g->samples > 1 && !search) out << samples_table(*g, m, f) << "\n";
  }
  out << baselines_table(v, m, f);
  out << problems_table(v, f) << "\n";
  out << failures_table(m.failures, f) << "\n" << cost_table(m.cost, v.prices, f) << bill_lines(v, f);
  if (v.rescored) {
    out << "  (rescored: tokens, cost and LLM time are those of the run's generations; eval and wall time are the "
           "rescore's)\n";
  }
  out << provider_block(v, m.provider, f);
  out << "\n";
  return out.str();
}

// One row per view: the overall group at one turn (1, or each view's final).
std::string comparison_table(const std::vector<RunView>& views, const std::vector<RunMetrics>& metrics, bool final_turn,
                             TextFormat f) {
  // On a terminal the model and scaffold go above the table, which then
  // fits 100 columns; Markdown keeps them in it.
  const bool wide = f == TextFormat::kMarkdown;
  Table t;
  t.header = {"run [protocol]", "model", "scaffold", "problems", "compile", "correct"};
  t.text_columns = 3;
  if (!wide) {
    t.header = {"run [protocol]", "problems", "correct"};  // compile rates: in each run's own section
    t.text_columns = 1;
  }
  for (double p : metrics.front().ps) {
    if (p > 0) t.header.push_back(p_name(p));
  }
  t.header.push_back("geomean");
  // The runs of one sweep (NAME/key=value/...): rows without the shared
  // NAME/, which the list above the table keeps; a run whose figures are
  // not the whole run's is marked (notes under the table).
  const std::vector<std::string> labels = distinct_labels(views);
  std::vector<std::string> marks(views.size());
  std::string notes;
  for (std::size_t i = 0; i < views.size(); ++i) {
    const RunView& v = views[i];
    if (v.attempts_not_rescored) {
      marks[i] += " *";
      notes += "  * " + v.label() + ": PARTIAL RESCORE: " + std::to_string(v.attempts_not_rescored) +
               " of the run's attempts have no " + v.protocol + " record (kloop rescore " + v.run_dir +
               " --protocol " + v.protocol + " completes it)\n";
    }
    if (v.unfinished_chains) {
      marks[i] += " +";
      notes += "  + " + v.label() + ": UNFINISHED: " + std::to_string(v.unfinished_chains) + " of " +
               std::to_string(v.chains) + " chains short of their last turn\n";
    }
  }
  // On a terminal, labels too long for the table become numbers, which the
  // list above it explains.
  bool numbered = false;
  for (std::size_t i = 0; i < views.size(); ++i) numbered = numbered || (!wide && labels[i].size() + marks[i].size() > 26);
  for (std::size_t i = 0; i < views.size(); ++i) {
    const GroupMetrics* g = overall(metrics[i]);
    if (!g) continue;
    const TurnMetrics& tm = final_turn ? g->by_turn.back() : g->by_turn.front();
    std::vector<std::string> row = {(numbered ? "#" + std::to_string(i + 1) : labels[i]) + marks[i],
                                    views[i].model,
                                    views[i].scaffold,
                                    std::to_string(g->problems),
                                    percent(tm.compile_rate, false),
                                    percent(tm.correctness, false)};
    if (!wide) {
      row.erase(row.begin() + 4);  // compile
      row.erase(row.begin() + 1, row.begin() + 3);
    }
    const bool speed_na = no_published_speedups(views[i]);
    for (std::size_t k = 0; k < metrics[i].ps.size(); ++k) {
      if (metrics[i].ps[k] > 0) row.push_back(speed_na ? "n/a" : percent(tm.fast_p[k], false));
    }
    row.push_back(speed_na ? "n/a" : speedup(tm.geomean_speedup, false));
    t.rows.push_back(row);
  }
  std::string runs;
  if (!wide) {
    for (std::size_t i = 0; i < views.size(); ++i) {
      runs += "  " + (numbered ? "#" + std::to_string(i + 1) + " " : "") + views[i].label() + ": " + views[i].model +
              "; " + views[i].scaffold + "\n";
    }
  }
  return heading(final_turn ? "final turn (iterative), all problems" : "one-shot (turn 1), all problems", 3, f) +
         runs + render_table(t, f) + (notes.empty() || !final_turn ? "" : "\n" + notes);
}

// Runs side by side at equal spend per problem: fast_1 (and correctness)
// at each budget of calls, output tokens and dollars.
std::string budget_tables(const std::vector<RunView>& views, const std::vector<RunMetrics>& metrics, TextFormat f) {
  std::vector<std::vector<Attempt>> runs;
  for (const auto& v : views) runs.push_back(v.attempts);
  const MetricOptions options = options_of(metrics.front());
  const auto one = std::find(options.ps.begin(), options.ps.end(), 1.0);
  std::string out;
  for (BudgetAxis axis : {BudgetAxis::kCalls, BudgetAxis::kOutputTokens, BudgetAxis::kDollars}) {
    const std::vector<double> grid = budget_grid(axis, runs);
    if (grid.empty()) continue;
    Table t;
    t.header = {"run [protocol]"};
    t.text_columns = 1;
    for (double b : grid) {
      t.header.push_back(axis == BudgetAxis::kCalls     ? fmt::format("{:g}", b)
                         : axis == BudgetAxis::kDollars ? "$" + fmt::format("{:.3g}", b)
                                                        : fmt::format("{:.3g}", b));
    }
    const std::vector<std::string> labels = distinct_labels(views);
    for (std::size_t i = 0; i < views.size(); ++i) {
      const bool numbered = labels[i].rfind("#", 0) == 0;
      std::vector<std::string> row = {(numbered ? "" : "#" + std::to_string(i + 1) + " ") + labels[i]};
      for (const auto& point : budget_curve(views[i].problems, views[i].attempts, axis, grid, options)) {
        const Estimate& e = one != options.ps.end() ? point.metrics.fast_p[one - options.ps.begin()] : point.metrics.correctness;
        row.push_back(percent(e, false) + " / " + percent(point.metrics.correctness, false));
      }
      t.rows.push_back(row);
    }
    const std::string what = axis == BudgetAxis::kCalls           ? "LLM calls"
                             : axis == BudgetAxis::kOutputTokens ? "output tokens"
                                                                 : "dollars";
    out += heading(std::string(one != options.ps.end() ? "fast_1" : "correct") + " / correct at equal " + what +
                       " per problem",
                   3, f) +
           render_table(t, f) + "\n";
  }
  return out;
}

std::string published_vs_measured(const std::vector<RunView>& views, TextFormat f) {
  std::string out;
  for (const auto& p : published_vs_measured_tables(views)) {
    Table t;
    t.header = p.header;
    t.rows = p.rows;
    out += heading(p.title, 3, f) + render_table(t, f) + "\n";
  }
  return out;
}

}  // namespace

// A figure the release does not give reads n/a; a task without a kernel
// stays in, as KernelBench's analysis counts it.
std::vector<PublishedVsMeasured> published_vs_measured_tables(const std::vector<RunView>& views) {
  std::vector<PublishedVsMeasured> out;
  for (const RunView& published : views) {
    if (published.protocol != "kernelbench_published") continue;
    std::vector<const RunView*> measured;
    for (const RunView& v : views) {
      if (&v != &published && v.run_dir == published.run_dir) measured.push_back(&v);
    }
    const auto claimed = problem_rows(published);
    std::vector<std::map<std::string, ProblemRow>> ours;
    for (const RunView* v : measured) ours.push_back(problem_rows(*v));
    PublishedVsMeasured t;
    t.header = {"problem", "level", "published", "claimed"};
    for (const RunView* v : measured) {
      t.header.push_back(v->protocol);
      t.header.push_back("measured");
      if (v->attempts_not_rescored) {
        t.notes.push_back("PARTIAL RESCORE (" + v->protocol + "): " + std::to_string(v->attempts_not_rescored) +
                          " of the run's attempts have no " + v->protocol + " record (kloop rescore " + v->run_dir +
                          " --protocol " + v->protocol + " completes it)");
      }
    }
    auto verdict = [](const std::map<std::string, ProblemRow>& rows, const std::string& name, bool published_side) {
      const auto it = rows.find(name);
      if (it == rows.end() || !it->second.attempts) return std::string(published_side ? "(no kernel)" : "-");
      return it->second.best ? std::string(outcome_name(*it->second.best)) : std::string("unevaluated");
    };
    auto figure = [](const std::map<std::string, ProblemRow>& rows, const std::string& name, const char* none) {
      const auto it = rows.find(name);
      if (it == rows.end() || !it->second.speedup) return std::string(none);
      return fmt::format("{:.2f}x", *it->second.speedup);
    };
    for (const auto& p : published.problems) {
      std::vector<std::string> row = {p.name, std::to_string(p.level), verdict(claimed, p.name, true),
                                      figure(claimed, p.name, "n/a")};
      for (const auto& rows : ours) {
        row.push_back(verdict(rows, p.name, false));
        row.push_back(figure(rows, p.name, "-"));
      }
      t.rows.push_back(row);
    }
    t.title = "published vs measured: " + published.run_name + " (" + std::to_string(published.problems.size()) +
              " tasks of the levels imported; claimed n/a: the release gives no figure)";
    out.push_back(std::move(t));
  }
  return out;
}

std::string render_text_report(const std::vector<RunView>& views, const std::vector<RunMetrics>& metrics,
                               TextFormat format) {
  std::ostringstream out;
  out << heading("kloop report", 1, format);
  if (format == TextFormat::kTerminal) out << "\n";
  // Speedups are each against the reference on the GPU the attempt ran
  // on; across GPU models neither they nor the times compare.
  if (const std::vector<std::string> gpus = gpu_models(views); gpus.size() > 1) {
    out << "WARNING: these results come from " << gpus.size() << " GPU models (";
    for (std::size_t i = 0; i < gpus.size(); ++i) out << (i ? ", " : "") << gpus[i];
    out << "); their timings and speedups do not compare with each other (`evaluated on` in each section says "
           "which attempts ran where)\n\n";
  }
  if (views.size() > 1) {
    out << heading("side by side", 2, format);
    // Rows are labelled without the sweep's name they share: said once here.
    if (const std::string shared = shared_label_prefix(views); !shared.empty()) {
      out << "runs of " << shared.substr(0, shared.size() - 1) << "\n\n";
    }
    out << comparison_table(views, metrics, false, format) << "\n"
        << comparison_table(views, metrics, true, format) << "\n"
        << budget_tables(views, metrics, format) << published_vs_measured(views, format);
  }
  for (std::size_t i = 0; i < views.size(); ++i) out << view_section(views[i], metrics[i], format);
  return format == TextFormat::kTerminal ? wrap_lines(out.str()) : out.str();
}

}  // namespace kloop::report
