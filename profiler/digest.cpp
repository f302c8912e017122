#include "profiler/digest.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace kloop::profiler {
namespace {

// Hopper's per-SM limits (the digest's occupancy arithmetic).
constexpr int kRegistersPerSm = 65536;
constexpr int kRegisterAllocationUnit = 256;  // registers per warp are allocated in these units
constexpr int kMaxBlocksPerSm = 32;
constexpr int kSharedBytesPerSm = 228 * 1024;
constexpr int kSharedBytesReservedPerBlock = 1024;
constexpr int kDefaultSmCount = 132;
constexpr int kDefaultMaxWarpsPerSm = 64;

// Thresholds, in one place so the tests and the text agree.
constexpr double kBusyPct = 40;                // a unit above this share of its peak is doing real work
constexpr double kShortLaunchUs = 5;           // shorter launches are dominated by launch overhead
constexpr double kShortLaunchBusyPct = 60;     // ... unless a unit is this busy
constexpr double kLowBandwidthFraction = 0.6;  // of the calibrated DRAM bandwidth
constexpr double kExcessTraffic = 1.5;         // DRAM bytes over the problem's unavoidable bytes
constexpr double kLowL1HitPct = 50;
constexpr double kLowOccupancyPct = 40;
constexpr int kManyTinyLaunches = 8;   // per forward
constexpr double kIdleGpuShare = 0.6;  // GPU busy below this share of the forward
constexpr std::size_t kMaxKernelBlocks = 8;
constexpr double kMinShownShare = 0.01;  // kernels below this share are only counted...
constexpr std::size_t kAlwaysShown = 3;  // ...beyond the first few
constexpr std::size_t kMaxNameChars = 96;

bool known(double v) { return std::isfinite(v); }

std::string time_text(double us) {
  if (us < 10) return fmt::format("{:.2f} µs", us);
  if (us < 1000) return fmt::format("{:.1f} µs", us);
  if (us < 1e6) return fmt::format("{:.2f} ms", us * 1e-3);
  return fmt::format("{:.2f} s", us * 1e-6);
}

std::string bytes_text(double bytes) {
  if (bytes < 1e3) return fmt::format("{:.0f} B", bytes);
  if (bytes < 1e6) return fmt::format("{:.1f} KB", bytes * 1e-3);
  if (bytes < 1e9) return fmt::format("{:.1f} MB", bytes * 1e-6);
  return fmt::format("{:.2f} GB", bytes * 1e-9);
}

std::string shared_text(int bytes) {
  if (bytes < 1024) return fmt::format("{} B", bytes);
  return fmt::format("{:.1f} KiB", bytes / 1024.0);
}

std::string bandwidth_text(double bytes_per_s) { return fmt::format("{:.0f} GB/s", bytes_per_s * 1e-9); }

std::string flops_text(double flops) {
  if (flops < 1e9) return fmt::format("{:.1f} MFLOP", flops * 1e-6);
  if (flops < 1e12) return fmt::format("{:.2f} GFLOP", flops * 1e-9);
  return fmt::format("{:.2f} TFLOP", flops * 1e-12);
}

std::string pct_text(double pct) { return pct < 9.95 ? fmt::format("{:.1f}%", pct) : fmt::format("{:.0f}%", pct); }

std::string count_text(double n, const char* singular, const char* plural) {
  if (n == std::floor(n)) return fmt::format("{:.0f} {}", n, n == 1 ? singular : plural);
  return fmt::format("{:.1f} {}", n, plural);
}

std::string dim_text(const std::array<uint32_t, 3>& d) { return fmt::format("({},{},{})", d[0], d[1], d[2]); }

// "void ns::kernel<float, 4>(float*, int)" -> "ns::kernel<float, 4>", at most kMaxNameChars.
std::string short_name(const std::string& name) {
  std::string s = name.rfind("void ", 0) == 0 ? name.substr(5) : name;
  const std::string anonymous = "(anonymous namespace)::";
  for (std::size_t at = s.find(anonymous); at != std::string::npos; at = s.find(anonymous, at)) {
    s.erase(at, anonymous.size());
  }
  if (!s.empty() && s.back() == ')') {
    int depth = 0;
    for (std::size_t i = s.size(); i-- > 0;) {
      if (s[i] == ')') ++depth;
      if (s[i] == '(' && --depth == 0) {
        if (i > 0) s.resize(i);
        break;
      }
    }
  }
  if (s.size() > kMaxNameChars) s = s.substr(0, kMaxNameChars - 3) + "...";
  return s;
}

// Mean of the known values.
struct Mean {
  double sum = 0;
  int n = 0;
  void add(double v) {
    if (known(v)) sum += v, ++n;
  }
  double value() const { return n > 0 ? sum / n : kNoValue; }
};

struct MetricMeans {
  Mean dram_pct, dram_bytes, sm_pct, occupancy, l1, l2;
};

double peak_flops(const DeviceRates& rates, const std::string& math) {
  if (math == "tf32") return rates.tf32_flops_per_s;
  if (math == "bf16") return rates.bf16_flops_per_s;
  return rates.fp32_flops_per_s;
}

// One kernel's section of the digest: its title and what was observed.
std::vector<std::string> kernel_block(std::size_t rank, const KernelSummary& k, const DigestInputs& inputs) {
  const double forwards = std::max(1, inputs.forwards);
  const int sm_count = inputs.rates && inputs.rates->sm_count > 0 ? inputs.rates->sm_count : kDefaultSmCount;
  const int max_warps =
      inputs.rates && inputs.rates->max_warps_per_sm > 0 ? inputs.rates->max_warps_per_sm : kDefaultMaxWarpsPerSm;
  const double bandwidth = inputs.rates ? inputs.rates->dram_bytes_per_s : 0;
  const double mean_us = k.mean_us();
  std::vector<std::string> lines;

  std::string title = fmt::format("{}. {} [{}]: ", rank, short_name(k.name).c_str(), k.library.c_str());
  if (k.total_us > 0) {
    title +=
        fmt::format("{} per forward ({} of GPU time), {}", time_text(k.total_us / forwards).c_str(),
                    pct_text(k.share * 100).c_str(), count_text(k.launches / forwards, "launch", "launches").c_str());
    if (k.launches > forwards) title += " of " + time_text(mean_us);
  } else {
    title +=
        count_text(std::max(k.launches, k.profiled_launches) / forwards, "launch", "launches") + " (durations unknown)";
  }
  lines.push_back(title);

  const KernelRecord& s = k.shape;

  // Counters and the bound.
  const double bytes = k.dram_bytes_per_launch;
  const double achieved_bw = known(bytes) && mean_us > 0 ? bytes / (mean_us * 1e-6) : kNoValue;
  const double bw_fraction = known(achieved_bw) && bandwidth > 0 ? achieved_bw / bandwidth : kNoValue;
  const Bound bound = classify_bound(k.dram_throughput_pct, k.sm_throughput_pct, mean_us, bw_fraction);
  if (k.profiled_launches == 0) {
    lines.push_back("   bound: unknown (no hardware counters)");
  } else {
    std::vector<std::string> parts;
    if (known(k.dram_throughput_pct)) parts.push_back("DRAM " + pct_text(k.dram_throughput_pct) + " of peak");
    if (known(bytes)) {
      // The achieved bandwidth only where DRAM does real work.
      std::string moved = bytes_text(bytes) + "/launch";
      const bool busy = known(bw_fraction) ? bw_fraction >= 0.05 : k.dram_throughput_pct >= 5;
      if (known(achieved_bw) && busy) moved += " at " + bandwidth_text(achieved_bw);
      if (known(bw_fraction) && busy) moved += " = " + pct_text(bw_fraction * 100) + " of calibrated";
      parts.push_back(moved);
    }
    if (known(k.sm_throughput_pct)) parts.push_back("SM " + pct_text(k.sm_throughput_pct) + " of peak");
    // Ratios can read a little over 100% (counter sampling); shown clamped.
    if (known(k.achieved_occupancy_pct)) {
      parts.push_back("warps active " + pct_text(std::min(k.achieved_occupancy_pct, 100.0)));
    }
    if (known(k.l1_hit_rate_pct)) parts.push_back("L1 hit " + pct_text(std::min(k.l1_hit_rate_pct, 100.0)));
    if (known(k.l2_hit_rate_pct)) parts.push_back("L2 hit " + pct_text(std::min(k.l2_hit_rate_pct, 100.0)));
    std::string line = fmt::format("   bound: {}", bound_name(bound));
    for (std::size_t i = 0; i < parts.size(); ++i) line += (i == 0 ? " (" : ", ") + parts[i];
    lines.push_back(line + (parts.empty() ? "" : ")"));
  }

  // Observations, most telling first.
  const bool dram_dominated =
      known(k.dram_throughput_pct) && (!known(k.sm_throughput_pct) || k.dram_throughput_pct >= k.sm_throughput_pct);
  if (dram_dominated && mean_us >= kShortLaunchUs) {
    if (known(bw_fraction) && bw_fraction < kLowBandwidthFraction) {
      lines.push_back(fmt::format(
          "   - low DRAM bandwidth for a memory-dominated kernel: {} is {} of the calibrated {}; "
          "make loads coalesced and wide (16 bytes per thread) and keep more of them in flight",
          bandwidth_text(achieved_bw).c_str(), pct_text(bw_fraction * 100).c_str(), bandwidth_text(bandwidth).c_str()));
    } else if (!known(bw_fraction) && k.dram_throughput_pct < kLowBandwidthFraction * 100) {
      lines.push_back(
          fmt::format("   - low DRAM bandwidth for a memory-dominated kernel: {} of peak; "
                      "make loads coalesced and wide (16 bytes per thread) and keep more of them in flight",
                      pct_text(k.dram_throughput_pct).c_str()));
    }
  }
  if (known(bytes) && inputs.problem_bytes > 0) {
    const double per_forward = bytes * std::max(k.launches, k.profiled_launches) / forwards;
    const double ratio = per_forward / inputs.problem_bytes;
    if (ratio >= kExcessTraffic) {
      std::string line = fmt::format("   - moves {:.1f}x the problem's unavoidable bytes ({} per forward vs {})", ratio,
                                     bytes_text(per_forward).c_str(), bytes_text(inputs.problem_bytes).c_str());
      if (known(k.l1_hit_rate_pct) && k.l1_hit_rate_pct < kLowL1HitPct) {
        line += " with an L1 hit rate of " + pct_text(k.l1_hit_rate_pct);
      }
      lines.push_back(line + ": uncoalesced or repeated loads; reuse data through shared memory or registers");
    }
  }
  const OccupancyLimit limit = occupancy_limit(s, max_warps);
  const double occupancy = known(k.achieved_occupancy_pct) ? k.achieved_occupancy_pct : kNoValue;
  if (s.blocks() > 0 && s.blocks() < static_cast<uint64_t>(sm_count)) {
    lines.push_back(fmt::format("   - grid of {} blocks leaves {} of {} SMs idle: split the work into more blocks",
                                static_cast<unsigned long long>(s.blocks()),
                                static_cast<unsigned long long>(sm_count - s.blocks()), sm_count));
  } else if (!limit.limiter.empty() &&
             (known(occupancy) ? occupancy < kLowOccupancyPct : limit.theoretical_pct < kLowOccupancyPct)) {
    const std::string observed = known(occupancy) ? pct_text(occupancy) + " warps active" : "";
    const int warps = limit.blocks_per_sm * static_cast<int>((s.threads_per_block() + 31) / 32);
    const std::string fits = fmt::format("fit {} block{} ({} of {} warps) per SM", limit.blocks_per_sm,
                                         limit.blocks_per_sm == 1 ? "" : "s", warps, max_warps);
    std::string line = "   - low occupancy";
    if (!observed.empty()) line += " (" + observed + ")";
    if (limit.theoretical_pct >= kLowOccupancyPct) {
      line += fmt::format(": up to {} is possible; too few blocks per SM or uneven work",
                          pct_text(limit.theoretical_pct).c_str());
    } else if (limit.limiter == "registers") {
      line += fmt::format(
          ": {} registers x {} threads {}; fewer registers per thread (__launch_bounds__, fewer live "
          "values) allow more",
          s.registers_per_thread, static_cast<unsigned long long>(s.threads_per_block()), fits.c_str());
    } else if (limit.limiter == "shared memory") {
      line += fmt::format(": {} of shared memory per block {}; use less per block",
                          shared_text(s.static_shared_bytes + s.dynamic_shared_bytes).c_str(), fits.c_str());
    } else {
      line += fmt::format(": blocks of {} threads {}; use at least 128 threads per block",
                          static_cast<unsigned long long>(s.threads_per_block()), fits.c_str());
    }
    lines.push_back(line);
  }
  if (bound == Bound::kCompute) {
    lines.push_back(
        fmt::format("   - compute-bound at SM {} of peak: only fewer or cheaper instructions help "
                    "(tensor cores for matrix products, less index arithmetic)",
                    pct_text(k.sm_throughput_pct).c_str()));
  }
  if (k.total_us > 0 && mean_us < kShortLaunchUs && k.launches / forwards >= 2) {
    lines.push_back(fmt::format("   - {} of {} each: launch overhead dominates; fuse them with neighbouring work",
                                count_text(k.launches / forwards, "launch", "launches").c_str(),
                                time_text(mean_us).c_str()));
  }
  // The launch shape last: the first line a tight cap gives up.
  if (s.threads_per_block() > 0) {
    lines.push_back(fmt::format("   launch: grid {} block {}, {} registers/thread, {} shared memory/block",
                                dim_text(s.grid).c_str(), dim_text(s.block).c_str(), s.registers_per_thread,
                                shared_text(s.static_shared_bytes + s.dynamic_shared_bytes).c_str()));
  }
  return lines;
}

}  // namespace

