// kloop_throughput_bench: evaluations per GPU-hour of a real `kloop run` at
// upstream sizes. A command provider plays the model and answers each of 22
// level-1 tasks (elementwise maps, reductions over a dimension, row
// softmaxes) with a correct light-API CUDA kernel this program writes; the
// run is strict, one sample of `--turns` turns per task, so later turns find
// their build and baseline cached. While it runs, nvidia-smi samples the
// GPU's utilisation (the fraction of time a kernel ran).
//
//   kloop_throughput_bench [--device cuda] [--turns 2] [--problems A,B,...]
//                          [--max-timing-seconds S] [--dir DIR] [--keep]
//   kloop_throughput_bench --write-candidates DIR   (only writes the .cu files)
//
// Runs one `kloop run` per turn (each extends the same run folder) and
// prints, as each ends: its evaluations (verdict, compile, queue wait,
// phases), its wall time, evaluations per GPU-hour, the evaluation queue's
// busy fraction (the share of the run during which an evaluation held the
// GPU), the sampled kernel utilisation and the median phase breakdown
// (with the steps of an evaluation: PhaseTimes).
// Turn 1 makes the builds and baselines; later turns find them cached. Builds and baselines come from kloop's cache (KLOOP_CACHE_DIR): the
// first turn finds them there or makes them, later turns find them.
#include <signal.h>
#include <sys/wait.h>
#include <fcntl.h>
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

#include <nlohmann/json.hpp>

#include "agent/llm/provider.h"
#include "agent/scaffold/run_config.h"
#include "agent/scaffold/turn_loop.h"
#include "evaluator/build/environment.h"
#include "evaluator/timing/sample_stats.h"

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (std::size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
  }
  return s;
}

// y = f(x) elementwise; `a` is the constructor argument ARG (or 0).
std::string elementwise(const std::string& expr, const std::string& arg) {
  std::string s = R"(// kloop_throughput_bench: an elementwise map, grid-stride, light API.
#include <kloop/light_api.h>

#include <algorithm>

__global__ void map_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n, float a) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += stride) {
    const float v = x[i];
    y[i] = EXPR;
  }
}

struct ModelNew {
  explicit ModelNew(const kloop::ModuleInit& init) : a_(ARG) { (void)init; }
  kloop::Tensor forward(const kloop::Tensor& x) {
    kloop::Tensor in = x.contiguous();
    kloop::Tensor out = kloop::empty_like(in);
    const int64_t n = in.numel();
    if (n > 0) {
      const int blocks = static_cast<int>(std::min<int64_t>((n + 255) / 256, 132 * 16));
      map_kernel<<<blocks, 256, 0, kloop::current_stream()>>>(in.data_ptr<float>(), out.data_ptr<float>(), n, a_);
    }
    return out;
  }
  float a_;
};
KLOOP_REGISTER_CANDIDATE(ModelNew)
)";
  s = replace_all(s, "EXPR", expr);
  return replace_all(s, "ARG", arg.empty() ? "0.f" : "static_cast<float>(init.arg_float(\"" + arg + "\"))");
}

std::string scalar_product() {
  return R"(// kloop_throughput_bench: C = A * s with s a 0-d tensor on the GPU.
#include <kloop/light_api.h>

#include <algorithm>

__global__ void scale_kernel(const float* __restrict__ x, const float* __restrict__ s, float* __restrict__ y, int64_t n) {
  const float k = *s;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += stride) y[i] = x[i] * k;
}

struct ModelNew {
  kloop::Tensor forward(const kloop::Tensor& a, const kloop::Tensor& s) {
    kloop::Tensor in = a.contiguous();
    kloop::Tensor out = kloop::empty_like(in);
    const int64_t n = in.numel();
    if (n > 0) {
      const int blocks = static_cast<int>(std::min<int64_t>((n + 255) / 256, 132 * 16));
      scale_kernel<<<blocks, 256, 0, kloop::current_stream()>>>(in.data_ptr<float>(), s.data_ptr<float>(),
                                                                out.data_ptr<float>(), n);
    }
    return out;
  }
};
KLOOP_REGISTER_CANDIDATE(ModelNew)
)";
}

