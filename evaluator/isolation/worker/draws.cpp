// Weights and inputs from kloop's generator, drawn where they are used
// (worker.h).
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>

#include <cmath>
#include <functional>
#include <map>

#include "evaluator/isolation/tensor_bridge.h"
#include "evaluator/isolation/worker/worker.h"
#ifdef KLOOP_WITH_CUDA
#include "evaluator/runtime/generator_device.h"
#endif

namespace kloop::worker {
namespace {

DrawSpec draw_spec(const wire::Draw& d, double scale = 1.0) { return {d.kind, d.params, scale, d.structure, 0, 0}; }

// PyTorch's default initialisation drawn from kloop's generator; the spec's
// `weights` overrides win, `strict` randomises identity-valued vectors.
DrawSpec weight_draw(const std::string& name, const at::Tensor& p,
                     const std::vector<std::pair<std::string, at::Tensor>>& all, const wire::Case& c) {
  DrawSpec d;
  const bool randomize = c.randomize_identity_params;
  if (auto o = c.weight_overrides.find(name); o != c.weight_overrides.end()) {
    d = draw_spec(o->second);
    // A declared identity value (upstream's torch.ones / zeros) is as
    // exploitable as a default one: strict randomises it the same way.
    if (randomize && d.kind == "ones") return {"uniform", {{"low", 0.5}, {"high", 1.5}}, 1.0, "", 0, 0};
    if (randomize && d.kind == "zeros") return {"uniform", {{"low", -0.5}, {"high", 0.5}}, 1.0, "", 0, 0};
    return d;
  }
  auto fan_in_bound = [](const at::Tensor& w) {
    int64_t fan_in = w.size(1);
    for (int64_t i = 2; i < w.dim(); ++i) fan_in *= w.size(i);
    return 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(fan_in, 1)));
  };
  auto uniform = [&d](double lo, double hi) {
    d.kind = "uniform";
    d.params = {{"low", lo}, {"high", hi}};
    return d;
  };
  if (p.dim() >= 2) {
    double b = fan_in_bound(p);
    return uniform(-b, b);
  }
  // A rank-1 bias whose sibling weight is a matrix or filter: fan-in bound.
  std::string leaf = name.substr(name.rfind('.') + 1);
  std::string prefix = name.substr(0, name.size() - leaf.size());
  if (leaf.rfind("bias", 0) == 0) {
    std::string sibling = prefix + "weight" + leaf.substr(4);
    for (const auto& [n, w] : all) {
      if (n == sibling && w.dim() >= 2) {
        double b = fan_in_bound(w);
        return uniform(-b, b);
      }
    }
    if (randomize) return uniform(-0.5, 0.5);
    d.kind = "zeros";
    return d;
  }
  if (leaf.rfind("weight", 0) == 0) {
    if (randomize) return uniform(0.5, 1.5);
    d.kind = "ones";
    return d;
  }
  d.kind = "randn";
  return d;
}

// One input of a call of a case: its distribution, dtype, shape and seed.
struct InputDraw {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  DrawSpec draw;
  uint64_t seed;
};

// An fp16 reference on the CPU: this LibTorch (1.13) has no fp16 CPU
// kernel for many operators ("clamp_min_cpu" not implemented for 'Half'),
// so the module keeps its fp16 parameters and buffers (drawn, written for
// the candidate, widened for the fp64 twin as they are) and computes in
// fp32 on them: an fp32 twin built at the first call with those values
// widened, fed the fp16 inputs widened, its outputs rounded to fp16. That
// is what a GPU's fp16 kernels do inside (fp32 arithmetic, fp16 storage);
// docs/protocols.md says so.
class WidenedForward : public ModuleRunner {
 public:
  WidenedForward(std::unique_ptr<ModuleRunner> narrow, at::ScalarType storage,
                 std::function<std::unique_ptr<ModuleRunner>()> make_twin)
      : narrow_(std::move(narrow)), storage_(storage), make_twin_(std::move(make_twin)) {}