const char* bound_name(Bound bound) {
  switch (bound) {
    case Bound::kMemory:
      return "memory";
    case Bound::kCompute:
      return "compute";
    case Bound::kLatency:
      return "latency";
    case Bound::kUnknown:
      break;
  }
  return "unknown";
}

Bound classify_bound(double dram_pct, double sm_pct, double mean_duration_us, double dram_bandwidth_fraction) {
  double memory = known(dram_pct) ? dram_pct : kNoValue;
  if (known(dram_bandwidth_fraction)) {
    memory = known(memory) ? std::max(memory, dram_bandwidth_fraction * 100) : dram_bandwidth_fraction * 100;
  }
  if (!known(memory) && !known(sm_pct)) return Bound::kUnknown;
  const double mem = known(memory) ? memory : 0;
  const double sm = known(sm_pct) ? sm_pct : 0;
  const double busiest = std::max(mem, sm);
  if (busiest < kBusyPct) return Bound::kLatency;
  if (mean_duration_us > 0 && mean_duration_us < kShortLaunchUs && busiest < kShortLaunchBusyPct) {
    return Bound::kLatency;
  }
  return mem >= sm ? Bound::kMemory : Bound::kCompute;
}

OccupancyLimit occupancy_limit(const KernelRecord& launch, int max_warps_per_sm) {
  OccupancyLimit limit;
  const uint64_t threads = launch.threads_per_block();
  if (threads == 0 || max_warps_per_sm <= 0) return limit;
  const int warps_per_block = static_cast<int>((threads + 31) / 32);

  struct Candidate {
    const char* name;
    int blocks;
  };
  std::vector<Candidate> candidates;
  if (launch.registers_per_thread > 0) {
    const int unit = kRegisterAllocationUnit;
    const int registers_per_warp = (launch.registers_per_thread * 32 + unit - 1) / unit * unit;
    candidates.push_back({"registers", kRegistersPerSm / registers_per_warp / warps_per_block});
  }
  const int shared = launch.static_shared_bytes + launch.dynamic_shared_bytes;
  if (shared > 0) {
    candidates.push_back({"shared memory", kSharedBytesPerSm / (shared + kSharedBytesReservedPerBlock)});
  }
  candidates.push_back({"threads", max_warps_per_sm / warps_per_block});
  candidates.push_back({"blocks", kMaxBlocksPerSm});

  // The first of equally tight limits names the cause.
  const Candidate* tightest = &candidates.front();
  for (const auto& c : candidates) {
    if (c.blocks < tightest->blocks) tightest = &c;
  }
  limit.blocks_per_sm = tightest->blocks;
  limit.limiter = tightest->name;
  limit.theoretical_pct = 100.0 * limit.blocks_per_sm * warps_per_block / max_warps_per_sm;
  return limit;
}

