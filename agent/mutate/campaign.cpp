// kloop mutate's campaign: seeds checked, mutants written and evaluated
// under each protocol by the same Evaluator `kloop eval` uses, survivors
// put to the fp64 oracle, kill rates tallied (campaign.h).
#include "agent/mutate/campaign.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "evaluator/build/builder.h"
#include "evaluator/problem/registry.h"
#include "evaluator/problem/yaml_input.h"

namespace kloop::mutate {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument(path + ": cannot read the file");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string one_line(std::string s, std::size_t most = 300) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  if (s.size() > most) s = s.substr(0, most) + "...";
  return s;
}

bool stillborn_verdict(VerdictClass v) { return v == VerdictClass::kCompileError || v == VerdictClass::kLoadError; }

// A verdict, with a bounded number of retries when the machine (not the
// candidate) failed. A kloop-side error is recorded as such: the judge did
// not kill the mutant, so it counts as a survivor (fail closed).
struct Judged {
  std::string verdict;
  std::string message;
  std::optional<Verdict> full;
};

// Timed evaluations on a GPU run one at a time (`device`): the trusted
// timer counts another process's work on the device as the candidate's
// (work outside its calls), so evaluations timed side by side there judge
// one another's work. Their builds still go on side by side: the candidate
// is built before the device is taken (a failed build is left for the
// evaluation to report).
Judged evaluate_once(Builder& builder, EvalOptions options, const ProblemSpec& spec, const std::string& file,
                     std::mutex& device) {
  std::unique_lock<std::mutex> exclusive(device, std::defer_lock);
  if (options.measure_time && options.device != "cpu") {
    try {
      const Evaluator configures(builder, options);  // the builder as the evaluation's (sandbox, limits, arch)
      build_candidate_file(builder, file, options.candidate_format, BuildTarget::kCuda);
    } catch (const std::exception&) {
    }
    exclusive.lock();
  }
  for (int attempt = 0;; ++attempt) {
    try {
      Evaluator evaluator(builder, options);
      Verdict v = evaluator.evaluate(spec, file);
      if (!v.environment_fault.empty() && attempt < 2) continue;
      return {verdict_name(v.verdict), one_line(v.message), std::move(v)};
    } catch (const EnvironmentError& e) {
      if (attempt < 2) continue;
      return {"evaluation_error", one_line(e.what()), std::nullopt};
    } catch (const std::exception& e) {
      return {"evaluation_error", one_line(e.what()), std::nullopt};
    }
  }
}

std::string file_extension(const std::string& path) {
  const std::string ext = fs::path(path).extension().string();
  return ext.empty() ? ".cpp" : ext;
}

}  // namespace

std::vector<Seed> load_seed_set(const std::string& path) {
  const YAML::Node root = load_yaml_file(path);
  if (!root.IsMap() || !root["seeds"] || !root["seeds"].IsSequence()) {
    throw std::invalid_argument(path + ": expected a map with a list 'seeds' of {problem, candidate}");
  }
  const fs::path base = fs::path(path).parent_path();
  std::vector<Seed> seeds;
  int i = 0;
  for (const auto& n : root["seeds"]) {
    const std::string where = path + ": seeds[" + std::to_string(i++) + "]";
    if (!n.IsMap() || !n["problem"] || !n["candidate"] || !n["problem"].IsScalar() || !n["candidate"].IsScalar()) {
      throw std::invalid_argument(where + ": expected {problem: NAME, candidate: FILE}");
    }
    Seed s{n["problem"].as<std::string>(), (base / n["candidate"].as<std::string>()).lexically_normal().string(), {}};
    if (n["operators"]) {
      if (!n["operators"].IsSequence()) throw std::invalid_argument(where + ".operators: expected a list of operator names");
      for (const auto& op : n["operators"]) {
        const std::string name = op.IsScalar() ? op.as<std::string>() : "";
        const auto& cat = operator_catalogue();
        if (std::none_of(cat.begin(), cat.end(), [&](const MutationOperator& o) { return o.name == name; })) {
          throw std::invalid_argument(where + ".operators: no operator '" + name + "' (kloop mutate --list shows them)");
        }
        s.operators.push_back(name);
      }
    }
    if (!fs::is_regular_file(s.path)) {
      throw std::invalid_argument(where + ".candidate: no file " + s.path + " (paths are relative to the set file)");
    }
    seeds.push_back(std::move(s));
  }
  if (seeds.empty()) throw std::invalid_argument(path + ": 'seeds' is empty");
  return seeds;
}

