// What this device achieves (worker.h): copy bandwidth (read + write) and
// dense GEMM rates in FP32, TF32 and BF16, and the empty launch. The
// speed-of-light floor is built from them.
#include <ATen/core/grad_mode.h>

#include "evaluator/isolation/worker/worker.h"

namespace kloop::worker {

// Median seconds of `samples` timed calls of fn, after three warm-ups.
template <typename F>
double Worker::median_seconds(F&& fn, int samples) {
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

wire::CalibrateReply Worker::calibrate(const wire::Calibrate& cmd) {
  if (!session_) {
    device_ = cmd.device;
    session_ = std::make_unique<DeviceSession>(device_);
  }
  if (!session_->cuda()) throw WorkerError{"runtime_error", "calibrate needs a CUDA device, not " + device_};
  at::AutoGradMode no_grad(false);
  const auto opts = at::TensorOptions().device(at::Device(device_)).dtype(at::kFloat);
  set_phase("calibrating copy bandwidth");
  const int64_t n = cmd.copy_bytes.value_or(int64_t{1} << 31) / 4;
  at::Tensor src = at::rand({n}, opts), dst = at::empty_like(src);
  const double copy_s = median_seconds([&] { dst.copy_(src); }, 30);
  src.reset();
  dst.reset();
  set_phase("calibrating GEMM rates");
  const int64_t m = cmd.gemm_size.value_or(8192);
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
  wire::CalibrateReply reply;
  reply.device = session_->info();
  reply.copy_bytes = 2.0 * static_cast<double>(n) * 4;
  reply.copy_seconds = copy_s;
  reply.dram_bytes_per_s = reply.copy_bytes / copy_s;
  reply.gemm_size = m;
  reply.fp32_flops_per_s = flops / fp32_s;
  reply.tf32_flops_per_s = flops / tf32_s;
  reply.bf16_flops_per_s = flops / bf16_s;
  reply.small_kernel_seconds = launch_s;
  return reply;
}

}  // namespace kloop::worker
