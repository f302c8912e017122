// The candidate's side of the timed calls (timer_link.h's handshake): wait
// for go, call forward on the shared inputs, say called, copy the outputs
// into the shared block, say copied. Everything here runs in the
// candidate's process, so none of it is believed: the timer in the
// reference's process measures, and judges what was copied.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "evaluator/isolation/tensor_bridge.h"
#include "evaluator/isolation/worker/worker.h"

namespace kloop::worker {
using timer::Word;

namespace {
// How long a GPU call's wait for go spins before it sleeps (the timer's
// store of go then wakes it).
constexpr std::chrono::microseconds kSpinOnGo{50'000};
}  // namespace

// Maps a block the timer made. The control block may come before `load`:
// the handshake's floors are measured while no module is in this process.
wire::NoReply Worker::timer_attach(const wire::TimerAttach& cmd) {
  if (role_ == "reference") throw WorkerError{"runtime_error", "timer_attach is the candidate's"};
  if (!session_) {
    device_ = cmd.device;
    set_phase("preparing " + device_);
    session_ = std::make_unique<DeviceSession>(device_);
  }
  // The control block is host memory (the timer watches it from its host).
  auto block = SharedBlock::attach(device_, incoming_fd(), cmd.bytes,
                                   cmd.block == "control" ? SharedBlock::Place::kHost : SharedBlock::Place::kDevice);
  if (cmd.block == "control") {
    timer_control_ = std::move(block);
  } else if (cmd.block == "data" && cmd.layout) {
    timer_inputs_ = block_views(*block, cmd.layout->inputs, device_);
    timer_outputs_ = block_views(*block, cmd.layout->outputs, device_);
    // The seal's rows as views made here, so that a call's own steps are
    // the handshake's (which fills a tensor of this process's).
    timer_seal_rows_.clear();
    if (cmd.layout->seal) {
      const at::Tensor seal = block_views(*block, {*cmd.layout->seal}, device_).front();
      for (int64_t r = 0; r < timer::kSealRows; ++r) timer_seal_rows_.push_back(seal.select(0, r));
    }
    timer_data_ = std::move(block);
  } else {
    throw WorkerError{"runtime_error", "timer_attach: block '" + cmd.block + "' (with a layout for data)"};
  }
  return {};
}

// One timed call, `seq`. Its outputs are copied as far as they fit the
// slots the timer expects; what does not fit is noted (the checks judge).
// The worker waits for go on its host and launches forward after it, on a
// GPU as on the CPU: nothing of this process is on the device while the
// timer draws, and the call's window holds its launches, as the
// reference's baseline holds its own. On a GPU every call with work runs a
// small kernel of kloop's right after go, before forward: the device's
// switch to this process's context at its first kernel after the timer's
// drawing (about 150 us on an H100, the same every call) lands on it, in
// the window, whatever forward launches (a forward with no kernel met it
// at the copy of its outputs, after `called`, and was counted as work
// outside). The handshake's floors (an empty call with `work`, no module
// loaded yet) run the same small kernel, and a small copy where the
// outputs' copy would run, so the floor subtracts the kernel and the
// switch. The kernel is kloop's code in the candidate's process: a
// candidate that skipped it would have its window short of that kernel
// (about 2 us on an H100). So in a timed call it seals the call's row of
// the timer's data block (device memory, timer_link.h), which the timer
// checks after the batch; a candidate can only write the row from a kernel
// of its own instead, which saves at most one launch a call.
void Worker::serve_one(uint32_t seq, bool empty, bool work, std::string& note) {
  SharedBlock& control = *timer_control_;
  const bool cuda = session_->cuda();
  void* stream = session_->stream();
  // A GPU call the timer counts (a timed call, or the handshake's with
  // `work`): kloop's small kernel runs after go.
  const bool small_kernel = cuda && (!empty || work);
  // A carve-out would let the module's data survive the timer's flush:
  // cleared before each call (the stream is idle here), and what was set is
  // reported.
  if (small_kernel) session_->guard_persisting_l2();
  if (small_kernel && !timer_small_.defined()) {
    timer_small_ = at::empty({64}, at::TensorOptions().dtype(at::kFloat).device(at::Device(device_)));
    timer_small_out_ = at::empty_like(timer_small_);
  }
  void* signal = cuda ? timer::signal_stream() : nullptr;
  if (cuda) {
    // Its own steps before the call are done (the stream is idle): the
    // timer may draw, then store go.
    timer::host_store(control, Word::kArmed, seq);
  }
  // Spinning first: the timer's drawing takes microseconds to milliseconds,
  // and a sleeping worker would add its wake-up to the window.
  const auto go = timer::host_wait(control, Word::kGo, seq, Clock::now() + std::chrono::hours(24),
                                   cuda ? kSpinOnGo : std::chrono::microseconds(0));
  if (!go || *go == timer::kAbort) throw WorkerError{"runtime_error", "the timer stopped the timed calls"};
  if (small_kernel) {
    // On kloop's stream, which `called` and `copied` follow, whatever
    // stream the module left current: the seal is written before they are.
    session_->restore_stream();
    // A timed call seals its row of the timer's block; the handshake's
    // calls fill memory of this process's.
    if (!empty && !timer_seal_rows_.empty()) {
      timer_seal_rows_[static_cast<std::size_t>(timer::seal_row(seq))].fill_(static_cast<double>(timer::seal_value(seq)));
    } else {
      timer_small_.fill_(static_cast<double>(timer::seal_value(seq)));
    }
  }
  std::vector<at::Tensor> out;
  if (!empty) out = timing_module_->forward(timer_inputs_);
  auto copy_out = [&] {
    for (std::size_t k = 0; k < out.size() && k < timer_outputs_.size(); ++k) {
      const at::Tensor& o = out[k];
      at::Tensor& slot = timer_outputs_[k];
      if (!o.defined() || o.sizes() != slot.sizes() || o.scalar_type() != slot.scalar_type() ||
          o.device() != slot.device()) {
        if (note.empty()) note = "output " + std::to_string(k) + " does not fit the expected shape, dtype or device";
        continue;
      }
      slot.copy_(o);
    }
    if (!empty && out.size() != timer_outputs_.size() && note.empty()) {
      note = "forward returned " + std::to_string(out.size()) + " output(s), expected " +
             std::to_string(timer_outputs_.size());
    }
  };
  if (cuda) {
    timer::join(signal, stream);
    timer::stream_store(signal, control, Word::kCalled, seq);
    copy_out();
    if (empty && small_kernel) timer_small_out_.copy_(timer_small_);
    timer::join(signal, stream);
    timer::stream_store(signal, control, Word::kCopied, seq);
    synchronize();  // one call at a time: the next is armed once this one's work is done
    if (timer::device_load(control, Word::kGo) == timer::kAbort) {
      throw WorkerError{"runtime_error", "the timer stopped the timed calls"};
    }
  } else {
    // The CPU: the copy and the outputs' release are inside the call (its
    // window ends when the process is quiet); the words follow, never over
    // a later number the candidate stored (the timer then reads a forgery,
    // not this call's number, however late it looks).
    copy_out();
    out.clear();
    timer::host_raise(control, Word::kCalled, seq);
    timer::host_raise(control, Word::kCopied, seq);
  }
}

wire::TimerServeReply Worker::timer_serve(const wire::TimerServe& cmd) {
  if (role_ == "reference" || !timer_control_) throw WorkerError{"runtime_error", "timer_serve before timer_attach"};
  if (!cmd.empty && (!timing_module_ || !timer_data_)) {
    throw WorkerError{"runtime_error", "timer_serve before time_setup and the data block"};
  }
  at::AutoGradMode no_grad(false);
  set_phase(cmd.empty ? "serving the timer's handshake" : "timed calls, " + timing_label_);
  wire::TimerServeReply reply;
  std::string note;
  try {
    for (int i = 0; i < cmd.samples; ++i) {
      serve_one(cmd.first + static_cast<uint32_t>(i), cmd.empty, cmd.work, note);
      ++reply.served;
    }
  } catch (...) {
    // The timer must not wait for calls that will not come.
    if (session_->cuda()) {
      timer::device_abort(*timer_control_);
    } else {
      for (Word w : {Word::kCalled, Word::kCopied}) timer::host_store(*timer_control_, w, timer::kAbort);
    }
    throw;
  }
  if (!note.empty()) reply.note = note;
  if (!cmd.empty) {
    reply.persisting_l2_limit = session_->persisting_l2_limit();
    reply.persisting_l2_window_bytes = session_->persisting_l2_window_bytes();
  }
  return reply;
}

}  // namespace kloop::worker