SeedErrors seed_errors(const Verdict& v) {
  SeedErrors out;
  for (const auto& row : v.error_analysis.is_array() ? v.error_analysis : json::array()) {
    auto num = [&](const char* k) { return row.contains(k) && row[k].is_number() ? row[k].get<double>() : 0.0; };
    auto& e = out[{row.value("case", std::string()), row.value("output", 0)}];
    e.first = std::max(e.first, num("candidate_max_abs_error"));
    e.second = std::max(e.second, num("candidate_rms_error"));
  }
  return out;
}

std::pair<Equivalence, std::string> judge_equivalence(const Verdict& v, double factor, const SeedErrors& seed) {
  if (stillborn_verdict(v.verdict) || v.verdict == VerdictClass::kRuntimeError || v.verdict == VerdictClass::kTimeout) {
    return {Equivalence::kDistinct, std::string("no outputs to compare: ") + verdict_name(v.verdict)};
  }
  if (v.tests.empty()) return {Equivalence::kDistinct, "no test call ran"};
  // The seed passed this same run cleanly (every seed is correct under
  // every protocol): a finding here is behaviour of the mutant's own (an
  // output of the wrong size, kept across calls, aliased).
  if (v.verdict == VerdictClass::kIntegrityViolation) {
    const std::string finding =
        v.integrity.empty() ? one_line(v.message, 160) : v.integrity.front().check + ": " + one_line(v.integrity.front().message, 160);
    return {Equivalence::kDistinct, "the oracle's run found " + finding};
  }
  std::size_t expected_rows = 0;
  for (const auto& t : v.tests) {
    if (t.problem_kind == "output_count" || t.problem_kind == "device" || t.outputs.empty()) {
      return {Equivalence::kDistinct, "outputs unlike the reference's on " + t.label + ": " + one_line(t.problem, 120)};
    }
    expected_rows += t.outputs.size();
  }
  if (!v.error_analysis.is_array() || v.error_analysis.size() < expected_rows) {
    return {Equivalence::kDistinct,
            fmt::format("fp64 figures for {} of {} outputs{}", v.error_analysis.is_array() ? v.error_analysis.size() : 0,
                        expected_rows, v.fp64_unavailable.empty() ? "" : " (" + one_line(v.fp64_unavailable, 120) + ")")};
  }
  constexpr double kFp32Unit = 1.0 / (1 << 24);
  double worst = 0;
  std::string worst_text = "every output within the fp32 reference's own error";
  for (const auto& row : v.error_analysis) {
    auto num = [&](const char* k) { return row.contains(k) && row[k].is_number() ? row[k].get<double>() : NAN; };
    const double cmax = num("candidate_max_abs_error"), crms = num("candidate_rms_error");
    double rmax = num("reference_max_abs_error"), rrms = num("reference_rms_error");
    if (const auto it = seed.find({row.value("case", std::string()), row.value("output", 0)}); it != seed.end()) {
      rmax = std::max(rmax, it->second.first);  // NaN stays NaN: no evidence
      rrms = std::max(rrms, it->second.second);
    }
    const double emax = num("max_abs_fp64"), erms = num("rms_fp64");
    const double bmax = std::max(factor * rmax, kOracleFloorUlps * kFp32Unit * emax);
    const double brms = std::max(factor * rrms, kOracleFloorUlps * kFp32Unit * erms);
    if (!std::isfinite(cmax) || !std::isfinite(crms) || !std::isfinite(bmax) || !std::isfinite(brms)) {
      return {Equivalence::kDistinct, "a non-finite error on " + row.value("case", std::string("?"))};
    }
    const double ratio = std::max(bmax > 0 ? cmax / bmax : (cmax > 0 ? INFINITY : 0.0),
                                  brms > 0 ? crms / brms : (crms > 0 ? INFINITY : 0.0));
    if (ratio > 1) {
      return {Equivalence::kDistinct,
              fmt::format("{}: max error {:.3g} vs the fp32 reference's or seed's {:.3g}, rms {:.3g} vs {:.3g}",
                          row.value("case", std::string("?")), cmax, rmax, crms, rrms)};
    }
    if (ratio >= worst) {
      worst = ratio;
      worst_text = fmt::format("worst {}: max error {:.3g} vs the fp32 reference's or seed's {:.3g}, rms {:.3g} vs {:.3g}",
                               row.value("case", std::string("?")), cmax, rmax, crms, rrms);
    }
  }
  return {Equivalence::kEquivalent, worst_text};
}

