// kloop-worker: the process that runs model code (a reference or a
// candidate) for the driver. It reads one command per line on fd 3 and
// answers there (wire.h); stdout and stderr are a log. A candidate's
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
//             where the fp64 twin did not run beside the candidate, keeps
//             the outputs on the host for analyze_deferred, the reference's
//             last command, after the candidate's process ended;
//   export    candidate: publishes the last call again with another transport.
// Also: load, generate (reference: every case to files, for the reference
// checks), audit (reference: the degeneracy checks, on the device, no
// files), the timing commands, baseline, profile, calibrate, exit.
//
// Where each lives:
//   worker_main.cpp       the command loop, load, module construction
//   draws.cpp             weights and inputs from kloop's generator
//   reference_ops.cpp     generate, prepare, expect, audit, judge, analyze_deferred
//   candidate_ops.cpp     run, export
//   python_candidate.cpp  load and construct a KernelBench-format (Python) candidate
//   timing/worker_loops.cpp  the timed loops: baseline, time_*, timing_floor
//   profile_op.cpp        the activity trace and the counters
//   calibrate_op.cpp      the device's copy bandwidth and GEMM rates
#pragma once

#include <ATen/ATen.h>
#include <kloop/kernel_api.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "evaluator/isolation/channel.h"
#include "evaluator/isolation/device_session.h"
#include "evaluator/isolation/python/python_host.h"
#include "evaluator/isolation/tensor_exchange.h"
#include "evaluator/isolation/timer_link.h"
#include "evaluator/isolation/wire.h"
#include "evaluator/runtime/generator.h"
#include "evaluator/runtime/host_tensor.h"
#include "evaluator/check/tensor_compare.h"
#include "evaluator/timing/sample_stats.h"

namespace kloop::worker {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// An error with the verdict class it maps to.
struct WorkerError {
  std::string error_class;  // load_error, runtime_error, exchange_error
  std::string message;
};

// Each phase goes to stderr (the log tail a verdict quotes) and, where
// $KLOOP_TRACE names a file, is appended there with the wall-clock time and
// the role, so both workers' steps interleave in one timeline.
void phase(const std::string& role, const std::string& what);

// Tensors over `block`'s slots (trusted_timer.cpp).
std::vector<at::Tensor> block_views(const SharedBlock& block, const std::vector<wire::TensorSlot>& slots,
                                    const std::string& device);

class Worker {
 public:
  explicit Worker(Channel& channel) : channel_(channel) {}
  int serve();

 private:
  // The command loop (worker_main.cpp).
  json dispatch(const std::string& op, const json& cmd);
  template <class Command, class Reply>
  json serve_as(const json& cmd, Reply (Worker::*handler)(const Command&));
  void send(const json& j);
  json attach(const ExchangeExport& e, json description);
  int incoming_fd() const { return incoming_fds_.empty() ? -1 : incoming_fds_.front().get(); }
  void set_phase(const std::string& what);
  void synchronize() { session_->synchronize(); }
  void release_call_state();

  wire::LoadReply load(const wire::Load& cmd);
  // A KernelBench-format candidate through the Python host (python_candidate.cpp).
  wire::LoadReply load_python(const wire::Load& cmd);
  std::unique_ptr<ModuleRunner> construct_python(const std::map<std::string, at::Tensor>& params,
                                                 const std::vector<wire::Arg>& args, const std::string& precision);
  // `precision` (wire::Case::precision): a Python candidate's ModelNew is
  // converted to it before it takes the weights; "" keeps it fp32.
  std::unique_ptr<ModuleRunner> construct(const std::map<std::string, at::Tensor>& params,
                                          const std::vector<wire::Arg>& args, const std::string& label,
                                          const std::string& precision = "");
  // A seeded case's ModelNew, built as KernelBench builds it (python_candidate.cpp).
  std::unique_ptr<ModuleRunner> construct_python_seeded(const wire::Case& c);

  // Weights and inputs (draws.cpp).
  std::map<std::string, at::Tensor> read_weights(const std::string& path);
  std::unique_ptr<ModuleRunner> reference_module(const wire::Case& c, const std::string& label,
                                                 std::vector<HostTensor>* weights = nullptr);
  std::unique_ptr<ModuleRunner> candidate_module(const wire::Case& c, const std::string& dir, const std::string& label);
  std::vector<std::vector<int64_t>> randomize_norm_layers(ModuleRunner& module, const wire::Case& c);
  // The reference's floating-point parameters and buffers in the case's
  // precision (KernelBench's model.to(dtype)); nothing for fp32.
  void to_case_precision(ModuleRunner& module, const wire::Case& c);
  // An fp16 reference on the CPU, whose LibTorch lacks fp16 kernels: fp32
  // arithmetic on its fp16 values, outputs rounded to fp16 (draws.cpp).
  std::unique_ptr<ModuleRunner> computed_in_fp32_where_needed(std::unique_ptr<ModuleRunner> module,
                                                              const wire::Case& c, const std::string& label);
  std::vector<HostTensor> draw_weights(ModuleRunner& module, const wire::Case& c, bool keep = true);
  std::vector<at::Tensor> draw_args(const wire::Case& c, int64_t call);
  void redraw(std::vector<at::Tensor>& set, const wire::Case& c, int64_t call);
  std::pair<std::vector<HostTensor>, std::vector<at::Tensor>> draw_inputs(const wire::Case& c, int64_t call);
  void draw_into(const std::vector<at::Tensor>& views, const wire::Case& c, int64_t call, void* stream);