// A reduction over the dimension the `dim` argument names: one thread per
// output, reading down the reduced dimension (coalesced across the inner one).
std::string reduction(const std::string& init, const std::string& step, const std::string& result,
                      const std::string& out_type, const std::string& out_dtype, bool keepdim) {
  std::string s = R"(// kloop_throughput_bench: a reduction over one dimension, light API.
#include <kloop/light_api.h>

#include <algorithm>
#include <cmath>
#include <vector>

__global__ void reduce_kernel(const float* __restrict__ x, OUT_T* __restrict__ y, int64_t outer, int64_t r,
                              int64_t inner) {
  const int64_t total = outer * inner, stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t o = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; o < total; o += stride) {
    const float* p = x + (o / inner) * r * inner + o % inner;
    INIT
    for (int64_t k = 0; k < r; ++k) {
      const float v = p[k * inner];
      STEP
    }
    y[o] = RESULT;
  }
}

struct ModelNew {
  explicit ModelNew(const kloop::ModuleInit& init) : dim_(init.arg_int("dim")) {}
  kloop::Tensor forward(const kloop::Tensor& x) {
    kloop::Tensor in = x.contiguous();
    const int64_t d = dim_ < 0 ? dim_ + in.dim() : dim_;
    int64_t outer = 1, inner = 1;
    std::vector<int64_t> shape;
    for (int64_t i = 0; i < in.dim(); ++i) {
      if (i < d) outer *= in.size(i);
      if (i > d) inner *= in.size(i);
      if (i != d) shape.push_back(in.size(i));
      else if (KEEPDIM) shape.push_back(1);
    }
    kloop::Tensor out = kloop::empty(shape, kloop::DType::OUT_DTYPE);
    if (outer * inner > 0) {
      const int blocks = static_cast<int>(std::min<int64_t>((outer * inner + 255) / 256, 132 * 16));
      reduce_kernel<<<blocks, 256, 0, kloop::current_stream()>>>(in.data_ptr<float>(), out.data_ptr<OUT_T>(), outer,
                                                                 in.size(d), inner);
    }
    return out;
  }
  int64_t dim_;
};
KLOOP_REGISTER_CANDIDATE(ModelNew)
)";
  s = replace_all(s, "INIT", init);
  s = replace_all(s, "STEP", step);
  s = replace_all(s, "RESULT", result);
  s = replace_all(s, "OUT_T", out_type);
  s = replace_all(s, "OUT_DTYPE", out_dtype);
  return replace_all(s, "KEEPDIM", keepdim ? "true" : "false");
}

// Softmax or log-softmax over the rows of a 2-D tensor: one block per row.
std::string row_softmax(bool log) {
  std::string s = R"(// kloop_throughput_bench: a row softmax, one 1024-thread block per row, light API.
#include <kloop/light_api.h>

#include <cmath>

__device__ float block_reduce(float v, bool is_max, float* shared) {
  for (int o = 16; o > 0; o >>= 1) {
    const float w = __shfl_xor_sync(0xffffffffu, v, o);
    v = is_max ? fmaxf(v, w) : v + w;
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < warps ? shared[lane] : (is_max ? -INFINITY : 0.f);
    for (int o = 16; o > 0; o >>= 1) {
      const float w = __shfl_xor_sync(0xffffffffu, v, o);
      v = is_max ? fmaxf(v, w) : v + w;
    }
    if (lane == 0) shared[0] = v;
  }
  __syncthreads();
  v = shared[0];
  __syncthreads();
  return v;
}

__global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y, int64_t cols) {
  __shared__ float shared[32];
  const float* row = x + static_cast<int64_t>(blockIdx.x) * cols;
  float* out = y + static_cast<int64_t>(blockIdx.x) * cols;
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) m = fmaxf(m, row[j]);
  m = block_reduce(m, true, shared);
  float s = 0.f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) s += expf(row[j] - m);
  s = block_reduce(s, false, shared);