std::vector<Mutant> seed_mutants(const Seed& seed, int max_sites) {
  const std::string source = read_text(seed.path);
  const std::string stem = fs::path(seed.path).stem().string() + file_extension(seed.path).substr(1);
  std::vector<Mutant> all = generate_mutants(stem, source, source_kind(seed.path, source), max_sites);
  if (seed.operators.empty()) return all;
  std::vector<Mutant> picked;
  for (auto& m : all) {
    if (std::find(seed.operators.begin(), seed.operators.end(), m.operator_name) != seed.operators.end()) {
      picked.push_back(std::move(m));
    }
  }
  return picked;
}

std::optional<std::string> evidence_beyond_the_oracle(const MutantOutcome& o) {
  for (const auto& [protocol, verdict] : o.verdict) {
    const auto m = o.message.find(protocol);
    if (verdict != "integrity_violation" || m == o.message.end()) continue;
    if (m->second.rfind("corrupt_after_repeat", 0) == 0) {
      return "killed by " + protocol + " with corrupt_after_repeat: its outputs went wrong after the timed repetitions, "
             "which the oracle's calls do not make";
    }
  }
  return std::nullopt;
}

bool MutantOutcome::killed_by(const std::string& protocol) const {
  const auto it = verdict.find(protocol);
  return it != verdict.end() && it->second != "correct" && it->second != "evaluation_error";
}

int CampaignReport::stillborn() const {
  return static_cast<int>(std::count_if(outcomes.begin(), outcomes.end(), [](const auto& o) { return o.stillborn; }));
}

int CampaignReport::equivalent() const {
  return static_cast<int>(std::count_if(outcomes.begin(), outcomes.end(),
                                        [](const auto& o) { return o.equivalence == Equivalence::kEquivalent; }));
}

int CampaignReport::killed_equivalent(const std::string& protocol) const {
  return static_cast<int>(std::count_if(outcomes.begin(), outcomes.end(), [&](const auto& o) {
    return o.equivalence == Equivalence::kEquivalent && o.killed_by(protocol);
  }));
}

namespace {
KillTally tally_where(const CampaignReport& r, const std::string& protocol,
                      const std::function<bool(const MutantOutcome&)>& counts) {
  KillTally t;
  for (const auto& o : r.outcomes) {
    if (o.stillborn || o.equivalence == Equivalence::kEquivalent || !counts(o)) continue;
    ++t.mutants;
    if (o.killed_by(protocol)) ++t.killed;
  }
  return t;
}
}  // namespace

KillTally CampaignReport::tally(const std::string& protocol, const std::string& fault_class) const {
  return tally_where(*this, protocol, [&](const MutantOutcome& o) { return o.mutant.fault_class == fault_class; });
}

