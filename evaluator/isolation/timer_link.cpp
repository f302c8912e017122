// Shared blocks and the timed calls' handshake (timer_link.h).
#include "evaluator/isolation/timer_link.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "evaluator/isolation/vmm.h"

#ifdef KLOOP_WITH_CUDA
#include <cuda.h>
#include <cuda_runtime_api.h>

#include "base/cuda_check.h"
#endif

namespace kloop {

struct SharedBlock::Vmm {
  VmmBuffer buffer;
};

namespace {

int ordinal_of(const std::string& device) {
  if (device.rfind("cuda:", 0) == 0) return std::stoi(device.substr(5));
  return 0;
}

std::runtime_error system_error(const std::string& what) { return std::runtime_error(what + ": " + strerror(errno)); }

}  // namespace

void SharedBlock::map_memfd(int fd, uint64_t bytes) {
  if (fd < 0) {
    fd = static_cast<int>(syscall(SYS_memfd_create, "kloop-timed-calls", MFD_CLOEXEC | MFD_ALLOW_SEALING));
    if (fd < 0) throw system_error("memfd_create");
    fd_ = fd;
    if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) throw system_error("sizing the shared block");
    // The candidate gets this descriptor: it must not be able to shrink the
    // file under the timer's mapping (a SIGBUS there) or grow it.
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) throw system_error("sealing the shared block");
  } else {
    struct stat st {};
    if (fstat(fd, &st) != 0) throw system_error("the shared block's descriptor");
    if (static_cast<uint64_t>(st.st_size) < bytes) {
      throw std::runtime_error("the shared block holds " + std::to_string(st.st_size) + " bytes, not " +
                               std::to_string(bytes));
    }
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) throw system_error("mapping the shared block");
  data_ = static_cast<char*>(p);
  size_ = bytes;
}

void SharedBlock::register_for_device() {
#ifdef KLOOP_WITH_CUDA
  // Pinned and mapped for the device: the stream memory operations of
  // either process reach it, and the timer's host reads it as it changes.
  KLOOP_CUDA_CHECK(cudaHostRegister(data_, size_, cudaHostRegisterMapped | cudaHostRegisterPortable),
                   "registering the timed calls' control block for the device");
  registered_ = true;
  void* device = nullptr;
  KLOOP_CUDA_CHECK(cudaHostGetDevicePointer(&device, data_, 0), "the control block's device address");
  device_data_ = static_cast<char*>(device);
#else
  throw std::logic_error("no CUDA in this build");
#endif
}

std::unique_ptr<SharedBlock> SharedBlock::create(const std::string& device, uint64_t bytes, Place place) {
  std::unique_ptr<SharedBlock> b(new SharedBlock());
  if (bytes == 0) bytes = 1;
  b->cuda_ = device != "cpu";
  b->ordinal_ = ordinal_of(device);
  if (!b->cuda_ || place == Place::kHost) {
    b->map_memfd(-1, bytes);
    std::memset(b->data_, 0, bytes);
    if (b->cuda_) b->register_for_device();
    return b;
  }
  b->vmm_ = std::make_unique<Vmm>();
  b->vmm_->buffer = vmm_create(b->ordinal_, bytes, "the timed calls' shared block");
  b->data_ = reinterpret_cast<char*>(b->vmm_->buffer.address);
  b->size_ = bytes;
  b->fd_ = vmm_export(b->vmm_->buffer, "the timed calls' shared block");
#ifdef KLOOP_WITH_CUDA
  KLOOP_CUDA_CHECK(cudaMemset(b->data_, 0, bytes), "clearing the timed calls' shared block");
#endif
  return b;
}

std::unique_ptr<SharedBlock> SharedBlock::attach(const std::string& device, int fd, uint64_t bytes, Place place) {
  std::unique_ptr<SharedBlock> b(new SharedBlock());
  if (bytes == 0) bytes = 1;
  b->cuda_ = device != "cpu";
  b->ordinal_ = ordinal_of(device);
  if (!b->cuda_ || place == Place::kHost) {
    if (fd < 0) throw std::runtime_error("the shared block's descriptor is missing");
    b->map_memfd(fd, bytes);
    b->fd_ = -1;
    if (b->cuda_) b->register_for_device();
    return b;
  }
  b->vmm_ = std::make_unique<Vmm>();
  b->vmm_->buffer = vmm_import(fd, bytes, b->ordinal_, "the timed calls' shared block");
  b->data_ = reinterpret_cast<char*>(b->vmm_->buffer.address);
  b->size_ = bytes;
  return b;
}

SharedBlock::~SharedBlock() {
#ifdef KLOOP_WITH_CUDA
  if (cuda_ && (vmm_ || registered_)) cudaDeviceSynchronize();  // nothing of ours may still use it
  if (registered_) cudaHostUnregister(data_);
  if (cuda_ && vmm_) vmm_->buffer.release();
#endif
  if (!vmm_ && data_) munmap(data_, size_);
  if (fd_ >= 0) close(fd_);
}

namespace timer {
namespace {

uint64_t word_offset(SharedBlock& control, Word w) {
  const uint64_t offset = static_cast<uint64_t>(w) * 128;
  if (control.size() < offset + sizeof(uint32_t)) throw std::logic_error("the control block is too small");
  return offset;
}

std::atomic<uint32_t>* host_word(SharedBlock& control, Word w) {
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) && std::atomic<uint32_t>::is_always_lock_free);
  if (!control.host()) throw std::logic_error("the control block is not host memory");
  return reinterpret_cast<std::atomic<uint32_t>*>(control.data() + word_offset(control, w));
}