  std::vector<at::Tensor> forward(const std::vector<at::Tensor>& inputs) override {
    if (!twin_) {
      twin_ = make_twin_();
      std::map<std::string, at::Tensor> values;
      for (const auto& [n, t] : narrow_->parameters()) values[n] = t;
      for (const auto& [n, t] : narrow_->buffers()) values[n] = t;
      auto widen_into = [&](std::vector<std::pair<std::string, at::Tensor>> tensors) {
        for (auto& [n, t] : tensors) {
          const auto it = values.find(n);
          if (it != values.end()) t.set_data(it->second.scalar_type() == storage_ ? it->second.to(at::kFloat) : it->second.clone());
        }
      };
      widen_into(twin_->parameters());
      widen_into(twin_->buffers());
    }
    std::vector<at::Tensor> wide;
    wide.reserve(inputs.size());
    for (const auto& x : inputs) wide.push_back(x.scalar_type() == storage_ ? x.to(at::kFloat) : x);
    std::vector<at::Tensor> out = twin_->forward(wide);
    for (auto& o : out) {
      if (o.scalar_type() == at::kFloat) o = o.to(storage_);
    }
    return out;
  }
  std::vector<std::pair<std::string, at::Tensor>> parameters() override { return narrow_->parameters(); }
  std::vector<std::pair<std::string, at::Tensor>> buffers() override { return narrow_->buffers(); }
  std::vector<std::pair<at::Tensor, at::Tensor>> norm_affine() override { return narrow_->norm_affine(); }

 private:
  std::unique_ptr<ModuleRunner> narrow_;
  at::ScalarType storage_;
  std::function<std::unique_ptr<ModuleRunner>()> make_twin_;
  std::unique_ptr<ModuleRunner> twin_;
};

std::vector<InputDraw> input_draws(const wire::Case& c, int64_t call) {
  std::vector<InputDraw> draws;
  for (const auto& in : c.inputs) {
    const auto dtype = parse_dtype(in.dtype);
    if (!dtype) throw WorkerError{"runtime_error", "input '" + in.name + "' has an unknown dtype '" + in.dtype + "'"};
    DrawSpec draw = draw_spec(in.dist, c.scale);
    if (in.shape.size() >= 2) {  // a structure's matrices: the last two dimensions
      draw.rows = in.shape[in.shape.size() - 2];
      draw.cols = in.shape.back();
    }
    draws.push_back({in.name, *dtype, in.shape, draw, stream_seed(c.seed, "call" + std::to_string(call))});
  }
  return draws;
}

}  // namespace

std::map<std::string, at::Tensor> Worker::read_weights(const std::string& path) {
  std::map<std::string, at::Tensor> out;
  for (auto& [name, t] : read_tensors(path, device_)) out[name] = std::move(t);
  return out;
}

// Draws every parameter of a freshly constructed module from kloop's
// generator (the audit varies weights and inputs separately; otherwise
// one seed drives both). `keep`: also returns them with the buffers, for
// the weights file; without it a CPU parameter is drawn in place, with no
// host copy (a level-3 network's weights are hundreds of MB per case).
std::vector<HostTensor> Worker::draw_weights(ModuleRunner& module, const wire::Case& c, bool keep) {
  // A misspelt name in the spec's `weights:` would otherwise fall back to
  // the default draw without a word.
  const auto params = module.parameters();  // once: a network has hundreds
  for (const auto& [name, unused] : c.weight_overrides) {
    bool found = false;
    std::string known;
    for (const auto& [n, t] : params) {
      found = found || n == name;
      known += (known.empty() ? "" : ", ") + n;
    }
    if (!found) {
      throw WorkerError{"runtime_error", "the spec's weights: names '" + name +
                                             "', which is not a parameter of the reference (it has: " +
                                             (known.empty() ? "none" : known) + ")"};
    }
  }
  std::vector<HostTensor> weights;
  for (const auto& [name, p] : params) {
    DrawSpec draw = weight_draw(name, p, params, c);
    const uint64_t seed = stream_seed(c.weight_seed, "weights");
    if (!keep && p.device().is_cpu() && p.is_contiguous()) {  // the same values, drawn where they live
      generate_into(p.data_ptr(), name, dtype_of(p), p.numel(), draw, seed);
      continue;
    }
    HostTensor h = generate_tensor(name, dtype_of(p), shape_of(p), draw, seed);
    p.copy_(to_device(host_to_tensor(h), device_));
    if (keep) weights.push_back(std::move(h));
  }
  if (keep) {
    for (auto& [name, b] : module.buffers()) weights.push_back(tensor_to_host(b, name));
  }
  return weights;
}

