// kloop-worker: the process that runs model code (a reference or a
// candidate) for the driver. It reads one JSON command per line on stdin and
// answers one JSON line on fd 3; stdout and stderr are a log. A candidate's
// process never holds expected outputs: the reference's process judges.
//
// Commands, test by test (the evaluation streams one call at a time, so
// upstream sizes need memory for one call, not for the whole plan):
//   prepare   reference: the case's module and weights (written for the
//             candidate, the only tensor file on the GPU path);
//   expect    reference: draws the call's inputs, computes and keeps the
//             expected outputs where they live (the GPU);
//   run       candidate: gets the same inputs (from the reference's
//             published copy, or drawn here with kloop's generator from the
//             same seed), calls forward, publishes outputs and inputs-after
//             (tensor_exchange.h: CUDA IPC or files);
//   judge     reference: imports what the candidate published and compares
//             it with the expected outputs in place (tensor_compare.h);
//   export    candidate: publishes the last call again with another transport.
// Also: load, generate (reference: every case to files, for the reference
// checks), audit (reference: the degeneracy checks, on the device, no
// files), time, baseline, profile, calibrate, exit.
#include <dlfcn.h>
#include <link.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>
#include <c10/util/Exception.h>
#include <kloop/kernel_api.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "evaluator/check/activity_audit.h"
#include "evaluator/check/tensor_compare.h"
#include "evaluator/isolation/channel.h"
#include "evaluator/isolation/device_session.h"
#include "evaluator/isolation/light_module.h"
#include "evaluator/isolation/tensor_bridge.h"
#include "evaluator/isolation/tensor_exchange.h"
#include "evaluator/runtime/generator.h"
#ifdef KLOOP_WITH_CUDA
#include "evaluator/runtime/generator_device.h"
#endif
#include "evaluator/runtime/host_tensor.h"
#include "evaluator/timing/sample_stats.h"

#ifdef KLOOP_WITH_CUPTI
#include <cupti.h>

#include "profiler/activity_tracer.h"
#include "profiler/range_profiler.h"
#endif

namespace kloop {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// An error with the verdict class it maps to.
struct WorkerError {
  std::string error_class;  // load_error, runtime_error
  std::string message;
};

// Each phase goes to stderr (the log tail a verdict quotes) and, where
// $KLOOP_TRACE names a file, is appended there with the wall-clock time and
// the role, so both workers' steps interleave in one timeline.
void phase(const std::string& role, const std::string& what) {
  std::fprintf(stderr, "kloop-worker: %s\n", what.c_str());
  std::fflush(stderr);
  static FILE* trace = [] {
    const char* path = std::getenv("KLOOP_TRACE");
    return path && *path ? std::fopen(path, "a") : nullptr;
  }();
  if (trace) {
    const double now =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    std::fprintf(trace, "%.3f %s[%d] %s\n", now, role.empty() ? "worker" : role.c_str(), getpid(), what.c_str());
    std::fflush(trace);
  }
}

class InitFromData : public ModuleInit {
 public:
  InitFromData(std::map<std::string, at::Tensor> params, json args, std::string device)
      : params_(std::move(params)), args_(std::move(args)), device_(std::move(device)) {}

  bool has_param(const std::string& name) const override { return params_.count(name) > 0; }
  at::Tensor param(const std::string& name) const override {
    auto it = params_.find(name);
    if (it == params_.end()) {
      std::string known;
      for (const auto& [k, v] : params_) known += (known.empty() ? "" : ", ") + k;
      throw std::out_of_range("kloop: no weight named '" + name + "' (this problem has: " +
                              (known.empty() ? "none" : known) + ")");
    }
    return it->second;
  }
  std::vector<std::string> param_names() const override {
    std::vector<std::string> out;
    for (const auto& [k, v] : params_) out.push_back(k);
    return out;
  }
  bool has_arg(const std::string& name) const override { return find(name) != nullptr; }
  int64_t arg_int(const std::string& name) const override { return get(name, "int").get<int64_t>(); }
  double arg_float(const std::string& name) const override {
    const json& v = get(name, nullptr);
    if (!v.is_number()) throw std::invalid_argument("kloop: argument '" + name + "' is not a number");
    return v.get<double>();
  }
  bool arg_bool(const std::string& name) const override { return get(name, "bool").get<bool>(); }
  std::vector<int64_t> arg_ints(const std::string& name) const override {
    return get(name, "ints").get<std::vector<int64_t>>();
  }
  std::string arg_string(const std::string& name) const override {
    return get(name, "string").get<std::string>();
  }
  std::string device() const override { return device_; }

 private:
  const json* find(const std::string& name) const {
    for (const auto& a : args_) {
      if (a.at("name") == name) return &a;
    }
    return nullptr;
  }
  const json& get(const std::string& name, const char* type) const {
    const json* a = find(name);
    if (!a) {
      std::string known;
      for (const auto& x : args_) known += (known.empty() ? "" : ", ") + x.at("name").get<std::string>();
      throw std::out_of_range("kloop: no constructor argument named '" + name + "' (this problem has: " +
                              (known.empty() ? "none" : known) + ")");
    }
    if (type && a->at("type") != type && !(std::string(type) == "int" && a->at("type") == "int")) {
      throw std::invalid_argument("kloop: argument '" + name + "' has type " +
                                  a->at("type").get<std::string>() + ", not " + type);
    }
    return a->at("value");
  }

  std::map<std::string, at::Tensor> params_;
  json args_;
  std::string device_;
};

class Worker {
 public:
  explicit Worker(Channel& channel) : channel_(channel) {}

  int serve() {
    for (;;) {
      auto message = channel_.receive(std::nullopt);
      if (!message) break;
      const std::string& line = message->line;
      incoming_fds_ = std::move(message->fds);
      outgoing_fds_.clear();
      if (line.empty()) continue;
      json cmd;
      json answer;
      try {
        cmd = json::parse(line);
        const std::string op = cmd.at("op");
        if (op == "exit") {
          send({{"ok", true}});
          return 0;
        }
        answer = dispatch(op, cmd);
        answer["ok"] = true;
      } catch (const WorkerError& e) {
        answer = {{"ok", false}, {"error_class", e.error_class}, {"message", e.message}};
      } catch (const c10::Error& e) {  // LibTorch errors: the message without the C++ backtrace
        answer = {{"ok", false}, {"error_class", "runtime_error"},
                  {"message", current_ + ": " + e.what_without_backtrace()}};
      } catch (const std::exception& e) {
        answer = {{"ok", false}, {"error_class", "runtime_error"}, {"message", current_ + ": " + e.what()}};
      } catch (...) {
        answer = {{"ok", false}, {"error_class", "runtime_error"},
                  {"message", current_ + ": threw a non-standard exception"}};
      }
      send(answer);
    }
    return 0;
  }

 private:
  void send(const json& j) {
    std::vector<int> fds;
    for (const auto& f : outgoing_fds_) fds.push_back(f.get());
    channel_.send(j.dump(), fds);
    outgoing_fds_.clear();  // the peer holds its own copies now
    incoming_fds_.clear();
  }

