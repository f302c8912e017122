#include "evaluator/timing/device_figures.h"

#include <algorithm>
#include <cctype>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "evaluator/build/cache_entry.h"
#include "evaluator/build/content_hash.h"
#include "evaluator/build/integrity.h"

namespace kloop {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::optional<json> read_json(const fs::path& p) {
  std::ifstream in(p);
  if (!in) return std::nullopt;
  try {
    return json::parse(in);
  } catch (const json::exception&) {
    return std::nullopt;  // a torn or foreign file: measure again
  }
}

// Written next to its final name and renamed, so readers never see half a file.
void write_json_atomically(const fs::path& p, const json& j) {
  fs::create_directories(p.parent_path());
  build_cache::write_text_atomically(p, j.dump(2) + "\n");
}

// Baselines and calibrations carry a MAC under the cache's integrity key,
// bound to what the file is (`kind`) and which one (`name`: the key hash or
// the file name), so a file edited, written by someone else or copied to
// another name is not believed: it is measured again.
json sign(const std::string& cache_dir, const char* kind, const std::string& name, json j) {
  j = json::parse(j.dump());  // the fields as they will read back
  const std::string mac = IntegrityKey::for_cache(cache_dir).tag({kind, name, j.dump()});
  j["mac"] = mac;
  return j;
}

std::optional<json> read_signed_json(const std::string& cache_dir, const char* kind, const std::string& name,
                                     const fs::path& p, const char* what) {
  auto j = read_json(p);
  if (!j) return std::nullopt;
  std::string mac;
  if (j->is_object() && j->contains("mac") && (*j)["mac"].is_string()) {
    mac = (*j)["mac"].get<std::string>();
    j->erase("mac");
  }
  if (mac.empty() || !IntegrityKey::for_cache(cache_dir).verify(mac, {kind, name, j->dump()})) {
    warn_untrusted(p.string() + ": " + what + (mac.empty() ? " has no MAC" : " fails its MAC") +
                   " (not written by kloop on this machine, or changed since); ignored, it will be measured again");
    return std::nullopt;
  }
  return j;
}

std::string slug(const std::string& s) {
  std::string out;
  for (char c : s) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return out;
}

}  // namespace

json Calibration::to_json() const {
  return {{"device", device},
          {"dram_bytes_per_s", dram_bytes_per_s},
          {"fp32_flops_per_s", fp32_flops_per_s},
          {"tf32_flops_per_s", tf32_flops_per_s},
          {"bf16_flops_per_s", bf16_flops_per_s},
          {"small_kernel_seconds", small_kernel_seconds},
          {"measured_at", measured_at}};
}

Calibration Calibration::from_json(const json& j) {
  Calibration c;
  c.device = j.value("device", json::object());
  c.dram_bytes_per_s = j.value("dram_bytes_per_s", 0.0);
  c.fp32_flops_per_s = j.value("fp32_flops_per_s", 0.0);
  c.tf32_flops_per_s = j.value("tf32_flops_per_s", 0.0);
  c.bf16_flops_per_s = j.value("bf16_flops_per_s", 0.0);
  c.small_kernel_seconds = j.value("small_kernel_seconds", 0.0);
  c.measured_at = j.value("measured_at", "");
  return c;
}

std::string calibration_path(const std::string& cache_dir, const json& device) {
  const std::string name = device.value("name", "unknown");
  const std::string driver = std::to_string(device.value("cuda_driver", 0));
  return (fs::path(cache_dir) / "calibration" / (slug(name) + "-driver" + driver + ".json")).string();
}

std::optional<Calibration> load_calibration(const std::string& cache_dir, const json& device) {
  const fs::path p = calibration_path(cache_dir, device);
  auto j = read_signed_json(cache_dir, "kloop-calibration", p.filename().string(), p, "calibration");
  if (!j) return std::nullopt;
  Calibration c = Calibration::from_json(*j);
  if (c.dram_bytes_per_s <= 0 || c.bf16_flops_per_s <= 0) return std::nullopt;
  return c;
}

