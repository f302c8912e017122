// kloop's build and the machine, as recorded with results.
#include "evaluator/build/environment.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "evaluator/build/build_config.h"
#include "evaluator/build/kloop_version.h"
#include "evaluator/isolation/subprocess.h"

namespace kloop {
namespace {

using json = nlohmann::json;

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  }
  return "unknown";
}

std::string commit_text() { return std::string(KLOOP_GIT_COMMIT) + (KLOOP_GIT_DIRTY ? "-dirty" : ""); }

}  // namespace

json build_environment() {
  return {{"kloop_version", KLOOP_VERSION},
          {"kloop_commit", commit_text()},
          {"build_type", KLOOP_BUILD_TYPE},
          {"compiler", KLOOP_CXX_COMPILER_ID},
          {"libtorch", KLOOP_TORCH_VERSION},
          {"cuda", std::string(KLOOP_CUDA_VERSION).empty() ? json(nullptr) : json(KLOOP_CUDA_VERSION)}};
}

namespace {

// CUDA_VISIBLE_DEVICES's entries; nullopt when it is not set. CUDA stops at
// the first entry that names no device; kloop takes them as written.
std::optional<std::vector<std::string>> cuda_visible_entries() {
  const char* env = std::getenv("CUDA_VISIBLE_DEVICES");
  if (!env) return std::nullopt;
  std::vector<std::string> out;
  std::istringstream in(env);
  std::string item;
  while (std::getline(in, item, ',')) {
    item.erase(0, item.find_first_not_of(' '));
    item.erase(item.find_last_not_of(' ') + 1);
    if (item.empty() || item == "NoDevFiles" || item.rfind("-", 0) == 0) break;
    out.push_back(item);
  }
  return out;
}

}  // namespace

int visible_cuda_devices() {
  if (auto entries = cuda_visible_entries()) return static_cast<int>(entries->size());
  CommandResult r = run_command({"nvidia-smi", "-L"}, "", std::chrono::seconds(30));
  if (!r.status.exited || r.status.code != 0) return -1;  // cannot tell
  int n = 0;
  std::istringstream lines(r.output);
  std::string line;
  while (std::getline(lines, line)) n += line.rfind("GPU ", 0) == 0 ? 1 : 0;
  return n;
}

std::string visible_cuda_devices_source() {
  if (const char* env = std::getenv("CUDA_VISIBLE_DEVICES")) return std::string("CUDA_VISIBLE_DEVICES=") + env;
  return "nvidia-smi -L";
}

std::string nvidia_smi_device_id(const std::string& device) {
  const std::string index = device.rfind("cuda:", 0) == 0 ? device.substr(5) : "0";
  const auto entries = cuda_visible_entries();
  if (!entries) return index;
  try {
    const std::size_t i = std::stoul(index);
    if (i < entries->size()) return (*entries)[i];
  } catch (const std::exception&) {
  }
  return index;
}

json machine_environment(const std::string& device) {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  json m = {{"host", host}, {"cpu", cpu_model()}, {"cpu_threads", std::thread::hardware_concurrency()}};
  if (device == "cpu") return m;
  CommandResult r = run_command({"nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm",
                                 "--format=csv,noheader,nounits", "-i", nvidia_smi_device_id(device)},
                                "", std::chrono::seconds(30));
  if (!r.status.exited || r.status.code != 0) {
    m["gpu_error"] = "nvidia-smi: " + r.output.substr(0, 300);
    return m;
  }
  std::istringstream fields(r.output.substr(0, r.output.find('\n')));
  std::string name, driver, sm, mem, max_sm;
  std::getline(fields, name, ',');
  std::getline(fields, driver, ',');
  std::getline(fields, sm, ',');
  std::getline(fields, mem, ',');
  std::getline(fields, max_sm, ',');
  auto trim = [](std::string s) {
    s.erase(0, s.find_first_not_of(' '));
    s.erase(s.find_last_not_of(' ') + 1);
    return s;
  };
  m["gpu"] = {{"name", trim(name)},
              {"driver", trim(driver)},
              {"sm_clock_mhz", trim(sm)},
              {"memory_clock_mhz", trim(mem)},
              {"max_sm_clock_mhz", trim(max_sm)}};
  return m;
}

std::string data_dir() {
  if (const char* env = std::getenv("KLOOP_DATA_DIR"); env && *env) return env;
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const std::filesystem::path installed = exe.parent_path().parent_path() / "share" / "kloop";
    if (std::filesystem::is_directory(installed / "problems", ec)) return installed.string();
  }
  return KLOOP_SOURCE_DIR;
}

std::string version_text() {
  std::string cuda = KLOOP_CUDA_VERSION;
  return std::string("kloop ") + KLOOP_VERSION + " (commit " + commit_text() + ", " + KLOOP_BUILD_TYPE + ", " +
         KLOOP_CXX_COMPILER_ID + ", LibTorch " + KLOOP_TORCH_VERSION + ", " +
         (cuda.empty() ? std::string("no CUDA") : "CUDA " + cuda) + "); data: " + data_dir();
}

}  // namespace kloop
