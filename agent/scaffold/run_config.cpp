// YAML → RunConfig, converted through JSON so nested blocks (provider) can
// reuse their JSON readers.
#include "agent/scaffold/run_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <stdexcept>

#include "agent/scaffold/run_baselines.h"
#include "agent/store/run_store.h"
#include "base/settings.h"
#include "evaluator/build/build_config.h"
#include "evaluator/build/environment.h"
#include "evaluator/isolation/sandbox.h"
#include "evaluator/problem/registry.h"
#include "evaluator/problem/yaml_input.h"
#include "evaluator/compile_baseline.h"
#include "evaluator/protocol.h"

namespace kloop {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

json yaml_to_json(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Scalar: {
      const std::string& s = n.Scalar();
      if (n.Tag() == "!") return s;  // quoted: keep as a string
      if (s == "true" || s == "True") return true;
      if (s == "false" || s == "False") return false;
      if (s == "null" || s == "~") return nullptr;
      try {
        std::size_t used = 0;
        long long i = std::stoll(s, &used);
        if (used == s.size()) return i;
        double d = std::stod(s, &used);
        if (used == s.size()) return d;
      } catch (const std::exception&) {
      }
      return s;
    }
    case YAML::NodeType::Sequence: {
      json a = json::array();
      for (const auto& x : n) a.push_back(yaml_to_json(x));
      return a;
    }
    case YAML::NodeType::Map: {
      json o = json::object();
      for (const auto& kv : n) o[kv.first.Scalar()] = yaml_to_json(kv.second);
      return o;
    }
  }
  return nullptr;
}

}  // namespace

json RunConfig::to_json() const {
  // Stored only when not the default, so runs made before the field keep resuming.
  json evaluation = {{"timeout_s", eval_timeout_s}, {"max_timing_seconds", max_timing_seconds}, {"threads", threads}};
  if (isolation != "strict") evaluation["isolation"] = isolation;
  if (!activity_audit) evaluation["activity_audit"] = false;
  if (environment_retries != 2) evaluation["environment_retries"] = environment_retries;
  if (!baselines.empty()) evaluation["baselines"] = baselines;
  if (!upstream.empty()) evaluation["upstream"] = upstream;
  if (!python.empty()) evaluation["python"] = python;
  json feedback = json::array();
  for (auto k : scaffold.feedback) feedback.push_back(feedback_kind_name(k));
  json prov = {{"kind", provider.kind},
               {"model", provider.model},
               {"base_url", provider.base_url},
               {"api_key_env", provider.api_key_env},
               {"max_tokens", provider.max_tokens ? json(*provider.max_tokens) : json(nullptr)},
               {"temperature", provider.temperature ? json(*provider.temperature) : json(nullptr)},
               {"top_p", provider.top_p ? json(*provider.top_p) : json(nullptr)},
               {"reasoning_effort", provider.reasoning_effort ? json(*provider.reasoning_effort) : json(nullptr)},
               {"thinking_budget", provider.thinking_budget ? json(*provider.thinking_budget) : json(nullptr)},
               {"seed", provider.seed ? json(*provider.seed) : json(nullptr)},
               {"command", provider.command},
               {"transcript", provider.transcript},
               {"prices", {{"input", provider.prices.input}, {"output", provider.prices.output}}}};
  if (provider.prices.cached_input) prov["prices"]["cached_input"] = *provider.prices.cached_input;
  if (provider.prices.cache_write) prov["prices"]["cache_write"] = *provider.prices.cache_write;
  // Everything else a request depends on; of the extra headers only the
  // names (values may be credentials).
  json header_names = json::array();
  for (const auto& [name, value] : provider.extra_headers) header_names.push_back(name);
  prov["stop"] = provider.stop;
  prov["extra_body"] = provider.extra_body;
  prov["header_names"] = header_names;
  prov["connect_timeout_s"] = provider.connect_timeout.count() / 1000.0;
  prov["timeout_s"] = provider.total_timeout.count() / 1000.0;
  prov["max_retries"] = provider.max_retries;
  prov["initial_backoff_s"] = provider.initial_backoff.count() / 1000.0;
  prov["max_backoff_s"] = provider.max_backoff.count() / 1000.0;
  prov["concurrency"] = provider.concurrency;
  // The token clocks and the resends that may bill an answer again.
  prov["stream"] = provider.stream;
  prov["first_token_timeout_s"] = provider.first_token_timeout.count() / 1000.0;
  prov["idle_timeout_s"] = provider.idle_timeout.count() / 1000.0;
  prov["resend_broken_streams"] = provider.resend_broken_streams;
  json problems_json = {{"suite", problems.suite},
                        {"level", problems.level ? json(*problems.level) : json(nullptr)},
                        {"names", problems.names}};
  if (!problems.select.empty()) problems_json["select"] = problems.select;
  json out = {{"name", name},
             {"config_file", path},
             {"problems", problems_json},
             {"device", device},
             {"devices", devices},
             {"protocol", protocol},
             {"precision", precision},
             {"seed", seed},
             {"provider", prov},
             {"scaffold",
              {{"kind", scaffold.kind},
               {"samples", scaffold.samples},
               {"turns", scaffold.turns},
               {"feedback", feedback},
               {"context", scaffold.context},
               {"keep_best", scaffold.keep_best},
               {"width", scaffold.width},
               {"expand", scaffold.expand},
               {"population", scaffold.population},
               {"parents", scaffold.parents},
               {"crossover", scaffold.crossover},
               {"mutate_prompt", scaffold.mutate_prompt},
               {"select", scaffold.select},
               {"early_stop_speedup", scaffold.early_stop_speedup ? json(*scaffold.early_stop_speedup) : json(nullptr)}}},
             {"candidate_format", candidate_format},
             {"prompts",
              {{"dir", prompts.dir},
               {"max_feedback_chars", prompts.max_feedback_chars},
               {"style", prompts.style},
               {"upstream", prompts.upstream}}},
             {"evaluation", evaluation},
             {"parallel_chains", parallel_chains},
             {"compile_jobs", compile_jobs}};
  if (!overrides.empty()) out["overrides"] = overrides;
  return out;
}

