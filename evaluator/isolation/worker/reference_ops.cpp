// The reference's commands (worker.h): cases to files for the reference
// checks, the streamed test calls' expected outputs, the degeneracy audit,
// and the judge of what the candidate published.
#include <ATen/core/grad_mode.h>
#include <c10/util/Exception.h>

#include <cmath>

#include "evaluator/check/tensor_compare.h"
#include "evaluator/isolation/tensor_bridge.h"
#include "evaluator/isolation/worker/worker.h"

namespace kloop::worker {

namespace {
std::string call_label(const wire::Case& c, int64_t call) {
  return "case " + std::to_string(c.id) + " call " + std::to_string(call);
}

// Per output, the candidate's and the fp32 reference's errors against the
// fp64 twin's outputs (outputs of another shape are left out).
std::vector<wire::ErrorAnalysisRow> error_rows(const std::vector<at::Tensor>& fp64,
                                               const std::vector<at::Tensor>& actual,
                                               const std::vector<at::Tensor>& expected) {
  std::vector<wire::ErrorAnalysisRow> rows;
  for (std::size_t i = 0; i < fp64.size() && i < actual.size() && i < expected.size(); ++i) {
    if (fp64[i].sizes() != actual[i].sizes() || fp64[i].sizes() != expected[i].sizes()) continue;
    const ErrorVsExact cand = error_against(fp64[i], actual[i]);
    const ErrorVsExact ref = error_against(fp64[i], expected[i]);
    rows.push_back({static_cast<int>(i), cand.max_abs_exact, cand.rms_exact, cand.max_abs_error, cand.rms_error,
                    ref.max_abs_error, ref.rms_error});
  }
  return rows;
}
}  // namespace

// Draws weights and inputs, computes expected outputs, all to files.
wire::GenerateReply Worker::generate(const wire::Generate& cmd) {
  if (role_ != "reference") throw WorkerError{"runtime_error", "generate is for references"};
  at::AutoGradMode no_grad(false);
  session_->set_deterministic(true);          // expected outputs: reproducible bit for bit
  const bool files = cmd.weights_and_inputs;  // else only the expected outputs
  wire::GenerateReply reply;
  for (const auto& c : cmd.cases) {
    const std::string label = "case " + std::to_string(c.id);
    std::vector<HostTensor> weights;
    auto module = reference_module(c, label, files ? &weights : nullptr);
    if (files) write_tensor_file(wire::weights_file(cmd.dir, c.id), weights);
    wire::GeneratedCase done;
    done.id = c.id;
    for (int call = 0; call < c.calls; ++call) {
      auto [inputs, args] = draw_inputs(c, call);
      const std::string stem = cmd.dir + "/case" + std::to_string(c.id) + ".call" + std::to_string(call);
      if (files) write_tensor_file(stem + ".inputs.safetensors", inputs);
      set_phase("reference forward, " + call_label(c, call));
      auto out = module->forward(args);
      synchronize();
      std::vector<std::vector<int64_t>> shapes;
      for (const auto& o : out) shapes.push_back(shape_of(o));
      write_tensors(stem + ".expected.safetensors", out, "output");
      done.output_shapes.push_back(std::move(shapes));
    }
    done.parameters = module->parameters().size();
    reply.cases.push_back(std::move(done));
  }
  session_->set_deterministic(false);
  return reply;
}

// The case's module: with weights drawn from kloop's generator, written for
// the candidate (wire::weights_file), or seeded (a Python candidate builds
// its own the same way; no file).
wire::PrepareReply Worker::prepare(const wire::Prepare& cmd) {
  if (role_ != "reference") throw WorkerError{"runtime_error", "prepare is for references"};
  at::AutoGradMode no_grad(false);
  const wire::Case& c = cmd.c;
  const std::string label = "case " + std::to_string(c.id);
  wire::PrepareReply reply;
  if (c.construction == wire::Construction::kSeeded && !cmd.write_weights) {
    module_ = reference_module(c, label);
    if (c.randomize_identity_params) reply.norm_layers = norm_layers_;
  } else {
    std::vector<HostTensor> weights;
    module_ = reference_module(c, label, &weights);
    write_tensor_file(wire::weights_file(cmd.dir, c.id), weights);
  }
  module_case_ = c.id;
  pristine_.clear();
  expected_.clear();
  previous_expected_.clear();
  previous_actual_.clear();
  reply.parameters = module_->parameters().size();
  return reply;
}

// One call's inputs and expected outputs, kept in this process (on the
// device) for `judge`. `retain` keeps the outputs for the check after the
// candidate's timing.
wire::ExpectReply Worker::expect(const wire::Expect& cmd) {
  if (role_ != "reference" || !module_) throw WorkerError{"runtime_error", "expect needs a prepared reference"};
  at::AutoGradMode no_grad(false);
  const wire::Case& c = cmd.c;
  const std::string label = call_label(c, cmd.call);
  session_->set_deterministic(true);  // expected outputs: reproducible bit for bit
  set_phase("drawing inputs, " + label);
  auto args = draw_args(c, cmd.call);
  pristine_.clear();
  for (const auto& a : args) pristine_.push_back(a.clone());  // a reference may work in place
  input_export_.release();
  wire::ExpectReply reply;
  if (!cmd.publish_inputs.empty()) {
    set_phase("publishing inputs, " + label);
    try {
      const std::string stem =
          cmd.dir + "/case" + std::to_string(c.id) + ".call" + std::to_string(cmd.call) + ".reference";
      reply.inputs_exchange = attach(input_export_, input_export_.publish({}, pristine_, cmd.publish_inputs, stem));
    } catch (const std::exception& e) {  // the driver lets the candidate draw them instead
      reply.inputs_exchange_error = e.what();
    }
  }
  set_phase("reference forward, " + label);
  auto out = module_->forward(args);
  synchronize();
  fp64_expected_.clear();
  fp64_unavailable_.clear();
  expect_case_ = c;
  expect_call_ = cmd.call;
  if (cmd.fp64) fp64_reference(c, label);
  session_->set_deterministic(false);
  previous_expected_ = std::move(expected_);
  expected_.clear();
  for (auto& o : out) {
    expected_.push_back(o.contiguous());
    reply.output_shapes.push_back(o.sizes().vec());
  }
  if (cmd.retain) retained_expected_ = expected_;
  return reply;
}

// The audit's cases (one call each) run here and compared here, on the
// device, so the audit works at upstream sizes: how the first case's
// outputs look (all within tolerance of zero, constant, largest magnitude)
// and which pairs of cases give the same outputs within the tolerance.
wire::AuditReply Worker::audit(const wire::Audit& cmd) {
  if (role_ != "reference") throw WorkerError{"runtime_error", "audit is for references"};
  at::AutoGradMode no_grad(false);
  const Tolerance tol = tolerance_from_json(cmd.tolerance);
  session_->set_deterministic(true);
  std::vector<std::vector<at::Tensor>> outs;
  wire::AuditReply reply;
  for (const auto& c : cmd.cases) {
    const std::string label = "case " + std::to_string(c.id);
    auto module = reference_module(c, label);
    if (outs.empty()) reply.parameters = module->parameters().size();
    auto args = draw_args(c, 0);
    set_phase("reference forward, " + label);
    std::vector<at::Tensor> out;
    for (const auto& o : module->forward(args)) out.push_back(o.contiguous());
    synchronize();
    outs.push_back(std::move(out));
  }
  session_->set_deterministic(false);
  set_phase("comparing the audit's cases");
  reply.zeros_pass = true;
  reply.constant = true;
  for (const auto& t : outs.at(0)) {
    reply.elements += t.numel();
    reply.zeros_pass = reply.zeros_pass && compare_tensors(t, at::zeros_like(t), "output", tol, 0).passed;
    if (t.numel() == 0) continue;
    const at::Tensor flat = t.view({-1});
    const at::Tensor d = flat.to(at::kDouble);
    const at::Tensor finite = d.isfinite();
    if (finite.any().item<bool>()) {
      reply.max_abs_output = std::max(reply.max_abs_output, d.masked_select(finite).abs().max().item<double>());
    }
    reply.constant = reply.constant && flat.eq(flat[0]).all().item<bool>();
  }
  for (const auto& [first, second] : cmd.pairs) {
    const auto& a = outs.at(first);
    const auto& b = outs.at(second);
    bool equal = a.size() == b.size();
    for (std::size_t i = 0; equal && i < a.size(); ++i) {
      equal = a[i].sizes() == b[i].sizes() && compare_tensors(a[i], b[i], "output", tol, 0).passed;
    }
    reply.same.push_back(equal);
  }
  if (cmd.conditioning) reply.conditioning = conditioning(*cmd.conditioning);
  return reply;
}

// How well fp32 computes one case (strict's zero-mean case): the fp32
// outputs against the fp64 twin's, held to half the tolerance. Strict
// judges that case against the twin with the reference's own error added
// (compare_with_exact_allowance), so a candidate fails honestly only when
// its error passes the tolerance plus the reference's: where the reference
// strays more than half the tolerance, one that rounds three times worse
// can. Where the outputs are not finite, the case tests nothing.
wire::ConditioningReply Worker::conditioning(const wire::Conditioning& cc) {
  const wire::Case& c = cc.c;
  Tolerance half = tolerance_from_json(cc.tolerance);
  half.atol /= 2;
  half.rtol /= 2;
  half.magnitude /= 2;
  const std::vector<at::Tensor> out = outputs_with_twin(c, 0, "case " + std::to_string(c.id) + " (conditioning)");
  wire::ConditioningReply reply;
  for (const auto& o : out) reply.finite = reply.finite && (!o.is_floating_point() || o.isfinite().all().item<bool>());
  if (fp64_expected_.size() != out.size()) {
    reply.fp64_unavailable = fp64_unavailable_.empty() ? "no fp64 outputs" : fp64_unavailable_;
  } else {
    bool within = true;
    double worst = 0;
    for (std::size_t i = 0; i < out.size(); ++i) {
      const auto cmp =
          compare_tensors(fp64_expected_[i].to(out[i].scalar_type()), out[i], "output" + std::to_string(i), half, 0);
      within = within && cmp.passed;
      if (std::isfinite(cmp.max_abs_error)) worst = std::max(worst, cmp.max_abs_error);
    }
    reply.within_half = within;
    reply.max_abs_error = worst;
  }
  module_.reset();
  pristine_.clear();
  fp64_expected_.clear();
  return reply;
}

// One call of a case from scratch, deterministically: its module with the
// case's weights (module_), the call's inputs (pristine_), the fp32 outputs
// (returned) and the fp64 twin's (fp64_expected_, else fp64_unavailable_).
std::vector<at::Tensor> Worker::outputs_with_twin(const wire::Case& c, int64_t call, const std::string& label) {
  session_->set_deterministic(true);
  module_ = reference_module(c, label);
  auto args = draw_args(c, call);
  pristine_.clear();
  for (const auto& a : args) pristine_.push_back(a.clone());
  set_phase("reference forward, " + label);
  std::vector<at::Tensor> out;
  for (const auto& o : module_->forward(args)) out.push_back(o.contiguous());
  synchronize();
  fp64_expected_.clear();
  fp64_unavailable_.clear();
  fp64_reference(c, label);
  session_->set_deterministic(false);
  return out;
}

// An fp64 twin of the reference for error analysis: a second instance
// with the same weights in double precision, called on the call's inputs
// in double precision. A reference that makes float tensors of its own
// cannot run this way; the reason is kept and reported instead.
void Worker::fp64_reference(const wire::Case& c, const std::string& label) {
  set_phase("fp64 reference, " + label);
  auto widen = [](const at::Tensor& t) { return t.is_floating_point() ? t.to(at::kDouble) : t.clone(); };
  try {
    auto twin = construct({}, c.args, label + " (fp64)");
    std::map<std::string, at::Tensor> weights;
    for (const auto& [n, t] : module_->parameters()) weights[n] = t;
    for (const auto& [n, t] : module_->buffers()) weights[n] = t;
    for (auto& [n, t] : twin->parameters()) t.set_data(widen(weights.at(n)));
    for (auto& [n, t] : twin->buffers()) t.set_data(widen(weights.at(n)));
    std::vector<at::Tensor> args;
    for (const auto& p : pristine_) args.push_back(widen(p));
    for (const auto& o : twin->forward(args)) fp64_expected_.push_back(o.to(at::kDouble).contiguous());
    synchronize();
  } catch (const c10::Error& e) {
    fp64_unavailable_ = e.what_without_backtrace();
  } catch (const std::exception& e) {
    fp64_unavailable_ = e.what();
  }
  if (!fp64_unavailable_.empty()) {
    fp64_expected_.clear();
    fp64_unavailable_ = "the reference does not run in fp64: " + fp64_unavailable_.substr(0, 300);
  }
}

// Compares what the candidate published for the last `expect` (or, with
// `post`, for the retained call) on this process's device.
wire::JudgeReply Worker::judge(const wire::Judge& cmd) {
  if (role_ != "reference") throw WorkerError{"runtime_error", "judge is for references"};
  at::AutoGradMode no_grad(false);
  const Tolerance tol = tolerance_from_json(cmd.tolerance);
  set_phase("importing the candidate's tensors");
  // What the candidate published is untrusted: any failure to read it is
  // its failure (exchange_error), not the judge's.
  std::unique_ptr<ExchangeImport> imported;
  // No more than the problem's tensors can hold is taken from the candidate
  // (their element counts at the widest dtype, 8 bytes), whatever its
  // files' headers claim: a sparse file of 10 GiB passes a file-size check.
  const auto& held = cmd.post ? retained_expected_ : expected_;
  ExchangeLimits limits{64u << 10, 64u << 10};
  for (const auto& t : held) limits.output_bytes += static_cast<uint64_t>(t.numel()) * 8;
  for (const auto& t : pristine_) limits.input_bytes += static_cast<uint64_t>(t.numel()) * 8;
  try {
    imported = std::make_unique<ExchangeImport>(cmd.exchange, device_, incoming_fd(), limits);
  } catch (const std::exception& e) {
    throw WorkerError{"exchange_error", e.what()};
  }
  const ExchangeImport& got = *imported;
  set_phase("comparing on " + device_);
  const auto& expected = cmd.post ? retained_expected_ : expected_;
  const auto& actual = got.outputs();
  // Strict's analyzed calls: an output that misses the fp32 reference may
  // still be within the tolerance plus the reference's own error of the
  // fp64 twin's (compare_with_exact_allowance).
  const bool allowance = !cmd.post && cmd.exact_allowance && fp64_expected_.size() == expected.size();
  wire::JudgeReply reply;
  bool all_passed = actual.size() == expected.size();
  for (std::size_t i = 0; i < expected.size() && i < actual.size(); ++i) {
    const at::Tensor* exact = allowance ? &fp64_expected_[i] : nullptr;
    const TensorComparison cmp =
        compare_with_exact_allowance(expected[i], exact, actual[i], "output" + std::to_string(i), tol);
    all_passed = all_passed && cmp.passed;
    reply.outputs.push_back(to_json(cmp));
  }
  reply.output_count = actual.size();
  reply.expected_count = expected.size();
  if (cmd.identity) {
    reply.identical.emplace();
    for (std::size_t i = 0; i < expected.size() && i < actual.size(); ++i) {
      reply.identical->push_back(tensors_identical(expected[i], actual[i]));
    }
  }
  if (cmd.post) return reply;
  if (got.inputs_published()) {
    reply.mutated_inputs.emplace();
    // An input missing from what was published may have been changed: a
    // candidate that rewrote its inputs file, or described fewer tensors,
    // is not let off the check.
    for (std::size_t k = 0; k < pristine_.size(); ++k) {
      if (k >= got.inputs().size() || !tensors_identical(pristine_[k], got.inputs()[k])) {
        reply.mutated_inputs->push_back(k);
      }
    }
  }
  if (cmd.error_analysis) {
    const std::string why = fp64_unavailable_.empty() ? "no fp64 reference was computed" : fp64_unavailable_;
    if (!fp64_expected_.empty()) {
      reply.error_analysis = error_rows(fp64_expected_, actual, expected);
    } else if (cmd.defer_analysis && all_passed) {
      // The candidate's process may hold the device's memory so that the
      // twin cannot run beside it: its outputs wait on the host, and the
      // twin runs once the process has ended. (A call that already fails
      // needs no analysis.) Outputs that are the fp32 reference's bit for
      // bit are not kept: their error against the twin is the reference's
      // own, which the deferred analysis computes again (19_ReLU at
      // upstream size: 6.4 GB copied to the host per analyzed call).
      DeferredCall kept{expect_case_, expect_call_, {}, actual.size() == expected.size()};
      for (std::size_t i = 0; kept.identical && i < actual.size(); ++i) {
        kept.identical = tensors_identical(expected[i], actual[i]);
      }
      if (!kept.identical) {
        set_phase("keeping the candidate's outputs for the deferred fp64 analysis");
        for (const auto& a : actual) kept.actual.push_back(a.is_cpu() ? a.clone() : a.cpu());
      }
      deferred_.push_back(std::move(kept));
      reply.fp64_deferred = why;
    } else {
      reply.fp64_unavailable = why;
    }
  }
  // Results cached across calls: the same output for different inputs.
  if (!previous_actual_.empty() && previous_actual_.size() == actual.size()) {
    bool same_actual = true, same_expected = previous_expected_.size() == expected.size();
    for (std::size_t i = 0; i < actual.size(); ++i) {
      same_actual = same_actual && tensors_identical(previous_actual_[i], actual[i]);
      same_expected = same_expected && tensors_identical(previous_expected_[i], expected[i]);
    }
    reply.same_as_previous_call = same_actual;
    reply.expected_same_as_previous_call = same_expected;
  }
  // A result cached across calls is the previous call's result: within the
  // tolerance of that call's expected outputs (and, judged by the caller,
  // not of this call's). A constant or otherwise wrong output is not.
  if (!previous_expected_.empty() && previous_expected_.size() == actual.size()) {
    bool matches = true, same_expected = expected.size() == previous_expected_.size();
    for (std::size_t i = 0; matches && i < actual.size(); ++i) {
      matches = previous_expected_[i].sizes() == actual[i].sizes() &&
                compare_tensors(previous_expected_[i], actual[i], "output" + std::to_string(i), tol, 0).passed;
    }
    for (std::size_t i = 0; same_expected && i < expected.size(); ++i) {
      same_expected = tensors_identical(previous_expected_[i], expected[i]);
    }
    reply.matches_previous_expected = matches;
    reply.expected_same_as_previous_call = same_expected;
  }
  previous_actual_.clear();
  if (cmd.keep_for_next_call) {
    for (const auto& a : actual) previous_actual_.push_back(a.clone());  // the mapping closes on return
  }
  synchronize();
  return reply;
}

// The analyses `judge` deferred: each call's expected outputs and fp64 twin
// computed again (the same draws, deterministic), now that the candidate's
// process has ended and the device is the reference's alone, against the
// candidate's outputs kept on the host. The evaluation's last command: the
// calls' tensors are freed first, for the twin's room.
wire::AnalyzeDeferredReply Worker::analyze_deferred(const wire::AnalyzeDeferred&) {
  if (role_ != "reference") throw WorkerError{"runtime_error", "analyze_deferred is for references"};
  at::AutoGradMode no_grad(false);
  std::vector<DeferredCall> calls = std::move(deferred_);
  deferred_.clear();
  input_export_.release();
  for (auto* held :
       {&pristine_, &expected_, &previous_expected_, &retained_expected_, &previous_actual_, &fp64_expected_}) {
    held->clear();
  }
  module_.reset();
  module_case_ = -1;
  wire::AnalyzeDeferredReply reply;
  for (auto& d : calls) {
    const std::string label = call_label(d.c, d.call) + " (deferred analysis)";
    const std::vector<at::Tensor> expected = outputs_with_twin(d.c, d.call, label);
    wire::DeferredAnalysis done;
    done.case_id = d.c.id;
    done.call = d.call;
    if (fp64_expected_.empty()) {
      done.fp64_unavailable = fp64_unavailable_.empty() ? "no fp64 outputs" : fp64_unavailable_;
    } else {
      set_phase("comparing on " + device_ + ", " + label);
      std::vector<at::Tensor> actual;
      for (auto& a : d.actual) actual.push_back(a.to(at::Device(device_)));
      d.actual.clear();
      if (d.identical) {
        actual = expected;  // the candidate's outputs were these, bit for bit
        done.identical = true;
      }
      done.error_analysis = error_rows(fp64_expected_, actual, expected);
    }
    reply.calls.push_back(std::move(done));
    pristine_.clear();
    fp64_expected_.clear();
    module_.reset();
  }
  synchronize();
  return reply;
}

}  // namespace kloop::worker
