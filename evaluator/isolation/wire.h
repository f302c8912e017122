// The driver-worker protocol, one struct per command and per reply, each
// serialised here and nowhere else, used by both sides (kloop-worker and
// the evaluator's driver). On the channel (channel.h) a command is one JSON
// object with its `op`; a reply is either a failure
//   {"ok": false, "error_class": ..., "message": ...}
// or {"ok": true} with the command's reply struct's fields.
//
// A candidate's process writes replies too, so every reply is untrusted:
// reading one (read_reply) checks every field's type and throws
// MalformedReply for anything else, which the driver turns into a
// protocol_violation. Commands come from the driver, which the worker
// trusts; a command it cannot read is still an error reply, never a crash.
//
// Sizes, indices and counts in replies are the sender's word: the driver
// checks them against what it asked for (the range of an alias, the number
// of samples of a batch) where it uses them.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace kloop::wire {

using json = nlohmann::json;

// ---- what a worker builds modules and draws inputs from ------------------

// A distribution for kloop's generator (generator.h's DrawSpec by name).
struct Draw {
  std::string kind;
  std::map<std::string, double> params;
  std::string structure;  // "" or generator.h's DrawSpec::structure
};

// A tensor drawn before a seeded construction (ProblemSpec::InitDraw at the
// case's dims).
struct InitDraw {
  std::string dist;  // randn or rand
  std::vector<int64_t> shape;
};

// One constructor argument, typed by the spec ("int", "float", "bool",
// "ints", "string"), its value in JSON's matching form.
struct Arg {
  std::string name;
  std::string type;
  json value;
};

// One input of every call of a case.
struct InputSpec {
  std::string name;
  std::string dtype;  // dtype.h's names
  std::vector<int64_t> shape;
  Draw dist;
};

// How a case's module gets its weights (docs/kernelbench.md).
// kDrawn: constructed, then every parameter drawn from kloop's generator
// (`weight_seed`, the spec's overrides); a compiled candidate gets them by
// name. kSeeded: KernelBench's contract: the CPU generator seeded with
// construction_seed() right before the module is built on the CPU, its own
// initialisation kept, then moved to the device; a Python candidate is
// built the same way, so parameters are equal by construction whatever
// they are called and whatever it derives from them.
enum class Construction { kDrawn, kSeeded };

// One test case: a module built with `args`, weights drawn from
// `weight_seed` (with the spec's overrides) or seeded from it
// (`construction`), `calls` calls whose inputs are drawn from `seed` (call
// k's from the stream "call<k>") and scaled.
struct Case {
  int id = 0;
  uint64_t seed = 0;
  uint64_t weight_seed = 0;
  double scale = 1.0;
  std::vector<Arg> args;
  std::vector<InputSpec> inputs;
  int calls = 1;
  std::map<std::string, Draw> weight_overrides;
  bool randomize_identity_params = false;
  Construction construction = Construction::kDrawn;
  // The run's precision as a dtype name (float16, bfloat16): the modules'
  // floating-point parameters and buffers are converted to it once built,
  // as KernelBench's eval does with .to(dtype); "" keeps them as built
  // (fp32). The inputs above are already declared in it.
  std::string precision;
  // Seeded construction: drawn from the seeded generator, in order, before
  // the reference's constructor (upstream draws them; the port keeps none).
  std::vector<InitDraw> init_draws;
  // The seed of a seeded construction: torch's CPU generator (an mt19937)
  // keeps 32 bits of a seed, so the case's seed is folded to them.
  uint64_t construction_seed() const { return (weight_seed ^ (weight_seed >> 32)) & 0xffffffffu; }
  // The seed of strict's non-identity norm values under seeded construction.
  uint64_t norm_seed() const { return (construction_seed() * 2654435761u + 97) & 0xffffffffu; }
};

// ---- commands and replies --------------------------------------------------
// Each command names its reply type (Reply) and its op. Optional fields
// are left out of the JSON when unset.

struct NoReply {};