json read_config_json(const std::string& path, bool follow_links) {
  YamlLimits limits;
  limits.follow_links = follow_links;
  const YAML::Node root = load_yaml_file(path, limits);  // YamlInputError is an invalid_argument
  json j = yaml_to_json(root);
  if (!j.is_object()) throw std::invalid_argument(path + ": expected a YAML map at the top level");
  return j;
}

RunConfig load_run_config(const std::string& path) {
  const json j = read_config_json(path);
  if (j.contains("sweep")) {
    throw std::invalid_argument(path + ": field 'sweep': this config is a sweep of several runs; kloop run runs them "
                                "all (load_run_configs), or remove the sweep block for one run");
  }
  return run_config_from_json(j, path);
}

namespace {

// devices: all, a count, or a list of GPU indices (evaluation_devices resolves it).
void read_devices(const SettingsReader& r, const json& j, RunConfig& c) {
  if (j.contains("devices") && !j["devices"].is_null()) {
    const json& d = j["devices"];
    const bool pinned = c.device.rfind("cuda:", 0) == 0;
    if (pinned) r.fail("devices", "device " + c.device + " names one GPU; use device: cuda with devices: [..] for several");
    if (d.is_string()) {
      if (d.get<std::string>() != "all") r.fail("devices", "expected all, a number of devices, or a list of GPU indices");
      if (c.device == "cpu") r.fail("devices", "all means every GPU; on cpu give the number of CPU queues, e.g. 2");
    } else if (d.is_number_integer()) {
      if (d.get<long long>() < 1 || d.get<long long>() > 1024) r.fail("devices", "expected 1 or more, got " + d.dump());
    } else if (d.is_array()) {
      if (c.device == "cpu") r.fail("devices", "a list names GPUs; on cpu give the number of CPU queues, e.g. 2");
      if (d.empty()) r.fail("devices", "the list is empty; name at least one GPU index, e.g. [0, 1]");
      std::set<long long> seen;
      for (const auto& x : d) {
        long long index = -1;
        if (x.is_number_integer()) {
          index = x.get<long long>();
        } else if (x.is_string() && x.get<std::string>().rfind("cuda:", 0) == 0) {
          try {
            std::size_t used = 0;
            const std::string digits = x.get<std::string>().substr(5);
            index = std::stoll(digits, &used);
            if (used != digits.size()) index = -1;
          } catch (const std::exception&) {
          }
        }
        if (index < 0) r.fail("devices", x.dump() + " is not a GPU index; use 0, 1, ... (or cuda:0, cuda:1, ...)");
        if (!seen.insert(index).second) r.fail("devices", "GPU " + std::to_string(index) + " is listed twice");
      }
    } else {
      r.fail("devices", "expected all, a number of devices, or a list of GPU indices; got " + d.dump());
    }
    c.devices = d;
  }
}

void read_problems(const SettingsReader& r, RunConfig& c) {
  if (r.has("problems") && !r.at("problems").is_object())
    r.fail("problems", "expected a map with suite, level and/or names");
  const SettingsReader problems = r.block("problems");
  problems.known({"suite", "level", "names", "select"});
  c.problems.suite = problems.get<std::string>("suite", "");
  if (problems.has("level")) {
    c.problems.level = problems.get<int>("level", 0);
  }
  c.problems.names = problems.get<std::vector<std::string>>("names", {});
  if (!c.problems.names.empty() && c.problems.level) {
    r.fail("problems", "give either level (every problem of a level) or names (those problems), not both");
  }
  c.problems.select = problems.get<std::string>("select", "");
  if (problems.has("select")) {
    if (c.problems.level || !c.problems.names.empty()) {
      r.fail("problems.select", "selects by level and number itself; give it without level and names");
    }
    try {
      (void)parse_numbered_selection(c.problems.select);
    } catch (const std::invalid_argument& e) {
      r.fail("problems.select", e.what());
    }
  }
  {
    std::set<std::string> seen;
    for (const auto& n : c.problems.names) {
      if (!seen.insert(n).second) r.fail("problems.names", "'" + n + "' is listed twice; list each problem once");
    }
  }

}

// Each field belongs to its scaffolds: one given to another is a mistake.
void check_scaffold_fields(const SettingsReader& r, const SettingsReader& sc, const RunConfig& c, bool search) {
  auto only_for = [&](const std::string& field, const std::set<std::string>& kinds) {
    if (sc.json().contains(field) && !kinds.count(c.scaffold.kind)) {
      std::string list;
      for (const auto& k : kinds) list += (list.empty() ? "" : " or ") + k;
      r.fail("scaffold." + field, "belongs to the " + list + " scaffold, not " + c.scaffold.kind);
    }
  };
  only_for("width", {"beam"});
  only_for("expand", {"beam"});
  only_for("depth", {"beam"});
  only_for("population", {"evolve"});
  only_for("generations", {"evolve"});
  only_for("parents", {"evolve"});
  only_for("crossover", {"evolve"});
  only_for("mutate_prompt", {"evolve"});
  only_for("select", {"beam", "evolve"});
  if (search) {
    for (const char* f : {"samples", "turns", "keep_best", "early_stop_speedup"}) {
      if (sc.json().contains(f)) {
        r.fail(std::string("scaffold.") + f, "a " + c.scaffold.kind + " search has no " + f +
                                                 (c.scaffold.kind == "beam" ? "; use width, expand and depth"
                                                                            : "; use population and generations"));
      }
    }
  }
}

// samples and turns: a chain's own, or a search's from its shape.
void read_scaffold_shape(const SettingsReader& r, const SettingsReader& sc, RunConfig& c, bool search) {
  auto positive = [&](const char* field, int fallback) {
    const int v = sc.get<int>(field, fallback);
    if (v < 1) r.fail(std::string("scaffold.") + field, "expected at least 1, got " + std::to_string(v));
    return v;
  };
  c.scaffold.samples = search ? 1 : sc.get<int>("samples", 1);
  c.scaffold.turns = search ? 1 : sc.get<int>("turns", c.scaffold.kind == "iterative" ? 3 : 1);
  if (c.scaffold.kind == "beam") {
    c.scaffold.width = positive("width", 2);
    c.scaffold.expand = positive("expand", 2);
    c.scaffold.samples = c.scaffold.width * c.scaffold.expand;
    c.scaffold.turns = positive("depth", 3);
  } else if (c.scaffold.kind == "evolve") {
    c.scaffold.population = positive("population", 4);
    c.scaffold.parents = positive("parents", 2);
    c.scaffold.crossover = sc.get<bool>("crossover", true);
    c.scaffold.mutate_prompt = sc.get<std::string>("mutate_prompt", "");
    if (!c.scaffold.crossover) c.scaffold.parents = 1;
    if (sc.json().contains("parents") && !c.scaffold.crossover && sc.get<int>("parents", 1) != 1) {
      r.fail("scaffold.parents", "without crossover a child has one parent; leave parents out or set crossover: true");
    }
    c.scaffold.samples = c.scaffold.population;
    c.scaffold.turns = positive("generations", 3);
  }
}

void read_scaffold(const SettingsReader& r, RunConfig& c) {
  const SettingsReader sc = r.block("scaffold");
  sc.known({"kind", "samples", "turns", "feedback", "context", "keep_best", "early_stop_speedup", "width", "expand",
            "depth", "population", "generations", "parents", "crossover", "mutate_prompt", "select"});
  c.scaffold.kind = sc.get<std::string>("kind", "iterative");
  const bool search = c.scaffold.kind == "beam" || c.scaffold.kind == "evolve";
  check_scaffold_fields(r, sc, c, search);
  read_scaffold_shape(r, sc, c, search);
  if (search) {
    c.scaffold.select = sc.get<std::string>("select", "correct_then_speedup");
    if (c.scaffold.select != "correct_then_speedup" && c.scaffold.select != "speedup") {
      r.fail("scaffold.select", "expected correct_then_speedup or speedup, got '" + c.scaffold.select + "'");
    }
  }
  if (search) {
    // nothing more: samples and turns come from the search's own fields
  } else if (c.scaffold.kind == "one_shot") {
    if (c.scaffold.samples != 1 || c.scaffold.turns != 1) r.fail("scaffold", "one_shot means samples: 1 and turns: 1");
  } else if (c.scaffold.kind == "best_of_k") {
    if (c.scaffold.turns != 1) r.fail("scaffold.turns", "best_of_k takes one turn per sample; use iterative for more");
  } else if (c.scaffold.kind != "iterative") {
    r.fail("scaffold.kind",
           "unknown scaffold '" + c.scaffold.kind + "'; expected one_shot, best_of_k, iterative, beam or evolve");
  }
  if (c.scaffold.samples < 1) r.fail("scaffold.samples", "expected at least 1");
  if (c.scaffold.turns < 1) r.fail("scaffold.turns", "expected at least 1");
  if (sc.json().contains("feedback")) {
    c.scaffold.feedback.clear();
    for (const auto& f : sc.get<std::vector<std::string>>("feedback", {})) {
      try {
        c.scaffold.feedback.insert(parse_feedback_kind(f));
      } catch (const std::invalid_argument& e) {
        r.fail("scaffold.feedback", e.what());
      }
    }
  }
  c.scaffold.context = sc.get<std::string>("context", "full");
  if (c.scaffold.context != "full" && c.scaffold.context != "last") {
    r.fail("scaffold.context", "expected full or last, got '" + c.scaffold.context + "'");
  }
  c.scaffold.keep_best = sc.get<bool>("keep_best", false);
  if (sc.has("early_stop_speedup")) {
    c.scaffold.early_stop_speedup = sc.get<double>("early_stop_speedup", 0);
  }

}

void read_prompts(const SettingsReader& r, RunConfig& c) {
  const SettingsReader pr = r.block("prompts");
  pr.known({"dir", "max_feedback_chars", "max_reference_chars", "style", "upstream"});
  c.prompts.dir = r.resolve_path(pr.get<std::string>("dir", data_dir() + "/prompts"));
  c.prompts.max_feedback_chars = pr.get<std::size_t>("max_feedback_chars", 6000);
  c.prompts.max_reference_chars = pr.get<std::size_t>("max_reference_chars", 30000);
  c.prompts.cuda = c.device != "cpu";
  const bool python = c.candidate_format == "kernelbench_python";
  c.prompts.style = pr.get<std::string>("style", python ? "kernelbench" : "kloop");
  if (c.prompts.style != "kloop" && c.prompts.style != "kernelbench") {
    r.fail("prompts.style", "'" + c.prompts.style + "' is not a prompt style; use kloop or kernelbench");
  }
  if ((c.prompts.style == "kernelbench") != python) {
    r.fail("prompts.style", "style " + c.prompts.style + " asks for " + (python ? "C++" : "a Python ModelNew") +
                                ", but candidate_format is " + c.candidate_format +
                                "; use style kernelbench with candidate_format kernelbench_python, kloop with cpp");
  }
  if (pr.json().contains("upstream")) {
    c.prompts.upstream = r.resolve_path(pr.get<std::string>("upstream", ""));
    if (!fs::is_directory(fs::path(c.prompts.upstream) / "KernelBench")) {
      r.fail("prompts.upstream", c.prompts.upstream + " holds no KernelBench/ folder; give a KernelBench checkout");
    }
  }
  c.prompts.feedback = c.scaffold.feedback;

}

void read_evaluation(const SettingsReader& r, RunConfig& c) {
  const SettingsReader ev = r.block("evaluation");
  ev.known({"timeout_s", "max_timing_seconds", "threads", "isolation", "activity_audit", "environment_retries",
            "baselines", "upstream", "python"});
  c.baselines = ev.get<std::vector<std::string>>("baselines", {});
  for (const auto& b : c.baselines) {
    if (!is_run_baseline(b)) {
      r.fail("evaluation.baselines", "'" + b + "' is not a baseline; use " + run_baseline_choices());
    }
  }
  if (std::set<std::string>(c.baselines.begin(), c.baselines.end()).size() != c.baselines.size()) {
    r.fail("evaluation.baselines", "a baseline is listed twice");
  }
  c.upstream = ev.has("upstream") ? r.resolve_path(ev.get<std::string>("upstream", "")) : "";
  c.python = ev.get<std::string>("python", "");
  const bool compiled = std::any_of(c.baselines.begin(), c.baselines.end(),
                                    [](const std::string& b) { return !compile_mode_of(b).empty(); });
  if (compiled && c.upstream.empty()) {
    r.fail("evaluation.upstream", "missing; the torch.compile baselines compile the upstream task files: give a "
                                  "KernelBench checkout (the folder holding KernelBench/level1/...)");
  }
  c.activity_audit = ev.get<bool>("activity_audit", true);
  c.eval_timeout_s = ev.get<double>("timeout_s", kDefaultRunTimeoutSeconds);
  c.max_timing_seconds = ev.get<double>("max_timing_seconds", 0);
  c.threads = ev.get<int>("threads", 0);
  c.isolation = ev.get<std::string>("isolation", "strict");
  c.environment_retries = ev.get<int>("environment_retries", 2);
  if (c.environment_retries < 0 || c.environment_retries > 10) {
    r.fail("evaluation.environment_retries", "expected 0 to 10 evaluations made again, got " +
                                                 std::to_string(c.environment_retries));
  }
  if (!parse_isolation(c.isolation) || c.isolation == "none") {
    r.fail("evaluation.isolation", "'" + c.isolation + "' is not a sandbox level; use strict (the default) or weak");
  }
}

}  // namespace

