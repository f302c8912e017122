// The candidate's test calls (worker.h): one call on the reference's
// inputs, its outputs and inputs-after published for the judge.
#include <ATen/core/grad_mode.h>

#include "evaluator/isolation/tensor_bridge.h"
#include "evaluator/isolation/worker/worker.h"

namespace kloop::worker {

// One test call. The module is built from the case's weights file when the
// case changes; the inputs are the reference's published copy or drawn
// here with kloop's generator from the case's seed, as the reference drew
// them.
wire::RunReply Worker::run(const wire::Run& cmd) {
  at::AutoGradMode no_grad(false);
  const wire::Case& c = cmd.c;
  const std::string label = "case " + std::to_string(c.id) + " call " + std::to_string(cmd.call);
  exchange_.release();
  last_outputs_.clear();
  // The last call's inputs stay alive until this call's exist, so this
  // call's inputs are never where the last call's were, as in KernelBench's
  // eval (it draws each trial's inputs while the last trial's are alive). A
  // kernel that keeps reading the address it saw first (a CUDA graph that
  // captured the copy of its input, as the published L2/5 kernel does)
  // reads stale memory here as there; with the allocator handing the freed
  // block back, it read this call's inputs and passed.
  std::vector<at::Tensor> previous_inputs = std::move(last_inputs_);
  last_inputs_.clear();
  wire::RunReply reply;
  if (!module_ || module_case_ != c.id || module_randomized_ != c.randomize_identity_params) {
    module_.reset();
    module_ = candidate_module(c, cmd.dir, "case " + std::to_string(c.id));
    module_case_ = c.id;
    module_randomized_ = c.randomize_identity_params;
    if (python_ && c.construction == wire::Construction::kSeeded && c.randomize_identity_params) {
      reply.norm_layers = norm_layers_;
    }
  }
  std::vector<at::Tensor> inputs;
  if (cmd.inputs_exchange) {
    // The reference's copy, cloned into this process's own memory before
    // the mapping closes; a transport that fails is the driver's to handle.
    set_phase("importing inputs, " + label);
    try {
      ExchangeImport from_reference(*cmd.inputs_exchange, device_, incoming_fd());
      for (const auto& t : from_reference.inputs()) inputs.push_back(t.clone());
      synchronize();
    } catch (const std::exception& e) {
      throw WorkerError{"exchange_error", std::string("importing the reference's inputs: ") + e.what()};
    }
  } else {
    set_phase("drawing inputs, " + label);
    inputs = draw_args(c, cmd.call);
  }
  previous_inputs.clear();
  set_phase("forward, " + label);
  auto t0 = Clock::now();
  auto out = module_->forward(inputs);
  synchronize();
  reply.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  set_phase("publishing outputs of " + label);
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (!out[i].defined())
      throw WorkerError{"runtime_error", "forward returned an undefined tensor as output " + std::to_string(i)};
    for (std::size_t k = 0; k < inputs.size(); ++k) {
      if (storage_overlaps(out[i], inputs[k])) reply.aliases.push_back({static_cast<int>(i), static_cast<int>(k)});
    }
    if (out[i].device().str() != at::Device(device_).str()) {
      reply.wrong_device.push_back({static_cast<int>(i), out[i].device().str()});
    }
  }
  last_outputs_ = std::move(out);
  last_inputs_ = std::move(inputs);
  last_stem_ = (cmd.out_dir.empty() ? cmd.dir : cmd.out_dir) + "/case" + std::to_string(c.id) + ".call" +
               std::to_string(cmd.call) + ".candidate";
  if (reply.wrong_device.empty()) reply.exchange = publish(last_outputs_, last_inputs_, cmd.transport, last_stem_);
  if (python_) reply.runtime_builds = python_->runtime_builds();
  return reply;
}

// Publishes with the asked transport or, when that fails (CUDA IPC
// refused), with files, saying why in `fallback_reason`.
json Worker::publish(const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs,
                     const std::string& transport, const std::string& stem) {
  try {
    return attach(exchange_, exchange_.publish(outputs, inputs, transport, stem));
  } catch (const std::exception& e) {
    if (transport == "file") throw;
    json d = exchange_.publish(outputs, inputs, "file", stem);
    d["fallback_reason"] = e.what();
    return d;
  }
}

// The last call's tensors again, with another transport (the driver falls
// back to files when the judge cannot map CUDA IPC memory).
wire::ExchangeReply Worker::export_again(const wire::Export& cmd) {
  return {attach(exchange_, exchange_.publish(last_outputs_, last_inputs_, cmd.transport, last_stem_))};
}

}  // namespace kloop::worker