#if LOG_SOFTMAX
  const float shift = m + logf(s);
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) out[j] = row[j] - shift;
#else
  const float inv = 1.f / s;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) out[j] = expf(row[j] - m) * inv;
#endif
}

struct ModelNew {
  explicit ModelNew(const kloop::ModuleInit& init) {
    if (init.has_arg("dim") && init.arg_int("dim") != 1 && init.arg_int("dim") != -1) {
      throw std::runtime_error("this kernel reduces the last dimension of a 2-D tensor");
    }
  }
  kloop::Tensor forward(const kloop::Tensor& x) {
    kloop::Tensor in = x.contiguous();
    kloop::Tensor out = kloop::empty_like(in);
    if (in.numel() > 0) {
      softmax_rows<<<static_cast<unsigned>(in.size(0)), 1024, 0, kloop::current_stream()>>>(
          in.data_ptr<float>(), out.data_ptr<float>(), in.size(1));
    }
    return out;
  }
};
KLOOP_REGISTER_CANDIDATE(ModelNew)
)";
  return replace_all(s, "LOG_SOFTMAX", log ? "1" : "0");
}

std::map<std::string, std::string> candidates() {
  std::map<std::string, std::string> c;
  c["5_Matrix_scalar_multiplication"] = scalar_product();
  c["19_ReLU"] = elementwise("v > 0.f ? v : 0.f", "");
  c["20_LeakyReLU"] = elementwise("v > 0.f ? v : v * a", "negative_slope");
  c["21_Sigmoid"] = elementwise("1.f / (1.f + expf(-v))", "");
  c["22_Tanh"] = elementwise("tanhf(v)", "");
  c["25_Swish"] = elementwise("v / (1.f + expf(-v))", "");
  c["26_GELU_"] = elementwise("0.5f * v * (1.f + erff(v * 0.70710678118654752f))", "");
  c["27_SELU_"] = elementwise("1.0507009873554805f * (v > 0.f ? v : 1.6732632423543772f * expm1f(v))", "");
  c["28_HardSigmoid"] = elementwise("fminf(fmaxf(v / 6.f + 0.5f, 0.f), 1.f)", "");
  c["29_Softplus"] = elementwise("v > 20.f ? v : log1pf(expf(v))", "");
  c["30_Softsign"] = elementwise("v / (1.f + fabsf(v))", "");
  c["31_ELU"] = elementwise("v > 0.f ? v : a * expm1f(v)", "alpha");
  c["32_HardTanh"] = elementwise("fminf(fmaxf(v, -1.f), 1.f)", "");
  c["88_MinGPTNewGelu"] =
      elementwise("0.5f * v * (1.f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)))", "");
  c["47_Sum_reduction_over_a_dimension"] = reduction("float acc = 0.f;", "acc += v;", "acc", "float", "Float32", true);
  c["48_Mean_reduction_over_a_dimension"] =
      reduction("float acc = 0.f;", "acc += v;", "acc / static_cast<float>(r)", "float", "Float32", false);
  c["49_Max_reduction_over_a_dimension"] =
      reduction("float acc = -INFINITY;", "acc = fmaxf(acc, v);", "acc", "float", "Float32", false);
  c["53_Min_reduction_over_a_dimension"] =
      reduction("float acc = INFINITY;", "acc = fminf(acc, v);", "acc", "float", "Float32", false);
  c["51_Argmax_over_a_dimension"] = reduction("float best = -INFINITY; int64_t at = 0;",
                                              "if (v > best) { best = v; at = k; }", "at", "int64_t", "Int64", false);
  c["52_Argmin_over_a_dimension"] = reduction("float best = INFINITY; int64_t at = 0;",
                                              "if (v < best) { best = v; at = k; }", "at", "int64_t", "Int64", false);
  c["23_Softmax"] = row_softmax(false);
  c["24_LogSoftmax"] = row_softmax(true);
  return c;
}