// Any role: loads the module library (once per process; a reference bundle
// that has only generated may load another entry of itself).
struct LoadReply {
  int arity = 0;
  int api_version = 0;
  json device = json::object();  // DeviceSession::info(): the device as the verdicts record it
};
struct Load {
  using Reply = LoadReply;
  static constexpr const char* kOp = "load";
  std::string library;
  std::string role;  // reference, candidate
  std::string device = "cpu";
  int threads = 0;    // > 0: LibTorch's intra-op threads
  int arity = -1;     // >= 0: the forward's tensor count the problem passes
  std::string entry;  // a reference bundle's entry tag
  // A Python candidate (library: its build's module.py): the host library
  // the worker opens for it and the module search path of its python3.
  std::string python_host;
  std::vector<std::string> python_path;
};

// Reference (or a bare worker): the device's copy bandwidth and GEMM rates.
struct CalibrateReply {
  json device = json::object();
  double copy_bytes = 0;
  double copy_seconds = 0;
  double dram_bytes_per_s = 0;
  int64_t gemm_size = 0;
  double fp32_flops_per_s = 0;
  double tf32_flops_per_s = 0;
  double bf16_flops_per_s = 0;
  double small_kernel_seconds = 0;
};
struct Calibrate {
  using Reply = CalibrateReply;
  static constexpr const char* kOp = "calibrate";
  std::string device = "cuda:0";
  std::optional<int64_t> copy_bytes;
  std::optional<int64_t> gemm_size;
};

// Reference: every case to files (weights, inputs: optional; expected).
struct GeneratedCase {
  int id = 0;
  std::vector<std::vector<std::vector<int64_t>>> output_shapes;  // per call, per output
  std::size_t parameters = 0;
};
struct GenerateReply {
  std::vector<GeneratedCase> cases;
};
struct Generate {
  using Reply = GenerateReply;
  static constexpr const char* kOp = "generate";
  std::string dir;
  std::vector<Case> cases;
  bool weights_and_inputs = true;
};

// Reference: the case's module, its weights written for the candidate
// (and `generate`'s, with weights_and_inputs) at weights_file(dir, id).
std::string weights_file(const std::string& dir, int case_id);
struct PrepareReply {
  std::size_t parameters = 0;
  // A seeded case with randomize_identity_params: the weight shapes of the
  // norm layers that took non-identity values, in registration order.
  std::optional<std::vector<std::vector<int64_t>>> norm_layers;
};
struct Prepare {
  using Reply = PrepareReply;
  static constexpr const char* kOp = "prepare";
  std::string dir;
  Case c;
  // A seeded case: also write its weights file (port parity compares them
  // with upstream's; an evaluation's Python candidate builds its own).
  bool write_weights = false;
};

// Reference: one call's inputs drawn and expected outputs computed, kept.
struct ExpectReply {
  std::vector<std::vector<int64_t>> output_shapes;
  std::optional<json> inputs_exchange;               // tensor_exchange.h's description
  std::optional<std::string> inputs_exchange_error;  // why the inputs could not be published
};
struct Expect {
  using Reply = ExpectReply;
  static constexpr const char* kOp = "expect";
  std::string dir;
  Case c;
  int64_t call = 0;
  bool retain = false;         // keep the outputs for the check after timing
  bool fp64 = false;           // also the fp64 twin's outputs
  std::string publish_inputs;  // "", file or cuda_ipc
};

