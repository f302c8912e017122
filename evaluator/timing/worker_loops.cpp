// The worker's timed loops (kloop-worker, worker.h): the reference's
// baseline and the trusted timing floor, and the candidate's timing, which
// the driver runs from outside in batches (detail/candidate_timing.h) so
// that it can hold the claimed times against the wall time it sees itself.
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

// The candidate's timing is driven from outside, in three commands:
//   time_setup  the case's module and its input sets, then the warm-up;
//   time_batch  exactly `samples` timed calls, rotating over the sets;
//               their event (GPU) or wall (CPU) times, and what the device
//               saw (throttling, the persisting-L2 limit); after each
//               call it stops (SampleDone) and serves a time_check of
//               that call's outputs until told "next";
//   time_post   one more call on a fresh set, published for the judge.
// The case is the driver's timing case (inputs from a nonce of its own,
// never the test inputs): its `calls` input sets are drawn here once; the
// driver says which set each timed call gets, and whether it checks a
// call's outputs only after the call has returned (no command, phase text
// or call pattern tells a checked call from another before it is made).
wire::TimeSetupReply Worker::time_setup(const wire::TimeSetup& cmd) {
  at::AutoGradMode no_grad(false);
  const wire::Case& c = cmd.c;
  timing_label_ = "case " + std::to_string(c.id);
  release_call_state();
  timing_module_ = candidate_module(c, cmd.dir, timing_label_);
  set_phase("timed calls, " + timing_label_);
  // Fresh inputs (warmup_first_call): one set, redrawn for every call;
  // otherwise the case's few sets, cycled.
  const bool fresh = cmd.warmup_first_call.has_value();
  const int64_t warm_first = cmd.warmup_first_call.value_or(0);
  if (fresh) {
    timing_sets_.push_back(draw_args(c, warm_first));
  } else {
    for (int call = 0; call < c.calls; ++call) timing_sets_.push_back(draw_args(c, call));
  }
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
    if (fresh && i > 0) redraw(timing_sets_[0], c, warm_first + i);
    auto out = timing_module_->forward(timing_sets_[timing_next_++ % timing_sets_.size()]);
    synchronize();
    reply.output_bytes = 0;
    for (const auto& t : out) reply.output_bytes += t.defined() ? static_cast<double>(t.numel() * t.element_size()) : 0;
    if (i > 10000) break;
  }
  reply.sets = timing_sets_.size();
  return reply;
}

wire::TimeBatchReply Worker::time_batch(const wire::TimeBatch& cmd) {
  if (!timing_module_) throw WorkerError{"runtime_error", "time_batch before time_setup"};
  at::AutoGradMode no_grad(false);
  const int n = cmd.samples;
  // first_call: sample i runs on call first_call + i's inputs, drawn just
  // before it (outside its timed span).
  const bool fresh = cmd.first_call.has_value();
  const int64_t first = cmd.first_call.value_or(0);
  if (!cmd.sets.empty() && cmd.sets.size() != static_cast<std::size_t>(n)) {
    throw WorkerError{"runtime_error", "time_batch: 'sets' must give one input set per sample"};
  }
  kept_.clear();
  wire::TimeBatchReply reply;
  for (int i = 0; i < n; ++i) {
    std::size_t set = 0;
    if (fresh) {
      redraw(timing_sets_[0], timing_case_, first + i);
    } else {
      set = cmd.sets.empty() ? timing_next_++ % timing_sets_.size() : cmd.sets[static_cast<std::size_t>(i)];
    }
    if (set >= timing_sets_.size())
      throw WorkerError{"runtime_error", "time_batch: no input set " + std::to_string(set)};
    const auto& in = timing_sets_[set];
    session_->begin_sample(cmd.l2_flush);
    auto out = timing_module_->forward(in);
    reply.samples.push_back(session_->end_sample());
    reply.wall.push_back(session_->last_wall_seconds());
    reply.throttled.push_back(session_->last_sample_throttled());
    kept_ = {std::move(out)};  // for a time_check the driver may now ask for
    await_next(i);
    kept_.clear();
  }
  reply.persisting_l2_limit = session_->persisting_l2_limit();
  reply.persisting_l2_window_bytes = session_->persisting_l2_window_bytes();
  reply.clock_monitor = session_->clock_monitor();
  return reply;
}

// After timed sample i: says so, then serves the driver's commands (a
// time_check of that sample's outputs) until it says "next". Whether a
// call is checked is decided only once it has returned.
void Worker::await_next(int i) {
  send(wire::SampleDone{i});
  for (;;) {
    auto message = channel_.receive(std::nullopt);
    if (!message) throw WorkerError{"runtime_error", "the driver went away during a timing batch"};
    incoming_fds_ = std::move(message->fds);
    outgoing_fds_.clear();
    const json cmd = json::parse(message->line);
    const std::string op = cmd.value("op", "");
    if (op == wire::Next::kOp) return;
    if (op != wire::TimeCheck::kOp) {
      throw WorkerError{"runtime_error", "only time_check or next between timed samples, not '" + op + "'"};
    }
    send(wire::ok_json(time_check(cmd.get<wire::TimeCheck>())));
  }
}

// Publishes the outputs of the timed call the batch stopped after, for
// the driver's check against the reference on its inputs.
wire::ExchangeReply Worker::time_check(const wire::TimeCheck& cmd) {
  if (cmd.kept >= kept_.size())
    throw WorkerError{"runtime_error", "time_check: no kept output " + std::to_string(cmd.kept)};
  const std::vector<at::Tensor>& out = kept_[cmd.kept];
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (!out[i].defined() || out[i].device().str() != at::Device(device_).str()) {
      throw WorkerError{"runtime_error",
                        "a timed call returned output " + std::to_string(i) + " undefined or on another device"};
    }
  }
  return {publish(out, {}, cmd.transport, cmd.out_dir + "/" + cmd.name)};
}

wire::ExchangeReply Worker::time_post(const wire::TimePost& cmd) {
  if (!timing_module_) throw WorkerError{"runtime_error", "time_post before time_setup"};
  at::AutoGradMode no_grad(false);
  session_->set_tf32(false);
  timing_sets_.clear();  // memory for the fresh set
  kept_.clear();
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

// The sampling loop around no forward at all, for the driver's measure of
// what a sample costs beyond the call itself.
wire::TimingFloorReply Worker::timing_floor(const wire::TimingFloor& cmd) {
  if (role_ != "reference") throw WorkerError{"runtime_error", "timing_floor is for references"};
  // With a case: each sample first draws a call's inputs, as the timed
  // calls on fresh inputs do.
  std::vector<at::Tensor> set;
  const int64_t first = cmd.first_call.value_or(0);
  if (cmd.c) set = draw_args(*cmd.c, first);
  wire::TimingFloorReply reply;
  for (int i = 0; i < cmd.samples; ++i) {
    if (cmd.c) redraw(set, *cmd.c, first + i + 1);
    session_->begin_sample(cmd.l2_flush);
    reply.samples.push_back(session_->end_sample());
    await_next(i);  // the same stop after each sample as a candidate's batches
  }
  synchronize();
  return reply;
}

}  // namespace kloop::worker