RunConfig run_config_from_json(const json& j, const std::string& path) {
  const SettingsReader r(j, path);
  r.known({"name", "runs_dir", "problems_dir", "problems", "device", "devices", "protocol", "precision",
           "candidate_format", "seed",
           "provider", "scaffold", "prompts", "evaluation", "parallel_chains", "compile_jobs"});

  RunConfig c;
  c.path = path;
  c.name = r.get<std::string>("name", fs::path(path).stem().string());
  if (const std::string why = run_name_problem(c.name); !why.empty()) {
    r.fail("name", "'" + c.name.substr(0, 200) + "' cannot name a run: " + why);
  }
  // Given in the config: relative to it; not given: runs/ in the working folder.
  c.runs_dir = j.contains("runs_dir") ? r.resolve_path(r.get<std::string>("runs_dir", ""))
                                      : (fs::current_path() / "runs").string();
  c.problems_dir = r.resolve_path(r.get<std::string>("problems_dir", ProblemRegistry::default_root()));
  c.device = r.get<std::string>("device", "cpu");
  c.protocol = r.get<std::string>("protocol", "strict");
  try {
    (void)protocol_by_name(c.protocol);
  } catch (const std::invalid_argument& e) {
    r.fail("protocol", e.what());
  }
  c.precision = r.get<std::string>("precision", "fp32");
  if (const auto p = parse_precision(c.precision)) {
    c.precision = precision_name(*p);  // float16 is stored as fp16
  } else {
    r.fail("precision", "'" + c.precision + "' is not a precision; use " + precision_choices() +
                            " (KernelBench's: inputs, weights, reference, tolerance and baseline in it)");
  }
  c.candidate_format = r.get<std::string>("candidate_format", "cpp");
  if (c.candidate_format != "cpp" && c.candidate_format != "kernelbench_python") {
    r.fail("candidate_format", "'" + c.candidate_format + "' is not a format; use cpp (kloop's kernel API) or "
                                                          "kernelbench_python (KernelBench's Python ModelNew)");
  }
  if (c.device != "cpu" && c.device != "cuda" && c.device.rfind("cuda:", 0) != 0) {
    r.fail("device", "'" + c.device + "' is not a device; use cpu, cuda or cuda:N");
  }
#ifndef KLOOP_WITH_CUDA
  if (c.device != "cpu") {
    r.fail("device", "this kloop was built without CUDA (a CPU LibTorch); build it against a CUDA LibTorch "
                     "(scripts/build with KLOOP_CMAKE_ARGS=-DCMAKE_PREFIX_PATH=...) or use device: cpu");
  }
#endif
  c.seed = r.get<unsigned long long>("seed", 1);
  c.parallel_chains = r.get<int>("parallel_chains", 0);
  c.compile_jobs = r.get<int>("compile_jobs", 0);
  if (c.compile_jobs < 0) r.fail("compile_jobs", "must be 0 (one per core) or a positive number of compiles at once");

  read_devices(r, j, c);
  read_problems(r, c);
  if (!j.contains("provider")) r.fail("provider", "missing; e.g. {kind: openai, model: gpt-5, api_key_env: OPENAI_API_KEY}");
  c.provider = provider_config_from_json(j["provider"], path);
  if (!c.provider.transcript.empty()) c.provider.transcript = r.resolve_path(c.provider.transcript);

  read_scaffold(r, c);
  read_prompts(r, c);
  read_evaluation(r, c);
  return c;
}