// Reference: what the candidate published, judged against the expected.
struct ErrorAnalysisRow {
  int output = 0;
  double max_abs_fp64 = 0;
  double rms_fp64 = 0;
  double candidate_max_abs_error = 0;
  double candidate_rms_error = 0;
  double reference_max_abs_error = 0;
  double reference_rms_error = 0;
};
struct JudgeReply {
  std::vector<json> outputs;  // tensor_compare's comparisons (comparison_from_json)
  std::size_t output_count = 0;
  std::size_t expected_count = 0;
  std::optional<std::vector<std::size_t>> mutated_inputs;  // not for `post`
  std::optional<std::vector<ErrorAnalysisRow>> error_analysis;
  std::optional<std::string> fp64_unavailable;
  std::optional<bool> same_as_previous_call;
  std::optional<bool> expected_same_as_previous_call;
  // Every output within the tolerance of the previous call's expected
  // outputs (the stale-output check: a result cached across calls).
  std::optional<bool> matches_previous_expected;
  std::optional<std::vector<bool>> identical;  // per output, bit for bit (when asked: identity)
  // The fp64 twin did not run beside the candidate (why): the outputs wait
  // in the reference's host memory for AnalyzeDeferred.
  std::optional<std::string> fp64_deferred;
};
struct Judge {
  using Reply = JudgeReply;
  static constexpr const char* kOp = "judge";
  json exchange;                    // the trusted rebuild of what the candidate published
  json tolerance;                   // tensor_compare's Tolerance (to_json)
  bool post = false;                // against the retained call's outputs
  bool keep_for_next_call = false;  // for the stale-output check
  bool error_analysis = false;      // rows against the fp64 twin
  bool exact_allowance = false;     // strict's allowance of the reference's own error
  bool identity = false;            // also say which outputs equal the expected bit for bit
  bool defer_analysis = false;      // where the twin did not run, keep the outputs for AnalyzeDeferred
};

// Reference: the error analyses `judge` deferred, run after the candidate's
// process ended (its last command: it frees the calls' tensors first).
struct DeferredAnalysis {
  int64_t case_id = 0;
  int64_t call = 0;
  std::optional<std::vector<ErrorAnalysisRow>> error_analysis;
  std::optional<std::string> fp64_unavailable;  // the twin does not run even alone
  // The candidate's outputs were the fp32 reference's bit for bit: its
  // error against the twin is the reference's (none of them were kept).
  std::optional<bool> identical;
};
struct AnalyzeDeferredReply {
  std::vector<DeferredAnalysis> calls;
};
struct AnalyzeDeferred {
  using Reply = AnalyzeDeferredReply;
  static constexpr const char* kOp = "analyze_deferred";
};

// Candidate: one test call, its outputs and inputs-after published.
struct Alias {
  int output = 0;
  int input = 0;
};
struct WrongDevice {
  int output = 0;
  std::string device;
};
struct RunReply {
  double seconds = 0;
  // A Python candidate built for a seeded case with
  // randomize_identity_params (this call built it): the weight shapes of
  // the norm layers that took non-identity values, in the order it built
  // them. A claim: it decides only whether that check applies.
  std::optional<std::vector<std::vector<int64_t>>> norm_layers;
  std::vector<Alias> aliases;
  std::vector<WrongDevice> wrong_device;
  std::optional<json> exchange;  // what it says it published (untrusted)
  // A Python candidate: the extensions ModelNew asked for after the import
  // (in __init__ or forward), which the build did not make. A claim: the
  // verdict names them (what ran did without them); it decides nothing.
  std::vector<std::string> runtime_builds;
};
struct Run {
  using Reply = RunReply;
  static constexpr const char* kOp = "run";
  std::string dir;
  std::string out_dir;
  Case c;
  int64_t call = 0;
  std::string transport = "file";
  std::optional<json> inputs_exchange;  // the reference's published inputs
};

// Candidate: the last call published again with another transport.
struct ExchangeReply {
  std::optional<json> exchange;
};
struct Export {
  using Reply = ExchangeReply;
  static constexpr const char* kOp = "export";
  std::string transport;
};

// Reference: the degeneracy audit's cases, compared on the device.
struct Conditioning {
  Case c;
  json tolerance;
};
struct ConditioningReply {
  bool finite = true;
  std::optional<std::string> fp64_unavailable;
  std::optional<bool> within_half;
  std::optional<double> max_abs_error;
};
struct AuditReply {
  std::size_t parameters = 0;
  bool zeros_pass = false;
  bool constant = false;
  double max_abs_output = 0;
  int64_t elements = 0;
  std::vector<bool> same;  // per pair
  std::optional<ConditioningReply> conditioning;
};
struct Audit {
  using Reply = AuditReply;
  static constexpr const char* kOp = "audit";
  std::vector<Case> cases;
  json tolerance;
  std::vector<std::pair<std::size_t, std::size_t>> pairs;
  std::optional<Conditioning> conditioning;
};

