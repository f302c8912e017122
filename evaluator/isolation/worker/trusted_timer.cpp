// The trusted timer: the reference's worker times the candidate's calls
// from its own process (docs/protocols.md: Timing). Nothing the candidate's process
// says enters a timing: the timer draws each timed call's inputs into the
// shared data block, flushes L2, marks the start, lets the call go, and
// marks the end when the candidate's stream (GPU) or thread (CPU) says the
// call has returned (on a GPU the timer watches for that from its host,
// with nothing of its own on the device while the call runs); the outputs the candidate then copies out are captured
// into the timer's own memory for the calls the driver chose to check, and
// compared there with the reference's outputs on the same inputs.
//
// What it subtracts is what the candidate cannot shorten: the handshake's
// own cost, measured before the candidate's module was loaded (the floors'
// window). What it adds is candidate work outside the window: on a GPU,
// time the timer's own spans (drawing and flushing; the candidate's copy of
// its outputs; the capture), from the host's launch to the host's seeing
// them done, took beyond their floors, which only another context's work on
// the device can cause (the timer's work waits for it); on the CPU, the CPU time the
// kernel accounted to the candidate's processes outside the window.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>
#include <time.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <fstream>
#include <functional>
#include <thread>

#include "base/process.h"
#include "evaluator/isolation/tensor_bridge.h"
#include "evaluator/isolation/worker/worker.h"

#ifdef KLOOP_WITH_CUDA
#include <cuda_runtime_api.h>

#include "base/cuda_check.h"
#endif

namespace kloop::worker {
namespace {

using timer::Word;

// Honest spans vary by a few percent; what a span takes beyond its floor,
// less this slack, is counted as the candidate's.
constexpr double kSlackFraction = 0.05;
double slack_seconds(bool cuda) { return cuda ? 5e-6 : 50e-6; }
// GPU: what the worker's steps between two calls may take beyond their
// floor (host steps on both sides) before the rest is counted as the call's.
constexpr double kBetweenSlackFraction = 0.2;
constexpr double kBetweenSlack = 20e-6;
[[maybe_unused]] double beyond(double seen, double floor, bool cuda) {
  return std::max(0.0, seen - floor * (1 + kSlackFraction) - slack_seconds(cuda));
}
// The timer's wait for a call to return spins this long before it sleeps:
// a sleeping timer would add its own wake-up to every short call.
constexpr std::chrono::microseconds kSpinOnCall{200};
// The CPU: how long a call's end waits for the candidate's threads to leave
// the CPU; a thread that never does makes each call's window this long.
constexpr int kSettleMs = 20;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

constexpr uint64_t kAlign = 256;
uint64_t aligned(uint64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// The data block's layout: the case's inputs, then `outputs`' shapes, then
// (GPU: `seal`) the rows kloop's small kernel seals in each timed call.
wire::TimerLayout layout_for(const wire::Case& c, const std::vector<at::Tensor>& outputs, bool seal) {
  wire::TimerLayout l;
  auto add = [&](std::vector<wire::TensorSlot>& slots, const std::string& dtype, const std::vector<int64_t>& shape) {
    const auto d = parse_dtype(dtype);
    if (!d) throw WorkerError{"runtime_error", "the timed calls: unknown dtype " + dtype};
    wire::TensorSlot s{dtype, shape, l.bytes, 0};
    s.bytes = static_cast<uint64_t>(shape_numel(shape)) * dtype_size(*d);
    l.bytes += aligned(std::max<uint64_t>(s.bytes, 1));
    slots.push_back(std::move(s));
  };
  for (const auto& in : c.inputs) add(l.inputs, in.dtype, in.shape);
  for (const auto& o : outputs) add(l.outputs, dtype_name(dtype_of(o)), o.sizes().vec());
  if (seal) {
    std::vector<wire::TensorSlot> rows;
    add(rows, "float32", {timer::kSealRows, timer::kSealWidth});
    l.seal = rows.front();
  }
  return l;
}

uint64_t output_bytes(const std::vector<at::Tensor>& ts) {
  uint64_t n = 0;
  for (const auto& t : ts) n += static_cast<uint64_t>(t.numel()) * t.element_size();
  return n;
}

// How a watch of the candidate's side ended.
enum class Seen { kDone, kAbort, kAhead, kLate, kGone };

std::string why_stopped(Seen seen, const std::string& what, int call) {
  switch (seen) {
    case Seen::kAbort: return "the candidate's worker stopped during the timed calls";
    case Seen::kAhead:
      return "the candidate's side stored `" + what + "` ahead of timed call " + std::to_string(call) +
             " of the batch (kloop's worker stores each call's own number): a forged handshake";
    case Seen::kGone: return "the candidate's process ended during timed call " + std::to_string(call) + " of the batch";
    case Seen::kLate: return "the candidate did not finish timed call " + std::to_string(call) + " of the batch in time";
    case Seen::kDone: break;
  }
  return "";
}

#ifdef KLOOP_WITH_CUDA
// Events of the timer's spans, made once per batch.
class Events {
 public:
  explicit Events(std::size_t n) : e_(n, nullptr) {
    for (auto& e : e_) KLOOP_CUDA_CHECK(cudaEventCreate(&e), "the timer's events");
  }
  ~Events() {
    for (auto e : e_) {
      if (e) cudaEventDestroy(e);
    }
  }
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;
  cudaEvent_t operator[](std::size_t i) const { return e_[i]; }
  static double seconds(cudaEvent_t a, cudaEvent_t b) {
    float ms = 0;
    KLOOP_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b), "reading the timer's events");
    return ms * 1e-3;
  }

