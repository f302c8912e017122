// torch.compile baselines through the upstream harness (compile_baseline.h).
#include "evaluator/compile_baseline.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include "evaluator/build/content_hash.h"
#include "evaluator/parity.h"
#include "evaluator/timing/device_figures.h"

namespace kloop {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

}  // namespace

std::vector<std::string> compile_modes() { return {"default", "reduce-overhead"}; }

std::string compile_mode_of(const std::string& baseline) {
  const std::string prefix = kCompileBaselinePrefix;
  if (baseline.rfind(prefix, 0) != 0) return "";
  const std::string mode = baseline.substr(prefix.size());
  for (const auto& m : compile_modes()) {
    if (m == mode) return mode;
  }
  return "";
}

std::string compile_unavailable(const std::string& python) {
  std::string exe;
  try {
    exe = python.empty() ? find_python_with_torch("") : python;
  } catch (const std::exception& e) {
    return std::string("torch.compile baselines need a python3 with torch >= 2.0: ") + e.what();
  }
  const fs::path log = fs::temp_directory_path() / ("kloop-compile-probe-" + std::to_string(::getpid()) + ".log");
  UpstreamHost host(exe, log.string());
  const json reply = host.run({{"probe", true}}, std::chrono::seconds(120));
  std::error_code ec;
  fs::remove(log, ec);
  if (!reply.value("ok", false)) {
    return exe + " cannot run the upstream harness: " + reply.value("error", std::string("no answer"));
  }
  if (!reply.value("compile", false)) return reply.value("why", std::string("torch.compile is missing"));
  return "";
}

CompileBaselineReport measure_compile_baseline(Evaluator& evaluator, const ProblemSpec& given, const std::string& mode,
                                               const CompileBaselineOptions& options) {
  const EvalOptions& eo = evaluator.options();
  const ProblemSpec spec = spec_at_precision(given, eo.precision);
  CompileBaselineReport r;
  r.problem = spec.name;
  r.mode = mode;
  bool known_mode = false;
  for (const auto& m : compile_modes()) known_mode = known_mode || m == mode;
  if (!known_mode) {
    r.error = "'" + mode + "' is not a torch.compile mode kloop measures (default, reduce-overhead)";
    return r;
  }
  const auto file = spec.provenance.find("file");
  if (file == spec.provenance.end()) {
    r.error = "the spec names no upstream file (provenance.file), so there is no PyTorch Model to compile";
    return r;
  }
  const fs::path upstream = fs::path(options.upstream_root) / file->second;
  if (options.upstream_root.empty() || !fs::is_regular_file(upstream)) {
    r.error = upstream.string() + ": not found; torch.compile baselines compile the upstream task (--upstream, a "
                                  "KernelBench checkout)";
    return r;
  }
  std::unique_ptr<UpstreamHost> own_host;
  UpstreamHost* host = options.host;
  std::string python = options.python;
  try {
    if (python.empty()) python = find_python_with_torch("");
  } catch (const std::exception& e) {
    r.error = e.what();
    return r;
  }
  // Which torch answers: part of the cache key, and the fail-closed message.
  const fs::path probe_log = fs::temp_directory_path() / ("kloop-compile-" + std::to_string(::getpid()) + ".log");
  if (!host) {
    own_host = std::make_unique<UpstreamHost>(python, probe_log.string());
    host = own_host.get();
  }
  const json probe = host->run({{"probe", true}}, std::chrono::seconds(120));
  if (!probe.value("ok", false)) {
    r.error = python + " cannot run the upstream harness: " + probe.value("error", std::string("no answer"));
    return r;
  }
  r.torch_version = probe.value("torch", std::string());
  if (!probe.value("compile", false)) {
    r.error = probe.value("why", std::string("torch.compile is missing"));
    return r;
  }
  std::unique_ptr<HeldReferenceCase> held;
  try {
    held = evaluator.hold_reference_case(spec);
  } catch (const std::exception& e) {
    r.error = std::string("kloop's reference: ") + e.what();
    return r;
  }
  ContentHash source;
  source.add_file(upstream.string());
  const json rules = {{"compile", mode}, {"trials", options.trials}, {"l2_flush", true}, {"harness", "v1"}};
  const BaselineKey key{spec.name, source.hex(), held->dims(), held->device(), "python torch " + r.torch_version,
                        rules, precision_name(eo.precision)};
  const std::string cache_dir = evaluator.builder_config().cache_dir;
  if (options.use_cache) {
    if (auto cached = load_baseline(cache_dir, key)) {
      r.cached = true;
      r.time = cached->fp32;
      r.measured_at = cached->measured_at;
      return r;
    }
  }
  const fs::path dir = held->folder();
  const std::string args_file = (dir / "args.json").string();
  std::ofstream(args_file) << held->args().dump();
  const std::string dims_file = (dir / "dims.json").string();
  std::ofstream(dims_file) << held->dims().dump();
  const std::string out_file = (dir / "compiled.safetensors").string();
  json request = {{"task", upstream.string()}, {"args", args_file},   {"weights", held->weights_file()},
                  {"inputs", held->inputs_file()}, {"out", out_file}, {"dims", dims_file},
                  {"device", eo.device},          {"compile", mode},  {"trials", options.trials}};
  if (eo.precision != Precision::kFp32) request["dtype"] = dtype_name(precision_dtype(eo.precision));
  const json reply = host->run(request, options.timeout);
  if (!reply.value("ok", false)) {
    r.error = "upstream under torch.compile(mode=" + mode + "): " + reply.value("error", std::string("failed"));
    return r;
  }
  // A compiled model that computes something else is no baseline.
  try {
    const HeldJudgement judged = held->judge(out_file, run_protocol(eo).tolerance);
    bool passed = judged.output_count == judged.expected_count;
    for (const auto& c : judged.outputs) passed = passed && c.passed;
    if (!passed) {
      r.error = "the compiled model's outputs differ from kloop's reference under " + eo.protocol +
                "'s tolerance: no baseline";
      return r;
    }
  } catch (const std::exception& e) {
    r.error = std::string("judging the compiled model's outputs: ") + e.what();
    return r;
  }
  std::vector<double> times;
  for (const auto& t : reply.value("times", json::array())) times.push_back(t.get<double>());
  if (times.empty()) {
    r.error = "the harness timed no call";
    return r;
  }
  r.time = summarize(times);
  r.compile_seconds = reply.value("compile_seconds", 0.0);
  r.measured_at = utc_now();
  // The CPU's figures are the machine's of the moment, as its eager ones are.
  if (eo.device != "cpu") store_baseline(cache_dir, key, Baseline{*r.time, std::nullopt, r.measured_at});
  return r;
}

}  // namespace kloop