// Candidate: the timing case's module, warmed up on inputs drawn from the
// case from `warmup_first_call` on (the timed calls get the timer's).
struct TimeSetupReply {
  std::size_t sets = 0;
  double output_bytes = 0;
};
struct TimeSetup {
  using Reply = TimeSetupReply;
  static constexpr const char* kOp = "time_setup";
  std::string dir;
  Case c;
  std::optional<Case> post_case;
  json rules;  // sample_stats' TimingRules (to_json)
  bool tf32 = false;
  std::optional<int64_t> warmup_first_call;  // fresh inputs from this call on
};

// Candidate: one more call on fresh inputs, published for the judge.
struct TimePost {
  using Reply = ExchangeReply;
  static constexpr const char* kOp = "time_post";
  std::string out_dir;
  std::string transport = "file";
  std::optional<std::string> name;
  std::optional<int64_t> call;  // a call of the timing case nobody has seen
};

// Reference: the baseline, timed with TF32 off and (CUDA) on.
struct TimeLoopReply {
  json timing;  // sample_stats' TimingSummary (summary_from_json)
  json wall;
  int throttled_discarded = 0;
  json clock_monitor;
  int64_t persisting_l2_limit = 0;
  int64_t persisting_l2_window_bytes = 0;
};
struct BaselineReply {
  std::size_t parameters = 0;
  double input_bytes = 0;
  json device = json::object();
  TimeLoopReply fp32;
  std::optional<TimeLoopReply> tf32;
};
struct Baseline {
  using Reply = BaselineReply;
  static constexpr const char* kOp = "baseline";
  Case c;
  json rules;
};

// Either role: the activity trace and, when asked, hardware counters.
struct ProfileReply {
  uint64_t flush_bytes = 0;              // the size of kloop's markers in the trace
  // The module's own code: its path as the dynamic loader names it, and
  // folders (ending in '/') whose every binary is the module's.
  std::vector<std::string> own_objects;
  std::optional<json> trace;             // profiler's records (profiler/records.h)
  std::vector<uint64_t> stream_done_ns;  // per traced call: when kloop's stream had finished
  std::optional<std::string> trace_unavailable;
  std::optional<json> metrics;
};
struct Profile {
  using Reply = ProfileReply;
  static constexpr const char* kOp = "profile";
  std::string dir;
  Case c;
  bool counters = false;
  std::optional<int> calls;           // traced calls (3)
  std::optional<int64_t> first_call;  // fresh inputs for every profiled call
};

// ---- the trusted timer (the reference's worker) and the candidate's side ----
// (timer_link.h: the shared blocks and the handshake; docs/protocols.md: Timing)

// One tensor in the data block.
struct TensorSlot {
  std::string dtype;
  std::vector<int64_t> shape;
  uint64_t offset = 0;
  uint64_t bytes = 0;
};
// The data block: the timed call's inputs, then its outputs, then (GPU) the
// seal kloop's small kernel writes in each timed call (timer_link.h).
struct TimerLayout {
  std::vector<TensorSlot> inputs;
  std::vector<TensorSlot> outputs;
  uint64_t bytes = 0;
  std::optional<TensorSlot> seal;
};

// What the timer subtracts or allows, each the least of its runs: drawing a
// call's inputs and flushing L2 (prep), a copy of its outputs in device (or
// host) memory (copy), and the handshake around a call that does nothing,
// from go to called (window) and from called to copied (tail).
struct TimerFloors {
  double prep = 0;
  double copy = 0;
  double window = 0;
  double tail = 0;
  // GPU: what the device's switch from one process's context to the other's
  // adds to the timer's spans before go (prep) and to a capture: measured
  // with kloop's own small kernels on both sides (TimerHandoff's `work`).
  double prep_switch = 0;
  double capture_switch = 0;
  // GPU: how far apart the handshake's windows with kernels lie (the 90th
  // less the 10th percentile): a call's time within twice this of the floor
  // cannot be told from the handshake's own jitter.
  double resolution = 0;
  // GPU: from a call's copied to the next call's armed, as the timer sees
  // them: the candidate's worker's own steps between two calls.
  double between = 0;
  // GPU: what an honest call counts outside its window on average (the
  // handshake's calls against these floors), allowed for by the finding.
  double outside_noise = 0;
};