KillTally CampaignReport::functional(const std::string& protocol) const {
  return tally_where(*this, protocol, [](const MutantOutcome& o) { return o.mutant.fault_class != "precision"; });
}

KillTally CampaignReport::all(const std::string& protocol) const {
  return tally_where(*this, protocol, [](const MutantOutcome&) { return true; });
}

json CampaignReport::to_json() const {
  json j;
  j["device"] = device;
  j["protocols"] = protocols;
  j["seconds"] = seconds;
  j["seeds"] = json::array();
  for (const auto& s : seeds) j["seeds"].push_back({{"problem", s.problem}, {"candidate", s.path}});
  j["generated"] = generated();
  j["stillborn"] = stillborn();
  j["equivalent"] = equivalent();
  auto cell = [](const KillTally& t) { return json{{"mutants", t.mutants}, {"killed", t.killed}, {"rate", t.rate()}}; };
  for (const auto& p : protocols) {
    json r;
    for (const auto& c : fault_classes()) r["classes"][c] = cell(tally(p, c));
    r["functional"] = cell(functional(p));
    r["precision"] = cell(tally(p, "precision"));
    r["all"] = cell(all(p));
    r["killed_equivalent"] = killed_equivalent(p);
    j["kill_rates"][p] = r;
  }
  j["mutants"] = json::array();
  for (const auto& o : outcomes) {
    json m = {{"id", o.mutant.id},
              {"class", o.mutant.fault_class},
              {"operator", o.mutant.operator_name},
              {"edit", o.mutant.edit},
              {"seed", o.seed_path},
              {"problem", o.problem},
              {"file", o.file},
              {"line", o.mutant.line},
              {"diff", o.mutant.diff()},
              {"stillborn", o.stillborn},
              {"equivalence", o.equivalence == Equivalence::kEquivalent ? "equivalent"
                              : o.equivalence == Equivalence::kDistinct ? "distinct"
                                                                        : "not_run"},
              {"oracle", o.oracle_detail}};
    for (const auto& p : protocols) {
      m["verdicts"][p] = {{"verdict", o.verdict.count(p) ? o.verdict.at(p) : ""},
                          {"message", o.message.count(p) ? o.message.at(p) : ""}};
    }
    j["mutants"].push_back(std::move(m));
  }
  return j;
}