// The case's module in the reference's process (wire::Construction):
// drawn, its parameters from kloop's generator (`weights`, when given,
// gets them and the buffers, for the candidate's weights file), or seeded
// as KernelBench builds it: the CPU generator (and CUDA's) seeded with the
// case's seed right before the constructor, which runs on the CPU and keeps
// its own initialisation (LibTorch's reset_parameters draw what PyTorch's
// do, in the same order); the adapter then moves it to the device.
std::unique_ptr<ModuleRunner> Worker::reference_module(const wire::Case& c, const std::string& label,
                                                       std::vector<HostTensor>* weights) {
  if (c.construction == wire::Construction::kSeeded) {
    at::manual_seed(c.construction_seed());
    for (const auto& d : c.init_draws) (void)(d.dist == "rand" ? at::rand(d.shape) : at::randn(d.shape));
    auto module = construct({}, c.args, label);
    norm_layers_.clear();
    if (c.randomize_identity_params) norm_layers_ = randomize_norm_layers(*module, c);
    to_case_precision(*module, c);  // built in fp32, then .to(dtype), as KernelBench's eval does
    module = computed_in_fp32_where_needed(std::move(module), c, label);
    if (weights) {
      for (auto& [name, p] : module->parameters()) weights->push_back(tensor_to_host(p, name));
      for (auto& [name, b] : module->buffers()) weights->push_back(tensor_to_host(b, name));
    }
    return module;
  }
  auto module = construct({}, c.args, label);
  to_case_precision(*module, c);  // then drawn in that dtype
  module = computed_in_fp32_where_needed(std::move(module), c, label);
  set_phase("drawing weights for " + label);
  if (weights) {
    *weights = draw_weights(*module, c, /*keep=*/true);
  } else {
    draw_weights(*module, c, /*keep=*/false);
  }
  return module;
}

// Strict's non-identity parameters under seeded construction: each norm
// layer, in registration order, takes weight 0.5 + U[0,1) and bias
// U[0,1) - 0.5 from a CPU generator of its own seeded with the case's norm
// seed, exactly what candidate_host.py's create_seeded hands the norm
// layers a Python ModelNew builds (the same draws, in the same order).
// Returns the layers' weight shapes.
std::vector<std::vector<int64_t>> Worker::randomize_norm_layers(ModuleRunner& module, const wire::Case& c) {
  std::vector<std::vector<int64_t>> shapes;
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(c.norm_seed());
  for (auto& [weight, bias] : module.norm_affine()) {
    weight.copy_(at::rand(weight.sizes(), generator) + 0.5);
    if (bias.defined()) bias.copy_(at::rand(bias.sizes(), generator) - 0.5);
    shapes.push_back(weight.sizes().vec());
  }
  return shapes;
}

// The case's module in the candidate's process: a Python candidate of a
// seeded case is built as KernelBench builds it (python_candidate.cpp);
// otherwise it gets the reference's weights by name from the case's file.
std::unique_ptr<ModuleRunner> Worker::candidate_module(const wire::Case& c, const std::string& dir,
                                                       const std::string& label) {
  if (python_ && c.construction == wire::Construction::kSeeded) {
    set_phase("constructing ModelNew for " + label + " (seeded)");
    return construct_python_seeded(c);
  }
  set_phase("reading weights for " + label);
  auto weights = read_weights(wire::weights_file(dir, c.id));
  return construct(weights, c.args, label, c.precision);
}

std::unique_ptr<ModuleRunner> Worker::computed_in_fp32_where_needed(std::unique_ptr<ModuleRunner> module,
                                                                   const wire::Case& c, const std::string& label) {
  if (c.precision != "float16" || device_ != "cpu") return module;
  const std::vector<wire::Arg> args = c.args;
  return std::make_unique<WidenedForward>(std::move(module), at::kHalf, [this, args, label] {
    return construct({}, args, label + " (fp32 arithmetic on its fp16 values)");
  });
}

