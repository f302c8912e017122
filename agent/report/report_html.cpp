// The HTML report: data for the page, inserted into the page template
// (agent/report/report_page.html, embedded at build time).
#include "agent/report/report_html.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <stdexcept>

#include "agent/report/report_export.h"
#include "agent/report/report_page.h"
#include "agent/report/report_text.h"
#include "agent/store/run_store.h"

namespace kloop::report {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// A file of the run as a link from the page's folder; "" stays "".
std::string link(const RunView& v, const std::string& file, const fs::path& page_dir) {
  if (file.empty()) return "";
  return fs::absolute(fs::path(v.run_dir) / file).lexically_normal().lexically_relative(page_dir).generic_string();
}

json curves_json(const std::vector<std::vector<ProblemBest>>& table, const std::vector<double>& ps) {
  // Past the largest p reported and past the largest speedup reached, so
  // that the last step of every curve shows (the axis follows the data).
  double fastest = 0;
  for (const auto& turn : table) {
    for (const auto& b : turn) {
      if (b.correct() && b.speedup()) fastest = std::max(fastest, *b.speedup());
    }
  }
  const double p_max = std::min(
      1e4, std::max({2.5, 1.25 * (ps.empty() ? 2.0 : *std::max_element(ps.begin(), ps.end())), 1.1 * fastest}));
  json curves = json::array();
  for (std::size_t t = 0; t < table.size(); ++t) {
    curves.push_back({{"name", "turn " + std::to_string(t + 1)}, {"points", fast_p_curve(table[t], p_max)}});
  }
  return curves;
}

// The final turn's fast_p curves against the protocol's own baseline and
// each one the run asked for besides it (evaluation.baselines), on one p
// axis; [] when the run asked for none, so its page is as before.
json baseline_curves_json(const RunView& v, const std::vector<Attempt>& attempts, const RunMetrics& m) {
  const std::vector<std::string> names = asked_baselines(attempts, v.baselines);
  if (names.empty()) return json::array();
  std::vector<std::pair<json, std::vector<ProblemBest>>> finals;
  // Correct attempts with a speedup against it, of all the run's (as baselines_json counts them).
  const auto timed = [](const std::vector<Attempt>& as) {
    return std::count_if(as.begin(), as.end(), [](const Attempt& a) {
      return a.record.outcome == Outcome::kCorrect && a.record.speedup.has_value();
    });
  };
  finals.push_back({{{"name", "own"}, {"label", v.protocol + "'s own (the headline)"}, {"timed", timed(v.attempts)}},
                    best_so_far(v.problems, attempts, m.turns, m.samples).back()});
  for (const auto& name : names) {
    const std::vector<Attempt> against = attempts_against(attempts, name);
    finals.push_back({{{"name", name}, {"label", name}, {"timed", timed(attempts_against(v.attempts, name))}},
                      best_so_far(v.problems, against, m.turns, m.samples).back()});
  }
  std::vector<std::vector<ProblemBest>> all;
  for (const auto& f : finals) all.push_back(f.second);
  const json shared = curves_json(all, m.ps);  // one p axis for all of them
  json out = json::array();
  for (std::size_t i = 0; i < finals.size(); ++i) {
    json c = finals[i].first;
    c["points"] = shared[i]["points"];
    out.push_back(c);
  }
  return out;
}

json best_speedups(const std::vector<ProblemBest>& bests) {
  json out = json::array();
  for (const auto& b : bests) {
    if (b.correct() && b.speedup()) out.push_back(*b.speedup());
  }
  return out;
}

json grid_json(const RunView& v, const std::vector<Attempt>& attempts, int turns, int samples,
               const fs::path& page_dir) {
  json grid = json::array();
  std::map<std::pair<std::string, int>, std::size_t> index;
  for (const auto& p : v.problems) {
    for (int s = 0; s < samples; ++s) {
      index[{p.name, s}] = grid.size();
      grid.push_back({{"problem", p.name}, {"level", p.level}, {"sample", s}, {"cells", json(turns, nullptr)}});
    }
  }
  for (const auto& a : attempts) {
    const AttemptRecord& r = a.record;
    auto it = index.find({r.problem, r.sample});
    if (it == index.end() || r.turn < 1 || r.turn > turns) continue;
    grid[it->second]["cells"][r.turn - 1] = {{"verdict", outcome_name(r.outcome)},
                                             {"speedup", r.speedup ? json(*r.speedup) : json(nullptr)},
                                             {"kind", a.failure_kind},
                                             {"message", r.message},
                                             {"code", link(v, a.code_file, page_dir)},
                                             {"feedback", link(v, a.feedback_file, page_dir)},
                                             {"verdict_file", link(v, a.verdict_file, page_dir)},
                                             {"profile", a.profile_digest},
                                             {"step", r.step}};
    if (!r.parents.empty()) {
      json parents = json::array();
      for (const auto& p : r.parents) parents.push_back({p.sample, p.turn});
      grid[it->second]["cells"][r.turn - 1]["parents"] = parents;
    }
  }
  return grid;
}

// JSON inside <script>: '<', '>' and '&' only occur in strings, where the
// \u escapes mean the same, so "</script>" in a message cannot end the block.
std::string script_safe(const std::string& json_text) {
  std::string out;
  out.reserve(json_text.size());
  for (char c : json_text) {
    if (c == '<') {
      out += "\\u003c";
    } else if (c == '>') {
      out += "\\u003e";
    } else if (c == '&') {
      out += "\\u0026";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

json html_report_data(const std::vector<RunView>& views, const std::vector<RunMetrics>& metrics,
                      const std::string& page_dir) {
  const fs::path dir = fs::absolute(page_dir).lexically_normal();
  json data = summary_json(views, metrics);
  data["generated"] = utc_timestamp();
  data["published_vs_measured"] = json::array();
  for (const auto& t : published_vs_measured_tables(views)) {
    data["published_vs_measured"].push_back(
        {{"title", t.title}, {"header", t.header}, {"rows", t.rows}, {"notes", t.notes}});
  }
  for (std::size_t i = 0; i < views.size(); ++i) {
    const RunView& v = views[i];
    const RunMetrics& m = metrics[i];
    const std::vector<Attempt> attempts = selected_attempts(v.problems, v.attempts);
    const auto table = best_so_far(v.problems, attempts, m.turns, m.samples);
    json& out = data["views"][i];
    out["id"] = "v" + std::to_string(i);
    out["curves"] = curves_json(table, m.ps);
    out["speedups"] = {{"one_shot", best_speedups(table.front())}, {"final", best_speedups(table.back())}};
    out["grid"] = grid_json(v, attempts, m.turns, m.samples, dir);
    out["baseline_curves"] = baseline_curves_json(v, attempts, m);
  }
  return data;
}

std::string render_html_report(const std::vector<RunView>& views, const std::vector<RunMetrics>& metrics,
                               const std::string& page_dir) {
  std::string page = report_page::kTemplate;
  const std::string placeholder = "/*KLOOP_REPORT_DATA*/";
  const auto at = page.find(placeholder);
  if (at == std::string::npos) throw std::logic_error("report_page.html has lost its data placeholder " + placeholder);
  page.replace(at, placeholder.size(), script_safe(html_report_data(views, metrics, page_dir).dump()));
  return page;
}

}  // namespace kloop::report