std::vector<std::string> ConfigOverrides::describe() const {
  std::vector<std::string> out;
  for (const auto& s : sets) out.push_back("--set " + s);
  if (!problems.empty()) out.push_back("--problems " + problems);
  return out;
}

namespace {

const std::set<std::string>& top_level_fields() {
  static const std::set<std::string> fields = {"name",     "runs_dir",         "problems_dir", "problems", "device",
                                               "devices",  "protocol",         "precision", "candidate_format", "seed",
                                               "provider",
                                               "scaffold", "prompts",          "evaluation",   "parallel_chains",
                                               "compile_jobs"};
  return fields;
}

}  // namespace

std::vector<std::string> overridden_fields(const ConfigOverrides& o) {
  std::vector<std::string> out;
  for (const auto& s : o.sets) out.push_back(s.substr(0, s.find('=')));
  if (!o.problems.empty()) out.push_back("problems");
  return out;
}

void apply_overrides(json& config, const ConfigOverrides& o) {
  for (const auto& s : o.sets) {
    const std::size_t eq = s.find('=');
    auto fail = [&](const std::string& why) {
      throw std::invalid_argument("--set " + s.substr(0, 200) + ": " + why);
    };
    if (eq == std::string::npos || eq == 0) fail("expected FIELD=VALUE, e.g. --set scaffold.turns=5");
    const std::string field = s.substr(0, eq);
    std::vector<std::string> keys;
    for (std::size_t from = 0; from <= field.size();) {
      const std::size_t dot = std::min(field.find('.', from), field.size());
      keys.push_back(field.substr(from, dot - from));
      if (keys.back().empty()) fail("field '" + field + "' has an empty part; write a dotted path like scaffold.turns");
      from = dot + 1;
    }
    if (keys.front() == "sweep") fail("a sweep is the config file's; --set changes one field of every run");
    if (!top_level_fields().count(keys.front())) {
      std::string list;
      for (const auto& f : top_level_fields()) list += (list.empty() ? "" : ", ") + f;
      fail("field '" + keys.front() + "' is not a field of a run config; known fields: " + list);
    }
    json value;
    try {
      value = yaml_to_json(YAML::Load(s.substr(eq + 1)));
    } catch (const YAML::Exception& e) {
      fail("the value is not YAML (" + std::string(e.what()).substr(0, 200) + "); quote it, e.g. --set 'provider.stop=[\"x\"]'");
    }
    json* cur = &config;
    for (std::size_t i = 0; i + 1 < keys.size(); ++i) {
      json& next = (*cur)[keys[i]];
      if (next.is_null()) next = json::object();
      if (!next.is_object()) {
        std::string at = keys[0];
        for (std::size_t k = 1; k <= i; ++k) at += "." + keys[k];
        fail("field '" + at + "' is " + next.dump().substr(0, 80) + ", not a map; set '" + at + "' itself");
      }
      cur = &next;
    }
    (*cur)[keys.back()] = value;
  }
  if (!o.problems.empty()) {
    try {
      (void)parse_numbered_selection(o.problems);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("--problems: " + std::string(e.what()) +
                                  " (the problems folder is given before the command: kloop --problems DIR run ...)");
    }
    json& p = config["problems"];
    if (!p.is_object()) p = json::object();
    p.erase("level");
    p.erase("names");
    p["select"] = o.problems;
  }
}

