// kloop eval: one candidate file against one problem, printed as text or JSON.
#include <cstdio>
#include <iostream>
#include <stdexcept>
#include <memory>

#include "agent/cli/commands.h"
#include "evaluator/problem/registry.h"

namespace kloop::cli {

void add_eval_options(CLI::App& app, EvalCliOptions& o) {
  app.add_option("--device", o.device, "cpu, or cuda / cuda:N where kloop was built with CUDA")->capture_default_str();
  app.add_option("--protocol", o.protocol, protocol_choices())->capture_default_str();
  app.add_option("--precision", o.precision,
                 "fp32, fp16 or bf16, as KernelBench's eval offers them: inputs, weights, reference, tolerance and "
                 "baseline in that precision (docs/protocols.md)")
      ->capture_default_str();
  app.add_option("--seed", o.seed, "base seed for weights and inputs")->capture_default_str();
  app.add_option("--timeout", o.timeout_s, "seconds allowed per worker step (tests, timing)")->capture_default_str();
  app.add_option("--memory-limit-gb", o.memory_limit_gb,
                 "address-space limit of the candidate process (CPU); also each process of its build's data "
                 "limit, and the build's whole tree where a cgroup can be made")
      ->capture_default_str();
  app.add_option("--process-limit", o.process_limit,
                 "processes and threads the candidate's tree, and its build's, may have (a pids cgroup of its own "
                 "where kloop can make one, else RLIMIT_NPROC)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--threads", o.threads, "intra-op CPU threads for both models (0: LibTorch default)")
      ->capture_default_str();
  app.add_flag("--no-timing", o.no_timing, "check correctness only");
  app.add_flag("--profile", o.profile, "GPU: collect hardware counters and print the profile digests");
  app.add_flag("--no-activity-audit", o.no_activity_audit,
               "GPU: do not trace the candidate's kernels (its timing then stands unaudited; verified and strict "
               "otherwise reject a timing whose audit cannot run, e.g. on a kloop-worker built without CUPTI)");
  app.add_flag("--fp64-reference", o.fp64_reference,
               "error analysis: the candidate's and the fp32 reference's errors against an fp64 run of the reference");
  app.add_option("--max-timing-seconds", o.max_timing_s, "cap the timing budget per model (0: the protocol's)")
      ->capture_default_str();
  app.add_option("--isolation", o.isolation,
                 "the candidate's sandbox: strict (namespaces, own uid, minimal filesystem, seccomp) or weak (no "
                 "namespaces: machines that forbid them, and ncu/nsys)")
      ->capture_default_str()
      ->check(CLI::IsMember({"strict", "weak"}));
  app.add_flag("--no-network-isolation", o.no_network_isolation,
               "keep the candidate in kloop's network namespace (the rest of the sandbox stays)");
  app.add_flag("--keep-work-dir", o.keep_work_dir, "keep the scratch folder (weights, inputs, logs)");
  app.add_option("--dims", o.dims, "GPU problem sizes: full (upstream's) or small (the spec's cpu dims)")
      ->capture_default_str()
      ->check(CLI::IsMember({"full", "small"}));
}

EvalOptions make_eval_options(const EvalCliOptions& o) {
  EvalOptions e;
  e.device = o.device;  // the Evaluator spells "cuda" as cuda:0
  if (e.device != "cpu" && e.device != "cuda" && e.device.rfind("cuda:", 0) != 0) {
    throw std::invalid_argument("--device: expected cpu or cuda[:N], got '" + o.device + "'");
  }
#ifndef KLOOP_WITH_CUDA
  if (e.device != "cpu") throw std::invalid_argument("--device " + o.device + ": this kloop was built without CUDA");
#endif
  protocol_by_name(o.protocol);  // validates the name
  e.protocol = canonical_protocol_name(o.protocol);
  e.precision = parse_precision_option("--precision", o.precision);
  e.seed = o.seed;
  if (o.timeout_s <= 0) throw std::invalid_argument("--timeout: expected a positive number of seconds");
  e.run_timeout = std::chrono::milliseconds(static_cast<long long>(o.timeout_s * 1000));
  e.memory_limit_bytes = static_cast<uint64_t>(o.memory_limit_gb * (1ull << 30));
  e.process_limit = o.process_limit;
  e.threads = o.threads;
  e.measure_time = !o.no_timing;
  e.profile = o.profile;
  e.activity_audit = !o.no_activity_audit;
  e.fp64_reference = o.fp64_reference;
  if (o.max_timing_s > 0) e.max_timing_seconds = o.max_timing_s;
  e.keep_work_dir = o.keep_work_dir;
  e.isolate_network = !o.no_network_isolation;
  e.isolation = *parse_isolation(o.isolation);
  e.small_dims = o.dims == "small";
  return e;
}

Precision parse_precision_option(const std::string& option, const std::string& value) {
  if (const auto p = parse_precision(value)) return *p;
  throw std::invalid_argument(option + ": '" + value + "' is not a precision; use " + precision_choices());
}

namespace {

// --set-dim NAME=VALUE: the dim at every size the run may use (full and cpu).
void apply_dim_override(ProblemSpec& spec, const std::string& kv) {
  const auto eq = kv.find('=');
  if (eq == std::string::npos) throw std::invalid_argument("--set-dim " + kv + ": expected NAME=VALUE");
  const std::string name = kv.substr(0, eq);
  if (!spec.dims.count(name)) {
    std::string known;
    for (const auto& [k, v] : spec.dims) known += (known.empty() ? "" : ", ") + k;
    throw std::invalid_argument("--set-dim " + kv + ": " + spec.name + " has no dim '" + name + "' (it has " + known + ")");
  }
  long long value = 0;
  try {
    value = std::stoll(kv.substr(eq + 1));
  } catch (const std::exception&) {
    throw std::invalid_argument("--set-dim " + kv + ": the value must be a whole number");
  }
  spec.dims[name] = value;
  if (spec.cpu_dims) (*spec.cpu_dims)[name] = value;
}

// Each repeat's median, and their coefficient of variation.
void print_repeats(Evaluator& evaluator, const ProblemSpec& spec, const std::string& candidate, int n) {
  std::vector<nlohmann::json> checks;
  std::vector<TimingSummary> runs = evaluator.repeat_candidate_timing(spec, candidate, n, &checks);
  std::vector<double> medians;
  for (const auto& r : runs) medians.push_back(r.median);
  TimingSummary s = summarize(medians);
  std::fprintf(stderr, "repeat timing (%d fresh processes): medians", n);
  for (double m : medians) std::fprintf(stderr, " %.2f", m * 1e6);
  std::fprintf(stderr, " us\nrepeat timing: mean of medians %.3f us, CV %.3f%%, min %.3f us, max %.3f us\n",
               s.mean * 1e6, s.mean > 0 ? 100 * s.stdev / s.mean : 0, s.min * 1e6, s.max * 1e6);
  // The last run's timer: its floors and the median of its spans (docs/protocols.md: the trusted timer).
  if (!checks.empty()) std::fprintf(stderr, "repeat timing: timer %s\n", checks.back().dump().c_str());
}

}  // namespace

Runner add_eval_command(CLI::App& app, const GlobalOptions& global) {
  struct State {
    std::string problem;
    std::string candidate;
    std::string candidate_format = "auto";
    bool json = false;
    EvalCliOptions eval;
    std::vector<std::string> set_dims;
    int repeat_timing = 0;
    bool timing_only = false;
  };
  auto st = std::make_shared<State>();
  app.add_option("--problem,-p", st->problem, "problem name, e.g. 19_ReLU")->required();
  app.add_option("--candidate,-c", st->candidate,
                 "candidate file: kloop's C++ (.cpp on CPU, .cu on CUDA) or KernelBench's Python ModelNew (.py)")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--candidate-format", st->candidate_format,
                 "cpp (kloop's kernel API), kernelbench_python (a torch.nn.Module ModelNew, load_inline allowed) or "
                 "auto (kernelbench_python for a .py file)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "cpp", "kernelbench_python"}));
  app.add_flag("--json", st->json, "print the verdict as JSON");
  app.add_option("--set-dim", st->set_dims, "override one of the problem's dims, NAME=VALUE (repeatable)");
  app.add_option("--repeat-timing", st->repeat_timing,
                 "after a correct verdict, time the candidate N more times in fresh processes and print the spread");
  app.add_flag("--timing-only", st->timing_only,
               "with --repeat-timing: skip the evaluation and only time the candidate (benchmarks of kloop's "
               "timer, such as the floor of an empty forward; no verdict, nothing is checked)");
  add_eval_options(app, st->eval);
  return [st, &global]() {
    ProblemRegistry reg(global.problems_dir);
    ProblemSpec spec = reg.load(st->problem);
    for (const auto& kv : st->set_dims) apply_dim_override(spec, kv);
    Builder builder(BuilderConfig::from_environment());
    EvalOptions options = make_eval_options(st->eval);
    options.candidate_format = st->candidate_format;
    Evaluator evaluator(builder, options);
    if (st->timing_only) {
      if (st->repeat_timing <= 0) throw std::invalid_argument("--timing-only needs --repeat-timing N");
      print_repeats(evaluator, spec, st->candidate, st->repeat_timing);
      return 0;
    }
    if (!st->json) std::cerr << "kloop: evaluating " << st->candidate << " on " << spec.name << " ...\n";
    Verdict v = evaluator.evaluate(spec, st->candidate);
    if (st->json) {
      std::cout << v.to_json().dump(2) << "\n";
    } else {
      std::cout << v.to_text();
    }
    if (st->repeat_timing > 0 && v.verdict == VerdictClass::kCorrect) print_repeats(evaluator, spec, st->candidate, st->repeat_timing);
    return 0;
  };
}

}  // namespace kloop::cli