 private:
  std::vector<cudaEvent_t> e_;
};

// Whether the candidate's process (its sandbox's first process) is still
// there: a timer waiting for a call of a process that died stops early.
bool alive(int64_t pid) {
  if (pid <= 0) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z' && line[close + 2] != 'X';
}


// The timer's watches from its host (a GPU's words, its own events): spin
// for the first kSpinFor, then look again after 1/2000 of the time waited
// so far (at most 1 ms), so a late look adds at most 0.05% to a long call;
// every 100 ms the deadline and whether the candidate's process is still
// there. `ready` says kDone, kAbort or kAhead, or nullopt to go on.
constexpr auto kSpinFor = std::chrono::milliseconds(5);
template <class Ready>
Seen watch(Ready ready, timer::Deadline deadline, int64_t pid) {
  const auto start = Clock::now();
  auto last_look = start;
  for (;;) {
    if (const std::optional<Seen> seen = ready()) return *seen;
    const auto now = Clock::now();
    if (now - last_look > std::chrono::milliseconds(100)) {
      if (now > deadline) return Seen::kLate;
      if (!alive(pid)) return Seen::kGone;
      last_look = now;
    }
    const auto waited = now - start;
    if (waited > kSpinFor) {
      std::this_thread::sleep_for(std::min<Clock::duration>(waited / 2000, std::chrono::milliseconds(1)));
    }
  }
}

// Until the candidate's worker stores `seq` into `w` (or kAbort; a later
// number than the call's is a forged handshake: kloop's worker stores each
// call's own). `at`: when the timer saw it.
Seen watch_word(SharedBlock& control, Word w, uint32_t seq, timer::Deadline deadline, int64_t pid,
                Clock::time_point* at = nullptr) {
  return watch(
      [&]() -> std::optional<Seen> {
        const uint32_t v = timer::host_load(control, w);
        if (v == seq) {
          if (at) *at = Clock::now();
          return Seen::kDone;
        }
        if (v == timer::kAbort) return Seen::kAbort;
        if (v > seq) return Seen::kAhead;
        return std::nullopt;
      },
      deadline, pid);
}

// Until the timer's own event `e` has completed.
Seen watch_event(cudaEvent_t e, timer::Deadline deadline, int64_t pid) {
  return watch(
      [&]() -> std::optional<Seen> {
        const cudaError_t r = cudaEventQuery(e);
        if (r == cudaSuccess) return Seen::kDone;
        if (r != cudaErrorNotReady) KLOOP_CUDA_CHECK(r, "the timer's stream");
        return std::nullopt;
      },
      deadline, pid);
}

#endif


// The CPU time the kernel accounted to a process tree (the candidate's
// sandbox): each process's CPU-time clock (clock_getcpuclockid), which
// keeps the time of its threads that ended, plus its reaped children's
// ticks from its stat file. A thread's account is brought up to date only
// when it leaves the CPU (or at a tick), so a reading is whole only while
// every thread is off the CPU: quiet() tells that from the threads' states.
// Processes and threads are found once per scan, so a reading between the
// calls costs microseconds, not a walk of /proc.
class CpuMeter {
 public:
  explicit CpuMeter(pid_t root) : root_(root), hz_(sysconf(_SC_CLK_TCK)) { scan(); }
  ~CpuMeter() { close_all(); }
  CpuMeter(const CpuMeter&) = delete;
  CpuMeter& operator=(const CpuMeter&) = delete;

  // Processes found again (new children, exited ones).
  void scan() {
    close_all();
    std::vector<pid_t> todo{root_};
    std::vector<pid_t> seen{root_};
    while (!todo.empty() && seen.size() < 4096) {
      const pid_t pid = todo.back();
      todo.pop_back();
      const std::string proc = "/proc/" + std::to_string(pid);
      clockid_t clock{};
      if (clock_getcpuclockid(pid, &clock) != 0) continue;
      const int stat = open((proc + "/stat").c_str(), O_RDONLY | O_CLOEXEC);
      if (stat < 0) continue;
      std::ifstream comm(proc + "/comm");
      std::string name;
      std::getline(comm, name);
      processes_.push_back({clock, stat, name + " (pid " + std::to_string(pid) + ")"});
      DIR* dir = opendir((proc + "/task").c_str());
      if (!dir) continue;
      while (const dirent* e = readdir(dir)) {
        if (e->d_name[0] == '.') continue;
        const int task = open((proc + "/task/" + e->d_name + "/stat").c_str(), O_RDONLY | O_CLOEXEC);
        if (task >= 0) threads_.push_back(task);
        std::ifstream children(proc + "/task/" + e->d_name + "/children");
        long long child = 0;
        while (children >> child) {
          if (std::find(seen.begin(), seen.end(), static_cast<pid_t>(child)) == seen.end()) {
            seen.push_back(static_cast<pid_t>(child));
            todo.push_back(static_cast<pid_t>(child));
          }
        }
      }
      closedir(dir);
    }
    if (processes_.empty()) {
      throw WorkerError{"runtime_error", "the timer cannot read the candidate's CPU time"};
    }
  }