std::vector<std::string> evaluation_devices(const RunConfig& c) {
  const std::string where = c.path + ": field 'devices': ";
  if (c.device == "cpu") {
    const int n = c.devices.is_number_integer() ? c.devices.get<int>() : 1;
    return std::vector<std::string>(static_cast<std::size_t>(n), "cpu");
  }
  if (c.device != "cuda") return {c.device};
  const int counted = visible_cuda_devices();
  // Unknown (no nvidia-smi): as many as asked for, else one; the
  // evaluator then says whether a device is there.
  const int visible = counted >= 0 ? counted : c.devices.is_number_integer() ? c.devices.get<int>() : c.devices.is_array() ? 1 << 20 : 1;
  auto too_few = [&](const std::string& asked) {
    return std::invalid_argument(where + asked + ", but this process sees " + std::to_string(visible) +
                                 " GPU(s) (" + visible_cuda_devices_source() +
                                 "); ask for fewer, or run where more are visible");
  };
  std::vector<std::string> out;
  if (c.devices.is_array()) {
    for (const auto& x : c.devices) {
      const long long index = x.is_number_integer() ? x.get<long long>() : std::stoll(x.get<std::string>().substr(5));
      if (index >= visible) throw too_few("GPU " + std::to_string(index) + " is listed");
      out.push_back("cuda:" + std::to_string(index));
    }
    return out;
  }
  int n = visible;
  if (c.devices.is_number_integer()) {
    n = c.devices.get<int>();
    if (n > visible) throw too_few(std::to_string(n) + " GPU(s) are asked for");
  }
  if (n < 1) {
    throw std::invalid_argument(c.path + ": field 'device': cuda, but this process sees no GPU (" +
                                visible_cuda_devices_source() + "); use device: cpu, or run on a GPU machine");
  }
  for (int i = 0; i < n; ++i) out.push_back("cuda:" + std::to_string(i));
  return out;
}

}  // namespace kloop
