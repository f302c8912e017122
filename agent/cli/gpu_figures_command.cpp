// kloop calibrate: this GPU's copy bandwidth and GEMM rates, measured once
// and cached for the speed-of-light floor. kloop baseline: the references'
// FP32 and TF32 times at their upstream sizes, as a table and in the
// baseline cache that evaluations reuse; with --compile, the upstream
// task's torch.compile times beside them (evaluator/compile_baseline.h).
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>

#include "agent/cli/commands.h"
#include "agent/cli/resumable_table.h"
#include "agent/scaffold/status_line.h"
#include "evaluator/compile_baseline.h"
#include "evaluator/parity.h"
#include "evaluator/problem/registry.h"

namespace kloop::cli {

Runner add_calibrate_command(CLI::App& app, const GlobalOptions& global) {
  struct State {
    std::string device = "cuda:0";
  };
  auto st = std::make_shared<State>();
  app.add_option("--device", st->device, "the GPU to measure")->capture_default_str();
  return [st, &global]() {
    (void)global;
    Builder builder(BuilderConfig::from_environment());
    EvalOptions opts;
    opts.device = st->device;
    Evaluator evaluator(builder, opts);
    Calibration c = evaluator.calibrate();
    std::printf("%s (driver %d, %d SMs)\n", c.device.value("name", "?").c_str(), c.device.value("cuda_driver", 0),
                c.device.value("sms", 0));
    std::printf("  copy bandwidth (read + write)  %8.0f GB/s\n", c.dram_bytes_per_s / 1e9);
    std::printf("  FP32 GEMM                      %8.1f TFLOP/s\n", c.fp32_flops_per_s / 1e12);
    std::printf("  TF32 GEMM                      %8.1f TFLOP/s\n", c.tf32_flops_per_s / 1e12);
    std::printf("  BF16 GEMM                      %8.1f TFLOP/s\n", c.bf16_flops_per_s / 1e12);
    std::printf("  one tiny kernel (events)       %8.2f us\n", c.small_kernel_seconds * 1e6);
    std::printf("stored in %s\n", calibration_path(builder.config().cache_dir, c.device).c_str());
    return 0;
  };
}

namespace {

// A measured reference's line on stdout and its row in the table.
nlohmann::json baseline_row(const ProblemSpec& spec, const BaselineReport& r) {
  nlohmann::json row = {{"task", spec.name}, {"level", spec.level}, {"cached", r.cached}};
  if (!r.error.empty()) {
    std::string first = r.error.substr(0, r.error.find('\n'));
    std::printf("%-62s %10s %10s %6s %6s %9s FAILED: %s\n", spec.name.c_str(), "-", "-", "-", "-", "-",
                first.substr(0, 160).c_str());
    row["error"] = r.error;
  } else {
    const double tf = r.tf32 ? r.tf32->median * 1e3 : 0;
    const std::string tf_s = r.tf32 ? fmt::format("{:.4f}", tf) : "-";
    std::printf("%-62s %10.4f %10s %6d %6.2f %8.2fG %s\n", spec.name.c_str(), r.fp32->median * 1e3, tf_s.c_str(),
                r.fp32->n, r.fp32->rel_stdev * 100, r.input_bytes / 1e9,
                r.cached                ? "cached"
                : !r.not_cached.empty() ? "throttled throughout: not cached"
                : r.throttled_discarded ? "throttled samples discarded"
                                        : "");
    row["fp32_ms"] = r.fp32->median * 1e3;
    if (r.tf32) row["tf32_ms"] = r.tf32->median * 1e3;
    row["fp32"] = to_json(*r.fp32);
    if (r.tf32) row["tf32"] = to_json(*r.tf32);
    row["input_bytes"] = r.input_bytes;
    if (!r.not_cached.empty()) row["not_cached"] = r.not_cached;
    row["seconds"] = r.seconds;
  }
  return row;
}

}  // namespace

namespace {

// The command's options.
struct BaselineState {
  std::vector<std::string> names;
  std::string suite;
  int level = 0;
  std::string device = "cuda:0";
  std::string protocol = "strict";
  std::string precision = "fp32";
  std::string dims = "full";
  double max_timing_s = 0;
  bool remeasure = false;
  std::string json_out;
  std::string resume;
  double timeout_s = 300;
  std::vector<std::string> compile;  // torch.compile modes: default, reduce-overhead
  std::string upstream;              // a KernelBench checkout, for --compile
  std::string python;                // with torch >= 2.0, for --compile
};

}  // namespace

Runner add_baseline_command(CLI::App& app, const GlobalOptions& global) {
  auto st = std::make_shared<BaselineState>();
  app.add_option("names", st->names, "problems (default: all selected)");
  app.add_option("--suite", st->suite, "only this suite");
  app.add_option("--level", st->level, "only this level");
  app.add_option("--device", st->device, "cpu or cuda[:N]")->capture_default_str();
  app.add_option("--protocol", st->protocol, "whose timing rules")->capture_default_str();
  app.add_option("--precision", st->precision,
                 "fp32, fp16 or bf16: the reference's inputs and weights in that precision (cached apart; the "
                 "\"FP32\" and \"TF32\" columns are then the eager baseline with TF32 off and on)")
      ->capture_default_str();
  app.add_option("--dims", st->dims, "full (upstream sizes) or small (the cpu dims)")
      ->capture_default_str()
      ->check(CLI::IsMember({"full", "small"}));
  app.add_option("--max-timing", st->max_timing_s, "cap on timing seconds per setting (0: the protocol's)");
  app.add_flag("--remeasure", st->remeasure, "ignore the baseline cache (the new figures replace it)");
  app.add_option("--json", st->json_out, "also write the table as JSON to this file");
  app.add_option("--timeout", st->timeout_s, "seconds per reference before it counts as failed")->capture_default_str();
  app.add_option("--resume", st->resume,
                 "a --json table of an earlier run: its measured rows are kept, only the rest is measured");
  app.add_option("--compile", st->compile,
                 "also time the upstream task under torch.compile in these modes (default, reduce-overhead; "
                 "comma-separated), compilation excluded, cached like the eager baselines; needs --upstream and a "
                 "python3 with torch >= 2.0")
      ->delimiter(',');
  app.add_option("--upstream", st->upstream, "a KernelBench checkout, for --compile (the task files it compiles)");
  app.add_option("--python", st->python, "the python3 (torch >= 2.0) for --compile (default: $KLOOP_PYTHON, python3)");
  return [st, &global]() {
    // torch.compile: checked before anything is measured, and fails closed.
    for (const auto& m : st->compile) {
      if (compile_mode_of(kCompileBaselinePrefix + m).empty()) {
        throw std::invalid_argument("--compile: '" + m + "' is not a mode kloop measures; use default or "
                                    "reduce-overhead");
      }
    }
    if (!st->compile.empty()) {
      if (st->upstream.empty()) throw std::invalid_argument("--compile needs --upstream (a KernelBench checkout)");
      if (const std::string why = compile_unavailable(st->python); !why.empty()) {
        throw std::runtime_error("--compile: " + why);
      }
    }
    ProblemRegistry reg(global.problems_dir);
    const std::vector<ProblemEntry> entries =
        reg.select(st->names, st->suite, st->level > 0 ? std::optional<int>(st->level) : std::nullopt);
    // Rows measured before (a level cut short by a time limit): kept as
    // they are, in the selection's order, and not measured again.
    const std::string precision = precision_name(parse_precision_option("--precision", st->precision));
    ResumableTable table(st->json_out, st->resume, "task", "a baseline table written by --json",
                         [&](const nlohmann::json& row) {
                           return row.contains("fp32_ms") && !row.contains("error") &&
                                  row.value("precision", "fp32") == precision;
                         });
    table.only(entries);
    Builder builder(BuilderConfig::from_environment());
    EvalOptions opts;
    opts.device = st->device;
    opts.protocol = canonical_protocol_name(st->protocol);
    opts.precision = *parse_precision(precision);
    opts.small_dims = st->dims == "small";
    if (st->max_timing_s > 0) opts.max_timing_seconds = st->max_timing_s;
    opts.run_timeout = std::chrono::milliseconds(static_cast<long long>(st->timeout_s * 1000));
    protocol_by_name(opts.protocol);
    Evaluator evaluator(builder, opts);
    std::vector<std::string> sources;
    for (const auto& e : entries) {
      ProblemSpec spec = reg.load(e);
      if (!table.earlier(spec.name)) sources.push_back(spec.reference_path);
    }
    std::fprintf(stderr, "kloop: building %zu reference(s)...\n", sources.size());
    build_many(builder.config(), sources, ModuleRole::kReference,
               opts.device == "cpu" ? BuildTarget::kCpu : BuildTarget::kCuda, 0, build_progress_on_stderr("references"));
    int failed = 0;
    std::size_t resumed = 0;
    std::printf("%-62s %10s %10s %6s %6s %9s %s\n", "task", "FP32 ms", "TF32 ms", "n", "rsd%", "inputs", "note");
    StatusLine status(static_cast<int>(entries.size()));  // on a terminal: done, in flight, ETA
    for (const auto& e : entries) {
      ProblemSpec spec = reg.load(e);
      status.done(0);  // counted as it starts: each row below finishes it
      if (const nlohmann::json* earlier = table.earlier(spec.name)) {
        auto quiet = status.quiet();
        nlohmann::json row = *earlier;
        row["resumed"] = true;
        ++resumed;
        std::string tf_s = "-";
        if (row.contains("tf32_ms")) tf_s = fmt::format("{:.4f}", row["tf32_ms"].get<double>());
        std::printf("%-62s %10.4f %10s %6s %6s %9s resumed from %s\n", spec.name.c_str(), row["fp32_ms"].get<double>(),
                    tf_s.c_str(), "", "", "", st->resume.c_str());
        table.add(row);
        continue;
      }
      status.begin("eval");
      BaselineReport r = evaluator.measure_baseline(spec, !st->remeasure);
      status.end("eval");
      auto quiet = status.quiet();
      nlohmann::json row = baseline_row(spec, r);
      row["precision"] = precision;
      for (const auto& mode : st->compile) {
        CompileBaselineOptions co;
        co.upstream_root = std::filesystem::absolute(st->upstream).lexically_normal().string();  // the worker runs elsewhere
        co.python = st->python;
        co.use_cache = !st->remeasure;
        co.timeout = std::chrono::seconds(static_cast<long long>(st->timeout_s));
        const CompileBaselineReport c = measure_compile_baseline(evaluator, spec, mode, co);
        const std::string name = kCompileBaselinePrefix + mode;
        if (c.time) {
          const double ms = c.time->headline(run_protocol(opts).gpu_timing.statistic) * 1e3;
          row[name + "_ms"] = ms;
          row[name] = to_json(*c.time);
          row[name + "_compile_s"] = c.compile_seconds;
          std::printf("  %-60s %10.4f ms (torch %s%s; compiling took %.1f s, not counted)\n", name.c_str(), ms,
                      c.torch_version.c_str(), c.cached ? ", cached" : "", c.compile_seconds);
        } else {
          row[name + "_error"] = c.error;
          ++failed;
          std::printf("  %-60s FAILED: %s\n", name.c_str(), c.error.substr(0, 200).c_str());
        }
      }
      failed += row.contains("error") ? 1 : 0;
      table.add(row);  // the --json file kept current
      std::fflush(stdout);
    }
    std::printf("%zu references measured on %s (%s timing rules%s), %zu resumed: %d failed\n", sources.size(),
                opts.device.c_str(), opts.protocol.c_str(), precision == "fp32" ? "" : (", " + precision).c_str(),
                resumed, failed);
    return failed ? 1 : 0;
  };
}

}  // namespace kloop::cli