  // Seconds: every process's CPU time and its reaped children's.
  double read() {
    char buf[1024];
    long long ns = 0;
    long long ticks = 0;
    int gone = 0;
    for (const Process& p : processes_) {
      timespec ts{};
      if (clock_gettime(p.clock, &ts) != 0) {  // a process that ended: its time is no longer anywhere exact
        ++gone;
        if (ended_name_.empty()) ended_name_ = p.name;
        continue;
      }
      ns += static_cast<long long>(ts.tv_sec) * 1'000'000'000LL + ts.tv_nsec;
      const ssize_t n = pread(p.stat, buf, sizeof buf - 1, 0);
      if (n <= 0) continue;
      buf[n] = 0;
      const char* c = std::strrchr(buf, ')');  // the name may hold spaces
      if (!c) continue;
      // After the name: state, then fields 4.. ; cutime and cstime are fields 16 and 17.
      int field = 2;
      for (++c; *c; ++c) {
        if (*c != ' ') continue;
        ++field;
        if (field == 16 || field == 17) ticks += std::atoll(c + 1);
      }
    }
    ended_ = std::max(ended_, gone);
    return static_cast<double>(ns) * 1e-9 + (hz_ > 0 ? static_cast<double>(ticks) / static_cast<double>(hz_) : 0);
  }

  // Whether every thread found by the last scan is off the CPU (not R:
  // asleep, stopped or gone).
  bool quiet() const {
    char buf[1024];
    for (int f : threads_) {
      const ssize_t n = pread(f, buf, sizeof buf - 1, 0);
      if (n <= 0) continue;
      buf[n] = 0;
      const char* c = std::strrchr(buf, ')');
      if (c && c[1] == ' ' && c[2] == 'R') return false;
    }
    return true;
  }
  // Waits (spinning) until quiet(), or until `until`: false then.
  bool settle(Clock::time_point until) const {
    while (!quiet()) {
      if (Clock::now() > until) return false;
    }
    return true;
  }

  // Processes gone since the last scan: the CPU time they spent since then
  // cannot be told exactly (a process can hide work that way).
  int ended() const { return ended_; }
  const std::string& ended_name() const { return ended_name_; }

 private:
  struct Process {
    clockid_t clock;
    int stat;
    std::string name;
  };
  void close_all() {
    ended_ = 0;
    for (const Process& p : processes_) ::close(p.stat);
    for (int f : threads_) ::close(f);
    processes_.clear();
    threads_.clear();
  }
  pid_t root_;
  long hz_;
  int ended_ = 0;
  std::string ended_name_;
  std::vector<Process> processes_;
  std::vector<int> threads_;
};

#ifdef KLOOP_WITH_CUDA
// How often the kernel has switched this thread out for another: a span of
// the timer's host clock that holds such a switch holds the host's time.
long involuntary_switches() {
  rusage r{};
  if (getrusage(RUSAGE_THREAD, &r) != 0) return -1;
  return r.ru_nivcsw;
}

// One GPU call's spans: the timer's own work (prep, capture) as its events
// saw it on the device, the rest on its host's clock.
struct CallSpans {
  double prep = 0;                // `before_go` on the device
  double window = 0;              // go until called seen
  double tail = 0;                // called until copied seen
  std::optional<double> capture;  // `after` on the device
  Clock::time_point armed, copied;  // when the timer saw them
  bool preempted = false;           // the timer's thread was switched out meanwhile
};

// From call `before`'s copied to call `next`'s armed, as the timer saw them:
// the candidate's worker's own steps between two calls.
double between(const CallSpans& before, const CallSpans& next) {
  return std::chrono::duration<double>(next.armed - before.copied).count();
}
struct CallEnd {
  Seen seen = Seen::kDone;
  std::string word;  // whose watch ended it
};

// The timer's part of GPU call `seq` (timer_link.h), the same for the
// handshake's calls and the timed ones, so that the floors measure what the
// timed calls pay: once the candidate's worker has armed the call (its own
// steps before it are done), `before_go` on `stream` (drawing and flushing),
// seen done from the host; go; called and copied seen; then `after` (a
// capture), seen done. Between go and copied the timer has nothing on the
// device, so the device runs the candidate's context alone. `ev`: four
// events of the timer's.
CallEnd host_call(SharedBlock& control, cudaStream_t stream, const Events& ev, uint32_t seq, timer::Deadline deadline,
                  int64_t pid, const std::function<void()>& before_go, const std::function<void()>& after,
                  CallSpans& spans) {
  auto seconds = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
  const long switched = involuntary_switches();
  if (Seen s = watch_word(control, Word::kArmed, seq, deadline, pid, &spans.armed); s != Seen::kDone) return {s, "armed"};
  KLOOP_CUDA_CHECK(cudaEventRecord(ev[0], stream), "the timer's events");
  before_go();
  KLOOP_CUDA_CHECK(cudaEventRecord(ev[1], stream), "the timer's events");
  if (Seen s = watch_event(ev[1], deadline, pid); s != Seen::kDone) return {s, ""};
  const auto go = Clock::now();
  timer::host_store(control, Word::kGo, seq);
  Clock::time_point called;
  if (Seen s = watch_word(control, Word::kCalled, seq, deadline, pid, &called); s != Seen::kDone) return {s, "called"};
  if (Seen s = watch_word(control, Word::kCopied, seq, deadline, pid, &spans.copied); s != Seen::kDone) {
    return {s, "copied"};
  }
  spans.prep = Events::seconds(ev[0], ev[1]);
  spans.window = seconds(go, called);
  spans.tail = seconds(called, spans.copied);
  if (after) {
    KLOOP_CUDA_CHECK(cudaEventRecord(ev[2], stream), "the timer's events");
    after();
    KLOOP_CUDA_CHECK(cudaEventRecord(ev[3], stream), "the timer's events");
    if (Seen s = watch_event(ev[3], deadline, pid); s != Seen::kDone) return {s, ""};
    spans.capture = Events::seconds(ev[2], ev[3]);
  }
  spans.preempted = involuntary_switches() != switched;
  return {};
}

// The timer's watches sleep between looks after kSpinFor: with the
// default slack of 50 us a look could come that much late.
void tighten_timer_slack() { prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL); }
#endif

}  // namespace