std::vector<KernelSummary> summarize_kernels(const ActivityTrace& trace, const MetricsReport& metrics) {
  std::vector<const KernelRecord*> launches;
  for (const auto& k : trace.kernels) launches.push_back(&k);
  std::stable_sort(launches.begin(), launches.end(), [](const KernelRecord* a, const KernelRecord* b) {
    return a->start_ns != b->start_ns ? a->start_ns < b->start_ns : a->correlation_id < b->correlation_id;
  });
  auto key_of = [](const KernelRecord& k) { return k.name.empty() ? k.mangled : k.name; };

  std::map<std::string, KernelSummary> by_name;
  std::map<std::string, std::size_t> first_seen;
  double total = 0;
  for (std::size_t i = 0; i < launches.size(); ++i) {
    const KernelRecord& k = *launches[i];
    const std::string key = key_of(k);
    KernelSummary& s = by_name[key];
    if (s.launches == 0) {
      s.name = key;
      s.shape = k;
      first_seen.emplace(key, i);
    }
    ++s.launches;
    s.total_us += k.duration_us();
    total += k.duration_us();
  }

  std::map<std::string, MetricMeans> means;
  for (const auto& m : metrics.kernels) {
    std::string key = m.name;
    if (key.empty() && m.launch_index >= 0 && static_cast<std::size_t>(m.launch_index) < launches.size()) {
      key = key_of(*launches[m.launch_index]);
    }
    if (key.empty()) key = fmt::format("kernel #{}", m.launch_index);
    KernelSummary& s = by_name[key];
    if (s.name.empty()) {
      s.name = key;
      first_seen.emplace(key, launches.size() + std::max(0, m.launch_index));
    }
    ++s.profiled_launches;
    MetricMeans& mean = means[key];
    mean.dram_pct.add(m.dram_throughput_pct);
    mean.dram_bytes.add(
        known(m.dram_bytes_read) && known(m.dram_bytes_written) ? m.dram_bytes_read + m.dram_bytes_written : kNoValue);
    mean.sm_pct.add(m.sm_throughput_pct);
    mean.occupancy.add(m.achieved_occupancy_pct);
    mean.l1.add(m.l1_hit_rate_pct);
    mean.l2.add(m.l2_hit_rate_pct);
  }

  std::vector<KernelSummary> result;
  for (auto& [key, s] : by_name) {
    s.library = kernel_library(s.name);
    s.share = total > 0 ? s.total_us / total : 0;
    if (auto it = means.find(key); it != means.end()) {
      s.dram_throughput_pct = it->second.dram_pct.value();
      s.dram_bytes_per_launch = it->second.dram_bytes.value();
      s.sm_throughput_pct = it->second.sm_pct.value();
      s.achieved_occupancy_pct = it->second.occupancy.value();
      s.l1_hit_rate_pct = it->second.l1.value();
      s.l2_hit_rate_pct = it->second.l2.value();
    }
    result.push_back(s);
  }
  std::sort(result.begin(), result.end(), [&](const KernelSummary& a, const KernelSummary& b) {
    if (a.total_us != b.total_us) return a.total_us > b.total_us;
    if (first_seen[a.name] != first_seen[b.name]) return first_seen[a.name] < first_seen[b.name];
    return a.name < b.name;
  });
  return result;
}

