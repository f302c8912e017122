// kloop-worker's command loop, `load` and module construction (worker.h).
#include <ATen/Parallel.h>
#include <c10/util/Exception.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <new>
#include <stdexcept>

#include "evaluator/isolation/light_module.h"
#include "evaluator/isolation/worker/worker.h"

namespace kloop::worker {
namespace {

class InitFromData : public ModuleInit {
 public:
  InitFromData(std::map<std::string, at::Tensor> params, std::vector<wire::Arg> args, std::string device)
      : params_(std::move(params)), args_(std::move(args)), device_(std::move(device)) {}

  bool has_param(const std::string& name) const override { return params_.count(name) > 0; }
  at::Tensor param(const std::string& name) const override {
    auto it = params_.find(name);
    if (it == params_.end()) {
      std::string known;
      for (const auto& [k, v] : params_) known += (known.empty() ? "" : ", ") + k;
      throw std::out_of_range("kloop: no weight named '" + name +
                              "' (this problem has: " + (known.empty() ? "none" : known) + ")");
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
  std::string arg_string(const std::string& name) const override { return get(name, "string").get<std::string>(); }
  std::string device() const override { return device_; }

 private:
  const wire::Arg* find(const std::string& name) const {
    for (const auto& a : args_) {
      if (a.name == name) return &a;
    }
    return nullptr;
  }
  const json& get(const std::string& name, const char* type) const {
    const wire::Arg* a = find(name);
    if (!a) {
      std::string known;
      for (const auto& x : args_) known += (known.empty() ? "" : ", ") + x.name;
      throw std::out_of_range("kloop: no constructor argument named '" + name +
                              "' (this problem has: " + (known.empty() ? "none" : known) + ")");
    }
    if (type && a->type != type) {
      throw std::invalid_argument("kloop: argument '" + name + "' has type " + a->type + ", not " + type);
    }
    return a->value;
  }

  std::map<std::string, at::Tensor> params_;
  std::vector<wire::Arg> args_;
  std::string device_;
};

// A failure's class from its message: the device's (or the host's) memory
// ran out (CUDA's allocator, cuBLAS and cuDNN say it in these words), or
// any other runtime error.
std::string failure_class(const std::string& what) {
  for (const char* sign : {"out of memory", "Out of memory", "ALLOC_FAILED"}) {
    if (what.find(sign) != std::string::npos) return "out_of_memory";
  }
  return "runtime_error";
}
}  // namespace

void phase(const std::string& role, const std::string& what) {
  std::fprintf(stderr, "kloop-worker: %s\n", what.c_str());
  std::fflush(stderr);
  static FILE* trace = [] {
    const char* path = std::getenv("KLOOP_TRACE");
    return path && *path ? std::fopen(path, "a") : nullptr;
  }();
  if (trace) {
    const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    std::fprintf(trace, "%.3f %s[%d] %s\n", now, role.empty() ? "worker" : role.c_str(), getpid(), what.c_str());
    std::fflush(trace);
  }
}

int Worker::serve() {
  for (;;) {
    auto message = channel_.receive(std::nullopt);
    if (!message) break;
    const std::string& line = message->line;
    incoming_fds_ = std::move(message->fds);
    outgoing_fds_.clear();
    if (line.empty()) continue;
    json answer;
    try {
      const json cmd = json::parse(line);
      const std::string op = cmd.at("op");
      if (op == wire::Exit::kOp) {
        send(wire::ok_json(json::object()));
        return 0;
      }
      if (op == wire::Ready::kOp) {
        send(wire::ok_json(json::object()));
        continue;
      }
      answer = wire::ok_json(dispatch(op, cmd));
    } catch (const WorkerError& e) {
      answer = wire::failure_json({e.error_class, e.message});
    } catch (const c10::Error& e) {  // LibTorch errors: the message without the C++ backtrace
      const std::string what = e.what_without_backtrace();
      answer = wire::failure_json({failure_class(what), current_ + ": " + what});
    } catch (const std::bad_alloc& e) {
      answer = wire::failure_json({"out_of_memory", current_ + ": " + e.what()});
    } catch (const std::exception& e) {
      answer = wire::failure_json({failure_class(e.what()), current_ + ": " + e.what()});
    } catch (...) {
      answer = wire::failure_json({"runtime_error", current_ + ": threw a non-standard exception"});
    }
    send(answer);
  }
  return 0;
}

void Worker::send(const json& j) {
  std::vector<int> fds;
  for (const auto& f : outgoing_fds_) fds.push_back(f.get());
  channel_.send(j.dump(), fds);
  outgoing_fds_.clear();  // the peer holds its own copies now
  incoming_fds_.clear();
}

// A description published by `e`, with its descriptor (cuda_ipc) queued
// to travel with the reply.
json Worker::attach(const ExchangeExport& e, json description) {
  if (e.fd() >= 0 && description.value("transport", "") == "cuda_ipc") {
    int copy = dup(e.fd());
    if (copy < 0) throw std::runtime_error("cannot duplicate the exported descriptor");
    outgoing_fds_.emplace_back(copy);
  }
  return description;
}

void Worker::set_phase(const std::string& what) {
  current_ = what;
  phase(role_, what);
}

template <class Command, class Reply>
json Worker::serve_as(const json& cmd, Reply (Worker::*handler)(const Command&)) {
  return (this->*handler)(cmd.get<Command>());
}

json Worker::dispatch(const std::string& op, const json& cmd) {
  if (op == wire::Load::kOp) return serve_as(cmd, &Worker::load);
  if (op == wire::Calibrate::kOp) return serve_as(cmd, &Worker::calibrate);
  // The timer's handshake is measured before the candidate's module is loaded.
  if (op == wire::TimerAttach::kOp) return serve_as(cmd, &Worker::timer_attach);
  if (op == wire::TimerServe::kOp) return serve_as(cmd, &Worker::timer_serve);
  if (!create_ && !python_) throw WorkerError{"runtime_error", "kloop-worker: '" + op + "' before 'load'"};
  if (op == wire::Generate::kOp) return serve_as(cmd, &Worker::generate);
  generate_only_ = false;
  if (op == wire::Prepare::kOp) return serve_as(cmd, &Worker::prepare);
  if (op == wire::Expect::kOp) return serve_as(cmd, &Worker::expect);
  if (op == wire::Judge::kOp) return serve_as(cmd, &Worker::judge);
  if (op == wire::AnalyzeDeferred::kOp) return serve_as(cmd, &Worker::analyze_deferred);
  if (op == wire::Run::kOp) return serve_as(cmd, &Worker::run);
  if (op == wire::Export::kOp) return serve_as(cmd, &Worker::export_again);
  if (op == wire::Audit::kOp) return serve_as(cmd, &Worker::audit);
  if (op == wire::TimeSetup::kOp) return serve_as(cmd, &Worker::time_setup);
  if (op == wire::TimePost::kOp) return serve_as(cmd, &Worker::time_post);
  if (op == wire::TimerCalibrate::kOp) return serve_as(cmd, &Worker::timer_calibrate);
  if (op == wire::TimerHandoff::kOp) return serve_as(cmd, &Worker::timer_handoff);
  if (op == wire::TimerOpen::kOp) return serve_as(cmd, &Worker::timer_open);
  if (op == wire::TimerBatch::kOp) return serve_as(cmd, &Worker::timer_batch);
  if (op == wire::TimerClose::kOp) return serve_as(cmd, &Worker::timer_close);
  if (op == wire::Baseline::kOp) return serve_as(cmd, &Worker::baseline);
  if (op == wire::Profile::kOp) return serve_as(cmd, &Worker::profile);
  throw WorkerError{"runtime_error", "kloop-worker: unknown op '" + op + "'"};
}

wire::LoadReply Worker::load(const wire::Load& cmd) {
  const std::string& library = cmd.library;
  if (handle_) {
    // One module per process, with one exception: a reference worker that
    // has only generated cases (which keeps no state) may load another
    // entry of the same bundle, so a check of a whole bundle starts one
    // process, not one per reference.
    if (!(generate_only_ && role_ == "reference" && cmd.role == "reference" && library == library_ &&
          cmd.device == device_)) {
      throw WorkerError{"load_error", "kloop-worker: a module is already loaded in this process"};
    }
    create_ = nullptr;
  } else {
    role_ = cmd.role;
    // Only the trusted roles stay undumpable; a candidate's own process is
    // the attacker's anyway, and some libraries read their /proc/self files.
    if (role_ == "candidate") prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
    device_ = cmd.device;
    if (cmd.threads > 0) at::set_num_threads(cmd.threads);
    // LibTorch sets the thread count again on a thread's first parallel
    // op, which rebuilds its thread pools: done here, not in the first
    // timed call (where the trusted timer would see threads end).
    (void)at::get_num_threads();
    set_phase("preparing " + device_);
    if (!session_) session_ = std::make_unique<DeviceSession>(device_);  // timer_attach may have made it
    if (!cmd.python_host.empty()) return load_python(cmd);
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
  own_objects_ = {dlinfo(handle_, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name ? map->l_name : library};
  // A reference bundle's member answers to kloop_reference_<entry>_*.
  const std::string& entry = cmd.entry;
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
    throw WorkerError{"load_error",
                      "the module was built for kernel API version " + std::to_string(version) +
                          ", this kloop speaks version " + std::to_string(kKernelApiVersion) +
                          (role_ == "candidate" ? " (<kloop/kernel_api.h>) and " +
                                                      std::to_string(KLOOP_LIGHT_API_VERSION) + " (<kloop/light_api.h>)"
                                                : std::string())};
  }
  if (!version_fn || !arity_fn || !create_) {
    create_ = nullptr;
    std::string other = role_ == "candidate" ? "reference" : "candidate";
    bool wrong_role = dlsym(handle_, ("kloop_" + other + "_api_version").c_str()) != nullptr;
    std::string macro = role_ == "candidate" ? "KLOOP_REGISTER_CANDIDATE(ModelNew)" : "KLOOP_REGISTER_REFERENCE(Model)";
    throw WorkerError{"load_error", wrong_role
                                        ? "the module registers a " + other + ", not a " + role_ + "; use " + macro
                                        : "the module registers no " + role_ + " (symbol " + prefix +
                                              "create is missing); end the file with " + macro};
  }
  arity_ = arity_fn();
  const int expected = cmd.arity;
  if (expected >= 0 && arity_ != expected) {
    create_ = nullptr;
    throw WorkerError{"load_error", "forward takes " + std::to_string(arity_) +
                                        " tensor argument(s), but the problem passes " + std::to_string(expected)};
  }
  return {arity_, version, session_->info()};
}

std::unique_ptr<ModuleRunner> Worker::construct(const std::map<std::string, at::Tensor>& params,
                                                const std::vector<wire::Arg>& args, const std::string& label,
                                                const std::string& precision) {
  set_phase("constructing the module for " + label);
  if (python_) return construct_python(params, args, precision);
  InitFromData init(params, args, device_);
  return create_(init);
}

// Frees what the streamed test calls held (the retained expected outputs
// stay for the check after the candidate's timing): timing and profiling
// at upstream sizes need the memory.
void Worker::release_call_state() {
  timing_module_.reset();
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

}  // namespace kloop::worker

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
  return kloop::worker::Worker(channel).serve();
}