// Reference, before any code of the candidate's runs: the control block
// (its descriptor comes with the reply) and the floors it can measure alone
// for the case's sizes.
struct TimerCalibrateReply {
  TimerFloors floors;
  uint64_t control_bytes = 0;
};
struct TimerCalibrate {
  using Reply = TimerCalibrateReply;
  static constexpr const char* kOp = "timer_calibrate";
  Case c;
  bool l2_flush = true;
  int samples = 20;
};

// Reference: the timer's half of `samples` calls that do nothing, beside the
// candidate's worker serving them before its module is loaded (TimerServe
// with `empty`): the handshake's own cost (the floors' window and tail).
struct TimerHandoffReply {
  TimerFloors floors;
  std::vector<double> window;
  std::vector<double> tail;
  std::vector<double> prep;     // `work`: the timer's small kernel before go
  std::vector<double> capture;  // `work`: the timer's small copy after copied
  std::vector<double> between;  // GPU: copied to the next call's armed
  double alone_copy = 0;        // `work`: the small copy with no switch around it (the window's floor keeps the small kernel)
};
struct TimerHandoff {
  using Reply = TimerHandoffReply;
  static constexpr const char* kOp = "timer_handoff";
  int samples = 0;
  uint32_t first = 1;       // the first call's sequence number
  int64_t deadline_ms = 0;  // per call
  int64_t candidate_pid = 0;  // the CPU: whose processes' quiet ends a call (as in TimerBatch)
  // GPU: both sides run a small kernel where a timed call runs its work
  // (the timer before go and after copied, the candidate's worker between
  // go and called and between called and copied), so the floors hold the
  // device's switches between the two contexts as the timed calls meet them.
  bool work = false;
};

// Reference: the data block for the timing case (prepared: its module
// computes the checked calls); its descriptor comes with the reply.
struct TimerOpenReply {
  TimerLayout layout;
};
struct TimerOpen {
  using Reply = TimerOpenReply;
  static constexpr const char* kOp = "timer_open";
  Case c;
};

// Reference: one batch of timed calls, each on inputs drawn for it alone
// (call `first` + i of the timing case). Calls in `check` are captured once
// the candidate says its outputs are copied and compared with the
// reference's; calls in `precision` also against the fp64 twin.
struct TimedSample {
  double seconds = 0;  // the call's time as the timer counts it (below)
  double window = 0;   // go to called, as measured
  double tail = 0;     // called to copied (GPU: as measured; CPU: the candidate's CPU time meanwhile)
  double prep = 0;     // drawing and flushing before go (GPU: as measured; CPU: the candidate's CPU time meanwhile)
  double outside = 0;  // what of the candidate's work fell outside its window, added to `seconds`
  std::optional<double> capture;  // a checked call: the copy of its outputs (GPU) or the candidate's CPU time during it
  double between = 0;  // GPU: the call before's copied to this call's armed, as seen (0 when the timer was busy between)
  bool throttled = false;
  // GPU: the timer's own thread was switched out during the call, so its
  // spans hold the host's time too: nothing of them is counted as outside.
  bool unwatched = false;
};
struct TimedCheck {
  int sample = 0;
  bool passed = false;
  std::string message;
  std::vector<json> outputs;  // tensor_compare's comparisons
  std::optional<std::vector<ErrorAnalysisRow>> error_analysis;
  std::optional<std::string> fp64_unavailable;
};
struct TimerBatchReply {
  std::vector<TimedSample> samples;
  std::vector<TimedCheck> checks;
  std::optional<std::string> aborted;  // why the batch stopped early (the candidate's side)
  json clock_monitor;
  double check_seconds = 0;  // the checks' own time (the reference's forwards and comparisons)
  int processes_ended = 0;  // CPU: processes of the candidate's that ended during its calls (their work is no longer exact)
  std::optional<std::string> ended_process;  // the first of them: its name and pid
  int unsettled = 0;        // CPU: calls whose end still found a thread of the candidate's on the CPU (kSettleMs on)
  bool forged = false;      // `aborted` because the candidate's side stored a word of the handshake ahead of its call
};
struct TimerBatch {
  using Reply = TimerBatchReply;
  static constexpr const char* kOp = "timer_batch";
  int samples = 0;
  uint32_t first = 1;
  bool l2_flush = true;
  std::vector<int> check;
  std::vector<int> precision;
  json tolerance;
  int64_t candidate_pid = 0;  // CPU: whose CPU time counts (its process tree)
  int threads = 1;            // CPU: the threads the candidate may run on
  int64_t deadline_ms = 0;    // per call
};