// Tensors over a shared block's slots (either side; the layout is the
// timer's, checked against the block it came with).
std::vector<at::Tensor> block_views(const SharedBlock& block, const std::vector<wire::TensorSlot>& slots,
                                 const std::string& device) {
  std::vector<at::Tensor> out;
  for (const auto& s : slots) {
    const auto d = parse_dtype(s.dtype);
    if (!d || s.offset > block.size() || s.bytes > block.size() - s.offset ||
        static_cast<uint64_t>(shape_numel(s.shape)) * dtype_size(*d) != s.bytes) {
      throw WorkerError{"runtime_error", "the timed calls' layout does not fit its block"};
    }
    out.push_back(at::from_blob(block.data() + s.offset, s.shape,
                                at::TensorOptions().dtype(scalar_type_of(*d)).device(at::Device(device))));
  }
  return out;
}

// Before any code of the candidate's runs: the control block, and what the
// timer's own spans cost at this case's sizes with the device to itself.
wire::TimerCalibrateReply Worker::timer_calibrate(const wire::TimerCalibrate& cmd) {
  if (role_ != "reference") throw WorkerError{"runtime_error", "the timer is the reference's"};
  at::AutoGradMode no_grad(false);
  release_call_state();
  const wire::Case& c = cmd.c;
  const std::string label = "case " + std::to_string(c.id);
  auto module = reference_module(c, label);
  auto args = draw_args(c, 0);
  std::vector<at::Tensor> outputs;
  for (const auto& o : module->forward(args)) outputs.push_back(o.contiguous());
  synchronize();
  args.clear();
  module.reset();
  set_phase("timer: calibrating its own spans for " + label);
  const wire::TimerLayout layout = layout_for(c, outputs, false);
  auto data = SharedBlock::create(device_, layout.bytes);
  const auto inputs = block_views(*data, layout.inputs, device_);
  const auto outs = block_views(*data, layout.outputs, device_);
  std::vector<at::Tensor> captured;
  for (const auto& o : outs) captured.push_back(at::empty_like(o));
  wire::TimerCalibrateReply reply;
  const int n = std::max(3, cmd.samples);
  double prep = 1e9, copy = 1e9;
  const bool cuda = session_->cuda();
  for (int i = 0; i < n; ++i) {
#ifdef KLOOP_WITH_CUDA
    if (cuda) {
      Events e(4);
      auto* stream = static_cast<cudaStream_t>(session_->stream());
      KLOOP_CUDA_CHECK(cudaEventRecord(e[0], stream), "the timer's events");
      draw_into(inputs, c, int64_t{1} << 41 | i, stream);
      if (cmd.l2_flush) session_->flush_l2_async();
      KLOOP_CUDA_CHECK(cudaEventRecord(e[1], stream), "the timer's events");
      // A copy of outputs just written (warm, as the candidate's copy is).
      for (std::size_t k = 0; k < outs.size(); ++k) outs[k].copy_(outputs[k]);
      KLOOP_CUDA_CHECK(cudaEventRecord(e[2], stream), "the timer's events");
      for (std::size_t k = 0; k < outs.size(); ++k) captured[k].copy_(outs[k]);
      KLOOP_CUDA_CHECK(cudaEventRecord(e[3], stream), "the timer's events");
      synchronize();
      prep = std::min(prep, Events::seconds(e[0], e[1]));
      copy = std::min(copy, Events::seconds(e[2], e[3]));
      continue;
    }
#endif
    for (std::size_t k = 0; k < outs.size(); ++k) outs[k].copy_(outputs[k]);
    const auto t0 = Clock::now();
    for (std::size_t k = 0; k < outs.size(); ++k) captured[k].copy_(outs[k]);
    copy = std::min(copy, seconds_since(t0));
    prep = 0;  // the CPU counts the candidate's CPU time while it draws, not the drawing's
  }
  (void)cuda;
  reply.floors.prep = prep;
  reply.floors.copy = copy;
  timer_floors_ = reply.floors;
  timer_calibrated_case_ = c;
  timer_calibrated_layout_ = layout;
  timer_calibrated_flush_ = cmd.l2_flush;
  timer_control_ = SharedBlock::create(device_, timer::kControlBytes, SharedBlock::Place::kHost);
  reply.control_bytes = timer::kControlBytes;
  export_block(*timer_control_);
  return reply;
}

