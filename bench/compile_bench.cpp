// kloop_compile_bench: how long a candidate takes to compile, cold and
// cached, through kloop's own Builder (the sandbox and flags of a real
// evaluation). Each cold build gets an empty cache folder of its own; the
// cached rebuild then looks the same source up in it.
//
//   kloop_compile_bench [--target cuda|cpu] [--arch sm_90a] [--repeats 3] [FILE...]
//
// Without files it compiles, for CUDA, the GPU fixtures written against the
// ATen API (<kloop/kernel_api.h>) and their twins against the light API
// (<kloop/light_api.h>); for CPU, the CPU ones. Prints one row per file (each
// cold build, their median, the cached lookup) and the median of each API.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "evaluator/build/builder.h"
#include "evaluator/build/environment.h"
#include "evaluator/timing/sample_stats.h"

namespace fs = std::filesystem;

namespace {

double median(const std::vector<double>& v) { return kloop::summarize(v).median; }  // 0 for none

std::string api_of(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str().find("kloop/light_api.h") != std::string::npos ? "light" : "aten";
}

std::string fixed(double v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  std::string target = "cuda", arch = "sm_90a";
  int repeats = 3;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    const bool has_value = i + 1 < argc;
    if (flag == "--target" && has_value) target = argv[++i];
    else if (flag == "--arch" && has_value) arch = argv[++i];
    else if (flag == "--repeats" && has_value) repeats = std::max(1, std::stoi(argv[++i]));
    else if (flag.rfind("--", 0) == 0) {
      std::cerr << "kloop_compile_bench: unknown option " << flag
                << " (use --target cuda|cpu, --arch ARCH, --repeats N, then files)\n";
      return 2;
    } else {
      files.push_back(fs::absolute(flag).string());
    }
  }
  if (target != "cuda" && target != "cpu") {
    std::cerr << "kloop_compile_bench: --target is cuda or cpu, not " << target << "\n";
    return 2;
  }
  const std::string root = kloop::data_dir();
  if (files.empty()) {
    const std::vector<std::string> cuda = {"tests/gpu/fixtures/relu_correct.cu", "tests/gpu/fixtures/relu_light.cu",
                                           "tests/gpu/fixtures/matmul_tiled.cu", "tests/gpu/fixtures/matmul_light.cu"};
    const std::vector<std::string> cpu = {"tests/fixtures/relu/correct.cpp", "tests/fixtures/light/relu_correct.cpp",
                                          "examples/cpu/33_BatchNorm_running_stats.cpp",
                                          "tests/fixtures/light/batchnorm_training.cpp"};
    for (const auto& f : target == "cuda" ? cuda : cpu) files.push_back(root + "/" + f);
  }
  const kloop::BuildTarget build_target = target == "cuda" ? kloop::BuildTarget::kCuda : kloop::BuildTarget::kCpu;
  const fs::path scratch = fs::temp_directory_path() / ("kloop-compile-bench-" + std::to_string(getpid()));

  std::cout << "# candidate compile times (" << target << (target == "cuda" ? ", " + arch : std::string()) << ", "
            << repeats << " cold build(s) each, nproc " << sysconf(_SC_NPROCESSORS_ONLN) << ")\n"
            << "| candidate | API | cold builds s | median s | cached s |\n|---|---|---|---|---|\n";
  std::map<std::string, std::vector<double>> by_api;
  int status = 0;
  for (const auto& file : files) {
    std::vector<double> cold;
    double cached = 0;
    std::string failure;
    for (int r = 0; r < repeats && failure.empty(); ++r) {
      kloop::BuilderConfig config = kloop::BuilderConfig::from_environment();
      config.cache_dir = (scratch / (std::to_string(cold.size()) + "-" + fs::path(file).stem().string())).string();
      config.cuda_arch = arch;
      kloop::Builder builder(config);
      kloop::BuildResult b = builder.build(file, kloop::ModuleRole::kCandidate, build_target);
      if (!b.ok) {
        failure = b.log.substr(0, 2000);
        break;
      }
      cold.push_back(b.seconds);
      if (r + 1 == repeats) cached = builder.build(file, kloop::ModuleRole::kCandidate, build_target).seconds;
    }
    const std::string api = api_of(file);
    if (!failure.empty()) {
      std::cout << "| " << fs::path(file).filename().string() << " | " << api << " | build failed | | |\n";
      std::cerr << file << ":\n" << failure << "\n";
      status = 1;
      continue;
    }
    std::string each;
    for (double s : cold) each += (each.empty() ? "" : ", ") + fixed(s, 2);
    for (double s : cold) by_api[api].push_back(s);
    std::cout << "| " << fs::path(file).filename().string() << " | " << api << " | " << each << " | "
              << fixed(median(cold), 2) << " | " << fixed(cached, 3) << " |\n";
  }
  for (const auto& [api, times] : by_api) {
    std::cout << "median of every cold " << api << " build: " << fixed(median(times), 2) << " s over " << times.size()
              << " build(s)\n";
  }
  std::error_code ec;
  fs::remove_all(scratch, ec);
  return status;
}