  // A description published by `e`, with its descriptor (cuda_ipc) queued
  // to travel with the reply.
  json attach(const ExchangeExport& e, json description) {
    if (e.fd() >= 0 && description.value("transport", "") == "cuda_ipc") {
      int copy = dup(e.fd());
      if (copy < 0) throw std::runtime_error("cannot duplicate the exported descriptor");
      outgoing_fds_.emplace_back(copy);
    }
    return description;
  }

  // The descriptor that came with the command (a CUDA memory export), or -1.
  int incoming_fd() const { return incoming_fds_.empty() ? -1 : incoming_fds_.front().get(); }

  void set_phase(const std::string& what) {
    current_ = what;
    phase(role_, what);
  }

  json dispatch(const std::string& op, const json& cmd) {
    if (op == "load") return load(cmd);
    if (op == "calibrate") return calibrate(cmd);
    if (!create_) throw WorkerError{"runtime_error", "kloop-worker: '" + op + "' before 'load'"};
    if (op == "generate") return generate(cmd);
    generate_only_ = false;
    if (op == "prepare") return prepare(cmd);
    if (op == "expect") return expect(cmd);
    if (op == "judge") return judge(cmd);
    if (op == "run") return run(cmd);
    if (op == "export") return export_again(cmd);
    if (op == "audit") return audit(cmd);
    if (op == "time_setup") return time_setup(cmd);
    if (op == "time_batch") return time_batch(cmd);
    if (op == "time_check") return time_check(cmd);
    if (op == "time_post") return time_post(cmd);
    if (op == "timing_floor") return timing_floor(cmd);
    if (op == "baseline") return baseline(cmd);
    if (op == "profile") return profile(cmd);
    throw WorkerError{"runtime_error", "kloop-worker: unknown op '" + op + "'"};
  }

