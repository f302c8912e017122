// DeviceSession: a worker's hold on its device. On CUDA it owns the one
// stream that LibTorch and the module both use (made current for the whole
// process), the L2 flush buffer and the timing events, keeps the
// persisting-L2 limit at zero, and turns asynchronous CUDA errors into
// exceptions at synchronisation points. On CPU it times with a steady clock.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <memory>
#include <string>

namespace kloop {

class DeviceSession {
 public:
  explicit DeviceSession(const std::string& device);  // "cpu" or "cuda:N"
  ~DeviceSession();
  DeviceSession(const DeviceSession&) = delete;
  DeviceSession& operator=(const DeviceSession&) = delete;

  bool cuda() const { return cuda_; }
  // The session's stream (a cudaStream_t, current for the whole process), or null on CPU.
  void* stream() const;
  // Makes kloop's stream the current one again (a module may have made
  // another current and left it so).
  void restore_stream();
  // Waits for all work on the device; throws std::runtime_error with the
  // CUDA error string when a kernel failed (illegal address, ...).
  void synchronize();
  // Records the end event on kloop's stream and waits for it: the moment
  // the timer considers a call complete (legacy default-stream work is
  // ordered before it, other streams are not). The activity audit looks for
  // work that outlives it.
  void synchronize_stream();
  // Returns the blocks LibTorch's caching allocator holds but no tensor
  // uses to the driver (after a synchronize): what a profiler that saves and
  // restores device memory per replay pass must then copy shrinks to the
  // live tensors. No-op on the CPU.
  void release_cached_memory();
  // A 4-byte memset on the legacy default stream, so a trace can tell that
  // stream (where a plain <<<grid, block>>> launch goes) from side streams.
  void mark_legacy_stream();
  // A `bytes`-byte memset on kloop's stream, enqueued once a traced call has
  // returned: its start is when the stream reached the end of the call,
  // after every event or stream wait the module put on it (a joined side
  // stream's work ends before it; un-joined work may not).
  void mark_call_end(std::size_t bytes);
  // TF32 in cuBLAS and cuDNN (the baseline is measured with both settings).
  void set_tf32(bool on);
  // Deterministic algorithms (expected outputs must not depend on atomics'
  // ordering) versus LibTorch's defaults (what the baseline is timed with).
  void set_deterministic(bool on);

  // One timed sample: begin_sample, the call, end_sample. GPU time comes
  // from events on the session stream, after an optional L2 flush; the
  // device is synchronised at the end so side-stream work cannot leak into
  // the next sample. Returns seconds; last_wall_seconds() has the host's view
  // of the same sample (launch + completion).
  // `guard_l2`: the persisting-L2 reads and resets (below) around it; the
  // activity audit's traced calls go without, so the trace holds nothing
  // but the calls and kloop's markers.
  void begin_sample(bool flush_l2, bool guard_l2 = true);
  double end_sample();
  double last_wall_seconds() const { return last_wall_; }
  // True when NVML reported a power or thermal slowdown of the clocks at the
  // start or the end of the last sample (such samples are discarded).
  bool last_sample_throttled() const { return last_throttled_; }
  // "nvml" when clock slowdowns are watched, else why not.
  std::string clock_monitor() const;

  // For the trusted timer (worker/trusted_timer.cpp): one L2 flush enqueued
  // on the session's stream, and whether NVML reports a power or thermal
  // slowdown now.
  void flush_l2_async();
  bool throttled_now() const;
  // The candidate's side, before each timed call: the persisting-L2 limit
  // and window cleared (what was set is kept, as around a sample) and every
  // persisting line demoted.
  void guard_persisting_l2();

  // The persisting-L2 carve-out, which kloop keeps at 0 so nothing survives
  // a flush. Every sample reads the device's limit and the access-policy
  // window of kloop's stream before its flush and after its call, and the
  // largest of each since the last reset is kept here. Before each flush
  // the limit and the window are set back to zero and every persisting line
  // is demoted to normal (cudaCtxResetPersistingL2Cache), so a carve-out
  // the module sets and clears inside its call keeps nothing across calls.
  long long persisting_l2_limit() const;
  long long persisting_l2_window_bytes() const;
  void reset_persisting_l2();

  nlohmann::json info() const;  // name, compute capability, L2 size, SMs, memory

 private:
  bool cuda_ = false;
  int index_ = 0;
  struct Cuda;
  std::unique_ptr<Cuda> gpu_;
  bool throttled_at_begin_ = false;
  bool last_throttled_ = false;
  bool guard_l2_ = true;
  std::chrono::steady_clock::time_point wall_start_;
  double last_wall_ = 0;
  long long l2_limit_seen_ = 0;
  long long l2_window_seen_ = 0;
  void observe_persisting_l2();
  void clear_persisting_l2();
};

}  // namespace kloop