std::string CampaignReport::to_markdown() const {
  std::ostringstream md;
  md << "# kloop mutate: kill rates\n\n";
  md << fmt::format("Device {}, {} seed(s), {} mutants generated: {} stillborn (do not build or load), {} equivalent "
                    "(the fp64 oracle), {} counted. {:.0f} s.\n\n",
                    device, seeds.size(), generated(), stillborn(), equivalent(),
                    generated() - stillborn() - equivalent(), seconds);
  md << "| class | mutants |";
  for (const auto& p : protocols) md << " " << p << " |";
  md << "\n|---|---|";
  for (std::size_t i = 0; i < protocols.size(); ++i) md << "---|";
  md << "\n";
  auto row = [&](const std::string& name, const std::function<KillTally(const std::string&)>& get) {
    const KillTally first = protocols.empty() ? KillTally{} : get(protocols[0]);
    md << "| " << name << " | " << first.mutants << " |";
    for (const auto& p : protocols) {
      const KillTally t = get(p);
      md << (t.mutants ? fmt::format(" {:.1f}% ({}/{}) |", 100 * t.rate(), t.killed, t.mutants) : std::string(" - |"));
    }
    md << "\n";
  };
  for (const auto& c : fault_classes()) row(c, [&](const std::string& p) { return tally(p, c); });
  row("**functional** (all but precision)", [&](const std::string& p) { return functional(p); });
  row("**precision**", [&](const std::string& p) { return tally(p, "precision"); });
  row("**all**", [&](const std::string& p) { return all(p); });
  md << "\nPublished anchor (2026 mutation-testing study of KernelBench): KernelBench's own check misses 16.9% of "
        "injected faults (83.1% killed) and 78.6% of precision faults (21.4% killed).\n";
  for (const auto& p : protocols) {
    if (const int k = killed_equivalent(p)) {
      md << fmt::format("\n{} killed {} mutant(s) the oracle found equivalent (a false alarm of its judge).\n", p, k);
    }
  }
  md << "\n## Surviving mutants\n\n";
  int survivors = 0;
  for (const auto& o : outcomes) {
    if (o.stillborn || o.equivalence == Equivalence::kEquivalent) continue;
    std::string survived, killed;
    for (const auto& p : protocols) {
      std::string& into = o.killed_by(p) ? killed : survived;
      into += (into.empty() ? "" : ", ") + p + " (" + o.verdict.at(p) + ")";
    }
    if (survived.empty()) continue;
    ++survivors;
    md << fmt::format("### {} ({}: {})\n\n{}:{} ({}); survives {}{}.\n", o.mutant.id, o.mutant.fault_class,
                      o.mutant.edit, o.seed_path, o.mutant.line, o.problem, survived,
                      killed.empty() ? "" : "; killed by " + killed);
    for (const auto& p : protocols) {
      if (o.killed_by(p) && !o.message.at(p).empty()) md << "- " << p << ": " << o.message.at(p) << "\n";
    }
    if (!o.oracle_detail.empty()) md << "- oracle: distinct (" << o.oracle_detail << ")\n";
    md << "\n```diff\n" << o.mutant.diff() << "```\n\n";
  }
  if (survivors == 0) md << "None.\n\n";
  md << "## Equivalent mutants (left out of every denominator)\n\n";
  int eq = 0;
  for (const auto& o : outcomes) {
    if (o.equivalence != Equivalence::kEquivalent) continue;
    ++eq;
    md << fmt::format("- {} ({}): {}; {}\n", o.mutant.id, o.mutant.fault_class, one_line(o.mutant.after, 120),
                      o.oracle_detail);
  }
  if (eq == 0) md << "None.\n";
  return md.str();
}

std::vector<std::string> check_floors(const CampaignReport& report, const std::string& floors_path) {
  json floors;
  try {
    floors = json::parse(read_text(floors_path));
  } catch (const json::exception& e) {
    throw std::invalid_argument(floors_path + ": not JSON (" + std::string(e.what()) + ")");
  }
  if (!floors.is_object() || !floors.contains("protocols") || !floors["protocols"].is_object()) {
    throw std::invalid_argument(floors_path + ": expected {\"protocols\": {NAME: {\"functional\": RATE, ...}}}");
  }
  std::vector<std::string> shortfalls;
  if (floors.contains("generated")) {
    if (!floors["generated"].is_number_integer()) throw std::invalid_argument(floors_path + ": 'generated' must be a whole number");
    if (floors["generated"].get<int>() != report.generated()) {
      shortfalls.push_back(fmt::format("{} mutants generated where the floors expect {}: the set or the operators "
                                       "changed; check the new mutants and update {}",
                                       report.generated(), floors["generated"].get<int>(), floors_path));
    }
  }
  auto check = [&](const std::string& protocol, const std::string& what, const KillTally& t, const json& floor) {
    if (!floor.is_number() || floor.get<double>() < 0 || floor.get<double>() > 1) {
      throw std::invalid_argument(floors_path + ": protocols." + protocol + "." + what + ": expected a rate in [0, 1]");
    }
    const double f = floor.get<double>();
    if (t.mutants == 0) {
      shortfalls.push_back(fmt::format("{} {}: no counted mutants to measure the floor {:.3f}", protocol, what, f));
    } else if (t.rate() + 1e-12 < f) {
      shortfalls.push_back(fmt::format("{} {}: kill rate {:.3f} ({}/{}) below the floor {:.3f}", protocol, what,
                                       t.rate(), t.killed, t.mutants, f));
    }
  };
  for (const auto& [protocol, f] : floors["protocols"].items()) {
    if (std::find(report.protocols.begin(), report.protocols.end(), protocol) == report.protocols.end()) {
      shortfalls.push_back(protocol + ": has floors but was not run (--protocol)");
      continue;
    }
    if (!f.is_object()) throw std::invalid_argument(floors_path + ": protocols." + protocol + ": expected a map");
    for (const auto& [what, floor] : f.items()) {
      if (what == "functional") {
        check(protocol, what, report.functional(protocol), floor);
      } else if (what == "all") {
        check(protocol, what, report.all(protocol), floor);
      } else if (what == "classes") {
        if (!floor.is_object()) throw std::invalid_argument(floors_path + ": protocols." + protocol + ".classes: expected a map");
        for (const auto& [c, cf] : floor.items()) {
          const auto& known = fault_classes();
          if (std::find(known.begin(), known.end(), c) == known.end()) {
            throw std::invalid_argument(floors_path + ": protocols." + protocol + ".classes." + c + ": unknown class");
          }
          check(protocol, c, report.tally(protocol, c), cf);
        }
      } else if (std::find(fault_classes().begin(), fault_classes().end(), what) != fault_classes().end()) {
        check(protocol, what, report.tally(protocol, what), floor);
      } else {
        throw std::invalid_argument(floors_path + ": protocols." + protocol + "." + what +
                                    ": unknown key (functional, all, classes, or a class name)");
      }
    }
  }
  return shortfalls;
}