// Either role: the data block goes.
struct TimerClose {
  using Reply = NoReply;
  static constexpr const char* kOp = "timer_close";
};

// Candidate: maps a block the reference made (its descriptor comes with the
// command); "control" may come before `load`.
struct TimerAttach {
  using Reply = NoReply;
  static constexpr const char* kOp = "timer_attach";
  std::string block;  // control or data
  std::string device = "cpu";
  uint64_t bytes = 0;
  std::optional<TimerLayout> layout;  // data
};

// Candidate: serves `samples` timed calls (timer_link.h's handshake) with
// the module of time_setup on the data block's inputs; `empty` calls do
// nothing (the handoff's floors, before the module is loaded).
struct TimerServeReply {
  int served = 0;
  std::optional<std::string> note;  // what it could not copy (its word; the checks judge)
  // The persisting-L2 carve-out its process saw set around the calls (its
  // word too: the worker clears it before each call).
  int64_t persisting_l2_limit = 0;
  int64_t persisting_l2_window_bytes = 0;
};
struct TimerServe {
  using Reply = TimerServeReply;
  static constexpr const char* kOp = "timer_serve";
  int samples = 0;
  uint32_t first = 1;
  bool empty = false;
  bool work = false;  // with `empty`: TimerHandoff's `work` (kloop's small kernels in place of forward and the copy)
};

struct Exit {
  using Reply = NoReply;
  static constexpr const char* kOp = "exit";
};

// Any role, before anything else: answers once the worker's process is up
// (its libraries loaded and initialised), so a worker started early can be
// known idle before kloop measures beside it.
struct Ready {
  using Reply = NoReply;
  static constexpr const char* kOp = "ready";
};

// ---- serialisation -----------------------------------------------------------

#define KLOOP_WIRE_TYPE(T)           \
  void to_json(json& j, const T& v); \
  void from_json(const json& j, T& v);