// The timer's half of calls that do nothing: the handshake's own cost
// (the candidate's worker serves them before its module is loaded).
wire::TimerHandoffReply Worker::timer_handoff(const wire::TimerHandoff& cmd) {
  if (role_ != "reference" || !timer_control_) throw WorkerError{"runtime_error", "timer_handoff before timer_calibrate"};
  set_phase("timer: the handshake's own cost");
  SharedBlock& control = *timer_control_;
  const auto deadline = Clock::now() + std::chrono::milliseconds(std::max<int64_t>(cmd.deadline_ms, 1000));
  wire::TimerHandoffReply reply;
  const int n = std::max(1, cmd.samples);
#ifdef KLOOP_WITH_CUDA
  if (session_->cuda()) {
    auto* stream = static_cast<cudaStream_t>(session_->stream());
    tighten_timer_slack();
    Events done(4);
    // With `work`, the timer draws the case's inputs and flushes L2 before
    // go, and captures the outputs after copied, at the case's sizes, as a
    // timed call does (a block of its own like the timed calls'): the
    // switches between the two contexts grow with what the timer has on the
    // device while the candidate's side waits there, so kloop's small
    // kernels in their place left most of them out (H100: a 1.8 us ReLU
    // timed 12.4 us under strict, 4.8 us without the drawing and flush).
    std::unique_ptr<SharedBlock> data;
    std::vector<at::Tensor> inputs, outs, captured;
    at::Tensor small, small_out;  // the candidate's side's small kernel and copy, alone (below)
    if (cmd.work) {
      data = SharedBlock::create(device_, timer_calibrated_layout_.bytes);
      inputs = block_views(*data, timer_calibrated_layout_.inputs, device_);
      outs = block_views(*data, timer_calibrated_layout_.outputs, device_);
      for (const auto& o : outs) captured.push_back(at::empty_like(o));
      small = at::zeros({64}, at::TensorOptions().dtype(at::kFloat).device(at::Device(device_)));
      small_out = at::empty_like(small);
    }
    // Every other call with work captures its outputs, as a checked timed
    // call does: the capture's floor from those, and `between` from the
    // calls after one that did not capture, as the timed calls count it
    // (the worker's next `armed` waits behind the timer's copy: with a
    // capture after every call the floor held it, 5.1 ms at 19_ReLU's
    // upstream size on an H100, and work after `copied` went uncounted).
    CallSpans last;
    bool last_captured = false;
    for (int i = 0; i < n; ++i) {
      const uint32_t seq = cmd.first + static_cast<uint32_t>(i);
      const bool capture = cmd.work && i % 2 == 1;
      CallSpans spans;
      const CallEnd end = host_call(
          control, stream, done, seq, deadline, cmd.candidate_pid,
          [&] {
            if (!cmd.work) return;
            draw_into(inputs, timer_calibrated_case_, int64_t{1} << 42 | i, stream);
            small.fill_(-1.0);  // where a timed call clears its row of the seal
            if (timer_calibrated_flush_) session_->flush_l2_async();
          },
          capture ? std::function<void()>([&] {
            for (std::size_t k = 0; k < outs.size(); ++k) captured[k].copy_(outs[k]);
          })
                  : std::function<void()>(),
          spans);
      if (end.seen != Seen::kDone) {
        if (end.seen == Seen::kLate || end.seen == Seen::kGone) timer::device_abort(control);
        throw WorkerError{"runtime_error", "the candidate's worker did not serve the handshake's calls (" +
                                               why_stopped(end.seen, end.word, i) + ")"};
      }
      reply.window.push_back(spans.window);
      reply.tail.push_back(spans.tail);
      // The first waits for the command to arrive.
      if (i > 0 && !last_captured) reply.between.push_back(between(last, spans));
      last = spans;
      last_captured = capture;
      if (!cmd.work) continue;
      reply.prep.push_back(spans.prep);
      if (capture) reply.capture.push_back(spans.capture.value_or(0));
    }
    if (cmd.work) {
      // The candidate's side's small copy with the device to the timer
      // alone: taken out of the tail (the window's floor keeps the small
      // kernel, which every timed call runs too).
      const int m = 20;
      Events a(2 * m);
      for (int j = 0; j < m; ++j) {
        small.fill_(static_cast<double>(j));  // as in a call: the copy's source just written
        KLOOP_CUDA_CHECK(cudaEventRecord(a[2 * j], stream), "the timer's events");
        small_out.copy_(small);
        KLOOP_CUDA_CHECK(cudaEventRecord(a[2 * j + 1], stream), "the timer's events");
      }
      synchronize();
      reply.alone_copy = 1e9;
      for (int j = 0; j < m; ++j) {
        reply.alone_copy = std::min(reply.alone_copy, Events::seconds(a[2 * j], a[2 * j + 1]));
      }
    }
  }
#endif
  if (!session_->cuda()) {
    // As a timed call ends: when the candidate's processes are quiet.
    if (cmd.candidate_pid <= 0) throw WorkerError{"runtime_error", "timer_handoff on the CPU needs the candidate's pid"};
    CpuMeter meter(static_cast<pid_t>(cmd.candidate_pid));
    for (int i = 0; i < n; ++i) {
      const uint32_t seq = cmd.first + static_cast<uint32_t>(i);
      const auto t0 = Clock::now();
      timer::host_store(control, Word::kGo, seq);
      const auto called = timer::host_wait(control, Word::kCalled, seq, deadline, kSpinOnCall);
      const auto copied = called ? timer::host_wait(control, Word::kCopied, seq, deadline, kSpinOnCall) : std::nullopt;
      if (!called || !copied || *called == timer::kAbort || *copied == timer::kAbort) {
        throw WorkerError{"runtime_error", "the candidate's worker did not serve the handshake's calls"};
      }
      meter.settle(Clock::now() + std::chrono::milliseconds(kSettleMs));
      const auto t1 = Clock::now();
      reply.window.push_back(std::chrono::duration<double>(t1 - t0).count());
      reply.tail.push_back(0);
    }
  }
  // The least of each: a candidate can only ever make the handshake slower.
  // With `work`, the median: what the switches between the two contexts
  // add, as the timed calls meet them. The window's floor keeps kloop's
  // small kernel, which every timed call runs after go as well
  // (candidate_timer.cpp); the tail's is less kloop's small copy, which
  // stands for the outputs' copy.
  const bool least = !cmd.work;
  auto floor_of = [&](std::vector<double> v, double less) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    return std::max(0.0, (least ? v.front() : v[v.size() / 2]) - less);
  };
  timer_floors_.window = floor_of(reply.window, 0);
  timer_floors_.tail = floor_of(reply.tail, reply.alone_copy);
  // The timer's own spans less what they take with the device to the timer
  // alone (the calibration's, at the case's sizes).
  timer_floors_.prep_switch = floor_of(reply.prep, timer_floors_.prep);
  timer_floors_.capture_switch = floor_of(reply.capture, timer_floors_.copy);
  timer_floors_.between = floor_of(reply.between, 0);
  timer_floors_.resolution = 0;
  if (cmd.work && reply.window.size() >= 10) {
    std::vector<double> w = reply.window;
    std::sort(w.begin(), w.end());
    timer_floors_.resolution = w[w.size() * 9 / 10] - w[w.size() / 10];
  }
  // GPU: what an honest call counts outside its window on average: the
  // handshake's own calls against the floors just taken (their spread above
  // the medians). The finding of work outside the calls allows for it.
  timer_floors_.outside_noise = 0;
  if (cmd.work && !reply.prep.empty()) {
    double noise = 0;
    for (std::size_t i = 0; i < reply.prep.size(); ++i) {
      noise += beyond(reply.prep[i], timer_floors_.prep + timer_floors_.prep_switch, true);
      if (i < reply.tail.size()) noise += beyond(reply.tail[i], reply.alone_copy + timer_floors_.tail, true);
    }
    timer_floors_.outside_noise = noise / static_cast<double>(reply.prep.size());
  }
  reply.floors = timer_floors_;
  return reply;
}