// A number field, 0 when absent or null.
double num(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
}

double median(const std::vector<double>& v) { return kloop::summarize(v).median; }  // 0 for none

// nvidia-smi printing the GPU's utilisation every 200 ms into a file.
class UtilisationSampler {
 public:
  UtilisationSampler(const std::string& device, const fs::path& file) : file_(file) {
    const std::string index = kloop::nvidia_smi_device_id(device == "cuda" ? "cuda:0" : device);
    pid_ = fork();
    if (pid_ == 0) {
      const int fd = open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) dup2(fd, 1);
      execlp("nvidia-smi", "nvidia-smi", "-i", index.c_str(), "--query-gpu=utilization.gpu",
             "--format=csv,noheader,nounits", "-lms", "200", static_cast<char*>(nullptr));
      _exit(127);
    }
  }
  // Mean utilisation in percent and the number of samples (0: none).
  std::pair<double, int> stop() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
    std::ifstream in(file_);
    double sum = 0;
    int n = 0;
    for (std::string line; std::getline(in, line);) {
      try {
        sum += std::stod(line);
        ++n;
      } catch (const std::exception&) {
      }
    }
    return {n ? sum / n : 0, n};
  }
  ~UtilisationSampler() { stop(); }

 private:
  fs::path file_;
  pid_t pid_ = -1;
};

}  // namespace