[[maybe_unused]] unsigned long long device_word(SharedBlock& control, Word w) {
  return reinterpret_cast<unsigned long long>(control.device_data() + word_offset(control, w));
}

// Wakes the other process's waits on a word just stored (on a GPU too: the
// candidate's worker waits for go on its host, spinning, then sleeping).
void wake(SharedBlock&, std::atomic<uint32_t>* a) {
  // Shared (not private) futex: the waiter is another process.
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(a), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}

}  // namespace

void host_store(SharedBlock& control, Word w, uint32_t value) {
  std::atomic<uint32_t>* a = host_word(control, w);
  a->store(value, std::memory_order_seq_cst);
  wake(control, a);
}

void host_raise(SharedBlock& control, Word w, uint32_t value) {
  std::atomic<uint32_t>* a = host_word(control, w);
  uint32_t seen = a->load(std::memory_order_seq_cst);
  while (seen < value && !a->compare_exchange_weak(seen, value, std::memory_order_seq_cst)) {
  }
  wake(control, a);
}

uint32_t host_load(SharedBlock& control, Word w) { return host_word(control, w)->load(std::memory_order_seq_cst); }

std::optional<uint32_t> host_wait(SharedBlock& control, Word w, uint32_t value, Deadline deadline,
                                  std::chrono::microseconds spin) {
  std::atomic<uint32_t>* a = host_word(control, w);
  const auto spin_until = std::chrono::steady_clock::now() + spin;
  while (std::chrono::steady_clock::now() < spin_until) {
    const uint32_t seen = a->load(std::memory_order_acquire);
    if (seen >= value) return seen;
  }
  for (;;) {
    const uint32_t seen = a->load(std::memory_order_seq_cst);
    if (seen >= value) return seen;  // kAbort is the largest value
    const auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) return std::nullopt;
    // At most 50 ms per sleep: the deadline is checked however the word is woken.
    const auto ns = std::min<long long>(std::chrono::duration_cast<std::chrono::nanoseconds>(left).count(), 50'000'000);
    timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(a), FUTEX_WAIT, seen, &ts, nullptr, 0);
  }
}

#ifdef KLOOP_WITH_CUDA
void stream_store(void* stream, SharedBlock& control, Word w, uint32_t value) {
  KLOOP_CUDA_CHECK(cuStreamWriteValue32(static_cast<CUstream>(stream),
                                        static_cast<CUdeviceptr>(device_word(control, w)), value, 0),
                   "storing a timed call's counter");
}

void device_abort(SharedBlock& control) {
  if (control.host()) {
    for (Word w : {Word::kGo, Word::kCalled, Word::kCopied, Word::kArmed}) host_store(control, w, kAbort);
    return;
  }
  // A stream of its own that does not wait for the blocked ones (a legacy
  // stream would wait for them: they are blocking streams).
  cudaStream_t s = nullptr;
  if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) return;
  for (Word w : {Word::kGo, Word::kCalled, Word::kCopied, Word::kArmed}) {
    cuStreamWriteValue32(reinterpret_cast<CUstream>(s), static_cast<CUdeviceptr>(device_word(control, w)), kAbort, 0);
  }
  cudaStreamSynchronize(s);
  cudaStreamDestroy(s);
}

void* signal_stream() {
  static cudaStream_t s = [] {
    cudaStream_t made = nullptr;
    KLOOP_CUDA_CHECK(cudaStreamCreateWithFlags(&made, cudaStreamNonBlocking), "the timed calls' signal stream");
    return made;
  }();
  return s;
}

void join(void* waiter, void* signaller) {
  // One event serves every join: a wait takes the record made before it.
  static cudaEvent_t e = [] {
    cudaEvent_t made = nullptr;
    KLOOP_CUDA_CHECK(cudaEventCreateWithFlags(&made, cudaEventDisableTiming), "the timed calls' join event");
    return made;
  }();
  KLOOP_CUDA_CHECK(cudaEventRecord(e, static_cast<cudaStream_t>(signaller)), "joining the timed calls' streams");
  KLOOP_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(waiter), e, 0), "joining the timed calls' streams");
}

uint32_t device_load(SharedBlock& control, Word w) {
  if (control.host()) return host_load(control, w);
  uint32_t v = 0;
  KLOOP_CUDA_CHECK(cuMemcpyDtoH(&v, static_cast<CUdeviceptr>(device_word(control, w)), sizeof(v)),
                   "reading a timed call's counter");
  return v;
}
#else
void stream_store(void*, SharedBlock&, Word, uint32_t) { throw std::logic_error("no CUDA in this build"); }
void device_abort(SharedBlock&) {}
void* signal_stream() { throw std::logic_error("no CUDA in this build"); }
void join(void*, void*) { throw std::logic_error("no CUDA in this build"); }
uint32_t device_load(SharedBlock&, Word) { throw std::logic_error("no CUDA in this build"); }
#endif

// Exact in a float (below 2^24), and another value for each of 2^24
// consecutive calls: a row left from an earlier call never passes.
float seal_value(uint32_t seq) { return static_cast<float>(seq & 0xffffffu); }

std::optional<int> first_unsealed(const float* seal, uint32_t first, int calls) {
  for (int i = std::max(0, calls - static_cast<int>(kSealRows)); i < calls; ++i) {
    const uint32_t seq = first + static_cast<uint32_t>(i);
    const float* row = seal + seal_row(seq) * kSealWidth;
    for (int64_t k = 0; k < kSealWidth; ++k) {
      if (row[k] != seal_value(seq)) return i;
    }
  }
  return std::nullopt;
}

}  // namespace timer
}  // namespace kloop