// The data block of the timing case (prepared: module_ computes the checks).
wire::TimerOpenReply Worker::timer_open(const wire::TimerOpen& cmd) {
  if (role_ != "reference" || !timer_control_ || !module_) {
    throw WorkerError{"runtime_error", "timer_open needs timer_calibrate and a prepared case"};
  }
  at::AutoGradMode no_grad(false);
  timer_case_ = cmd.c;
  set_phase("timer: the timing case's shared block");
  auto args = draw_args(timer_case_, 0);
  std::vector<at::Tensor> outputs;
  for (const auto& o : module_->forward(args)) outputs.push_back(o.contiguous());
  synchronize();
  args.clear();
  wire::TimerOpenReply reply;
  reply.layout = layout_for(timer_case_, outputs, session_->cuda());
  timer_data_ = SharedBlock::create(device_, reply.layout.bytes);
  timer_inputs_ = block_views(*timer_data_, reply.layout.inputs, device_);
  timer_outputs_ = block_views(*timer_data_, reply.layout.outputs, device_);
  timer_seal_ = at::Tensor();
  timer_seal_rows_.clear();
  if (reply.layout.seal) {
    // No row may start out holding a call's value.
    timer_seal_ = block_views(*timer_data_, {*reply.layout.seal}, device_).front();
    timer_seal_.fill_(-1.0);
    for (int64_t r = 0; r < timer::kSealRows; ++r) timer_seal_rows_.push_back(timer_seal_.select(0, r));
    synchronize();
  }
  timer_captured_.clear();
  for (const auto& o : timer_outputs_) timer_captured_.push_back(at::empty_like(o));
  export_block(*timer_data_);
  return reply;
}

// A checked call: its inputs drawn again in the timer's own memory (the
// candidate could have written the shared ones), the reference's outputs
// on them, compared with what was captured.
wire::TimedCheck Worker::timer_check(int sample, int64_t call, bool precision, const Tolerance& tol) {
  wire::TimedCheck check;
  check.sample = sample;
  const std::string label = "timed call " + std::to_string(call);
  session_->set_deterministic(true);
  set_phase("timer: checking " + label);
  auto args = draw_args(timer_case_, call);
  pristine_.clear();
  if (precision) {
    for (const auto& a : args) pristine_.push_back(a.clone());
  }
  std::vector<at::Tensor> expected;
  for (const auto& o : module_->forward(args)) expected.push_back(o.contiguous());
  synchronize();
  check.passed = expected.size() == timer_captured_.size();
  if (!check.passed) check.message = "the reference returns another number of outputs";
  for (std::size_t i = 0; i < expected.size() && i < timer_captured_.size(); ++i) {
    const TensorComparison cmp = compare_tensors(expected[i], timer_captured_[i], "output" + std::to_string(i), tol);
    check.passed = check.passed && cmp.passed;
    check.outputs.push_back(to_json(cmp));
  }
  if (precision) {
    fp64_expected_.clear();
    fp64_unavailable_.clear();
    fp64_reference(timer_case_, label);
    if (!fp64_expected_.empty()) {
      check.error_analysis.emplace();
      for (std::size_t i = 0; i < fp64_expected_.size() && i < timer_captured_.size() && i < expected.size(); ++i) {
        if (fp64_expected_[i].sizes() != timer_captured_[i].sizes()) continue;
        const ErrorVsExact cand = error_against(fp64_expected_[i], timer_captured_[i]);
        const ErrorVsExact ref = error_against(fp64_expected_[i], expected[i]);
        check.error_analysis->push_back({static_cast<int>(i), cand.max_abs_exact, cand.rms_exact, cand.max_abs_error,
                                         cand.rms_error, ref.max_abs_error, ref.rms_error});
      }
    } else {
      check.fp64_unavailable = fp64_unavailable_;
    }
    fp64_expected_.clear();
    pristine_.clear();
  }
  session_->set_deterministic(false);
  return check;
}