KLOOP_WIRE_TYPE(Draw)
KLOOP_WIRE_TYPE(InitDraw)
KLOOP_WIRE_TYPE(Arg)
KLOOP_WIRE_TYPE(InputSpec)
KLOOP_WIRE_TYPE(Case)
KLOOP_WIRE_TYPE(NoReply)
KLOOP_WIRE_TYPE(Load)
KLOOP_WIRE_TYPE(LoadReply)
KLOOP_WIRE_TYPE(Calibrate)
KLOOP_WIRE_TYPE(CalibrateReply)
KLOOP_WIRE_TYPE(GeneratedCase)
KLOOP_WIRE_TYPE(Generate)
KLOOP_WIRE_TYPE(GenerateReply)
KLOOP_WIRE_TYPE(Prepare)
KLOOP_WIRE_TYPE(PrepareReply)
KLOOP_WIRE_TYPE(Expect)
KLOOP_WIRE_TYPE(ExpectReply)
KLOOP_WIRE_TYPE(ErrorAnalysisRow)
KLOOP_WIRE_TYPE(Judge)
KLOOP_WIRE_TYPE(JudgeReply)
KLOOP_WIRE_TYPE(DeferredAnalysis)
KLOOP_WIRE_TYPE(AnalyzeDeferredReply)
KLOOP_WIRE_TYPE(AnalyzeDeferred)
KLOOP_WIRE_TYPE(Alias)
KLOOP_WIRE_TYPE(WrongDevice)
KLOOP_WIRE_TYPE(Run)
KLOOP_WIRE_TYPE(RunReply)
KLOOP_WIRE_TYPE(Export)
KLOOP_WIRE_TYPE(ExchangeReply)
KLOOP_WIRE_TYPE(Conditioning)
KLOOP_WIRE_TYPE(ConditioningReply)
KLOOP_WIRE_TYPE(Audit)
KLOOP_WIRE_TYPE(AuditReply)
KLOOP_WIRE_TYPE(TimeSetup)
KLOOP_WIRE_TYPE(TimeSetupReply)
KLOOP_WIRE_TYPE(TimePost)
KLOOP_WIRE_TYPE(TimeLoopReply)
KLOOP_WIRE_TYPE(Baseline)
KLOOP_WIRE_TYPE(BaselineReply)
KLOOP_WIRE_TYPE(Profile)
KLOOP_WIRE_TYPE(ProfileReply)
KLOOP_WIRE_TYPE(TensorSlot)
KLOOP_WIRE_TYPE(TimerLayout)
KLOOP_WIRE_TYPE(TimerFloors)
KLOOP_WIRE_TYPE(TimerCalibrate)
KLOOP_WIRE_TYPE(TimerCalibrateReply)
KLOOP_WIRE_TYPE(TimerHandoff)
KLOOP_WIRE_TYPE(TimerHandoffReply)
KLOOP_WIRE_TYPE(TimerOpen)
KLOOP_WIRE_TYPE(TimerOpenReply)
KLOOP_WIRE_TYPE(TimedSample)
KLOOP_WIRE_TYPE(TimedCheck)
KLOOP_WIRE_TYPE(TimerBatch)
KLOOP_WIRE_TYPE(TimerBatchReply)
KLOOP_WIRE_TYPE(TimerClose)
KLOOP_WIRE_TYPE(TimerAttach)
KLOOP_WIRE_TYPE(TimerServe)
KLOOP_WIRE_TYPE(TimerServeReply)
KLOOP_WIRE_TYPE(Exit)
KLOOP_WIRE_TYPE(Ready)
#undef KLOOP_WIRE_TYPE

// A command as its line's JSON: the struct's fields and its op.
template <class Command>
json command_json(const Command& c) {
  json j = c;
  j["op"] = Command::kOp;
  return j;
}

// A failed reply: what went wrong and the verdict class it maps to
// (load_error, runtime_error, exchange_error).
struct Status {
  std::string error_class;
  std::string message;
};

json ok_json(const json& payload);  // {"ok": true, ...payload}
json failure_json(const Status& s);

// A reply that is not what its command's reply must be.
struct MalformedReply : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A reply line's JSON read as `Reply`, or as the failure it reports.
template <class Reply>
struct Outcome {
  std::optional<Status> failure;  // set: the command failed
  Reply reply;                    // meaningful when failure is not set
  bool ok() const { return !failure; }
  const std::string& message() const {
    static const std::string none;
    return failure ? failure->message : none;
  }
  const std::string& error_class() const {
    static const std::string none;
    return failure ? failure->error_class : none;
  }
};

// Reads `j` (an untrusted reply object) as Outcome<Reply>; throws
// MalformedReply when `ok` is missing or not a boolean, when a failure has
// no string message, or when a field of the reply has the wrong type.
Status read_failure(const json& j);
template <class Reply>
Outcome<Reply> read_reply(const json& j) {
  Outcome<Reply> out;
  const auto ok = j.find("ok");
  if (ok == j.end() || !ok->is_boolean()) throw MalformedReply("a reply without a boolean 'ok'");
  if (!ok->get<bool>()) {
    out.failure = read_failure(j);
    return out;
  }
  try {
    out.reply = j.get<Reply>();
  } catch (const json::exception& e) {
    throw MalformedReply(std::string("a reply kloop cannot read: ") + e.what());
  }
  return out;
}

}  // namespace kloop::wire