int main(int argc, char** argv) {
  std::string device = "cuda", problems_flag, dir_flag;
  int turns = 2;
  double max_timing = 0;
  bool keep = false;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    const bool has_value = i + 1 < argc;
    if (flag == "--device" && has_value) device = argv[++i];
    else if (flag == "--turns" && has_value) turns = std::max(1, std::stoi(argv[++i]));
    else if (flag == "--problems" && has_value) problems_flag = argv[++i];
    else if (flag == "--max-timing-seconds" && has_value) max_timing = std::stod(argv[++i]);
    else if (flag == "--dir" && has_value) dir_flag = argv[++i];
    else if (flag == "--keep") keep = true;
    else if (flag == "--write-candidates" && has_value) {
      const fs::path out = argv[++i];
      fs::create_directories(out);
      for (const auto& [name, source] : candidates()) std::ofstream(out / (name + ".cu")) << source;
      return 0;
    }
    else {
      std::cerr << "kloop_throughput_bench: unknown option " << flag
                << " (--device D, --turns N, --problems A,B, --max-timing-seconds S, --dir DIR, --keep,"
                   " --write-candidates DIR)\n";
      return 2;
    }
  }
  std::map<std::string, std::string> all = candidates();
  std::vector<std::string> problems;
  if (problems_flag.empty()) {
    for (const auto& [name, source] : all) problems.push_back(name);
  } else {
    std::istringstream in(problems_flag);
    for (std::string name; std::getline(in, name, ',');) {
      if (!all.count(name)) {
        std::cerr << "kloop_throughput_bench: no candidate for " << name << "\n";
        return 2;
      }
      problems.push_back(name);
    }
  }
  const fs::path dir = dir_flag.empty() ? fs::temp_directory_path() / ("kloop-throughput-" + std::to_string(getpid()))
                                        : fs::absolute(dir_flag);
  fs::create_directories(dir / "candidates");
  for (const auto& name : problems) std::ofstream(dir / "candidates" / (name + ".cu")) << all[name];
  // The model: answers with the candidate of the task its prompt names.
  std::ofstream(dir / "answer.sh") << "n=$(sed -n 's/^# Task: //p' | head -n 1)\nprintf '```cuda\\n'\ncat \""
                                   << (dir / "candidates").string() << "/$n.cu\"\nprintf '```\\n'\n";
  std::string names;
  for (const auto& n : problems) names += (names.empty() ? "" : ", ") + n;
  const std::string run_name = "throughput-" + std::to_string(getpid());
  {
    std::ofstream cfg(dir / "throughput.yaml");
    cfg << "name: " << run_name << "\nruns_dir: " << (dir / "runs").string() << "\nproblems: {suite: kernelbench, names: ["
        << names << "]}\ndevice: " << device << "\nprotocol: strict\n"
        << "provider: {kind: command, model: fixed, concurrency: 4, command: [sh, " << (dir / "answer.sh").string()
        << "]}\nscaffold: {kind: iterative, samples: 1, turns: " << turns << "}\nevaluation: {timeout_s: 300";
    if (max_timing > 0) cfg << ", max_timing_seconds: " << max_timing;
    cfg << "}\n";
  }
  const kloop::RunConfig config = kloop::load_run_config((dir / "throughput.yaml").string());
  std::cout << "# kloop_throughput_bench: " << problems.size() << " level-1 tasks x " << turns
            << " turn(s), strict, upstream sizes, on " << device << "\n# " << kloop::machine_environment(device).dump()
            << "\n";
  std::cout.flush();

  // One `kloop run` per turn over the same run folder (a longer run extends
  // the stored one), each printed as soon as it ends: turn 1 pays for the
  // builds and baselines, later turns show the steady state, and a run cut
  // short still leaves the figures of the turns it finished.
  int evaluations = 0, correct = 0;
  for (int turn = 1; turn <= turns; ++turn) {
    kloop::RunConfig phase = config;
    phase.scaffold.turns = turn;
    UtilisationSampler sampler(device, dir / ("utilisation-" + std::to_string(turn) + ".csv"));
    auto provider = kloop::make_provider(phase.provider);
    kloop::TurnLoop loop(phase, *provider, std::cerr);
    const kloop::LoopSummary summary = loop.run();
    const auto [utilisation, utilisation_samples] = sampler.stop();
    for (const auto& e : summary.errors) std::cerr << "kloop_throughput_bench: " << e << "\n";

    std::cout << "\n## turn " << turn << (turn == 1 ? " (builds and baselines made here)" : " (builds and baselines cached)")
              << "\n| problem | verdict | compile s | cached | queue s | eval s | reference s | candidate s | compare s | "
                 "speedup | baseline | candidate timing |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n";
    std::map<std::string, std::vector<double>> p;  // phase -> values
    int n = 0;
    for (const auto& entry : fs::directory_iterator(summary.run_path)) {
      const std::string file = entry.path().filename().string();
      if (file.rfind("results", 0) != 0 || entry.path().extension() != ".jsonl") continue;
      std::ifstream in(entry.path());
      for (std::string line; std::getline(in, line);) {
        json r;
        try {
          r = json::parse(line);
        } catch (const json::exception&) {
          continue;
        }
        if (static_cast<int>(num(r, "turn")) != turn) continue;
        ++n;
        const std::string verdict = r.value("verdict", "");
        correct += verdict == "correct" ? 1 : 0;
        json v;
        std::ifstream vin(fs::path(summary.run_path) / r.value("attempt_dir", "") / "verdict.json");
        if (vin) v = json::parse(vin, nullptr, false);
        const json ph = v.is_object() ? v.value("phases", json::object()) : json::object();
        // eval_seconds covers the compile and the wait for the GPU too.
        const double eval = num(r, "eval_seconds") - num(r, "compile_seconds") - num(r, "queue_seconds");
        p["compile"].push_back(num(r, "compile_seconds"));
        p["queue"].push_back(num(r, "queue_seconds"));
        p["eval"].push_back(eval);
        for (const char* k : {"reference", "candidate", "compare", "build_reference", "plan", "reference_start",
                              "baseline", "candidate_start", "tests", "timing", "end"}) {
          p[k].push_back(num(ph, k));
        }
        // Where the timing went: the baseline from the cache or measured
        // now (its samples and seconds), and the candidate's samples,
        // seconds and why its loop stopped (the noise target or a cap).
        const json timing = v.is_object() ? v.value("timing", json::object()) : json::object();
        auto loop = [](const json& t) {
          if (!t.is_object()) return std::string("-");
          char s[160];
          std::snprintf(s, sizeof s, "%d in %.2f s, %s", static_cast<int>(num(t, "n")), num(t, "total"),
                        t.value("stop_reason", "").c_str());
          return std::string(s);
        };
        const std::string baseline = timing.value("baseline_cached", false)
                                         ? "cached"
                                         : "measured: " + loop(timing.value("reference", json()));
        char row[1024];
        std::snprintf(row, sizeof row, "| %s | %s | %.2f | %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.3g | %s | %s |\n",
                      r.value("problem", "").c_str(), verdict.c_str(), num(r, "compile_seconds"),
                      r.value("build_cached", false) ? "yes" : "no", num(r, "queue_seconds"), eval, num(ph, "reference"),
                      num(ph, "candidate"), num(ph, "compare"), num(r, "speedup"), baseline.c_str(),
                      loop(timing.value("candidate", json())).c_str());
        std::cout << row;
        if (verdict != "correct") std::cout << "  " << r.value("message", "").substr(0, 300) << "\n";
      }
    }
    evaluations += n;
    double busy = 0;
    for (const auto& q : summary.queues) busy += q.busy_seconds;
    const double queues = std::max<std::size_t>(1, summary.queues.size());
    std::printf("turn %d: %d evaluation(s) in %.1f s: %.0f evaluations per GPU-hour; evaluation queue busy %.1f s of %.1f s "
                "(%.0f%%)",
                turn, n, summary.seconds, summary.seconds > 0 ? 3600.0 * n / summary.seconds / queues : 0.0, busy,
                summary.seconds * queues, summary.seconds > 0 ? 100 * busy / (summary.seconds * queues) : 0.0);
    if (utilisation_samples > 0) {
      std::printf("; GPU kernel utilisation (nvidia-smi, %d samples) %.0f%%\n", utilisation_samples, utilisation);
    } else {
      std::printf("; GPU utilisation not sampled (no nvidia-smi)\n");
    }
    for (std::size_t q = 0; q < summary.queues.size(); ++q) {  // one per GPU
      const auto& f = summary.queues[q];
      std::printf("  queue %zu (%s): %d evaluation(s), busy %.1f s (%.0f%%)\n", q, f.device.c_str(), f.evaluations,
                  f.busy_seconds, summary.seconds > 0 ? 100 * f.busy_seconds / summary.seconds : 0.0);
    }
    auto m = [&](const char* k) { return p.count(k) ? median(p.at(k)) : 0.0; };
    std::printf("turn %d median per evaluation: compile %.2f s, queue %.2f s, eval %.2f s (reference build %.2f s, "
                "reference %.2f s, candidate %.2f s, compare %.2f s)\n",
                turn, m("compile"), m("queue"), m("eval"), m("build_reference"), m("reference"), m("candidate"),
                m("compare"));
    std::printf("turn %d median steps of an evaluation on the GPU: plan %.2f s, reference worker %.2f s, baseline %.2f s, "
                "candidate worker %.2f s, tests %.2f s, timing %.2f s, end %.2f s\n",
                turn, m("plan"), m("reference_start"), m("baseline"), m("candidate_start"), m("tests"), m("timing"),
                m("end"));
    std::cout.flush();
  }
  std::printf("\n%d evaluation(s), %d correct\n", evaluations, correct);
  if (!keep && dir_flag.empty()) fs::remove_all(dir);
  return correct == evaluations && evaluations > 0 ? 0 : 1;
}
