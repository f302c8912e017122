// The activity audit's trace and, when asked, the hardware counters
// (worker.h).
#include <ATen/core/grad_mode.h>

#include "evaluator/check/activity_audit.h"
#include "evaluator/isolation/worker/worker.h"

#ifdef KLOOP_WITH_CUPTI
#include <cupti.h>

#include "profiler/activity_tracer.h"
#include "profiler/range_profiler.h"
#endif

namespace kloop::worker {

// In a phase of their own, since tracing slows the calls it watches. Each
// traced call starts with the L2 flush on kloop's stream (its memset record
// marks the stream and the call's start) and notes the CUPTI time at which
// kloop's stream had finished, so the driver can find work that ran
// elsewhere or later. The counters use kernel replay, which restores
// memory between passes, so in-place kernels are measured right.
wire::ProfileReply Worker::profile(const wire::Profile& cmd) {
  at::AutoGradMode no_grad(false);
  const wire::Case& c = cmd.c;
  const std::string label = "case " + std::to_string(c.id);
  wire::ProfileReply reply;
  if (!session_->cuda()) {
    reply.trace_unavailable = "profiling needs a CUDA device";
    return reply;
  }
  release_call_state();
#ifdef KLOOP_WITH_CUPTI
  // Launch origins from before the module exists: a graph it captures
  // while built or warmed up is named by the launches captured into it.
  profiler::ActivityTracer tracer;
  std::string why_not_traced;
  const bool watching = tracer.watch_launches(&why_not_traced);
#endif
  auto module = role_ == "reference" ? reference_module(c, label) : candidate_module(c, cmd.dir, label);
  // first_call: every profiled forward on a call's inputs of its own, all
  // drawn before the trace starts (a drawing kernel inside it would read
  // as the module's work) while they fit in kProfileBytes; else call 0's.
  constexpr double kProfileBytes = 16.0 * (1 << 30);
  const int traced = cmd.calls.value_or(3);
  const int64_t first = cmd.first_call.value_or(0);
  std::vector<std::vector<at::Tensor>> sets{draw_args(c, first)};
  if (cmd.first_call) {
    double bytes = 1;
    for (const auto& t : sets[0]) bytes += static_cast<double>(t.numel() * t.element_size());
    const int fit = static_cast<int>(std::min<double>(traced + 2, std::max(1.0, kProfileBytes / bytes)));
    for (int k = 1; k < fit; ++k) sets.push_back(draw_args(c, first + k));
  }
  auto inputs_of = [&](int k) -> const std::vector<at::Tensor>& {
    return sets[static_cast<std::size_t>(k) % sets.size()];
  };
  set_phase("profiling warm-up, " + label);
  module->forward(inputs_of(0));
  synchronize();
  reply.flush_bytes = session_->info().value("l2_bytes", uint64_t{0});  // the size of kloop's markers
  reply.own_objects = own_objects_;
#ifdef KLOOP_WITH_CUPTI
  {
    set_phase("activity audit, " + label);
    std::string why = why_not_traced;
    if (watching && tracer.start(&why)) {
      session_->mark_legacy_stream();  // the trace's first memset
      std::vector<uint64_t> stream_done;
      for (int i = 0; i < traced; ++i) {
        session_->begin_sample(true, /*guard_l2=*/false);
        module->forward(inputs_of(1 + i));
        session_->mark_call_end(kCallEndMarkerBytes);
        session_->synchronize_stream();
        uint64_t now = 0;
        cuptiGetTimestamp(&now);
        stream_done.push_back(now);
        synchronize();
      }
      reply.trace = profiler::to_json(tracer.stop());
      reply.stream_done_ns = stream_done;
    } else {
      tracer.stop();  // the launch callbacks off before the counters run
      reply.trace_unavailable = why;
    }
  }
  if (cmd.counters) {
    // Kernel replay saves and restores device memory around every pass:
    // only the inputs the profiled call reads stay allocated, so that
    // copy is one call's inputs and outputs, not every traced set.
    std::vector<at::Tensor> profiled = inputs_of(traced + 1);
    sets.assign(1, std::move(profiled));
    session_->release_cached_memory();
    set_phase("hardware counters, " + label);
    profiler::RangeProfiler counters;
    reply.metrics = profiler::to_json(counters.profile([&] {
      module->forward(inputs_of(0));
      synchronize();
    }));
  }
#else
  reply.trace_unavailable = "this kloop-worker was built without CUPTI";
#endif
  return reply;
}

}  // namespace kloop::worker