std::string make_digest(const ActivityTrace& trace, const MetricsReport& metrics, const DigestInputs& inputs,
                        std::size_t max_chars) {
  const double forwards = std::max(1, inputs.forwards);
  const std::vector<KernelSummary> kernels = summarize_kernels(trace, metrics);
  std::vector<std::string> header;

  // Where the time goes, for the whole forward.
  double kernel_us = 0;
  for (const auto& k : trace.kernels) kernel_us += k.duration_us();
  double copy_us = 0, copy_bytes = 0, host_copy_us = 0, host_copy_bytes = 0;
  int host_copies = 0;
  for (const auto& m : trace.memory) {
    copy_us += m.duration_us();
    copy_bytes += m.bytes;
    if (m.kind == "memcpy HtoD" || m.kind == "memcpy DtoH" || m.kind == "memcpy HtoH") {
      ++host_copies;
      host_copy_us += m.duration_us();
      host_copy_bytes += m.bytes;
    }
  }
  std::string title = "Profile of the " + inputs.role + "'s forward";
  if (known(inputs.forward_median_us)) title += ": median " + time_text(inputs.forward_median_us) + " (kloop timing)";
  header.push_back(title);
  if (trace.unavailable.empty()) {
    std::string line =
        fmt::format("GPU time per forward: {} in {} of {}", time_text(kernel_us / forwards).c_str(),
                    count_text(trace.kernels.size() / forwards, "kernel launch", "kernel launches").c_str(),
                    count_text(static_cast<double>(kernels.size()), "kernel", "kernels").c_str());
    if (!trace.memory.empty()) {
      line += fmt::format(", plus {} in {} ({})", time_text(copy_us / forwards).c_str(),
                          count_text(trace.memory.size() / forwards, "copy/memset", "copies/memsets").c_str(),
                          bytes_text(copy_bytes / forwards).c_str());
    }
    if (known(inputs.forward_median_us) && inputs.forward_median_us > 0) {
      const double busy = (kernel_us + copy_us) / forwards / inputs.forward_median_us;
      line += fmt::format("; GPU busy {} of the forward", pct_text(std::min(busy, 1.0) * 100).c_str());
      header.push_back(line);
      if (busy < kIdleGpuShare) {
        header.push_back(
            fmt::format("- the GPU idles {} of the forward: host-side work, synchronisation or gaps "
                        "between launches",
                        pct_text((1 - busy) * 100).c_str()));
      }
    } else {
      header.push_back(line);
    }
  } else {
    header.push_back("Kernel trace unavailable: " + trace.unavailable);
  }
  if (trace.dropped_records > 0) {
    header.push_back(fmt::format("- CUPTI dropped {} activity records: figures undercount",
                                 static_cast<unsigned long long>(trace.dropped_records)));
  }

  // Speed of light from the problem's costs and the calibrated rates.
  if (inputs.problem_bytes > 0 || inputs.problem_flops > 0) {
    const double bandwidth = inputs.rates ? inputs.rates->dram_bytes_per_s : 0;
    const double peak = inputs.rates ? peak_flops(*inputs.rates, inputs.math) : 0;
    const double memory_s = bandwidth > 0 ? inputs.problem_bytes / bandwidth : 0;
    const double compute_s = peak > 0 ? inputs.problem_flops / peak : 0;
    std::vector<std::string> costs, rates;
    if (inputs.problem_flops > 0) {
      costs.push_back(flops_text(inputs.problem_flops));
      if (peak > 0) rates.push_back(fmt::format("{:.0f} {} TFLOP/s", peak * 1e-12, inputs.math.c_str()));
    }
    if (inputs.problem_bytes > 0) {
      costs.push_back(bytes_text(inputs.problem_bytes));
      if (bandwidth > 0) rates.push_back(bandwidth_text(bandwidth));
    }
    const std::string cost = costs.size() == 2 ? costs[0] + " and " + costs[1] : costs[0];
    if (memory_s > 0 || compute_s > 0) {
      const double sol_us = std::max(memory_s, compute_s) * 1e6;
      std::string line = fmt::format("Speed of light: {} need at least {} ({}-bound at {})", cost.c_str(),
                                     time_text(sol_us).c_str(), memory_s >= compute_s ? "memory" : "compute",
                                     rates.size() == 2 ? (rates[0] + " and " + rates[1]).c_str() : rates[0].c_str());
      if (known(inputs.forward_median_us) && inputs.forward_median_us > 0) {
        line +=
            fmt::format("; this forward runs at {} of it", pct_text(100 * sol_us / inputs.forward_median_us).c_str());
      }
      header.push_back(line);
    } else {
      header.push_back("Problem: " + cost + " (no calibrated rates: speed of light unknown)");
    }
  }

  // Forward-wide observations.
  int tiny = 0;
  double tiny_us = 0;
  std::set<uint32_t> streams;
  for (const auto& k : trace.kernels) {
    streams.insert(k.stream_id);
    if (k.duration_us() < kShortLaunchUs) ++tiny, tiny_us += k.duration_us();
  }
  if (tiny / forwards >= kManyTinyLaunches) {
    header.push_back(
        fmt::format("- {} under {} each ({} per forward in total): each launch costs a few µs of "
                    "overhead; fuse them into fewer kernels",
                    count_text(tiny / forwards, "launch", "launches").c_str(), time_text(kShortLaunchUs).c_str(),
                    time_text(tiny_us / forwards).c_str()));
  }
  if (host_copies > 0) {
    header.push_back(fmt::format("- {} between host and device per forward ({}, {}): keep the data on the GPU",
                                 count_text(host_copies / forwards, "copy", "copies").c_str(),
                                 bytes_text(host_copy_bytes / forwards).c_str(),
                                 time_text(host_copy_us / forwards).c_str()));
  }
  if (streams.size() > 1) header.push_back(fmt::format("- kernels ran on {} streams", streams.size()));
  double dram_bytes = 0;
  bool dram_known = false;
  for (const auto& k : kernels) {
    if (known(k.dram_bytes_per_launch)) {
      dram_bytes += k.dram_bytes_per_launch * std::max(k.launches, k.profiled_launches) / forwards;
      dram_known = true;
    }
  }
  if (dram_known && inputs.problem_bytes > 0 && dram_bytes >= kExcessTraffic * inputs.problem_bytes) {
    header.push_back(fmt::format("- the kernels move {:.1f}x the problem's unavoidable bytes ({} per forward vs {})",
                                 dram_bytes / inputs.problem_bytes, bytes_text(dram_bytes).c_str(),
                                 bytes_text(inputs.problem_bytes).c_str()));
  }
  std::map<std::string, std::pair<int, double>> libraries;  // launches, share
  for (const auto& k : kernels) {
    if (k.library == "custom") continue;
    libraries[k.library].first += k.launches;
    libraries[k.library].second += k.share;
  }
  if (!libraries.empty()) {
    std::string line = "- library kernels:";
    bool first = true;
    for (const auto& [library, figures] : libraries) {
      line += fmt::format("{} {} ({}, {} of GPU time)", first ? "" : ",", library.c_str(),
                          count_text(figures.first / forwards, "launch", "launches").c_str(),
                          pct_text(figures.second * 100).c_str());
      first = false;
    }
    header.push_back(line);
  }

  // Whether the counters are there.
  if (!metrics.unavailable.empty()) {
    header.push_back("Hardware counters unavailable: " + metrics.unavailable);
  } else if (!metrics.notes.empty()) {
    std::string line = "Hardware counters partial:";
    for (std::size_t i = 0; i < metrics.notes.size(); ++i) line += (i == 0 ? " " : "; ") + metrics.notes[i];
    header.push_back(line);
  }
  if (!kernels.empty()) header.push_back("Kernels by GPU time:");

  // Kernel sections, ranked.
  std::vector<std::vector<std::string>> blocks;
  for (std::size_t i = 0; i < kernels.size() && blocks.size() < kMaxKernelBlocks; ++i) {
    if (i >= kAlwaysShown && kernels[i].total_us > 0 && kernels[i].share < kMinShownShare) break;
    blocks.push_back(kernel_block(i + 1, kernels[i], inputs));
  }

  // The cap keeps whole lines in rank order: the header, then each kernel's
  // lines from its title down, then a count of the kernels left out.
  auto tail = [&](std::size_t shown) -> std::string {
    if (shown >= kernels.size()) return "";
    double share = 0;
    for (std::size_t i = shown; i < kernels.size(); ++i) share += kernels[i].share;
    std::string line = fmt::format("({} more kernel{}", kernels.size() - shown, kernels.size() - shown == 1 ? "" : "s");
    if (share > 0) line += ": " + pct_text(share * 100) + " of GPU time";
    return line + ")\n";
  };
  std::string text;
  for (const auto& line : header) text += line + "\n";
  if (text.size() + tail(0).size() > max_chars) {
    // Not even the header fits: keep its first lines.
    text.clear();
    for (const auto& line : header) {
      if (text.size() + line.size() + 1 + tail(0).size() > max_chars) break;
      text += line + "\n";
    }
    return text.size() + tail(0).size() <= max_chars ? text + tail(0) : text;
  }
  std::size_t shown = 0;
  for (const auto& block : blocks) {
    bool whole = true;
    for (std::size_t i = 0; i < block.size(); ++i) {
      // A kernel whose title is in is no longer counted in the tail.
      const std::size_t after = i == 0 ? shown + 1 : shown;
      if (text.size() + block[i].size() + 1 + tail(after).size() > max_chars) {
        whole = false;
        break;
      }
      text += block[i] + "\n";
      shown = after;
    }
    if (!whole) break;
  }
  return text + tail(shown);
}

}  // namespace kloop::profiler