CampaignReport run_campaign(const std::vector<Seed>& seeds, const CampaignOptions& options,
                            const std::string& problems_dir, const std::function<void(const std::string&)>& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  if (options.protocols.empty()) throw std::invalid_argument("--protocol: no protocol given");
  for (const auto& p : options.protocols) protocol_by_name(p);
  if (options.out_dir.empty()) throw std::invalid_argument("--out: no output folder given");
  fs::create_directories(fs::path(options.out_dir) / "mutants");

  ProblemRegistry registry(problems_dir);
  CampaignReport report;
  report.protocols = options.protocols;
  report.seeds = seeds;
  report.device = options.eval.device;
  std::vector<ProblemSpec> specs;
  for (const auto& s : seeds) {
    ProblemSpec spec = registry.load(s.problem);
    for (const auto& [name, value] : options.set_dims) {
      if (!spec.dims.count(name)) continue;  // a dim of another seed's task
      spec.dims[name] = value;
      if (spec.cpu_dims) (*spec.cpu_dims)[name] = value;
    }
    specs.push_back(std::move(spec));
  }

  // Every mutant, written out, with its seed's index.
  std::vector<std::pair<std::size_t, MutantOutcome>> work;
  for (std::size_t i = 0; i < seeds.size(); ++i) {
    for (auto& m : seed_mutants(seeds[i], options.max_sites)) {
      MutantOutcome o;
      o.file = (fs::path(options.out_dir) / "mutants" / (m.id + file_extension(seeds[i].path))).string();
      std::ofstream(o.file, std::ios::binary) << m.source;
      o.mutant = std::move(m);
      o.seed_path = seeds[i].path;
      o.problem = specs[i].name;
      work.emplace_back(i, std::move(o));
    }
  }

  std::mutex mu;
  std::mutex device;  // evaluate_once's: timed evaluations one at a time on a GPU
  std::string seed_failure;
  std::vector<SeedErrors> seed_error(seeds.size());
  std::vector<bool> seed_done(seeds.size(), false);
  std::condition_variable seeds_checked;
  std::atomic<std::size_t> next{0};
  std::size_t done = 0;
  // The seeds first (each must be correct everywhere), then the mutants.
  const std::size_t total = seeds.size() + work.size();
  auto worker = [&] {
    Builder builder(BuilderConfig::from_environment());
    for (std::size_t k; (k = next++) < total;) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (!seed_failure.empty()) return;
      }
      if (k < seeds.size()) {
        if (options.oracle) {
          EvalOptions eo = options.eval;
          eo.protocol = "strict";
          eo.fp64_reference = true;
          eo.fp64_every_call = true;
          eo.measure_time = false;
          const Judged j = evaluate_once(builder, eo, specs[k], seeds[k].path, device);
          std::lock_guard<std::mutex> lock(mu);
          if (j.full) seed_error[k] = seed_errors(*j.full);
        }
        for (const auto& p : options.protocols) {
          EvalOptions eo = options.eval;
          eo.protocol = p;
          const Judged j = evaluate_once(builder, eo, specs[k], seeds[k].path, device);
          if (j.verdict != "correct") {
            std::lock_guard<std::mutex> lock(mu);
            seed_failure = seeds[k].path + " (" + seeds[k].problem + ") is not correct under " + p + ": " + j.verdict +
                           ": " + j.message + "; a seed must be a correct kernel";
            seeds_checked.notify_all();
            return;
          }
        }
        {
          std::lock_guard<std::mutex> lock(mu);
          seed_done[k] = true;
        }
        seeds_checked.notify_all();
        continue;
      }
      auto& [si, o] = work[k - seeds.size()];
      for (const auto& p : options.protocols) {
        if (o.stillborn) {
          o.verdict[p] = o.verdict.begin()->second;
          o.message[p] = o.message.begin()->second;
          continue;
        }
        EvalOptions eo = options.eval;
        eo.protocol = p;
        const Judged j = evaluate_once(builder, eo, specs[si], o.file, device);
        o.verdict[p] = j.verdict;
        o.message[p] = j.message;
        if (j.full && stillborn_verdict(j.full->verdict)) o.stillborn = true;
      }
      const bool survives = !o.stillborn && std::any_of(options.protocols.begin(), options.protocols.end(),
                                                         [&](const std::string& p) { return !o.killed_by(p); });
      if (options.oracle && survives) {
        EvalOptions eo = options.eval;
        eo.protocol = "strict";  // the widest case plan: every scaling, the centered case, hidden shapes
        eo.fp64_reference = true;
        eo.fp64_every_call = true;
        eo.measure_time = false;
        const Judged j = evaluate_once(builder, eo, specs[si], o.file, device);
        if (j.full) {
          SeedErrors errors;
          {
            // The seed's errors, once its own oracle run is done.
            std::unique_lock<std::mutex> lock(mu);
            seeds_checked.wait(lock, [&] { return seed_done[si] || !seed_failure.empty(); });
            errors = seed_error[si];
          }
          std::tie(o.equivalence, o.oracle_detail) = judge_equivalence(*j.full, options.oracle_factor, errors);
          if (const auto beyond = evidence_beyond_the_oracle(o); beyond && o.equivalence == Equivalence::kEquivalent) {
            o.equivalence = Equivalence::kDistinct;
            o.oracle_detail = *beyond + " (its own calls: " + o.oracle_detail + ")";
          }
        } else {
          o.equivalence = Equivalence::kDistinct;
          o.oracle_detail = "the oracle's evaluation failed: " + j.message;
        }
      }
      std::lock_guard<std::mutex> lock(mu);
      ++done;
      if (progress) {
        std::string line = fmt::format("[{}/{}] {}", done, work.size(), o.mutant.id);
        for (const auto& p : options.protocols) line += " " + p + "=" + o.verdict[p];
        if (o.equivalence == Equivalence::kEquivalent) line += " (equivalent)";
        progress(line);
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < std::max(1, options.jobs); ++t) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  if (!seed_failure.empty()) throw EvaluationError(seed_failure);
  for (auto& w : work) report.outcomes.push_back(std::move(w.second));
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return report;
}

}  // namespace kloop::mutate
