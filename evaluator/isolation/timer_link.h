// The memory and the handshake the trusted timer (the reference's worker,
// worker/trusted_timer.cpp) shares with a candidate's worker for the timed
// calls (docs/protocols.md: Timing).
//
// Two blocks, each created by the trusted side and mapped by the
// candidate's: the control block (four counters) and the data block (the
// timed call's inputs, which the timer draws, and a place for its outputs,
// which the candidate copies there). A block is a sealed memfd both
// processes map (the candidate cannot shrink it under the timer), except
// the data block on a GPU: one CUDA VMM allocation exported as a descriptor.
// On a GPU the control block is that host memory, registered for the device
// in both processes.
//
// The handshake for call s (a sequence number that only grows):
//   candidate  (GPU) its steps before the call done;  armed := s
//   timer      inputs drawn, L2 flushed;  start marked;  go := s
//   candidate  waits go >= s;  forward;  called := s;  outputs copied;  copied := s
//   timer      sees called == s, marks the end;  sees copied == s;  ...
// The candidate's worker waits for go on its host (spinning, then on a
// futex) and launches forward after it, so the window holds its launches,
// as the reference's baseline does, and nothing of its process is on the
// device while the timer draws. On a GPU it stores called and copied with
// stream memory operations on the host memory, ordered after its work; the
// timer watches the words from its host and marks on its host's monotonic
// clock, so its context has nothing on the device while a call runs: a wait
// of either side pending on the device would have the device switch
// between the two contexts at every timeslice and stretch the other's
// kernels. On the CPU the words are futexes. kAbort releases every wait: a
// side that cannot go on says so with it.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace kloop {

// Memory shared by the trusted timer and a candidate's worker.
class SharedBlock {
 public:
  // Where a block for a GPU lives: the device's memory (the data block), or
  // host memory the device reads and writes (the control block, which the
  // timer watches from its host). On the CPU both are host memory.
  enum class Place { kDevice, kHost };
  // The trusted side: a new block of `bytes` for `device` ("cpu", "cuda:N").
  static std::unique_ptr<SharedBlock> create(const std::string& device, uint64_t bytes, Place place = Place::kDevice);
  // The candidate's side: the block `fd` names (not taken over), which
  // must hold at least `bytes`.
  static std::unique_ptr<SharedBlock> attach(const std::string& device, int fd, uint64_t bytes,
                                             Place place = Place::kDevice);
  ~SharedBlock();
  SharedBlock(const SharedBlock&) = delete;
  SharedBlock& operator=(const SharedBlock&) = delete;

  // The block's address: a host address for host memory, a device address
  // for the device's.
  char* data() const { return data_; }
  // The address the device uses (data() but for host memory on a GPU).
  char* device_data() const { return device_data_ ? device_data_ : data_; }
  uint64_t size() const { return size_; }
  bool cuda() const { return cuda_; }
  // Whether data() is host memory (every block on the CPU).
  bool host() const { return !cuda_ || registered_; }
  int ordinal() const { return ordinal_; }
  // The creator's descriptor for the other side (-1 on the attaching side).
  int fd() const { return fd_; }

 private:
  SharedBlock() = default;
  // A sealed memfd of `bytes` (created when fd < 0), mapped here.
  void map_memfd(int fd, uint64_t bytes);
  // Host memory registered for the device (a GPU's control block).
  void register_for_device();
  char* data_ = nullptr;
  char* device_data_ = nullptr;
  bool registered_ = false;
  uint64_t size_ = 0;
  bool cuda_ = false;
  int ordinal_ = 0;
  int fd_ = -1;
  struct Vmm;
  std::unique_ptr<Vmm> vmm_;
};

namespace timer {

// The control block: one counter per cache line.
constexpr uint64_t kControlBytes = 4096;
// kArmed (GPU): the candidate's worker has done its own steps before a call
// (the call before has ended on the device); the timer waits for it before
// it draws, so none of kloop's per-call work lands in a call's window.
enum class Word { kGo = 0, kCalled = 1, kCopied = 2, kArmed = 3 };
constexpr uint32_t kAbort = 0xffffffffu;
using Deadline = std::chrono::steady_clock::time_point;

// Host memory (the CPU's control block; a GPU's, which the timer watches
// from its host): a store that wakes the other side's futex waits, and a
// wait until the word reaches `value` (or kAbort), spinning for
// `spin` before it sleeps. The value seen, or nullopt at the deadline.
void host_store(SharedBlock& control, Word w, uint32_t value);
std::optional<uint32_t> host_wait(SharedBlock& control, Word w, uint32_t value, Deadline deadline,
                                  std::chrono::microseconds spin = std::chrono::microseconds(0));
uint32_t host_load(SharedBlock& control, Word w);
// host_store for a word only kloop's worker raises (the CPU's `called` and
// `copied`): it stores `value` only over a lower number, so a later number
// stored by the candidate's side stays there for the timer to see, however
// late the timer looks (a plain store would write over it).
void host_raise(SharedBlock& control, Word w, uint32_t value);
// GPU: a store as an operation on `stream` (a cudaStream_t), ordered with
// the work before it; and kAbort stored into every word at once, outside
// any stream's order (it releases waits that will never be met), and a
// word read (with the host memory's, at once).
// The stream that carries every store of the candidate's words (one per
// process, non-blocking, never given a kernel), ordered after the streams
// that run kernels with join().
void* signal_stream();
// `waiter` (a cudaStream_t) waits for all work enqueued on `signaller` so far.
void join(void* waiter, void* signaller);
void stream_store(void* stream, SharedBlock& control, Word w, uint32_t value);
void device_abort(SharedBlock& control);
uint32_t device_load(SharedBlock& control, Word w);

// The seal (GPU): kloop's small kernel, which every timed call runs after go
// and before forward (worker/candidate_timer.cpp), fills row `seq %
// kSealRows` of a region of the timer's data block with seal_value(seq).
// The timer clears the call's row just before go. The region is device
// memory, so the candidate's side cannot write it from its host, nor ahead
// of the call: a call that skipped kloop's kernel (it would gain that
// kernel's time) leaves a row the timer finds wrong after the batch.
constexpr int64_t kSealRows = 512;
constexpr int64_t kSealWidth = 64;  // floats a row: kloop's small kernel
float seal_value(uint32_t seq);
// The row call `seq` seals.
inline int64_t seal_row(uint32_t seq) { return static_cast<int64_t>(seq % static_cast<uint32_t>(kSealRows)); }
// Of the calls first .. first + calls - 1 whose rows no later call of them
// wrote over (the last kSealRows), the first (0-based, in the batch) whose
// row in `seal` (kSealRows x kSealWidth floats, host memory) is not all
// seal_value of its seq; nullopt when every one is sealed.
std::optional<int> first_unsealed(const float* seal, uint32_t first, int calls);

}  // namespace timer
}  // namespace kloop