void Worker::to_case_precision(ModuleRunner& module, const wire::Case& c) {
  if (c.precision.empty()) return;
  const auto dtype = parse_dtype(c.precision);
  if (!dtype || !dtype_is_floating(*dtype)) {
    throw WorkerError{"runtime_error", "the case's precision '" + c.precision + "' is not a floating-point dtype"};
  }
  const at::ScalarType type = scalar_type_of(*dtype);
  // set_data swaps the tensor under the module's own handle, as
  // torch::nn::Module::to does.
  for (auto& [name, p] : module.parameters()) {
    if (p.is_floating_point()) p.set_data(p.to(type));
  }
  for (auto& [name, b] : module.buffers()) {
    if (b.is_floating_point()) b.set_data(b.to(type));
  }
}

// The inputs of one call of a case, drawn where they are used: on a GPU
// by kloop's device generator straight into device memory (no host draw,
// no copy: GBs per call at upstream sizes), on the CPU into the tensor's
// memory (no zero-fill). Both give the same bits.
std::vector<at::Tensor> Worker::draw_args(const wire::Case& c, int64_t call) {
  std::vector<at::Tensor> args;
  redraw(args, c, call);
  return args;
}

// Call `call`'s inputs drawn into `set` in place (a set of draw_args of
// the same case, or empty), finished before this returns: the sample that follows
// starts its wall clock with the device idle (the unaccounted-work check
// holds that clock against the events). A tensor the module resized or
// replaced is made anew.
void Worker::redraw(std::vector<at::Tensor>& set, const wire::Case& c, int64_t call) {
  const auto draws = input_draws(c, call);
  set.resize(draws.size());
  for (std::size_t i = 0; i < draws.size(); ++i) {
    const InputDraw& d = draws[i];
    at::Tensor& t = set[i];
    const auto type = scalar_type_of(d.dtype);
    if (!t.defined() || t.sizes() != at::IntArrayRef(d.shape) || !t.is_contiguous() || t.scalar_type() != type ||
        t.device() != at::Device(device_) || t.storage_offset() != 0) {
      t = at::empty(d.shape, at::TensorOptions().dtype(type).device(device_));
    }
#ifdef KLOOP_WITH_CUDA
    if (session_->cuda()) {
      try {
        generate_on_device(t.data_ptr(), d.name, d.dtype, t.numel(), d.draw, d.seed);
      } catch (const std::runtime_error& e) {
        throw WorkerError{"runtime_error", e.what()};
      }
      continue;
    }
#endif
    generate_into(t.data_ptr(), d.name, d.dtype, t.numel(), d.draw, d.seed);
  }
}

// Call `call`'s inputs drawn into `views` (the trusted timer's shared
// block: contiguous tensors of the inputs' shapes and dtypes), on a GPU
// enqueued on `stream` without waiting.
void Worker::draw_into(const std::vector<at::Tensor>& views, const wire::Case& c, int64_t call, void* stream) {
  const auto draws = input_draws(c, call);
  if (draws.size() != views.size()) throw WorkerError{"runtime_error", "the timer's inputs do not match the case"};
  for (std::size_t i = 0; i < draws.size(); ++i) {
    const InputDraw& d = draws[i];
#ifdef KLOOP_WITH_CUDA
    if (session_->cuda()) {
      generate_on_device(views[i].data_ptr(), d.name, d.dtype, views[i].numel(), d.draw, d.seed, stream);
      continue;
    }
#else
    (void)stream;
#endif
    generate_into(views[i].data_ptr(), d.name, d.dtype, views[i].numel(), d.draw, d.seed);
  }
}

// The same inputs, also as host tensors (for the files of `generate`).
std::pair<std::vector<HostTensor>, std::vector<at::Tensor>> Worker::draw_inputs(const wire::Case& c, int64_t call) {
  std::vector<at::Tensor> args = draw_args(c, call);
  std::vector<HostTensor> inputs;
  for (std::size_t i = 0; i < args.size(); ++i) inputs.push_back(tensor_to_host(args[i], c.inputs[i].name));
  return {std::move(inputs), std::move(args)};
}

}  // namespace kloop::worker
