// kloop problems list|show: browse the task suites.
#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "agent/cli/commands.h"
#include "agent/cli/resumable_table.h"
#include "agent/scaffold/status_line.h"
#include "agent/store/run_store.h"
#include "evaluator/evaluate.h"
#include "evaluator/parity.h"
#include "evaluator/build/content_hash.h"
#include "evaluator/problem/reference_source.h"
#include "evaluator/problem/registry.h"

namespace kloop::cli {
namespace {

std::string join_dims(const DimValues& dims) {
  std::string s;
  for (const auto& [k, v] : dims) s += (s.empty() ? "" : ", ") + k + "=" + std::to_string(v);
  return s;
}

std::string human_count(double v) {
  const char* units[] = {"", "K", "M", "G", "T", "P"};
  int u = 0;
  while (v >= 1000 && u < 5) {
    v /= 1000;
    ++u;
  }
  const std::string buf = fmt::format("{:.3g}{}", v, units[u]);
  return buf;
}

// "abc..." cut to `width` characters.
std::string fit(const std::string& text, std::size_t width) {
  if (text.size() <= width) return text;
  return width <= 3 ? text.substr(0, width) : text.substr(0, width - 3) + "...";
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ",") + i;
  return out;
}

const Precision kPrecisions[] = {Precision::kFp32, Precision::kFp16, Precision::kBf16};

// The table fits 100 columns: names cut past 44 characters (the number
// column and `kloop problems show NUMBER_...` give the whole one), the
// description whatever is left. A task a protocol leaves out at `precision`
// shows which; one left out only at other precisions shows those in
// parentheses.
int list(const GlobalOptions& g, const std::string& suite, std::optional<int> level, const std::string& selection,
         bool json_out, Precision precision) {
  if (!selection.empty() && level) throw std::invalid_argument("--problems selects levels itself; leave out --level");
  ProblemRegistry reg(g.problems_dir);
  const std::vector<ProblemEntry> entries =
      selection.empty() ? reg.list(suite, level) : reg.select_numbered(selection, suite);
  if (entries.empty()) {
    std::cerr << "kloop: no problem matches" << (suite.empty() ? "" : " suite '" + suite + "'")
              << (level ? " level " + std::to_string(*level) : "") << " under " << reg.root()
              << "; `kloop problems list` shows them all\n";
    return 2;
  }
  std::set<std::string> suites;
  for (const auto& e : entries) suites.insert(e.suite);
  const bool several_suites = suites.size() > 1;
  int bad = 0, excluded = 0, elsewhere = 0;
  nlohmann::json rows = nlohmann::json::array();
  constexpr std::size_t kName = 44, kExcluded = 15, kWidth = 100;
  if (!json_out) {
    std::string head = fmt::format("{}{:<2} {:<{}} {:>3} {:<{}} {}", several_suites ? "suite        " : "", "L", "name",
                                   kName, "in", "excluded from", kExcluded, "description");
    std::printf("%s\n", fit(head, kWidth).c_str());
  }
  for (const auto& e : entries) {
    try {
      ProblemSpec s = reg.load(e);
      const std::vector<std::string> here = s.excluded_from_at(precision_dtype(precision));
      std::string out_of = joined(here);
      nlohmann::json by_precision = nlohmann::json::object();
      std::vector<std::string> other;  // precisions that leave it out where this one does not
      for (Precision p : kPrecisions) {
        const std::vector<std::string> at = s.excluded_from_at(precision_dtype(p));
        by_precision[precision_name(p)] = at;
        if (here.empty() && !at.empty()) other.push_back(precision_name(p));
      }
      excluded += here.empty() ? 0 : 1;
      elsewhere += here.empty() && !other.empty() ? 1 : 0;
      if (out_of.empty() && !other.empty()) out_of = "(" + joined(other) + ")";
      if (json_out) {
        rows.push_back({{"suite", e.suite}, {"level", e.level}, {"name", e.name}, {"inputs", s.inputs.size()},
                        {"description", s.description}, {"excluded_from", here},
                        {"excluded_from_by_precision", by_precision}});
        continue;
      }
      std::string line = fmt::format("{}{:<2} {:<{}} {:>3} {:<{}} ", several_suites ? fmt::format("{:<12} ", fit(e.suite, 12)) : "",
                                     e.level, fit(e.name, kName), kName, s.inputs.size(),
                                     out_of.empty() ? "-" : fit(out_of, kExcluded), kExcluded);
      line += s.description;
      std::printf("%s\n", fit(line, kWidth).c_str());
    } catch (const std::exception& ex) {
      ++bad;
      std::cerr << "kloop: " << ex.what() << "\n";
    }
  }
  if (json_out) {
    std::cout << rows.dump(2) << "\n";
  } else {
    std::printf("%zu problem(s)", entries.size());
    if (excluded) {
      std::printf("; %d excluded from a protocol%s (left out of its runs and their denominator)", excluded,
                  precision == Precision::kFp32 ? "" : (std::string(" at ") + precision_name(precision)).c_str());
    }
    std::printf("\n");
    if (elsewhere) {
      std::printf("%d more excluded only at the precisions in parentheses (--precision P lists them)\n", elsewhere);
    }
  }
  return bad ? 1 : 0;
}

int show(const GlobalOptions& g, const std::string& name, bool json_out) {
  ProblemRegistry reg(g.problems_dir);
  ProblemSpec s = reg.load(name);
  DimValues d = s.resolve_dims(false);
  if (json_out) {
    nlohmann::json inputs = nlohmann::json::array();
    for (const auto& in : s.inputs) {
      inputs.push_back({{"name", in.name}, {"shape", s.resolve_shape(in, d)}, {"dtype", dtype_name(in.dtype)},
                        {"dist", in.dist.kind}});
    }
    nlohmann::json j = {{"name", s.name}, {"suite", s.suite}, {"level", s.level}, {"description", s.description},
                        {"dims", d}, {"inputs", inputs}, {"outputs", s.outputs}, {"flops", s.flop_count(d)},
                        {"bytes", s.byte_count(d)}, {"spec", s.spec_path}, {"reference", s.reference_path},
                        {"deviations", s.deviations}, {"excluded_from", s.excluded_from},
                        {"provenance", s.provenance}};
    if (s.cpu_dims) j["cpu_dims"] = s.resolve_dims(true);
    auto decisions = [](const std::vector<AuditDecision>& list) {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& a : list) out.push_back({{"flag", a.flag}, {"decision", a.decision}, {"note", a.note}});
      return out;
    };
    j["audit"] = decisions(s.audit);
    j["precisions"] = nlohmann::json::object();
    for (const auto& [dtype, d] : s.precisions) {
      const char* p = dtype == DType::kFloat16 ? "fp16" : "bf16";
      j["precisions"][p] = {{"excluded_from", d.excluded_from}, {"audit", decisions(d.audit)}};
    }
    j["variants"] = s.variants.size();
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << s.name << "  (" << s.suite << ", level " << s.level << ")\n";
  if (!s.description.empty()) std::cout << "  " << s.description << "\n";
  std::cout << "  dims: " << join_dims(d) << "\n";
  if (s.cpu_dims) std::cout << "  cpu dims: " << join_dims(s.resolve_dims(true)) << "\n";
  if (!s.args.empty()) {
    std::cout << "  constructor arguments:";
    for (const auto& a : s.resolve_args(d)) {
      std::cout << " " << a.name << "=";
      switch (a.type) {
        case ArgType::kInt: std::cout << a.int_value; break;
        case ArgType::kFloat: std::cout << a.float_value; break;
        case ArgType::kBool: std::cout << (a.bool_value ? "true" : "false"); break;
        case ArgType::kInts: {
          std::string l;
          for (auto v : a.ints) l += (l.empty() ? "" : ",") + std::to_string(v);
          std::cout << "[" << l << "]";
          break;
        }
        case ArgType::kString: std::cout << a.string_value; break;
      }
    }
    std::cout << "\n";
  }
  std::cout << "  inputs:\n";
  for (const auto& in : s.inputs) {
    std::string shape;
    for (auto v : s.resolve_shape(in, d)) shape += (shape.empty() ? "" : ", ") + std::to_string(v);
    std::cout << "    " << in.name << ": " << dtype_name(in.dtype) << "[" << shape << "] ~ " << in.dist.kind << "\n";
  }
  std::cout << "  outputs: " << s.outputs << "\n";
  std::cout << "  cost at default dims: " << human_count(s.flop_count(d)) << "FLOP, " << human_count(s.byte_count(d))
            << "B\n";
  std::cout << "  hidden shape variants: " << s.variants.size() << "\n";
  for (const auto& dev : s.deviations) std::cout << "  deviation: " << dev << "\n";
  for (const auto& p : s.excluded_from) std::cout << "  excluded from protocol: " << p << "\n";
  for (const auto& a : s.audit) std::cout << "  audit " << a.flag << ": " << a.decision << " (" << a.note << ")\n";
  for (const auto& [dtype, d] : s.precisions) {
    const char* p = dtype == DType::kFloat16 ? "fp16" : "bf16";
    for (const auto& x : d.excluded_from) std::cout << "  at " << p << ": excluded from protocol: " << x << "\n";
    for (const auto& a : d.audit) {
      std::cout << "  at " << p << ": audit " << a.flag << ": " << a.decision << " (" << a.note << ")\n";
    }
  }
  std::cout << "  spec: " << s.spec_path << "\n  reference: " << s.reference_path << "\n";
  return 0;
}

// The options of a command that goes through references untimed (check,
// build, parity): several compile in bundles, a tenth of the cost; one alone.
EvalOptions reference_command_options(std::size_t problems, const std::string& device) {
  EvalOptions opts;
  opts.measure_time = false;
  opts.device = device;
  if (problems > 1) opts.reference_bundle = kReferenceBundleSize;
  return opts;
}

int check(const GlobalOptions& g, const std::vector<std::string>& names, const std::string& suite,
          std::optional<int> level, const std::string& device) {
  ProblemRegistry reg(g.problems_dir);
  const std::vector<ProblemEntry> entries = reg.select(names, suite, level);
  Builder builder(BuilderConfig::from_environment());
  EvalOptions opts = reference_command_options(entries.size(), device);
  opts.small_dims = true;
  Evaluator evaluator(builder, opts);
  int bad = 0;
  std::printf("%-60s %-4s %-8s %-6s %-13s %-14s %-8s %s\n", "problem", "ok", "outputs", "finite", "deterministic",
              "seed-sensitive", "variants", "build/run s");
  StatusLine status(static_cast<int>(entries.size()));  // on a terminal: done, in flight, ETA
  auto print = [&](const ReferenceReport& r) {
    status.end("eval");
    status.done(0);
    {
      auto quiet = status.quiet();
      bad += r.ok ? 0 : 1;
      std::printf("%-60s %-4s %-8d %-6s %-13s %-14s %-8d %.1f/%.1f\n", r.problem.c_str(), r.ok ? "yes" : "NO",
                  r.outputs, r.finite ? "yes" : "no", r.deterministic ? "yes" : "no", r.seed_sensitive ? "yes" : "no",
                  r.variants_checked, r.build_seconds, r.run_seconds);
      if (!r.error.empty()) std::printf("    %s\n", r.error.c_str());
      std::fflush(stdout);
    }
    status.begin("eval");  // the next one
  };
  std::vector<ProblemSpec> specs;
  std::vector<std::string> sources;
  status.begin("eval");
  for (const auto& e : entries) {
    try {
      specs.push_back(reg.load(e));
      sources.push_back(specs.back().reference_path);
    } catch (const std::exception& ex) {
      ReferenceReport r;
      r.problem = e.name;
      r.error = ex.what();
      print(r);
    }
  }
  // Every reference compiled first, all cores at once; the checks then hit the cache.
  prebuild_references(builder.config(), sources, opts);
  // One worker per bundle, its references one after another.
  evaluator.check_references(specs, print);
  status.end("eval");
  std::printf("%zu references checked, %d failed\n", entries.size(), bad);
  return bad ? 1 : 0;
}

// Compiles the selected references without running them (in bundles when
// there are several): the build cache is then warm for whatever runs them
// next, on this machine or on every node that shares the cache.
int build(const GlobalOptions& g, const std::vector<std::string>& names, const std::string& suite,
          std::optional<int> level, const std::string& device) {
  ProblemRegistry reg(g.problems_dir);
  const std::vector<ProblemEntry> entries = reg.select(names, suite, level);
  Builder builder(BuilderConfig::from_environment());
  const EvalOptions opts = reference_command_options(entries.size(), device);
  Evaluator evaluator(builder, opts);
  std::vector<ProblemSpec> specs;
  std::vector<std::string> sources;
  for (const auto& e : entries) {
    specs.push_back(reg.load(e));
    sources.push_back(specs.back().reference_path);
  }
  prebuild_references(builder.config(), sources, opts);
  int failed = 0, bundled = 0;
  for (const auto& spec : specs) {
    const BuildResult rb = evaluator.build_reference(spec, /*bundled=*/true);  // from the cache now
    if (!rb.ok) {
      ++failed;
      std::printf("%s: does not build (%s)\n%s\n", spec.name.c_str(), spec.reference_path.c_str(),
                  rb.diagnostics.empty() ? rb.log.c_str() : summarize_diagnostics(rb.diagnostics, 10).c_str());
    }
    bundled += rb.ok && !rb.entry.empty() ? 1 : 0;
  }
  std::printf("%zu reference(s) built for %s (%d in bundles), %d failed\n", specs.size() - failed, device.c_str(),
              bundled, failed);
  return failed ? 1 : 0;
}

struct ParityArgs {
  std::vector<std::string> names;
  std::string suite;
  int level = 0;
  std::string upstream;
  std::string device = "cpu";
  std::string dims = "small";
  std::string python;
  std::string json_file;
  std::string resume;
  std::string markdown;
  std::string weights = "drawn";
};

// The parity table as Markdown, by level, then by the task's number.
std::string parity_markdown(const nlohmann::json& table_rows, bool seeded) {
  std::vector<nlohmann::json> rows(table_rows.begin(), table_rows.end());
  auto number = [](const std::string& name) { return std::atoi(name.c_str()); };
  std::stable_sort(rows.begin(), rows.end(), [&](const nlohmann::json& x, const nlohmann::json& y) {
    const int lx = x.value("level", 0), ly = y.value("level", 0);
    if (lx != ly) return lx < ly;
    return number(x.value("problem", "")) < number(y.value("problem", ""));
  });
  std::ostringstream md;
  md << "| level | problem | parity | " << (seeded ? "seeded weights (tensors) | " : "")
     << "bitwise | max abs error | max rel error | what differs | "
        "deviations from upstream (the spec's) | GPU |\n|--:|---|---|"
     << (seeded ? "---|" : "") << "---|--:|--:|---|---|---|\n";
  for (const auto& row : rows) {
    std::string dev;
    for (const auto& d : row.value("deviations", nlohmann::json::array())) dev += (dev.empty() ? "" : "; ") + d.get<std::string>();
    for (auto& ch : dev) ch = ch == '|' ? '/' : ch;
    const std::string nums =
        fmt::format("{:.3g} | {:.3g}", row.value("max_abs_error", 0.0), row.value("max_rel_error", 0.0));
    md << "| " << row.value("level", 0) << " | " << row.value("problem", "") << " | " << row.value("status", "") << " | ";
    if (seeded) {
      const std::string w = row.value("weights", "");
      md << (w.empty() ? "-" : w + " (" + std::to_string(row.value("weights_compared", 0)) + ")") << " | ";
    }
    md << (row.value("bitwise", false) ? "yes" : "no") << " | " << nums << " | ";
    std::string what;
    for (const auto& d : row.value("details", nlohmann::json::array())) what += (what.empty() ? "" : "; ") + d.get<std::string>();
    for (auto& ch : what) ch = ch == '|' ? '/' : ch == '\n' ? ' ' : ch;
    md << what.substr(0, 300) << " | " << dev << " | " << row.value("gpu", "") << " |\n";
  }
  return md.str();
}

// A task's row in the --json table.
nlohmann::json parity_row(const ParityResult& r, const ProblemSpec& spec, const ParityArgs& a) {
  return {{"problem", r.problem},
          {"level", spec.level},
          {"upstream_file", r.upstream_file},
          {"status", r.status},
          {"bitwise", r.bitwise},
          {"max_abs_error", r.max_abs_error},
          {"max_rel_error", r.max_rel_error},
          {"details", r.details},
          {"deviations", r.deviations},
          {"device", a.device},
          {"gpu", r.gpu},
          {"dims", a.dims},
          {"construction", a.weights},
          {"weights", r.weights},
          {"weights_compared", r.weights_compared},
          {"seconds", {{"reference", r.reference_seconds}, {"upstream", r.upstream_seconds}, {"compare", r.compare_seconds}}}};
}

// The port of each selected task against its upstream Python file: one row
// per task, optionally kept in a JSON table that --resume continues.
int parity(const GlobalOptions& g, const ParityArgs& a) {
  ProblemRegistry reg(g.problems_dir);
  const std::vector<ProblemEntry> entries = reg.select(a.names, a.suite, a.level > 0 ? std::optional<int>(a.level) : std::nullopt);
  if (!std::filesystem::is_directory(a.upstream)) {
    throw std::invalid_argument("--upstream " + a.upstream + ": not a folder; give a KernelBench checkout (the folder "
                                "holding KernelBench/level1/...)");
  }
  if (a.dims != "small" && a.dims != "full") throw std::invalid_argument("--dims: small or full, not " + a.dims);
  if (a.weights != "drawn" && a.weights != "seeded") {
    throw std::invalid_argument("--weights: drawn (kloop's weights loaded by name) or seeded (KernelBench's seeded "
                                "construction on both sides), not " + a.weights);
  }
  ParityOptions po;
  po.seeded = a.weights == "seeded";
  po.upstream_root = std::filesystem::absolute(a.upstream).lexically_normal().string();
  po.python = find_python_with_torch(a.python);
  // One python3 for every task (Python, torch and CUDA start once).
  UpstreamHost host(po.python, (std::filesystem::temp_directory_path() /
                                ("kloop-parity-" + std::to_string(getpid()) + ".log")).string());
  po.host = &host;
  Builder builder(BuilderConfig::from_environment());
  EvalOptions opts = reference_command_options(entries.size(), a.device);
  opts.small_dims = a.dims == "small";
  Evaluator evaluator(builder, opts);
  ResumableTable table(a.json_file, a.resume, "problem", "a parity table written by kloop problems parity --json");
  table.only(entries);
  std::vector<std::string> sources;
  for (const auto& e : entries) {
    if (!table.earlier(e.name)) sources.push_back(reg.load(e).reference_path);
  }
  prebuild_references(builder.config(), sources, opts);
  std::map<std::string, int> counts;
  std::printf("%-50s %-16s %-8s %-8s %-11s %-11s %s\n", "problem", "parity", "weights", "bitwise", "max_abs", "max_rel",
              "details");
  std::size_t resumed = 0;
  for (const auto& e : entries) {
    if (const nlohmann::json* earlier = table.earlier(e.name)) {
      table.add(*earlier);
      ++resumed;
      continue;
    }
    const ProblemSpec spec = reg.load(e);
    const ParityResult r = check_parity(evaluator, spec, po);
    ++counts[r.status];
    std::string details;
    for (const auto& d : r.details) details += (details.empty() ? "" : "; ") + d;
    std::printf("%-50s %-16s %-8s %-8s %-11.3g %-11.3g %s\n", r.problem.c_str(), r.status.c_str(),
                r.weights.empty() ? "-" : r.weights.c_str(), r.bitwise ? "yes" : "no", r.max_abs_error,
                r.max_rel_error, details.substr(0, 400).c_str());
    std::fprintf(stderr, "kloop: %s: reference %.1f s, upstream %.1f s, compare %.1f s\n", r.problem.c_str(),
                 r.reference_seconds, r.upstream_seconds, r.compare_seconds);
    std::fflush(stdout);
    table.add(parity_row(r, spec, a));
  }
  if (!a.markdown.empty()) RunStore::write_text(a.markdown, parity_markdown(table.rows(), a.weights == "seeded"));
  int bad = 0;
  std::string summary;
  for (const auto& [status, n] : counts) {
    summary += (summary.empty() ? "" : ", ") + std::to_string(n) + " " + status;
    if (status != "match") bad += n;
  }
  std::printf("%zu task(s) compared with %s: %s%s\n", entries.size() - resumed, a.upstream.c_str(),
              summary.empty() ? "none" : summary.c_str(),
              resumed == 0 ? "" : (" (" + std::to_string(resumed) + " kept from " + a.resume + ")").c_str());
  return bad ? 1 : 0;
}

// The reference hash of each selected task (docs/kernelbench.md, "Published
// kernels of any KernelBench version"): the upstream file its spec's
// provenance.file names, under `upstream`, against the spec's recorded
// provenance.reference_hash and inputs_hash. --write records them where they
// are missing or differ (for a port brought up to that upstream file).
int hash(const GlobalOptions& g, const std::vector<std::string>& names, const std::string& suite,
         std::optional<int> level, const std::string& upstream, bool write) {
  ProblemRegistry reg(g.problems_dir);
  int bad = 0, written = 0;
  const std::vector<ProblemEntry> entries = reg.select(names, suite, level);
  std::printf("%-52s %-16s %-16s %s\n", "problem", "recorded", "upstream", "");
  for (const auto& e : entries) {
    const ProblemSpec s = reg.load(e);
    const auto file = s.provenance.find("file");
    const auto recorded = s.provenance.find("reference_hash");
    const std::string have = recorded == s.provenance.end() ? "-" : recorded->second;
    if (file == s.provenance.end()) {
      std::printf("%-52s %-16s %-16s %s\n", e.name.c_str(), have.c_str(), "-", "no provenance.file");
      continue;
    }
    const std::filesystem::path path = std::filesystem::path(upstream) / file->second;
    std::string source;
    try {
      source = read_file(path.string());
    } catch (const std::exception& ex) {
      ++bad;
      std::printf("%-52s %-16s %-16s %s\n", e.name.c_str(), have.c_str(), "-", ex.what());
      continue;
    }
    const ReferenceIdentity id = reference_identity(source);
    const std::string& theirs = id.model_hash;
    const auto inputs = s.provenance.find("inputs_hash");
    const bool same = theirs == have && inputs != s.provenance.end() && inputs->second == id.inputs_hash;
    std::string state = same ? "same" : have == "-" ? "not recorded" : theirs == have ? "inputs differ" : "DIFFERS";
    if (!same && write) {
      // The hashes go on their own lines after provenance.file (the spec's
      // text is kept as written: comments, order).
      std::istringstream in(read_file(e.spec_path));
      std::string line, out;
      while (std::getline(in, line)) {
        if (line.rfind("  reference_hash:", 0) == 0 || line.rfind("  inputs_hash:", 0) == 0) continue;
        out += line + "\n";
        if (line.rfind("  file:", 0) == 0) {
          out += "  reference_hash: \"" + theirs + "\"\n  inputs_hash: \"" + id.inputs_hash + "\"\n";
        }
      }
      RunStore::write_text(e.spec_path, out);
      state = "written";
      ++written;
    } else if (!same) {
      ++bad;
    }
    std::printf("%-52s %-16s %-16s %s\n", e.name.c_str(), have.c_str(), theirs.c_str(), state.c_str());
  }
  std::printf("%zu task(s), %d differ or unreadable, %d written\n", entries.size(), bad, written);
  return bad ? 1 : 0;
}

// kloop problems hash's options and what runs it.
std::pair<CLI::App*, Runner> add_hash_subcommand(CLI::App& app, const GlobalOptions& global) {
  auto* cmd = app.add_subcommand(
      "hash", "each task's reference hash (its upstream Model, normalised) against the one its spec records");
  struct Args {
    std::vector<std::string> names;
    std::string suite, upstream;
    int level = 0;
    bool write = false;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("names", a->names, "problems (default: all selected)");
  cmd->add_option("--suite", a->suite, "only this suite");
  cmd->add_option("--level", a->level, "only this level");
  cmd->add_option("--upstream", a->upstream, "a KernelBench checkout (holds KernelBench/level1/...)")->required();
  cmd->add_flag("--write", a->write, "record the upstream file's hashes in each spec where they differ");
  return {cmd, [a, &global]() {
            return hash(global, a->names, a->suite, a->level > 0 ? std::optional<int>(a->level) : std::nullopt,
                        a->upstream, a->write);
          }};
}

}  // namespace

Runner add_problems_command(CLI::App& app, const GlobalOptions& global) {
  app.require_subcommand(1);
  auto* list_cmd = app.add_subcommand("list", "list problems");
  auto suite = std::make_shared<std::string>();
  auto level = std::make_shared<int>(0);
  auto json_list = std::make_shared<bool>(false);
  list_cmd->add_option("--suite", *suite, "only this suite (e.g. kernelbench)");
  list_cmd->add_option("--level", *level, "only this level (1, 2 or 3)");
  auto list_selection = std::make_shared<std::string>();
  list_cmd->add_option("--problems", *list_selection,
                       "by level and KernelBench number: L1, L1:1-20, 'L1:3,7-9,L2:5' (as kloop run --problems)");
  list_cmd->add_flag("--json", *json_list, "machine-readable output");
  auto list_precision = std::make_shared<std::string>("fp32");
  list_cmd
      ->add_option("--precision", *list_precision,
                   "fp32, fp16 or bf16: the column `excluded from` says what leaves a task out of runs at it")
      ->capture_default_str();
  auto* show_cmd = app.add_subcommand("show", "show one problem's spec");
  auto name = std::make_shared<std::string>();
  auto json_show = std::make_shared<bool>(false);
  show_cmd->add_option("name", *name, "problem name, e.g. 19_ReLU or level1/19_ReLU")->required();
  show_cmd->add_flag("--json", *json_show, "machine-readable output");
  auto* check_cmd = app.add_subcommand("check", "build and run references at cpu dims: output count, finite, deterministic");
  auto check_names = std::make_shared<std::vector<std::string>>();
  auto check_suite = std::make_shared<std::string>();
  auto check_level = std::make_shared<int>(0);
  check_cmd->add_option("names", *check_names, "problems to check (default: all selected)");
  check_cmd->add_option("--suite", *check_suite, "only this suite");
  check_cmd->add_option("--level", *check_level, "only this level");
  auto check_device = std::make_shared<std::string>("cpu");
  check_cmd->add_option("--device", *check_device, "cpu or cuda[:N] (runs at the small cpu dims either way)")
      ->capture_default_str();
  auto* build_cmd = app.add_subcommand("build", "compile references without running them (warms the build cache)");
  auto build_names = std::make_shared<std::vector<std::string>>();
  auto build_suite = std::make_shared<std::string>();
  auto build_level = std::make_shared<int>(0);
  auto build_device = std::make_shared<std::string>("cpu");
  build_cmd->add_option("names", *build_names, "problems to build (default: all selected)");
  build_cmd->add_option("--suite", *build_suite, "only this suite");
  build_cmd->add_option("--level", *build_level, "only this level");
  build_cmd->add_option("--device", *build_device, "cpu or cuda[:N] (the libraries a reference links differ)")
      ->capture_default_str();
  auto* parity_cmd = app.add_subcommand(
      "parity", "run each task's upstream Python file on kloop's weights and inputs and compare with kloop's port");
  auto pa = std::make_shared<ParityArgs>();
  parity_cmd->add_option("names", pa->names, "problems to compare (default: all selected)");
  parity_cmd->add_option("--upstream", pa->upstream, "a KernelBench checkout (holds KernelBench/level1/...)")->required();
  parity_cmd->add_option("--suite", pa->suite, "only this suite");
  parity_cmd->add_option("--level", pa->level, "only this level");
  parity_cmd->add_option("--device", pa->device, "cpu or cuda[:N]")->capture_default_str();
  parity_cmd->add_option("--dims", pa->dims, "small (the spec's cpu dims) or full (upstream's sizes; GPU)")
      ->capture_default_str();
  parity_cmd->add_option("--python", pa->python,
                         "python3 with torch (default: $KLOOP_PYTHON, else python3 or /usr/bin/python3, whichever imports torch)");
  parity_cmd->add_option("--json", pa->json_file, "write the table here as it grows (one row per task)");
  parity_cmd->add_option("--resume", pa->resume, "keep the rows of this earlier --json table and compare only the rest");
  parity_cmd->add_option("--markdown", pa->markdown, "write the table as Markdown here");
  parity_cmd->add_option("--weights", pa->weights,
                         "drawn: upstream loads kloop's weights by name; seeded: both sides built after "
                         "torch.manual_seed (KernelBench's contract), their state_dicts compared bit for bit")
      ->capture_default_str();
  const auto [hash_cmd, hash_runner] = add_hash_subcommand(app, global);
  return [&global, list_cmd, show_cmd, check_cmd, parity_cmd, pa, suite, level, json_list, name, json_show, check_names,
          check_suite, check_level, check_device, build_cmd, build_names, build_suite, build_level, build_device,
          list_selection, list_precision, hash_cmd = hash_cmd, hash_runner = hash_runner]() {
    if (parity_cmd->parsed()) return parity(global, *pa);
    if (hash_cmd->parsed()) return hash_runner();
    if (build_cmd->parsed()) {
      return build(global, *build_names, *build_suite,
                   *build_level > 0 ? std::optional<int>(*build_level) : std::nullopt, *build_device);
    }
    if (check_cmd->parsed()) {
      return check(global, *check_names, *check_suite,
                   *check_level > 0 ? std::optional<int>(*check_level) : std::nullopt, *check_device);
    }
    if (list_cmd->parsed()) {
      return list(global, *suite, *level > 0 ? std::optional<int>(*level) : std::nullopt, *list_selection, *json_list,
                  parse_precision_option("--precision", *list_precision));
    }
    if (show_cmd->parsed()) return show(global, *name, *json_show);
    return 2;
  };
}

}  // namespace kloop::cli