  // The reference's commands (reference_ops.cpp).
  wire::GenerateReply generate(const wire::Generate& cmd);
  wire::PrepareReply prepare(const wire::Prepare& cmd);
  wire::ExpectReply expect(const wire::Expect& cmd);
  wire::AuditReply audit(const wire::Audit& cmd);
  wire::ConditioningReply conditioning(const wire::Conditioning& cc);
  void fp64_reference(const wire::Case& c, const std::string& label);
  std::vector<at::Tensor> outputs_with_twin(const wire::Case& c, int64_t call, const std::string& label);
  wire::JudgeReply judge(const wire::Judge& cmd);
  wire::AnalyzeDeferredReply analyze_deferred(const wire::AnalyzeDeferred& cmd);

  // The candidate's test calls (candidate_ops.cpp).
  wire::RunReply run(const wire::Run& cmd);
  json publish(const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs,
               const std::string& transport, const std::string& stem);
  wire::ExchangeReply export_again(const wire::Export& cmd);

  // The timed loops (timing/worker_loops.cpp).
  wire::BaselineReply baseline(const wire::Baseline& cmd);
  wire::TimeLoopReply time_loop(ModuleRunner& module, const std::vector<std::vector<at::Tensor>>& sets,
                                const TimingRules& rules, bool tf32, const std::string& label);
  wire::TimeSetupReply time_setup(const wire::TimeSetup& cmd);
  wire::ExchangeReply time_post(const wire::TimePost& cmd);

  // The timed calls: the trusted timer's side (trusted_timer.cpp) and the
  // candidate's (candidate_timer.cpp), over timer_link.h's shared blocks.
  wire::TimerCalibrateReply timer_calibrate(const wire::TimerCalibrate& cmd);
  wire::TimerHandoffReply timer_handoff(const wire::TimerHandoff& cmd);
  wire::TimerOpenReply timer_open(const wire::TimerOpen& cmd);
  wire::TimerBatchReply timer_batch(const wire::TimerBatch& cmd);
  wire::TimedCheck timer_check(int sample, int64_t call, bool precision, const Tolerance& tol);
  wire::NoReply timer_close(const wire::TimerClose& cmd);
  wire::NoReply timer_attach(const wire::TimerAttach& cmd);
  wire::TimerServeReply timer_serve(const wire::TimerServe& cmd);
  void serve_one(uint32_t seq, bool empty, bool work, std::string& note);
  void export_block(const SharedBlock& block);

  wire::ProfileReply profile(const wire::Profile& cmd);        // profile_op.cpp
  wire::CalibrateReply calibrate(const wire::Calibrate& cmd);  // calibrate_op.cpp
  template <typename F>
  double median_seconds(F&& fn, int samples);

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
  bool module_randomized_ = false;  // module_ was built with randomize_identity_params
  // The reference's norm layers that took strict's non-identity values
  // (their weight shapes, registration order), or the candidate's (the
  // order it built them in; a claim), for the case module_ was built for.
  std::vector<std::vector<int64_t>> norm_layers_;
  // The candidate's timing (time_setup .. time_post).
  std::unique_ptr<ModuleRunner> timing_module_;
  wire::Case timing_case_;
  wire::Case post_case_;
  std::string timing_label_;
  std::vector<at::Tensor> pristine_, expected_, previous_expected_, retained_expected_, previous_actual_;
  std::vector<at::Tensor> fp64_expected_;  // the optional fp64 twin's outputs for the current call
  std::string fp64_unavailable_;
  wire::Case expect_case_;  // the current call's case and call number (expect)
  int64_t expect_call_ = 0;
  // Calls whose fp64 twin did not run beside the candidate: the candidate's
  // outputs on the host, analyzed after its process ended (analyze_deferred).
  struct DeferredCall {
    wire::Case c;
    int64_t call = 0;
    std::vector<at::Tensor> actual;
    bool identical = false;  // the outputs were the fp32 reference's bit for bit: none kept
  };
  std::vector<DeferredCall> deferred_;
  std::vector<at::Tensor> last_outputs_, last_inputs_;
  std::string last_stem_;
  ExchangeExport exchange_;
  ExchangeExport input_export_;  // reference: the current call's inputs, for the candidate
  void* handle_ = nullptr;
  std::string library_;        // the path handle_ was opened from
  bool generate_only_ = true;  // no op but load and generate has run (see load)
  // The loaded module's path as the dynamic loader names it, and folders
  // (ending in '/') whose binaries are the module's (a Python candidate's).
  std::vector<std::string> own_objects_;
  std::unique_ptr<python_host::Host> python_;  // a Python candidate's interpreter and ModelNew
  // The timed calls' shared blocks, the data block's views (inputs, then
  // outputs), and the timer's own: its floors, its case, the checked calls'
  // captured outputs (memory the candidate cannot reach).
  std::unique_ptr<SharedBlock> timer_control_, timer_data_;
  std::vector<at::Tensor> timer_inputs_, timer_outputs_, timer_captured_;
  // kloop's small kernel after go in every GPU call the timer counts
  // (candidate_timer.cpp's serve_one), and the small copy of the handshake's.
  at::Tensor timer_small_, timer_small_out_;
  // GPU: the data block's seal (timer_link.h): the timer's whole, the
  // candidate's side's by row.
  at::Tensor timer_seal_;
  std::vector<at::Tensor> timer_seal_rows_;
  wire::TimerFloors timer_floors_;
  wire::Case timer_case_;
  // The calibration's case, layout and flush: the handshake's calls with
  // work draw and flush as the timed calls will (timer_handoff).
  wire::Case timer_calibrated_case_;
  wire::TimerLayout timer_calibrated_layout_;
  bool timer_calibrated_flush_ = false;
  // Makes a module of the loaded library (either kernel API version).
  std::function<std::unique_ptr<ModuleRunner>(const ModuleInit&)> create_;
  std::string role_;
  std::string device_ = "cpu";
  int arity_ = 0;
  std::string current_ = "starting";
};

}  // namespace kloop::worker