void store_calibration(const std::string& cache_dir, const Calibration& c) {
  const fs::path p = calibration_path(cache_dir, c.device);
  write_json_atomically(p, sign(cache_dir, "kloop-calibration", p.filename().string(), c.to_json()));
}

SpeedOfLight speed_of_light(double flops, double bytes, const Calibration& c) {
  SpeedOfLight s;
  const double fastest = std::max({c.fp32_flops_per_s, c.tf32_flops_per_s, c.bf16_flops_per_s});
  s.memory_seconds = c.dram_bytes_per_s > 0 ? bytes / c.dram_bytes_per_s : 0;
  s.compute_seconds = fastest > 0 ? flops / fastest : 0;
  s.floor_seconds = std::max(s.memory_seconds, s.compute_seconds);
  s.bound = s.memory_seconds >= s.compute_seconds ? "memory" : "compute";
  return s;
}

std::string BaselineKey::hash() const {
  ContentHash h;
  h.add("kloop-baseline-v1").add(problem).add(reference_build).add(dims.dump());
  h.add(device.value("name", "")).add(std::to_string(device.value("cuda_driver", 0)));
  h.add(torch_version).add(rules.dump());
  // fp32 keys stay what they were before precisions, so cached fp32 baselines still serve.
  if (precision != "fp32") h.add("precision").add(precision);
  return h.hex();
}

std::optional<Baseline> load_baseline(const std::string& cache_dir, const BaselineKey& key) {
  const std::string name = key.hash();
  auto j = read_signed_json(cache_dir, "kloop-baseline", name, fs::path(cache_dir) / "baselines" / (name + ".json"),
                            "baseline");
  if (!j || !j->contains("fp32")) return std::nullopt;
  Baseline b;
  b.fp32 = summary_from_json(j->at("fp32"));
  if (j->contains("tf32")) b.tf32 = summary_from_json(j->at("tf32"));
  b.measured_at = j->value("measured_at", "");
  return b;
}

void store_baseline(const std::string& cache_dir, const BaselineKey& key, const Baseline& b) {
  json j = {{"problem", key.problem}, {"dims", key.dims}, {"device", key.device},
            {"torch_version", key.torch_version}, {"rules", key.rules}, {"fp32", to_json(b.fp32)},
            {"measured_at", b.measured_at}};
  if (b.tf32) j["tf32"] = to_json(*b.tf32);
  const std::string name = key.hash();
  write_json_atomically(fs::path(cache_dir) / "baselines" / (name + ".json"), sign(cache_dir, "kloop-baseline", name, j));
}

std::string baseline_not_kept(int fp32_discarded, int tf32_discarded) {
  if (fp32_discarded < kMaxThrottledDiscards && tf32_discarded < kMaxThrottledDiscards) return "";
  return "the card throttled through the measurement (" + std::to_string(fp32_discarded) + " FP32 and " +
         std::to_string(tf32_discarded) + " TF32 samples discarded, the most each loop discards): measured again next "
         "time";
}

std::optional<json> load_reference_metrics(const std::string& cache_dir, const BaselineKey& key) {
  const std::string name = key.hash();
  auto j = read_signed_json(cache_dir, "kloop-reference-metrics", name,
                            fs::path(cache_dir) / "reference-metrics" / (name + ".json"), "reference counters");
  if (!j || !j->contains("metrics") || !(*j)["metrics"].is_object()) return std::nullopt;
  return (*j)["metrics"];
}

void store_reference_metrics(const std::string& cache_dir, const BaselineKey& key, const json& metrics) {
  json j = {{"problem", key.problem}, {"dims", key.dims},        {"device", key.device},
            {"torch_version", key.torch_version}, {"rules", key.rules}, {"metrics", metrics},
            {"measured_at", utc_now()}};
  const std::string name = key.hash();
  write_json_atomically(fs::path(cache_dir) / "reference-metrics" / (name + ".json"),
                        sign(cache_dir, "kloop-reference-metrics", name, j));
}

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace kloop