  json load(const json& cmd) {
    const std::string library = cmd.at("library");
    if (handle_) {
      // One module per process, with one exception: a reference worker that
      // has only generated cases (which keeps no state) may load another
      // entry of the same bundle, so a check of a whole bundle starts one
      // process, not one per reference.
      if (!(generate_only_ && role_ == "reference" && cmd.at("role") == "reference" && library == library_ &&
            cmd.value("device", "cpu") == device_)) {
        throw WorkerError{"load_error", "kloop-worker: a module is already loaded in this process"};
      }
      create_ = nullptr;
    } else {
      role_ = cmd.at("role");
      // Only the trusted roles stay undumpable; a candidate's own process is
      // the attacker's anyway, and some libraries read their /proc/self files.
      if (role_ == "candidate") prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
      device_ = cmd.value("device", "cpu");
      if (int threads = cmd.value("threads", 0); threads > 0) at::set_num_threads(threads);
      set_phase("preparing " + device_);
      session_ = std::make_unique<DeviceSession>(device_);
      set_phase("loading " + library);
      handle_ = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
      library_ = library;
    }
    if (!handle_) {
      const char* err = dlerror();
      throw WorkerError{"load_error", std::string("cannot load the module: ") + (err ? err : "?")};
    }
    // The module's name as dladdr gives it for its code: the activity audit
    // tells the module's own kernel launches from a library's by it.
    link_map* map = nullptr;
    module_object_ = dlinfo(handle_, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name ? map->l_name : library;
    // A reference bundle's member answers to kloop_reference_<entry>_*.
    const std::string entry = cmd.value("entry", "");
    if (!entry.empty() && (role_ != "reference" || entry.size() > 16 ||
                           entry.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789") != std::string::npos)) {
      throw WorkerError{"load_error", "kloop-worker: entry '" + entry + "' is not a reference bundle's entry tag"};
    }
    const std::string prefix = "kloop_" + role_ + "_" + (entry.empty() ? "" : entry + "_");
    auto version_fn = reinterpret_cast<int (*)()>(dlsym(handle_, (prefix + "api_version").c_str()));
    auto arity_fn = reinterpret_cast<int (*)()>(dlsym(handle_, (prefix + "forward_arity").c_str()));
    const int version = version_fn ? version_fn() : 0;
    create_ = nullptr;
    if (version == kKernelApiVersion) {
      auto create = reinterpret_cast<ModuleRunner* (*)(const ModuleInit&)>(dlsym(handle_, (prefix + "create").c_str()));
      if (create) create_ = [create](const ModuleInit& init) { return std::unique_ptr<ModuleRunner>(create(init)); };
    } else if (version == KLOOP_LIGHT_API_VERSION && role_ == "candidate") {
      LightEntryPoints light;
      light.create = reinterpret_cast<kloop_light_create_fn>(dlsym(handle_, (prefix + "light_create").c_str()));
      light.forward = reinterpret_cast<kloop_light_forward_fn>(dlsym(handle_, (prefix + "light_forward").c_str()));
      light.destroy = reinterpret_cast<kloop_light_destroy_fn>(dlsym(handle_, (prefix + "light_destroy").c_str()));
      if (light.create && light.forward && light.destroy) {
        create_ = [this, light](const ModuleInit& init) {
          return make_light_module(light, init, device_, session_->stream());
        };
      }
    } else if (version_fn && arity_fn) {
      throw WorkerError{"load_error", "the module was built for kernel API version " + std::to_string(version) +
                                          ", this kloop speaks version " + std::to_string(kKernelApiVersion) +
                                          (role_ == "candidate" ? " (<kloop/kernel_api.h>) and " +
                                                                      std::to_string(KLOOP_LIGHT_API_VERSION) +
                                                                      " (<kloop/light_api.h>)"
                                                                : std::string())};
    }
    if (!version_fn || !arity_fn || !create_) {
      create_ = nullptr;
      std::string other = role_ == "candidate" ? "reference" : "candidate";
      bool wrong_role = dlsym(handle_, ("kloop_" + other + "_api_version").c_str()) != nullptr;
      std::string macro = role_ == "candidate" ? "KLOOP_REGISTER_CANDIDATE(ModelNew)" : "KLOOP_REGISTER_REFERENCE(Model)";
      throw WorkerError{"load_error",
                        wrong_role ? "the module registers a " + other + ", not a " + role_ + "; use " + macro
                                   : "the module registers no " + role_ + " (symbol " + prefix +
                                         "create is missing); end the file with " + macro};
    }
    arity_ = arity_fn();
    int expected = cmd.value("arity", -1);
    if (expected >= 0 && arity_ != expected) {
      create_ = nullptr;
      throw WorkerError{"load_error", "forward takes " + std::to_string(arity_) +
                                          " tensor argument(s), but the problem passes " +
                                          std::to_string(expected)};
    }
    return {{"arity", arity_}, {"api_version", version}, {"device", session_->info()}};
  }

  std::unique_ptr<ModuleRunner> construct(const std::map<std::string, at::Tensor>& params, const json& args,
                                          const std::string& label) {
    set_phase("constructing the module for " + label);
    InitFromData init(params, args, device_);
    return create_(init);
  }

  static std::string file(const json& cmd, const std::string& name) {
    return cmd.at("dir").get<std::string>() + "/" + name;
  }
  // Where a candidate writes what it publishes: its own folder (the shared
  // one is read-only to it).
  static std::string out_file(const json& cmd, const std::string& name) {
    return (cmd.contains("out_dir") ? cmd.at("out_dir") : cmd.at("dir")).get<std::string>() + "/" + name;
  }

  std::map<std::string, at::Tensor> read_weights(const std::string& path) {
    std::map<std::string, at::Tensor> out;
    for (auto& t : read_tensor_file(path)) out[t.name] = to_device(host_to_tensor(t), device_);
    return out;
  }

  // Draws every parameter of a freshly constructed module from kloop's
  // generator (the audit varies weights and inputs separately; otherwise
  // one seed drives both). `keep`: also returns them with the buffers, for
  // the weights file; without it a CPU parameter is drawn in place, with no
  // host copy (a level-3 network's weights are hundreds of MB per case).
  std::vector<HostTensor> draw_weights(ModuleRunner& module, const json& c, bool keep = true) {
    const uint64_t weight_seed = c.value("weight_seed", c.at("seed").get<uint64_t>());
    // A misspelt name in the spec's `weights:` would otherwise fall back to
    // the default draw without a word.
    const auto params = module.parameters();  // once: a network has hundreds
    if (c.contains("weight_overrides")) {
      for (const auto& [name, unused] : c["weight_overrides"].items()) {
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
    }
    std::vector<HostTensor> weights;
    for (const auto& [name, p] : params) {
      DrawSpec draw = weight_draw(name, p, params, c);
      const uint64_t seed = stream_seed(weight_seed, "weights");
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

  // One input of a call of a case: its distribution, dtype, shape and seed.
  struct InputDraw {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    DrawSpec draw;
    uint64_t seed;
  };
  static std::vector<InputDraw> input_draws(const json& c, int64_t call) {
    std::vector<InputDraw> draws;
    for (const auto& in : c.at("inputs")) {
      InputDraw d;
      d.name = in.at("name");
      d.dtype = *parse_dtype(in.at("dtype"));
      d.shape = in.at("shape").get<std::vector<int64_t>>();
      d.draw.kind = in.at("dist").at("kind");
      for (const auto& [k, v] : in.at("dist").at("params").items()) d.draw.params[k] = v.get<double>();
      d.draw.scale = c.value("scale", 1.0);
      d.seed = stream_seed(c.at("seed").get<uint64_t>(), "call" + std::to_string(call));
      draws.push_back(std::move(d));
    }
    return draws;
  }

  // The inputs of one call of a case, drawn where they are used: on a GPU
  // by kloop's device generator straight into device memory (no host draw,
  // no copy: GBs per call at upstream sizes), on the CPU into the tensor's
  // memory (no zero-fill). Both give the same bits.
  std::vector<at::Tensor> draw_args(const json& c, int64_t call) {
    std::vector<at::Tensor> args;
    redraw(args, c, call);
    return args;
  }

  // Call `call`'s inputs drawn into `set` in place (a set of draw_args of
  // the same case, or empty), finished before this returns: the sample that follows
  // starts its wall clock with the device idle (the unaccounted-work check
  // holds that clock against the events). A tensor the module resized or
  // replaced is made anew.
  void redraw(std::vector<at::Tensor>& set, const json& c, int64_t call) {
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

  // The same inputs, also as host tensors (for the files of `generate`).
  std::pair<std::vector<HostTensor>, std::vector<at::Tensor>> draw_inputs(const json& c, int64_t call) {
    std::vector<at::Tensor> args = draw_args(c, call);
    std::vector<HostTensor> inputs;
    for (std::size_t i = 0; i < args.size(); ++i) inputs.push_back(tensor_to_host(args[i], c.at("inputs")[i].at("name")));
    return {std::move(inputs), std::move(args)};
  }

  // Reference only: draws weights and inputs, computes expected outputs.
  json generate(const json& cmd) {
    if (role_ != "reference") throw WorkerError{"runtime_error", "generate is for references"};
    at::AutoGradMode no_grad(false);
    session_->set_deterministic(true);  // expected outputs: reproducible bit for bit
    const bool files = cmd.value("weights_and_inputs", true);  // else only the expected outputs
    json cases = json::array();
    for (const auto& c : cmd.at("cases")) {
      const int id = c.at("id");
      const std::string label = "case " + std::to_string(id);
      auto module = construct({}, c.at("args"), label);
      auto weights = draw_weights(*module, c, /*keep=*/files);
      if (files) write_tensor_file(file(cmd, "case" + std::to_string(id) + ".weights.safetensors"), weights);

      const int calls = c.value("calls", 1);
      json outputs = json::array();
      for (int call = 0; call < calls; ++call) {
        auto [inputs, args] = draw_inputs(c, call);
        const std::string stem = "case" + std::to_string(id) + ".call" + std::to_string(call);
        if (files) write_tensor_file(file(cmd, stem + ".inputs.safetensors"), inputs);
        set_phase("reference forward, " + label + " call " + std::to_string(call));
        auto out = module->forward(args);
        synchronize();
        std::vector<HostTensor> expected;
        json shapes = json::array();
        for (std::size_t i = 0; i < out.size(); ++i) {
          expected.push_back(tensor_to_host(out[i], "output" + std::to_string(i)));
          shapes.push_back(expected.back().shape);
        }
        write_tensor_file(file(cmd, stem + ".expected.safetensors"), expected);
        outputs.push_back(shapes);
      }
      cases.push_back({{"id", id}, {"output_shapes", outputs}, {"parameters", module->parameters().size()}});
    }
    session_->set_deterministic(false);
    return {{"cases", cases}};
  }

  // Reference only: the baseline at any size without files. Weights and the
  // case's input sets are drawn on the host and moved to the device, then
  // the module is timed with TF32 off and (on CUDA) on.
  json baseline(const json& cmd) {
    if (role_ != "reference") throw WorkerError{"runtime_error", "baseline is for references"};
    at::AutoGradMode no_grad(false);
    release_call_state();  // in an evaluation: the test calls' tensors
    const json& c = cmd.at("case");
    const std::string label = "case " + std::to_string(c.value("id", 0));
    auto module = construct({}, c.at("args"), label);
    set_phase("drawing weights for " + label);
    draw_weights(*module, c, /*keep=*/false);
    std::vector<std::vector<at::Tensor>> sets;
    double input_bytes = 0;
    for (int call = 0; call < c.value("calls", 1); ++call) {
      set_phase("drawing inputs for " + label + " call " + std::to_string(call));
      auto args = draw_args(c, call);
      for (const auto& t : args) input_bytes += static_cast<double>(t.numel() * t.element_size());
      sets.push_back(std::move(args));
    }
    const TimingRules rules = rules_from_json(cmd.at("rules"));
    json answer = {{"parameters", module->parameters().size()}, {"input_bytes", input_bytes},
                   {"device", session_->info()}};
    answer["fp32"] = time_loop(*module, sets, rules, false, label);
    if (session_->cuda()) answer["tf32"] = time_loop(*module, sets, rules, true, label);
    return answer;
  }

  // PyTorch's default initialisation drawn from kloop's generator; the spec's
  // `weights` overrides win, `strict` randomises identity-valued vectors.
  static DrawSpec weight_draw(const std::string& name, const at::Tensor& p,
                              const std::vector<std::pair<std::string, at::Tensor>>& all, const json& c) {
    DrawSpec d;
    const bool randomize = c.value("randomize_identity_params", false);
    if (c.contains("weight_overrides") && c["weight_overrides"].contains(name)) {
      const json& o = c["weight_overrides"][name];
      d.kind = o.at("kind");
      for (const auto& [k, v] : o.at("params").items()) d.params[k] = v.get<double>();
      // A declared identity value (upstream's torch.ones / zeros) is as
      // exploitable as a default one: strict randomises it the same way.
      if (randomize && d.kind == "ones") return {"uniform", {{"low", 0.5}, {"high", 1.5}}, 1.0};
      if (randomize && d.kind == "zeros") return {"uniform", {{"low", -0.5}, {"high", 0.5}}, 1.0};
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

  // Reference: the case's module with weights drawn from kloop's generator,
  // written for the candidate (case<ID>.weights.safetensors).
  json prepare(const json& cmd) {
    if (role_ != "reference") throw WorkerError{"runtime_error", "prepare is for references"};
    at::AutoGradMode no_grad(false);
    const json& c = cmd.at("case");
    const int id = c.at("id");
    module_ = construct({}, c.at("args"), "case " + std::to_string(id));
    set_phase("drawing weights for case " + std::to_string(id));
    write_tensor_file(file(cmd, "case" + std::to_string(id) + ".weights.safetensors"), draw_weights(*module_, c));
    module_case_ = id;
    pristine_.clear();
    expected_.clear();
    previous_expected_.clear();
    previous_actual_.clear();
    return {{"parameters", module_->parameters().size()}};
  }

  // Reference: one call's inputs and expected outputs, kept in this process
  // (on the device) for `judge`. `retain` keeps the outputs for the check
  // after the candidate's timing.
  json expect(const json& cmd) {
    if (role_ != "reference" || !module_) throw WorkerError{"runtime_error", "expect needs a prepared reference"};
    at::AutoGradMode no_grad(false);
    const json& c = cmd.at("case");
    const int64_t call = cmd.at("call").get<int64_t>();
    const std::string label = "case " + std::to_string(c.at("id").get<int>()) + " call " + std::to_string(call);
    session_->set_deterministic(true);  // expected outputs: reproducible bit for bit
    set_phase("drawing inputs, " + label);
    auto args = draw_args(c, call);
    pristine_.clear();
    for (const auto& a : args) pristine_.push_back(a.clone());  // a reference may work in place
    input_export_.release();
    json inputs_exchange;
    if (const std::string t = cmd.value("publish_inputs", ""); !t.empty()) {
      set_phase("publishing inputs, " + label);
      try {
        inputs_exchange = attach(input_export_, input_export_.publish({}, pristine_, t, file(cmd, "case" + std::to_string(c.at("id").get<int>()) +
                                                                                ".call" + std::to_string(call) + ".reference")));
      } catch (const std::exception& e) {  // the driver lets the candidate draw them instead
        inputs_exchange = json{{"error", e.what()}};
      }
    }
    set_phase("reference forward, " + label);
    auto out = module_->forward(args);
    synchronize();
    fp64_expected_.clear();
    fp64_unavailable_.clear();
    if (cmd.value("fp64", false)) fp64_reference(c, label);
    session_->set_deterministic(false);
    previous_expected_ = std::move(expected_);
    expected_.clear();
    json shapes = json::array();
    for (auto& o : out) {
      expected_.push_back(o.contiguous());
      shapes.push_back(o.sizes().vec());
    }
    if (cmd.value("retain", false)) retained_expected_ = expected_;
    json answer = {{"output_shapes", shapes}};
    if (inputs_exchange.contains("error")) {
      answer["inputs_exchange_error"] = inputs_exchange["error"];
    } else if (!inputs_exchange.is_null()) {
      answer["inputs_exchange"] = inputs_exchange;
    }
    return answer;
  }

  // Reference: the audit's cases (one call each) run here and compared here,
  // on the device, so the audit works at upstream sizes: how the first
  // case's outputs look (all within tolerance of zero, constant, largest
  // magnitude) and which pairs of cases give the same outputs within the
  // tolerance (`pairs`: [[a, b], ...]).
  json audit(const json& cmd) {
    if (role_ != "reference") throw WorkerError{"runtime_error", "audit is for references"};
    at::AutoGradMode no_grad(false);
    const Tolerance tol = tolerance_from_json(cmd.at("tolerance"));
    session_->set_deterministic(true);
    std::vector<std::vector<at::Tensor>> outs;
    std::size_t parameters = 0;
    for (const auto& c : cmd.at("cases")) {
      const std::string label = "case " + std::to_string(c.at("id").get<int>());
      auto module = construct({}, c.at("args"), label);
      set_phase("drawing weights for " + label);
      draw_weights(*module, c);
      if (outs.empty()) parameters = module->parameters().size();
      auto args = draw_args(c, 0);
      set_phase("reference forward, " + label);
      std::vector<at::Tensor> out;
      for (const auto& o : module->forward(args)) out.push_back(o.contiguous());
      synchronize();
      outs.push_back(std::move(out));
    }
    session_->set_deterministic(false);
    set_phase("comparing the audit's cases");
    bool zeros_pass = true, constant = true;
    double max_abs = 0;
    int64_t elements = 0;
    for (const auto& t : outs.at(0)) {
      elements += t.numel();
      zeros_pass = zeros_pass && compare_tensors(t, at::zeros_like(t), "output", tol, 0).passed;
      if (t.numel() == 0) continue;
      const at::Tensor flat = t.view({-1});
      const at::Tensor d = flat.to(at::kDouble);
      const at::Tensor finite = d.isfinite();
      if (finite.any().item<bool>()) max_abs = std::max(max_abs, d.masked_select(finite).abs().max().item<double>());
      constant = constant && flat.eq(flat[0]).all().item<bool>();
    }
    json same = json::array();
    for (const auto& p : cmd.at("pairs")) {
      const auto& a = outs.at(p.at(0).get<std::size_t>());
      const auto& b = outs.at(p.at(1).get<std::size_t>());
      bool equal = a.size() == b.size();
      for (std::size_t i = 0; equal && i < a.size(); ++i) {
        equal = a[i].sizes() == b[i].sizes() && compare_tensors(a[i], b[i], "output", tol, 0).passed;
      }
      same.push_back(equal);
    }
    json answer = {{"parameters", parameters}, {"zeros_pass", zeros_pass}, {"constant", constant},
                   {"max_abs_output", max_abs}, {"elements", elements}, {"same", same}};
    if (cmd.contains("conditioning")) answer["conditioning"] = conditioning(cmd["conditioning"]);
    return answer;
  }

  // How well fp32 computes one case (strict's zero-mean case): the fp32
  // outputs against the fp64 twin's, held to half the tolerance. Strict
  // judges that case against the twin with the reference's own error added
  // (compare_with_exact_allowance), so a candidate fails honestly only when
  // its error passes the tolerance plus the reference's: where the reference
  // strays more than half the tolerance, one that rounds three times worse
  // can. Where the outputs are not finite, the case tests nothing.
  json conditioning(const json& cc) {
    const json& c = cc.at("case");
    Tolerance half = tolerance_from_json(cc.at("tolerance"));
    half.atol /= 2;
    half.rtol /= 2;
    half.magnitude /= 2;
    const std::string label = "case " + std::to_string(c.at("id").get<int>()) + " (conditioning)";
    session_->set_deterministic(true);
    module_ = construct({}, c.at("args"), label);
    set_phase("drawing weights for " + label);
    draw_weights(*module_, c);
    auto args = draw_args(c, 0);
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
    json answer = json::object();
    bool finite = true;
    for (const auto& o : out) finite = finite && (!o.is_floating_point() || o.isfinite().all().item<bool>());
    answer["finite"] = finite;
    if (fp64_expected_.size() != out.size()) {
      answer["fp64_unavailable"] = fp64_unavailable_.empty() ? "no fp64 outputs" : fp64_unavailable_;
    } else {
      bool within = true;
      double worst = 0;
      for (std::size_t i = 0; i < out.size(); ++i) {
        const auto cmp = compare_tensors(fp64_expected_[i].to(out[i].scalar_type()), out[i],
                                         "output" + std::to_string(i), half, 0);
        within = within && cmp.passed;
        if (std::isfinite(cmp.max_abs_error)) worst = std::max(worst, cmp.max_abs_error);
      }
      answer["within_half"] = within;
      answer["max_abs_error"] = worst;
    }
    module_.reset();
    pristine_.clear();
    fp64_expected_.clear();
    return answer;
  }

  // An fp64 twin of the reference for error analysis: a second instance
  // with the same weights in double precision, called on the call's inputs
  // in double precision. A reference that makes float tensors of its own
  // cannot run this way; the reason is kept and reported instead.
  void fp64_reference(const json& c, const std::string& label) {
    set_phase("fp64 reference, " + label);
    auto widen = [](const at::Tensor& t) { return t.is_floating_point() ? t.to(at::kDouble) : t.clone(); };
    try {
      auto twin = construct({}, c.at("args"), label + " (fp64)");
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

  // Reference: compares what the candidate published for the last `expect`
  // (or, with `post`, for the retained call) on this process's device.
  json judge(const json& cmd) {
    if (role_ != "reference") throw WorkerError{"runtime_error", "judge is for references"};
    at::AutoGradMode no_grad(false);
    const Tolerance tol = tolerance_from_json(cmd.at("tolerance"));
    set_phase("importing the candidate's tensors");
    // What the candidate published is untrusted: any failure to read it is
    // its failure (exchange_error), not the judge's.
    std::unique_ptr<ExchangeImport> imported;
    try {
      imported = std::make_unique<ExchangeImport>(cmd.at("exchange"), device_, incoming_fd());
    } catch (const std::exception& e) {
      throw WorkerError{"exchange_error", e.what()};
    }
    const ExchangeImport& got = *imported;
    set_phase("comparing on " + device_);
    const bool post = cmd.value("post", false);
    const auto& expected = post ? retained_expected_ : expected_;
    const auto& actual = got.outputs();
    // Strict's analyzed calls: an output that misses the fp32 reference may
    // still be within the tolerance plus the reference's own error of the
    // fp64 twin's (compare_with_exact_allowance).
    const bool allowance = !post && cmd.value("exact_allowance", false) && fp64_expected_.size() == expected.size();
    json outputs = json::array();
    for (std::size_t i = 0; i < expected.size() && i < actual.size(); ++i) {
      const at::Tensor* exact = allowance ? &fp64_expected_[i] : nullptr;
      outputs.push_back(
          to_json(compare_with_exact_allowance(expected[i], exact, actual[i], "output" + std::to_string(i), tol)));
    }
    json answer = {{"outputs", outputs}, {"output_count", actual.size()}, {"expected_count", expected.size()}};
    if (post) return answer;
    json mutated = json::array();
    for (std::size_t k = 0; k < pristine_.size() && k < got.inputs().size(); ++k) {
      if (!tensors_identical(pristine_[k], got.inputs()[k])) mutated.push_back(k);
    }
    answer["mutated_inputs"] = mutated;
    if (cmd.value("error_analysis", false)) {
      if (fp64_expected_.empty()) {
        answer["fp64_unavailable"] = fp64_unavailable_.empty() ? "no fp64 reference was computed" : fp64_unavailable_;
      } else {
        json rows = json::array();
        for (std::size_t i = 0; i < fp64_expected_.size() && i < actual.size() && i < expected.size(); ++i) {
          if (fp64_expected_[i].sizes() != actual[i].sizes() || fp64_expected_[i].sizes() != expected[i].sizes()) continue;
          const ErrorVsExact cand = error_against(fp64_expected_[i], actual[i]);
          const ErrorVsExact ref = error_against(fp64_expected_[i], expected[i]);
          rows.push_back({{"output", i},
                          {"max_abs_fp64", cand.max_abs_exact},
                          {"rms_fp64", cand.rms_exact},
                          {"candidate_max_abs_error", cand.max_abs_error},
                          {"candidate_rms_error", cand.rms_error},
                          {"reference_max_abs_error", ref.max_abs_error},
                          {"reference_rms_error", ref.rms_error}});
        }
        answer["error_analysis"] = rows;
      }
    }
    // Results cached across calls: the same output for different inputs.
    if (!previous_actual_.empty() && previous_actual_.size() == actual.size()) {
      bool same_actual = true, same_expected = previous_expected_.size() == expected.size();
      for (std::size_t i = 0; i < actual.size(); ++i) {
        same_actual = same_actual && tensors_identical(previous_actual_[i], actual[i]);
        same_expected = same_expected && tensors_identical(previous_expected_[i], expected[i]);
      }
      answer["same_as_previous_call"] = same_actual;
      answer["expected_same_as_previous_call"] = same_expected;
    }
    previous_actual_.clear();
    if (cmd.value("keep_for_next_call", false)) {
      for (const auto& a : actual) previous_actual_.push_back(a.clone());  // the mapping closes on return
    }
    synchronize();
    return answer;
  }

  // Candidate: one test call. The module is built from the case's weights
  // file when the case changes; the inputs are drawn here with kloop's
  // generator from the case's seed, as the reference drew them.
  json run(const json& cmd) {
    at::AutoGradMode no_grad(false);
    const json& c = cmd.at("case");
    const int id = c.at("id");
    const int call = cmd.at("call");
    const std::string label = "case " + std::to_string(id) + " call " + std::to_string(call);
    exchange_.release();
    last_outputs_.clear();
    last_inputs_.clear();
    if (!module_ || module_case_ != id) {
      module_.reset();
      set_phase("reading weights for case " + std::to_string(id));
      auto weights = read_weights(file(cmd, "case" + std::to_string(id) + ".weights.safetensors"));
      module_ = construct(weights, c.at("args"), "case " + std::to_string(id));
      module_case_ = id;
    }
    std::vector<at::Tensor> inputs;
    if (cmd.contains("inputs_exchange")) {
      // The reference's copy, cloned into this process's own memory before
      // the mapping closes; a transport that fails is the driver's to handle.
      set_phase("importing inputs, " + label);
      try {
        ExchangeImport from_reference(cmd["inputs_exchange"], device_, incoming_fd());
        for (const auto& t : from_reference.inputs()) inputs.push_back(t.clone());
        synchronize();
      } catch (const std::exception& e) {
        throw WorkerError{"exchange_error", std::string("importing the reference's inputs: ") + e.what()};
      }
    } else {
      set_phase("drawing inputs, " + label);
      inputs = draw_args(c, call);
    }
    set_phase("forward, " + label);
    auto t0 = Clock::now();
    auto out = module_->forward(inputs);
    synchronize();
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    set_phase("publishing outputs of " + label);
    json aliases = json::array();
    json wrong_device = json::array();
    for (std::size_t i = 0; i < out.size(); ++i) {
      if (!out[i].defined()) throw WorkerError{"runtime_error", "forward returned an undefined tensor as output " + std::to_string(i)};
      for (std::size_t k = 0; k < inputs.size(); ++k) {
        if (storage_overlaps(out[i], inputs[k])) aliases.push_back({{"output", i}, {"input", k}});
      }
      if (out[i].device().str() != at::Device(device_).str()) {
        wrong_device.push_back({{"output", i}, {"device", out[i].device().str()}});
      }
    }
    json answer = {{"seconds", seconds}, {"aliases", aliases}, {"wrong_device", wrong_device}};
    last_outputs_ = std::move(out);
    last_inputs_ = std::move(inputs);
    last_stem_ = out_file(cmd, "case" + std::to_string(id) + ".call" + std::to_string(call) + ".candidate");
    if (wrong_device.empty()) answer["exchange"] = publish(last_outputs_, last_inputs_, cmd.value("transport", "file"), last_stem_);
    return answer;
  }

  // Publishes with the asked transport or, when that fails (CUDA IPC
  // refused), with files, saying why in `fallback_reason`.
  json publish(const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs,
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

  // Candidate: the last call's tensors again, with another transport (the
  // driver falls back to files when the judge cannot map CUDA IPC memory).
  json export_again(const json& cmd) {
    return {{"exchange", attach(exchange_, exchange_.publish(last_outputs_, last_inputs_, cmd.at("transport"), last_stem_))}};
  }

  // Repeated forward calls rotating over the input sets until the stopping
  // rule says the median is stable. Samples taken while the SM clock was
  // held down (power or thermal slowdown) are discarded, up to a bound, so
  // a throttled card cannot stall the measurement forever.
  json time_loop(ModuleRunner& module, const std::vector<std::vector<at::Tensor>>& sets, const TimingRules& rules,
                 bool tf32, const std::string& label) {
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
    return {{"timing", to_json(rule.summary())},
            {"wall", to_json(summarize(wall))},
            {"throttled_discarded", discarded},
            {"clock_monitor", session_->clock_monitor()},
            {"persisting_l2_limit", session_->persisting_l2_limit()},
            {"persisting_l2_window_bytes", session_->persisting_l2_window_bytes()}};
  }

  // The candidate's timing is driven from outside, in three commands, so
  // that the driver can hold the claimed times against the wall time it
  // sees itself (nothing this process reports is believed on its own):
  //   time_setup  the case's module and its input sets, then the warm-up;
  //   time_batch  exactly `samples` timed calls, rotating over the sets;
  //               their event (GPU) or wall (CPU) times, and what the device
  //               saw (throttling, the persisting-L2 limit); after each
  //               call it stops ({"sample_done": i}) and serves a
  //               time_check of that call's outputs until told "next";
  //   time_post   one more call on a fresh set, published for the judge.
  // Candidate: the timing loop's state. The case is the driver's timing
  // case (inputs from a nonce of its own, never the test inputs): its
  // `calls` input sets are drawn here once; the driver says which set each
  // timed call gets, and whether it checks a call's outputs only after the
  // call has returned (no command, phase text or call pattern tells a
  // checked call from another before it is made).
  json time_setup(const json& cmd) {
    at::AutoGradMode no_grad(false);
    const json& c = cmd.at("case");
    const int id = c.at("id");
    timing_label_ = "case " + std::to_string(id);
    release_call_state();
    auto weights = read_weights(file(cmd, "case" + std::to_string(id) + ".weights.safetensors"));
    timing_module_ = construct(weights, c.at("args"), timing_label_);
    set_phase("timed calls, " + timing_label_);
    // Fresh inputs (warmup_first_call): one set, redrawn for every call;
    // otherwise the case's few sets, cycled.
    const bool fresh = cmd.contains("warmup_first_call");
    const int64_t warm_first = cmd.value("warmup_first_call", int64_t{0});
    if (fresh) {
      timing_sets_.push_back(draw_args(c, warm_first));
    } else {
      for (int call = 0; call < c.value("calls", 1); ++call) timing_sets_.push_back(draw_args(c, call));
    }
    timing_case_ = c;
    post_case_ = cmd.value("post_case", c);
    const TimingRules rules = rules_from_json(cmd.at("rules"));
    session_->set_tf32(cmd.value("tf32", false));
    session_->reset_persisting_l2();
    const auto warm_start = Clock::now();
    double output_bytes = 0;
    for (int i = 0; i < rules.warmup_calls ||
                    std::chrono::duration<double>(Clock::now() - warm_start).count() < rules.warmup_seconds;
         ++i) {
      if (fresh && i > 0) redraw(timing_sets_[0], c, warm_first + i);
      auto out = timing_module_->forward(timing_sets_[timing_next_++ % timing_sets_.size()]);
      synchronize();
      output_bytes = 0;
      for (const auto& t : out) output_bytes += t.defined() ? static_cast<double>(t.numel() * t.element_size()) : 0;
      if (i > 10000) break;
    }
    return {{"sets", timing_sets_.size()}, {"output_bytes", output_bytes}};
  }

  json time_batch(const json& cmd) {
    if (!timing_module_) throw WorkerError{"runtime_error", "time_batch before time_setup"};
    at::AutoGradMode no_grad(false);
    const int n = cmd.at("samples");
    const bool flush = cmd.value("l2_flush", true);
    const json sets = cmd.value("sets", json::array());
    // first_call: sample i runs on call first_call + i's inputs, drawn just
    // before it (outside its timed span).
    const bool fresh = cmd.contains("first_call");
    const int64_t first = cmd.value("first_call", int64_t{0});
    if (!sets.is_array() || (!sets.empty() && sets.size() != static_cast<std::size_t>(n))) {
      throw WorkerError{"runtime_error", "time_batch: 'sets' must give one input set per sample"};
    }
    kept_.clear();
    json samples = json::array(), wall = json::array(), throttled = json::array();
    for (int i = 0; i < n; ++i) {
      std::size_t set = 0;
      if (fresh) {
        redraw(timing_sets_[0], timing_case_, first + i);
      } else {
        set = sets.empty() ? timing_next_++ % timing_sets_.size() : sets[static_cast<std::size_t>(i)].get<std::size_t>();
      }
      if (set >= timing_sets_.size()) throw WorkerError{"runtime_error", "time_batch: no input set " + std::to_string(set)};
      const auto& in = timing_sets_[set];
      session_->begin_sample(flush);
      auto out = timing_module_->forward(in);
      samples.push_back(session_->end_sample());
      wall.push_back(session_->last_wall_seconds());
      throttled.push_back(session_->last_sample_throttled());
      kept_ = {std::move(out)};  // for a time_check the driver may now ask for
      await_next(i);
      kept_.clear();
    }
    return {{"samples", samples}, {"wall", wall}, {"throttled", throttled},
            {"persisting_l2_limit", session_->persisting_l2_limit()},
            {"persisting_l2_window_bytes", session_->persisting_l2_window_bytes()}, {"clock_monitor", session_->clock_monitor()}};
  }

  // After timed sample i: says so, then serves the driver's
  // commands (a time_check of that sample's outputs) until it says "next".
  // Whether a call is checked is decided only once it has returned.
  void await_next(int i) {
    send({{"sample_done", i}});
    for (;;) {
      auto message = channel_.receive(std::nullopt);
      if (!message) throw WorkerError{"runtime_error", "the driver went away during a timing batch"};
      incoming_fds_ = std::move(message->fds);
      outgoing_fds_.clear();
      const json cmd = json::parse(message->line);
      const std::string op = cmd.value("op", "");
      if (op == "next") return;
      if (op != "time_check") throw WorkerError{"runtime_error", "only time_check or next between timed samples, not '" + op + "'"};
      json answer = time_check(cmd);
      answer["ok"] = true;
      send(answer);
    }
  }

  // Candidate: publishes the outputs of the timed call the batch stopped
  // after, for the driver's check against the reference on its inputs.
  json time_check(const json& cmd) {
    const std::size_t k = cmd.at("kept").get<std::size_t>();
    if (k >= kept_.size()) throw WorkerError{"runtime_error", "time_check: no kept output " + std::to_string(k)};
    const std::vector<at::Tensor>& out = kept_[k];
    for (std::size_t i = 0; i < out.size(); ++i) {
      if (!out[i].defined() || out[i].device().str() != at::Device(device_).str()) {
        throw WorkerError{"runtime_error", "a timed call returned output " + std::to_string(i) +
                                               " undefined or on another device"};
      }
    }
    return {{"exchange", publish(out, {}, cmd.value("transport", "file"), out_file(cmd, cmd.at("name").get<std::string>()))}};
  }

  json time_post(const json& cmd) {
    if (!timing_module_) throw WorkerError{"runtime_error", "time_post before time_setup"};
    at::AutoGradMode no_grad(false);
    session_->set_tf32(false);
    timing_sets_.clear();  // memory for the fresh set
    kept_.clear();
    // The timed calls may have left anything in the old ones. `call`: a
    // call of the timing case nobody has seen; else the first test's.
    auto fresh = cmd.contains("call") ? draw_args(timing_case_, cmd.at("call").get<int64_t>()) : draw_args(post_case_, 0);
    auto out = timing_module_->forward(fresh);
    synchronize();
    for (std::size_t i = 0; i < out.size(); ++i) {
      if (!out[i].defined() || out[i].device().str() != at::Device(device_).str()) {
        throw WorkerError{"runtime_error", "after timing, forward returned output " + std::to_string(i) +
                                               " undefined or on another device"};
      }
    }
    const std::string stem = out_file(cmd, cmd.value("name", "case" + std::to_string(post_case_.at("id").get<int>()) + ".post"));
    json answer = {{"exchange", publish(out, {}, cmd.value("transport", "file"), stem)}};
    timing_module_.reset();
    return answer;
  }

  // Reference: the sampling loop around no forward at all, for the driver's
  // measure of what a sample costs beyond the call itself.
  json timing_floor(const json& cmd) {
    if (role_ != "reference") throw WorkerError{"runtime_error", "timing_floor is for references"};
    const int n = cmd.at("samples");
    const bool flush = cmd.value("l2_flush", true);
    // With a case: each sample first draws a call's inputs, as the timed
    // calls on fresh inputs do.
    std::vector<at::Tensor> set;
    const int64_t first = cmd.value("first_call", int64_t{0});
    if (cmd.contains("case")) set = draw_args(cmd["case"], first);
    json samples = json::array();
    for (int i = 0; i < n; ++i) {
      if (!set.empty()) redraw(set, cmd["case"], first + i + 1);
      session_->begin_sample(flush);
      samples.push_back(session_->end_sample());
      await_next(i);  // the same stop after each sample as a candidate's batches
    }
    synchronize();
    return {{"samples", samples}};
  }

  // The activity audit and, when asked, the hardware counters: in a phase of
  // their own, since tracing slows the calls it watches. Each traced call
  // starts with the L2 flush on kloop's stream (its memset record marks the
  // stream and the call's start) and notes the CUPTI time at which kloop's
  // stream had finished, so the driver can find work that ran elsewhere or
  // later. The counters use kernel replay, which restores memory between
  // passes, so in-place kernels are measured right.
  json profile(const json& cmd) {
    at::AutoGradMode no_grad(false);
    const json& c = cmd.at("case");
    const int id = c.at("id");
    const std::string label = "case " + std::to_string(id);
    if (!session_->cuda()) return {{"trace_unavailable", "profiling needs a CUDA device"}};
    release_call_state();
#ifdef KLOOP_WITH_CUPTI
    // Launch origins from before the module exists: a graph it captures
    // while built or warmed up is named by the launches captured into it.
    profiler::ActivityTracer tracer;
    std::string why_not_traced;
    const bool watching = tracer.watch_launches(&why_not_traced);
#endif
    auto module = construct(read_weights(file(cmd, "case" + std::to_string(id) + ".weights.safetensors")), c.at("args"), label);
    // first_call: every profiled forward on a call's inputs of its own, all
    // drawn before the trace starts (a drawing kernel inside it would read
    // as the module's work) while they fit in kProfileBytes; else call 0's.
    constexpr double kProfileBytes = 16.0 * (1 << 30);
    const int traced = cmd.value("calls", 3);
    const int64_t first = cmd.value("first_call", int64_t{0});
    std::vector<std::vector<at::Tensor>> sets{draw_args(c, first)};
    if (cmd.contains("first_call")) {
      double bytes = 1;
      for (const auto& t : sets[0]) bytes += static_cast<double>(t.numel() * t.element_size());
      const int fit = static_cast<int>(std::min<double>(traced + 2, std::max(1.0, kProfileBytes / bytes)));
      for (int k = 1; k < fit; ++k) sets.push_back(draw_args(c, first + k));
    }
    auto inputs_of = [&](int k) -> const std::vector<at::Tensor>& { return sets[static_cast<std::size_t>(k) % sets.size()]; };
    set_phase("profiling warm-up, " + label);
    module->forward(inputs_of(0));
    synchronize();
    json answer = {{"flush_bytes", session_->info().value("l2_bytes", 0)},  // the size of kloop's markers
                   {"module_object", module_object_}};
#ifdef KLOOP_WITH_CUPTI
    {
      set_phase("activity audit, " + label);
      std::string why = why_not_traced;
      if (watching && tracer.start(&why)) {
        session_->mark_legacy_stream();  // the trace's first memset
        json stream_done = json::array();
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
        answer["trace"] = profiler::to_json(tracer.stop());
        answer["stream_done_ns"] = stream_done;
      } else {
        tracer.stop();  // the launch callbacks off before the counters run
        answer["trace_unavailable"] = why;
      }
    }
    if (cmd.value("counters", false)) {
      // Kernel replay saves and restores device memory around every pass:
      // only the inputs the profiled call reads stay allocated, so that
      // copy is one call's inputs and outputs, not every traced set.
      std::vector<at::Tensor> profiled = inputs_of(traced + 1);
      sets.assign(1, std::move(profiled));
      session_->release_cached_memory();
      set_phase("hardware counters, " + label);
      profiler::RangeProfiler counters;
      answer["metrics"] = profiler::to_json(counters.profile([&] {
        module->forward(inputs_of(0));
        synchronize();
      }));
    }
#else
    answer["trace_unavailable"] = "this kloop-worker was built without CUPTI";
#endif
    return answer;
  }

  // Median seconds of `samples` timed calls of fn, after three warm-ups.
  template <typename F>
  double median_seconds(F&& fn, int samples) {
    for (int i = 0; i < 3; ++i) fn();
    synchronize();
    std::vector<double> t;
    for (int i = 0; i < samples; ++i) {
      session_->begin_sample(false);
      fn();
      t.push_back(session_->end_sample());
    }
    return summarize(t).median;
  }

  // What this device achieves: copy bandwidth (read + write) and dense GEMM
  // rates in FP32, TF32 and BF16. The speed-of-light floor is built from them.
  json calibrate(const json& cmd) {
    if (!session_) {
      device_ = cmd.value("device", "cuda:0");
      session_ = std::make_unique<DeviceSession>(device_);
    }
    if (!session_->cuda()) throw WorkerError{"runtime_error", "calibrate needs a CUDA device, not " + device_};
    at::AutoGradMode no_grad(false);
    const auto opts = at::TensorOptions().device(at::Device(device_)).dtype(at::kFloat);
    set_phase("calibrating copy bandwidth");
    const int64_t n = cmd.value("copy_bytes", int64_t{1} << 31) / 4;
    at::Tensor src = at::rand({n}, opts), dst = at::empty_like(src);
    const double copy_s = median_seconds([&] { dst.copy_(src); }, 30);
    src.reset();
    dst.reset();
    set_phase("calibrating GEMM rates");
    const int64_t m = cmd.value("gemm_size", 8192);
    at::Tensor a = at::randn({m, m}, opts), b = at::randn({m, m}, opts), out;
    const double flops = 2.0 * static_cast<double>(m) * m * m;
    session_->set_tf32(false);
    const double fp32_s = median_seconds([&] { out = at::mm(a, b); }, 10);
    session_->set_tf32(true);
    const double tf32_s = median_seconds([&] { out = at::mm(a, b); }, 20);
    session_->set_tf32(false);
    at::Tensor ah = a.to(at::kBFloat16), bh = b.to(at::kBFloat16);
    const double bf16_s = median_seconds([&] { out = at::mm(ah, bh); }, 30);
    set_phase("calibrating the empty launch");
    at::Tensor one = at::zeros({1}, opts);
    const double launch_s = median_seconds([&] { one.add_(1); }, 200);
    return {{"device", session_->info()},
            {"copy_bytes", 2.0 * static_cast<double>(n) * 4},
            {"copy_seconds", copy_s},
            {"dram_bytes_per_s", 2.0 * static_cast<double>(n) * 4 / copy_s},
            {"gemm_size", m},
            {"fp32_flops_per_s", flops / fp32_s},
            {"tf32_flops_per_s", flops / tf32_s},
            {"bf16_flops_per_s", flops / bf16_s},
            {"small_kernel_seconds", launch_s}};
  }

  void synchronize() { session_->synchronize(); }

  // Frees what the streamed test calls held (the retained expected outputs
  // stay for the check after the candidate's timing): timing and profiling
  // at upstream sizes need the memory.
  void release_call_state() {
    timing_module_.reset();
    timing_sets_.clear();
    kept_.clear();
    exchange_.release();
    input_export_.release();
    last_outputs_.clear();
    last_inputs_.clear();
    module_.reset();
    module_case_ = -1;
    pristine_.clear();
    expected_.clear();
    previous_expected_.clear();
    previous_actual_.clear();
    fp64_expected_.clear();
  }

  Channel& channel_;
  // Descriptors that came with the current command (CUDA memory exports)
  // and those to send with its reply.
  std::vector<UniqueFd> incoming_fds_, outgoing_fds_;
  std::unique_ptr<DeviceSession> session_;
  // Streamed evaluation: the current case's module; the reference's
  // pristine inputs and expected outputs of the current call (and of the
  // previous call and the retained one); the candidate's last call.
  std::unique_ptr<ModuleRunner> module_;
  int module_case_ = -1;
  // The candidate's timing (time_setup .. time_post).
  std::unique_ptr<ModuleRunner> timing_module_;
  std::vector<std::vector<at::Tensor>> timing_sets_;
  std::size_t timing_next_ = 0;
  json timing_case_;
  json post_case_;
  std::vector<std::vector<at::Tensor>> kept_;  // outputs of timed calls the driver will check
  std::string timing_label_;
  std::vector<at::Tensor> pristine_, expected_, previous_expected_, retained_expected_, previous_actual_;
  std::vector<at::Tensor> fp64_expected_;  // the optional fp64 twin's outputs for the current call
  std::string fp64_unavailable_;
  std::vector<at::Tensor> last_outputs_, last_inputs_;
  std::string last_stem_;
  ExchangeExport exchange_;
  ExchangeExport input_export_;  // reference: the current call's inputs, for the candidate
  void* handle_ = nullptr;
  std::string library_;        // the path handle_ was opened from
  bool generate_only_ = true;  // no op but load and generate has run (see load)
  std::string module_object_;  // the loaded module's path as the dynamic loader names it
  // Makes a module of the loaded library (either kernel API version).
  std::function<std::unique_ptr<ModuleRunner>(const ModuleInit&)> create_;
  std::string role_;
  std::string device_ = "cpu";
  int arity_ = 0;
  std::string current_ = "starting";
};

}  // namespace
}  // namespace kloop

int main() {
  // cuBLAS is deterministic only with a fixed workspace configuration; it
  // must be set before the first CUDA call.
  setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", 0);
  // fd 3 is the channel to the driver (commands in, replies out); keep it
  // away from whatever the module prints. Nobody may attach to the
  // reference's or kloop's memory: not dumpable (no ptrace, no
  // /proc/PID/mem for the same uid).
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  if (fcntl(3, F_GETFD) < 0) {
    std::fprintf(stderr, "kloop-worker: fd 3 (the channel) is not open; run me through kloop\n");
    return 2;
  }
  fcntl(3, F_SETFD, FD_CLOEXEC);
  kloop::Channel channel(3);
  return kloop::Worker(channel).serve();
}
