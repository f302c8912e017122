// kloop_tensor_file_bench: a worker's tensor files written and read through
// HostTensors (a copy into a byte buffer each way, as before) against
// straight from and into a tensor's own storage (write_tensors,
// read_tensors), side by side: the ways alternate, so drift hits both
// alike. At upstream sizes a task moves tensors of several GB through these
// files (port parity, the file transport). Prints figures; asserts nothing.
//
//   kloop_tensor_file_bench [--gb 2] [--repeats 3] [--dir /dev/shm]
#include <ATen/ATen.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "evaluator/isolation/tensor_bridge.h"
#include "evaluator/runtime/host_tensor.h"
#include "evaluator/timing/sample_stats.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

int main(int argc, char** argv) {
  double gb = 2;
  int repeats = 3;
  std::string dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : std::filesystem::temp_directory_path().string();
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--gb")
      gb = std::atof(value.c_str());
    else if (flag == "--repeats")
      repeats = std::atoi(value.c_str());
    else if (flag == "--dir")
      dir = value;
    else {
      std::fprintf(stderr, "usage: kloop_tensor_file_bench [--gb 2] [--repeats 3] [--dir DIR]\n");
      return 2;
    }
  }
  const auto numel = static_cast<int64_t>(gb * (1ull << 30) / 4);
  const at::Tensor x = at::rand({numel});
  const std::string path = dir + "/kloop-tensor-file-bench-" + std::to_string(getpid()) + ".safetensors";
  // [way][0 write, 1 read]; way 0: through HostTensors, 1: straight.
  std::vector<double> took[2][2];
  for (int r = 0; r < repeats; ++r) {
    for (int k = 0; k < 2; ++k) {
      const int way = (r + k) % 2;
      auto start = Clock::now();
      if (way == 0) {
        kloop::write_tensor_file(path, {kloop::tensor_to_host(x, "output0")});
      } else {
        kloop::write_tensors(path, {x}, "output");
      }
      took[way][0].push_back(seconds_since(start));
      start = Clock::now();
      at::Tensor back;
      if (way == 0) {
        back = kloop::host_to_tensor(kloop::read_tensor_file(path).front());
      } else {
        back = kloop::read_tensors(path, "cpu").front().second;
      }
      took[way][1].push_back(seconds_since(start));
      if (!back.equal(x)) {
        std::fprintf(stderr, "the tensor read back differs\n");
        return 1;
      }
      std::filesystem::remove(path);
    }
  }
  auto median = [](const std::vector<double>& v) { return kloop::summarize(v).median; };
  std::printf("one float32 tensor of %.2f GB in %s, %d repeats, medians:\n", gb, dir.c_str(), repeats);
  std::printf("  write: through HostTensor %.3f s, straight %.3f s: %.2fx\n", median(took[0][0]), median(took[1][0]),
              median(took[0][0]) / median(took[1][0]));
  std::printf("  read:  through HostTensor %.3f s, straight %.3f s: %.2fx\n", median(took[0][1]), median(took[1][1]),
              median(took[0][1]) / median(took[1][1]));
  return 0;
}
