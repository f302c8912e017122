// The worker's timed loops (kloop-worker, worker.h): the reference's
// baseline, and the candidate's side of its timing: the timing case's
// module warmed up before the trusted timer (isolation/worker/
// trusted_timer.cpp, in the reference's process) times its calls, and one
// more call after them, published for the judge. Nothing measured here
// enters the candidate's time.
#include <ATen/core/grad_mode.h>

#include "evaluator/isolation/worker/worker.h"

namespace kloop::worker {

// The baseline at any size without files: weights and the case's input
// sets drawn where they are used, then the module timed with TF32 off and
// (on CUDA) on.
wire::BaselineReply Worker::baseline(const wire::Baseline& cmd) {
  if (role_ != "reference") throw WorkerError{"runtime_error", "baseline is for references"};
  at::AutoGradMode no_grad(false);
  release_call_state();  // in an evaluation: the test calls' tensors
  const wire::Case& c = cmd.c;
  const std::string label = "case " + std::to_string(c.id);
  auto module = reference_module(c, label);
  std::vector<std::vector<at::Tensor>> sets;
  wire::BaselineReply reply;
  for (int call = 0; call < c.calls; ++call) {
    set_phase("drawing inputs for " + label + " call " + std::to_string(call));
    auto args = draw_args(c, call);
    for (const auto& t : args) reply.input_bytes += static_cast<double>(t.numel() * t.element_size());
    sets.push_back(std::move(args));
  }
  const TimingRules rules = rules_from_json(cmd.rules);
  reply.parameters = module->parameters().size();
  reply.device = session_->info();
  reply.fp32 = time_loop(*module, sets, rules, false, label);
  if (session_->cuda()) reply.tf32 = time_loop(*module, sets, rules, true, label);
  return reply;
}

// Repeated forward calls rotating over the input sets until the stopping
// rule says the median is stable. Samples taken while the SM clock was
// held down (power or thermal slowdown) are discarded, up to a bound, so
// a throttled card cannot stall the measurement forever.
wire::TimeLoopReply Worker::time_loop(ModuleRunner& module, const std::vector<std::vector<at::Tensor>>& sets,
                                      const TimingRules& rules, bool tf32, const std::string& label) {
  session_->set_tf32(tf32);
  session_->reset_persisting_l2();
  set_phase(std::string("timing warm-up") + (tf32 ? " (TF32)" : "") + ", " + label);
  std::size_t k = 0;
  auto warm_start = Clock::now();
  for (int i = 0; i < rules.warmup_calls ||
                  std::chrono::duration<double>(Clock::now() - warm_start).count() < rules.warmup_seconds;
       ++i) {
    module.forward(sets[k++ % sets.size()]);
    synchronize();
    if (i > 10000) break;
  }
  set_phase(std::string("timing") + (tf32 ? " (TF32)" : "") + ", " + label);
  StoppingRule rule(rules);
  std::vector<double> wall;
  int discarded = 0;
  do {
    const auto& in = sets[k++ % sets.size()];
    session_->begin_sample(rules.l2_flush);
    auto out = module.forward(in);
    const double seconds = session_->end_sample();
    if (session_->last_sample_throttled() && discarded < kMaxThrottledDiscards) {
      ++discarded;
      continue;
    }
    rule.add(seconds);
    wall.push_back(session_->last_wall_seconds());
  } while (!rule.done());
  session_->set_tf32(false);
  wire::TimeLoopReply reply;
  reply.timing = to_json(rule.summary());
  reply.wall = to_json(summarize(wall));
  reply.throttled_discarded = discarded;
  reply.clock_monitor = session_->clock_monitor();
  reply.persisting_l2_limit = session_->persisting_l2_limit();
  reply.persisting_l2_window_bytes = session_->persisting_l2_window_bytes();
  return reply;
}

// The candidate's timing (the timed calls themselves are the trusted
// timer's: trusted_timer.cpp and candidate_timer.cpp):
//   time_setup  the timing case's module, warmed up on inputs drawn here
//               (the timed calls get inputs only the timer draws);
//   time_post   one more call on a fresh set, published for the judge.
wire::TimeSetupReply Worker::time_setup(const wire::TimeSetup& cmd) {
  at::AutoGradMode no_grad(false);
  const wire::Case& c = cmd.c;
  timing_label_ = "case " + std::to_string(c.id);
  release_call_state();
  timing_module_ = candidate_module(c, cmd.dir, timing_label_);
  set_phase("warm-up, " + timing_label_);
  const int64_t warm_first = cmd.warmup_first_call.value_or(0);
  std::vector<at::Tensor> set = draw_args(c, warm_first);
  timing_case_ = c;
  post_case_ = cmd.post_case.value_or(c);
  const TimingRules rules = rules_from_json(cmd.rules);
  session_->set_tf32(cmd.tf32);
  session_->reset_persisting_l2();
  const auto warm_start = Clock::now();
  wire::TimeSetupReply reply;
  for (int i = 0; i < rules.warmup_calls ||
                  std::chrono::duration<double>(Clock::now() - warm_start).count() < rules.warmup_seconds;
       ++i) {
    if (i > 0) redraw(set, c, warm_first + i);
    auto out = timing_module_->forward(set);
    synchronize();
    reply.output_bytes = 0;
    for (const auto& t : out) reply.output_bytes += t.defined() ? static_cast<double>(t.numel() * t.element_size()) : 0;
    if (i > 10000) break;
  }
  reply.sets = 1;
  return reply;
}

wire::ExchangeReply Worker::time_post(const wire::TimePost& cmd) {
  if (!timing_module_) throw WorkerError{"runtime_error", "time_post before time_setup"};
  at::AutoGradMode no_grad(false);
  session_->set_tf32(false);
  // The timed calls may have left anything in the old ones. `call`: a
  // call of the timing case nobody has seen; else the first test's.
  auto fresh = cmd.call ? draw_args(timing_case_, *cmd.call) : draw_args(post_case_, 0);
  auto out = timing_module_->forward(fresh);
  synchronize();
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (!out[i].defined() || out[i].device().str() != at::Device(device_).str()) {
      throw WorkerError{"runtime_error", "after timing, forward returned output " + std::to_string(i) +
                                             " undefined or on another device"};
    }
  }
  const std::string stem = cmd.out_dir + "/" + cmd.name.value_or("case" + std::to_string(post_case_.id) + ".post");
  wire::ExchangeReply reply{publish(out, {}, cmd.transport, stem)};
  timing_module_.reset();
  return reply;
}

}  // namespace kloop::worker
