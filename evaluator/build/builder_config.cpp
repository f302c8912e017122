// The builder's configuration as the environment and the build give it
// (builder.h): the cache folder, the compilers and LibTorch's flags.
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "evaluator/build/build_config.h"
#include "evaluator/build/builder.h"
#include "evaluator/build/environment.h"

namespace kloop {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ';')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

}  // namespace

BuilderConfig BuilderConfig::from_environment() {
  BuilderConfig c;
  std::string cache_home = env_or("XDG_CACHE_HOME", env_or("HOME", "/tmp") + "/.cache");
  // Absolute: compiles run in the entry's own folder, and the PCH flags
  // name files in the cache.
  c.cache_dir = fs::absolute(env_or("KLOOP_CACHE_DIR", cache_home + "/kloop")).lexically_normal().string();
  c.cxx = env_or("KLOOP_CXX", KLOOP_CXX_COMPILER);
  c.reference_cxx = env_or("KLOOP_REFERENCE_CXX", KLOOP_REFERENCE_CXX_COMPILER);
  c.nvcc = env_or("KLOOP_NVCC", KLOOP_NVCC_COMPILER);
  c.include_dirs = {env_or("KLOOP_KERNEL_API_DIR", data_dir() + "/evaluator/kernel_api")};
  for (const auto& d : split_list(KLOOP_TORCH_INCLUDE_DIRS)) c.include_dirs.push_back(d);
  c.library_dirs = split_list(KLOOP_TORCH_LIBRARY_DIRS);
  c.libraries = {"torch", "torch_cpu", "c10"};
  c.cuda_libraries = {"torch_cuda", "c10_cuda"};
  c.defines = split_list(KLOOP_TORCH_DEFINES);
  c.use_extension_pch = env_or("KLOOP_EXTENSION_PCH", "1") != "0";
  c.use_kernel_api_pch = env_or("KLOOP_CANDIDATE_PCH", "1") != "0";
  c.light_cuda_headers = env_or("KLOOP_LIGHT_CUDA_HEADERS", "1") != "0";
  return c;
}

}  // namespace kloop