wire::TimerBatchReply Worker::timer_batch(const wire::TimerBatch& cmd) {
  if (role_ != "reference" || !timer_data_ || !timer_control_) throw WorkerError{"runtime_error", "timer_batch before timer_open"};
  at::AutoGradMode no_grad(false);
  SharedBlock& control = *timer_control_;
  const Tolerance tol = tolerance_from_json(cmd.tolerance);
  const int n = std::max(0, cmd.samples);
  std::vector<bool> checked(static_cast<std::size_t>(n), false), precise(static_cast<std::size_t>(n), false);
  for (int i : cmd.check) {
    if (i >= 0 && i < n) checked[static_cast<std::size_t>(i)] = true;
  }
  for (int i : cmd.precision) {
    if (i >= 0 && i < n) precise[static_cast<std::size_t>(i)] = checked[static_cast<std::size_t>(i)];
  }
  const auto deadline = Clock::now() + std::chrono::milliseconds(std::max<int64_t>(cmd.deadline_ms, 1000));
  const wire::TimerFloors& f = timer_floors_;
  const uint64_t out_bytes = output_bytes(timer_outputs_);
  (void)out_bytes;
  wire::TimerBatchReply reply;
  reply.clock_monitor = session_->clock_monitor();
  set_phase("timer: timed calls");
#ifdef KLOOP_WITH_CUDA
  if (session_->cuda()) {
    auto* stream = static_cast<cudaStream_t>(session_->stream());
    if (timer_seal_rows_.size() != static_cast<std::size_t>(timer::kSealRows)) {
      throw WorkerError{"runtime_error", "the timed calls on a GPU need the seal in the data block"};
    }
    session_->reset_persisting_l2();
    tighten_timer_slack();
    const bool throttled_before = session_->throttled_now();
    Events done(4);
    std::vector<CallSpans> calls;
    for (int i = 0; i < n; ++i) {
      const uint32_t seq = cmd.first + static_cast<uint32_t>(i);
      const bool check = checked[static_cast<std::size_t>(i)];
      CallSpans spans;
      const CallEnd end = host_call(
          control, stream, done, seq, deadline, cmd.candidate_pid,
          [&] {
            draw_into(timer_inputs_, timer_case_, seq, stream);
            // The call's row of the seal cleared just before go: a row
            // written ahead (all of them at once, before the batch) does
            // not count; kloop's kernel in the call must write it.
            timer_seal_rows_[static_cast<std::size_t>(timer::seal_row(seq))].fill_(-1.0);
            if (cmd.l2_flush) session_->flush_l2_async();
          },
          check ? std::function<void()>([&] {
            for (std::size_t k = 0; k < timer_outputs_.size(); ++k) timer_captured_[k].copy_(timer_outputs_[k]);
          })
                : std::function<void()>(),
          spans);
      if (end.seen != Seen::kDone) {
        if (end.seen != Seen::kAbort) timer::device_abort(control);
        reply.aborted = why_stopped(end.seen, end.word, i);
        reply.forged = end.seen == Seen::kAhead;
        break;
      }
      calls.push_back(spans);
      if (!check) continue;
      const auto check_start = Clock::now();
      reply.checks.push_back(timer_check(i, seq, precise[static_cast<std::size_t>(i)], tol));
      reply.check_seconds += seconds_since(check_start);
    }
    synchronize();
    // Every timed call ran kloop's small kernel after go (its row, cleared
    // before go, sealed): a call that skipped it would have its window
    // short of that kernel, which the window's floor keeps.
    if (!calls.empty() && !reply.aborted) {
      const at::Tensor seal = timer_seal_.to(at::kCPU).contiguous();
      if (const auto k = timer::first_unsealed(seal.data_ptr<float>(), cmd.first, static_cast<int>(calls.size()))) {
        reply.aborted = "kloop's small kernel had not run in timed call " + std::to_string(*k) +
                        " of the batch when the call's words said it had ended (its row of the seal was not "
                        "written): the candidate's side skipped kloop's work in the call, or stored the words "
                        "itself";
        reply.forged = true;
      }
    }
    const bool throttled = throttled_before || session_->throttled_now();
    // The candidate's worker's steps between two calls, as the timer sees
    // them (a call's copied to the next call's armed; not after the batch's
    // command, which the worker was still reading, nor after a checked call,
    // when the timer was busy checking, nor when the timer's thread was
    // switched out): honest, they are the handshake's floor; longer, they
    // hold work the call did after it said it had copied its outputs. By the
    // batch's median, as the time is judged: the host's jitter in a few
    // calls adds nothing, work behind most calls is added to every call.
    std::vector<double> betweens;
    for (std::size_t i = 1; i < calls.size(); ++i) {
      if (!calls[i - 1].capture && !calls[i].preempted) betweens.push_back(between(calls[i - 1], calls[i]));
    }
    double behind = 0;
    if (!betweens.empty()) {
      std::nth_element(betweens.begin(), betweens.begin() + static_cast<std::ptrdiff_t>(betweens.size() / 2), betweens.end());
      // Two hosts' steps (the worker's and the timer's look): a wider slack
      // than the device's spans get.
      behind = std::max(0.0, betweens[betweens.size() / 2] - f.between * (1 + kBetweenSlackFraction) - kBetweenSlack);
    }
    for (std::size_t i = 0; i < calls.size(); ++i) {
      const CallSpans& c = calls[i];
      wire::TimedSample s;
      s.prep = c.prep;
      s.window = c.window;
      s.tail = c.tail;
      s.capture = c.capture;
      if (i > 0 && !calls[i - 1].capture) s.between = between(calls[i - 1], c);
      s.unwatched = c.preempted;
      s.outside = behind + beyond(s.prep, f.prep + f.prep_switch, true) + beyond(s.tail, f.tail + f.copy, true);
      if (c.capture) s.outside += beyond(*s.capture, f.copy + f.capture_switch, true);
      s.seconds = std::max(0.0, s.window - f.window) + s.outside;
      s.throttled = throttled;
      reply.samples.push_back(s);
    }
    return reply;
  }
#endif
  // The CPU: the window is wall time from go until the candidate's
  // processes are quiet again (every thread off the CPU), not until it says
  // "called": what it does after that is still the call's. Its worker
  // copies the outputs inside the window (the copy's floor is subtracted,
  // as the handshake's is). What it does between the calls (while the timer
  // draws, and while it captures a checked call's outputs) is told by the
  // CPU time the kernel accounted to its processes, read while they are
  // quiet. CPU time, not wall time, there: a loaded machine preempts an
  // honest worker, which does not make it work.
  const double slack = slack_seconds(false);
  CpuMeter meter(static_cast<pid_t>(cmd.candidate_pid));
  const auto settle_for = std::chrono::milliseconds(kSettleMs);
  double cpu_end = meter.read();
  for (int i = 0; i < n; ++i) {
    const uint32_t seq = cmd.first + static_cast<uint32_t>(i);
    draw_into(timer_inputs_, timer_case_, seq, nullptr);
    const double cpu_go = meter.read();
    const auto t0 = Clock::now();
    timer::host_store(control, Word::kGo, seq);
    const auto called = timer::host_wait(control, Word::kCalled, seq, deadline, kSpinOnCall);
    const auto t_called = Clock::now();
    const auto copied = called ? timer::host_wait(control, Word::kCopied, seq, deadline, kSpinOnCall) : std::nullopt;
    if (!called || !copied) {
      reply.aborted = "the candidate did not finish timed call " + std::to_string(i) + " of the batch in time";
      break;
    }
    if (*called == timer::kAbort || *copied == timer::kAbort) {
      reply.aborted = "the candidate's worker stopped during the timed calls";
      break;
    }
    if (*called != seq || *copied != seq) {
      // Released: kloop's worker there waits for a go that will not come.
      timer::host_store(control, Word::kGo, timer::kAbort);
      reply.aborted = why_stopped(Seen::kAhead, *called != seq ? "called" : "copied", i);
      reply.forged = true;
      break;
    }
    if (!meter.settle(Clock::now() + settle_for)) ++reply.unsettled;
    const auto t1 = Clock::now();
    const double cpu_quiet = meter.read();
    reply.processes_ended += meter.ended();
    if (meter.ended() && !reply.ended_process) reply.ended_process = meter.ended_name();
    meter.scan();  // processes and threads the call started count from here on
    const double cpu_after = std::max(cpu_quiet, meter.read());
    wire::TimedSample s;
    s.window = std::chrono::duration<double>(t1 - t0).count();
    s.tail = std::chrono::duration<double>(t1 - t_called).count();  // part of the window
    // Its CPU time while the timer drew; not for a batch's first call, when
    // its worker may still be reading the command that started the batch.
    s.prep = i == 0 ? 0.0 : cpu_go - cpu_end;
    s.outside = std::max(0.0, s.prep - slack);
    cpu_end = cpu_after;
    if (checked[static_cast<std::size_t>(i)]) {
      for (std::size_t k = 0; k < timer_outputs_.size(); ++k) timer_captured_[k].copy_(timer_outputs_[k]);
      const double captured = meter.read();
      s.capture = captured - cpu_after;
      s.outside += std::max(0.0, *s.capture - slack);
      const auto check_start = Clock::now();
      reply.checks.push_back(timer_check(i, seq, precise[static_cast<std::size_t>(i)], tol));
      reply.check_seconds += seconds_since(check_start);
      cpu_end = meter.read();  // the check is the timer's time, not the candidate's
    }
    s.seconds = std::max(0.0, s.window - f.window - f.copy) + s.outside;
    reply.samples.push_back(s);
  }
  return reply;
}

wire::NoReply Worker::timer_close(const wire::TimerClose&) {
  synchronize();
  timer_inputs_.clear();
  timer_outputs_.clear();
  timer_captured_.clear();
  timer_seal_ = at::Tensor();
  timer_seal_rows_.clear();
  timer_data_.reset();
  return {};
}

void Worker::export_block(const SharedBlock& block) {
  const int copy = dup(block.fd());
  if (copy < 0) throw std::runtime_error("cannot duplicate the shared block's descriptor");
  outgoing_fds_.emplace_back(copy);
}

}  // namespace kloop::worker
