// kloop eval: one candidate file against one problem, printed as text or JSON.
#include <iostream>
#include <memory>

#include "agent/cli/commands.h"
#include "evaluator/problem/registry.h"

namespace kloop::cli {

void add_eval_options(CLI::App& app, EvalCliOptions& o) {
  app.add_option("--device", o.device, "cpu, or cuda / cuda:N where kloop was built with CUDA")->capture_default_str();
  app.add_option("--protocol", o.protocol, "kernelbench, verified or strict")->capture_default_str();
  app.add_option("--seed", o.seed, "base seed for weights and inputs")->capture_default_str();
  app.add_option("--timeout", o.timeout_s, "seconds allowed per worker step (tests, timing)")->capture_default_str();
  app.add_option("--memory-limit-gb", o.memory_limit_gb, "address-space limit of the candidate process (CPU)")
      ->capture_default_str();
  app.add_option("--threads", o.threads, "intra-op CPU threads for both models (0: LibTorch default)")
      ->capture_default_str();
  app.add_flag("--no-timing", o.no_timing, "check correctness only");
  app.add_option("--max-timing-seconds", o.max_timing_s, "cap the timing budget per model (0: the protocol's)")
      ->capture_default_str();
  app.add_flag("--keep-work-dir", o.keep_work_dir, "keep the scratch folder (weights, inputs, logs)");
  app.add_option("--dims", o.dims, "GPU problem sizes: full (upstream's) or small (the spec's cpu dims)")
      ->capture_default_str()
      ->check(CLI::IsMember({"full", "small"}));
}

EvalOptions make_eval_options(const EvalCliOptions& o) {
  EvalOptions e;
  e.device = o.device;
  if (e.device == "cuda") e.device = "cuda:0";
  if (e.device != "cpu" && e.device.rfind("cuda:", 0) != 0) {
    throw std::invalid_argument("--device: expected cpu or cuda[:N], got '" + o.device + "'");
  }
#ifndef KLOOP_WITH_CUDA
  if (e.device != "cpu") throw std::invalid_argument("--device " + o.device + ": this kloop was built without CUDA");
#endif
  protocol_by_name(o.protocol);  // validates the name
  e.protocol = o.protocol;
  e.seed = o.seed;
  if (o.timeout_s <= 0) throw std::invalid_argument("--timeout: expected a positive number of seconds");
  e.run_timeout = std::chrono::milliseconds(static_cast<long long>(o.timeout_s * 1000));
  e.memory_limit_bytes = static_cast<uint64_t>(o.memory_limit_gb * (1ull << 30));
  e.threads = o.threads;
  e.measure_time = !o.no_timing;
  if (o.max_timing_s > 0) e.max_timing_seconds = o.max_timing_s;
  e.keep_work_dir = o.keep_work_dir;
  e.small_dims = o.dims == "small";
  return e;
}

Runner add_eval_command(CLI::App& app, const GlobalOptions& global) {
  struct State {
    std::string problem;
    std::string candidate;
    bool json = false;
    EvalCliOptions eval;
  };
  auto st = std::make_shared<State>();
  app.add_option("--problem,-p", st->problem, "problem name, e.g. 19_ReLU")->required();
  app.add_option("--candidate,-c", st->candidate, "candidate source file (.cpp on CPU, .cu on CUDA)")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_flag("--json", st->json, "print the verdict as JSON");
  add_eval_options(app, st->eval);
  return [st, &global]() {
    ProblemRegistry reg(global.problems_dir);
    ProblemSpec spec = reg.load(st->problem);
    Builder builder(BuilderConfig::from_environment());
    Evaluator evaluator(builder, make_eval_options(st->eval));
    if (!st->json) std::cerr << "kloop: evaluating " << st->candidate << " on " << spec.name << " ...\n";
    Verdict v = evaluator.evaluate(spec, st->candidate);
    if (st->json) {
      std::cout << v.to_json().dump(2) << "\n";
    } else {
      std::cout << v.to_text();
    }
    return 0;
  };
}

}  // namespace kloop::cli
