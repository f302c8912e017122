// kloop_eval_bench: prints where the wall time of one evaluation goes:
// candidate compile (cold, cached), reference, candidate, compare; the cost
// of the tensor exchange files; the compile time of a trivial candidate.
// A program that prints figures, not a test: it asserts nothing.
//
//   kloop_eval_bench [--repeats N] [--target cpu|cuda] [--arch sm_90a] [--check-repeats N] [--small]
//
// --check-repeats: rounds of the protocol comparison (section 5, default 3);
// --small: run it at the small cpu dims on the GPU too.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "evaluator/build/build_config.h"
#include "evaluator/evaluate.h"
#include "evaluator/problem/registry.h"
#include "evaluator/runtime/generator.h"
#include "evaluator/runtime/host_tensor.h"
#include "evaluator/timing/sample_stats.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double median(const std::vector<double>& v) { return kloop::summarize(v).median; }  // 0 for none

double median_of(const std::vector<kloop::PhaseTimes>& runs, double kloop::PhaseTimes::*phase) {
  std::vector<double> v;
  for (const auto& t : runs) v.push_back(t.*phase);
  return median(v);
}

// 19_ReLU with a correct candidate: the cached evaluation the sandbox and
// protocol comparisons time (on the GPU at small dims when small_dims).
struct ReluEvaluation {
  kloop::ProblemSpec spec;
  std::string candidate;
  kloop::EvalOptions options;
};

ReluEvaluation relu_evaluation(const std::string& target, bool small_dims) {
  kloop::ProblemRegistry reg(kloop::ProblemRegistry::default_root());
  ReluEvaluation r{reg.load("19_ReLU"), std::string(KLOOP_SOURCE_DIR) + "/examples/cpu/19_ReLU_loop.cpp", {}};
  r.options.max_timing_seconds = 0.2;
  if (target == "cuda") {
    r.options.device = "cuda:0";
    r.options.small_dims = small_dims;
    r.candidate = std::string(KLOOP_SOURCE_DIR) + "/tests/gpu/fixtures/relu_correct.cu";
  }
  return r;
}

// The evaluation under `variants` settings (vary sets variant i's and names
// it), interleaved over rounds + 1 rounds so drift hits all alike; the first
// round warms the caches and is not kept. Phase times per variant.
std::vector<std::vector<kloop::PhaseTimes>> interleaved_phases(
    kloop::Builder& builder, const ReluEvaluation& e, int rounds, int variants,
    const std::function<std::string(kloop::EvalOptions&, int)>& vary) {
  std::vector<std::vector<kloop::PhaseTimes>> out(static_cast<std::size_t>(variants));
  for (int r = 0; r <= rounds; ++r) {
    for (int i = 0; i < variants; ++i) {
      kloop::EvalOptions o = e.options;
      const std::string name = vary(o, i);
      kloop::Evaluator ev(builder, o);
      kloop::Verdict v = ev.evaluate(e.spec, e.candidate);
      if (v.verdict != kloop::VerdictClass::kCorrect) {
        std::fprintf(stderr, "%s: %s: %s\n", name.c_str(), kloop::verdict_name(v.verdict), v.message.c_str());
      }
      if (r > 0) out[static_cast<std::size_t>(i)].push_back(v.phases);
    }
  }
  return out;
}

const char* kTrivial =
    "#include <kloop/kernel_api.h>\n"
    "struct ModelNew {\n"
    "  explicit ModelNew(const kloop::ModuleInit&) {}\n"
    "  at::Tensor forward(const at::Tensor& x) { return x.clamp_min(0); }\n"
    "};\n"
    "KLOOP_REGISTER_CANDIDATE(ModelNew)\n";

const char* kTrivialCuda =
    "#include <kloop/kernel_api.h>\n"
    "#include <ATen/ops/empty_like.h>\n"
    "__global__ void relu(const float* x, float* y, long n) {\n"
    "  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;\n"
    "  if (i < n) y[i] = x[i] > 0 ? x[i] : 0;\n"
    "}\n"
    "struct ModelNew {\n"
    "  explicit ModelNew(const kloop::ModuleInit&) {}\n"
    "  at::Tensor forward(const at::Tensor& x) {\n"
    "    at::Tensor y = at::empty_like(x);\n"
    "    long n = x.numel();\n"
    "    relu<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);\n"
    "    return y;\n"
    "  }\n"
    "};\n"
    "KLOOP_REGISTER_CANDIDATE(ModelNew)\n";

}  // namespace

int main(int argc, char** argv) {
  int repeats = 5;
  std::string target = "cpu";
  std::string arch = "sm_90a";
  int check_repeats = 3;
  bool small = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--repeats" && i + 1 < argc) repeats = std::atoi(argv[++i]);
    else if (a == "--target" && i + 1 < argc) target = argv[++i];
    else if (a == "--arch" && i + 1 < argc) arch = argv[++i];
    else if (a == "--check-repeats" && i + 1 < argc) check_repeats = std::max(1, std::atoi(argv[++i]));
    else if (a == "--small") small = true;
    else {
      std::fprintf(stderr, "usage: %s [--repeats N] [--target cpu|cuda] [--arch sm_90a] [--check-repeats N] [--small]\n",
                   argv[0]);
      return 2;
    }
  }
  const fs::path scratch = fs::temp_directory_path() / ("kloop-bench-" + std::to_string(getpid()));
  fs::create_directories(scratch);
  kloop::BuilderConfig config = kloop::BuilderConfig::from_environment();
  config.cache_dir = (scratch / "cache").string();
  config.cuda_arch = arch;
  kloop::Builder builder(config);
  const kloop::BuildTarget bt = target == "cuda" ? kloop::BuildTarget::kCuda : kloop::BuildTarget::kCpu;

  // 1. Compile time of a trivial candidate with the kernel API's header set.
  std::vector<double> cold, cached;
  for (int r = 0; r < repeats; ++r) {
    fs::path src = scratch / ("trivial" + std::to_string(r) + (target == "cuda" ? ".cu" : ".cpp"));
    std::ofstream(src) << (target == "cuda" ? kTrivialCuda : kTrivial) << "// variant " << r << "\n";
    kloop::BuildResult b = builder.build(src.string(), kloop::ModuleRole::kCandidate, bt);
    if (!b.ok) {
      std::fprintf(stderr, "trivial candidate failed to build:\n%s\n", b.log.c_str());
      return 1;
    }
    cold.push_back(b.seconds);
    cached.push_back(builder.build(src.string(), kloop::ModuleRole::kCandidate, bt).seconds);
  }
  std::printf("# kloop_eval_bench (%s, LibTorch %s, %d repeats)\n\n", target.c_str(), KLOOP_TORCH_VERSION, repeats);
  std::printf("| build of a trivial candidate | median s | min s | max s |\n|---|---|---|---|\n");
  std::printf("| cold (compile + link) | %.3f | %.3f | %.3f |\n", median(cold), *std::min_element(cold.begin(), cold.end()),
              *std::max_element(cold.begin(), cold.end()));
  std::printf("| cached (hash + lookup) | %.4f | %.4f | %.4f |\n\n", median(cached),
              *std::min_element(cached.begin(), cached.end()), *std::max_element(cached.begin(), cached.end()));

  // 2. Tensor exchange through files on tmpfs (what crosses the process boundary).
  std::string shm = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : fs::temp_directory_path().string();
  std::printf("| tensor exchange file (%s) | MiB | write GB/s | read GB/s |\n|---|---|---|---|\n", shm.c_str());
  for (int64_t mib : {1, 64, 512}) {
    kloop::DrawSpec d;
    d.kind = "randn";
    auto t = kloop::generate_tensor("x", kloop::DType::kFloat32, {mib * (1 << 18)}, d, 1);
    std::string path = shm + "/kloop-bench-" + std::to_string(getpid()) + ".safetensors";
    std::vector<double> w, rd;
    for (int r = 0; r < 3; ++r) {
      auto t0 = Clock::now();
      kloop::write_tensor_file(path, {t});
      w.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
      t0 = Clock::now();
      auto back = kloop::read_tensor_file(path);
      rd.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
    fs::remove(path);
    double gb = static_cast<double>(t.bytes.size()) / 1e9;
    std::printf("| | %lld | %.2f | %.2f |\n", static_cast<long long>(mib), gb / median(w), gb / median(rd));
  }
  std::printf("\n");

  // 2b. Drawing one input set on the host, the way the workers did (draw
  //     into a zero-filled vector, then copy into the tensor's fresh memory)
  //     against now (draw straight into the fresh memory). Fresh, untouched
  //     memory stands in for at::empty's (an aligned malloc).
  std::printf("| drawing one randn float32 input | MiB | vector + copy s | straight into memory s | ratio |\n"
              "|---|---|---|---|---|\n");
  for (int64_t mib : {64, 512, 2048}) {
    kloop::DrawSpec d;
    d.kind = "randn";
    const int64_t n = mib * (1 << 18);
    std::vector<double> before, now;
    for (int r = 0; r < 3; ++r) {
      auto t0 = Clock::now();
      {
        auto t = kloop::generate_tensor("x", kloop::DType::kFloat32, {n}, d, 1);
        std::unique_ptr<uint8_t[]> dst(new uint8_t[t.bytes.size()]);
        std::memcpy(dst.get(), t.bytes.data(), t.bytes.size());
      }
      before.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
      t0 = Clock::now();
      {
        std::unique_ptr<uint8_t[]> dst(new uint8_t[static_cast<std::size_t>(n) * 4]);
        kloop::generate_into(dst.get(), "x", kloop::DType::kFloat32, n, d, 1);
      }
      now.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
    std::printf("| | %lld | %.3f | %.3f | %.2fx |\n", static_cast<long long>(mib), median(before), median(now),
                median(before) / median(now));
  }
  std::printf("\n");

  // 3. One evaluation of 19_ReLU split by phase: the first with cold builds,
  //    then `repeats` with everything cached.
  {
    kloop::ProblemRegistry reg(kloop::ProblemRegistry::default_root());
    kloop::ProblemSpec spec = reg.load("19_ReLU");
    kloop::EvalOptions opts;
    opts.max_timing_seconds = 0.2;
    std::string cand = std::string(KLOOP_SOURCE_DIR) + "/examples/cpu/19_ReLU_loop.cpp";
    if (target == "cuda") {
      opts.device = "cuda:0";
      opts.small_dims = true;
      cand = std::string(KLOOP_SOURCE_DIR) + "/tests/gpu/fixtures/relu_correct.cu";
    }
    kloop::Evaluator ev(builder, opts);
    std::printf("| evaluation of 19_ReLU (strict, %s%s) | build cand s | build ref s | reference s | candidate s | compare s | total s |\n",
                opts.device.c_str(), opts.small_dims ? ", small dims" : "");
    std::printf("|---|---|---|---|---|---|---|\n");
    std::vector<double> bc, br, ref, can, cmp, tot, medians;
    std::vector<kloop::PhaseTimes> cached;
    kloop::PhaseTimes cold;
    for (int r = 0; r <= repeats; ++r) {
      kloop::Verdict v = ev.evaluate(spec, cand);
      const auto& p = v.phases;
      if (r == 0) {
        cold = p;
        std::printf("| cold builds (%s; exchange %s) | %.2f | %.2f | %.2f | %.2f | %.3f | %.2f |\n", kloop::verdict_name(v.verdict),
                    v.exchange.c_str(), p.build_candidate, p.build_reference, p.reference, p.candidate, p.compare, p.total);
        continue;
      }
      if (v.candidate_time) medians.push_back(v.candidate_time->median);
      cached.push_back(p);
      bc.push_back(p.build_candidate);
      br.push_back(p.build_reference);
      ref.push_back(p.reference);
      can.push_back(p.candidate);
      cmp.push_back(p.compare);
      tot.push_back(p.total);
    }
    std::printf("| cached builds, median of %d | %.3f | %.3f | %.2f | %.2f | %.3f | %.2f |\n", repeats, median(bc),
                median(br), median(ref), median(can), median(cmp), median(tot));
    std::printf("\n(reference and candidate include process start, LibTorch load, %d test calls and timing capped at "
                "%.1f s per model)\n", 2 * static_cast<int>(kloop::plan_tests(spec, kloop::protocol_by_name("strict"), true, 1).size()),
                *opts.max_timing_seconds);
    // The same evaluations in the order their steps run (PhaseTimes).
    using T = kloop::PhaseTimes;
    std::printf("\n| steps of the evaluation (s) | builds | plan | reference worker | baseline | candidate worker | tests "
                "| timing | end | total |\n|---|---|---|---|---|---|---|---|---|---|\n");
    std::printf("| cold builds | %.2f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.2f |\n",
                cold.build_candidate + cold.build_reference, cold.plan, cold.reference_start, cold.baseline,
                cold.candidate_start, cold.tests, cold.timing, cold.end, cold.total);
    std::printf("| cached builds, median of %d | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.2f |\n",
                repeats, median_of(cached, &T::build_candidate) + median_of(cached, &T::build_reference),
                median_of(cached, &T::plan), median_of(cached, &T::reference_start), median_of(cached, &T::baseline),
                median_of(cached, &T::candidate_start), median_of(cached, &T::tests), median_of(cached, &T::timing),
                median_of(cached, &T::end), median_of(cached, &T::total));
    if (medians.size() > 1) {
      kloop::TimingSummary m = kloop::summarize(medians);
      std::printf("candidate median over %zu evaluations: %.3f us, coefficient of variation %.2f%%\n", medians.size(),
                  m.mean * 1e6, 100 * m.rel_stdev);
    }
  }
  // 4. What the sandbox costs a cached evaluation: the same evaluation with
  //    the candidate unsandboxed (kloop before the sandbox), weak and strict,
  //    interleaved so drift hits all three alike.
  {
    const kloop::Isolation levels[] = {kloop::Isolation::kNone, kloop::Isolation::kWeak, kloop::Isolation::kStrict};
    const ReluEvaluation relu = relu_evaluation(target, /*small_dims=*/true);
    const auto phases = interleaved_phases(builder, relu, repeats, 3, [&](kloop::EvalOptions& o, int l) {
      o.isolation = levels[l];
      return std::string("isolation ") + kloop::isolation_name(levels[l]);
    });
    using T = kloop::PhaseTimes;
    std::printf("\n| cached evaluation of 19_ReLU by sandbox (%s), median of %d | total s | candidate s | total vs none |\n"
                "|---|---|---|---|\n",
                relu.options.device.c_str(), repeats);
    for (int l = 0; l < 3; ++l) {
      std::printf("| %s | %.3f | %.3f | %.3fx |\n", kloop::isolation_name(levels[l]), median_of(phases[l], &T::total),
                  median_of(phases[l], &T::candidate), median_of(phases[l], &T::total) / median_of(phases[0], &T::total));
    }
  }
  // 5. What the integrity checks cost a cached evaluation: the same candidate
  //    under kernelbench (no checks), verified and strict (checked timed
  //    calls, the activity audit, the zero-mean case and the fp64 twin),
  //    interleaved so drift hits all three alike. On the GPU at upstream size
  //    (19_ReLU, 4096 x 393216) unless --small.
  {
    const char* protocols[] = {"kernelbench", "verified", "strict"};
    const ReluEvaluation relu = relu_evaluation(target, small);
    const auto phases = interleaved_phases(builder, relu, check_repeats, 3, [&](kloop::EvalOptions& o, int p) {
      o.protocol = protocols[p];
      return std::string("protocol ") + protocols[p];
    });
    std::printf("\n| cached evaluation of 19_ReLU by protocol (%s, %s dims), median of %d | total s | reference s | "
                "candidate s | compare s | checked timed calls s | activity audit s | total vs kernelbench |\n"
                "|---|---|---|---|---|---|---|---|\n",
                relu.options.device.c_str(), target == "cuda" && !small ? "full" : "small", check_repeats);
    for (int p = 0; p < 3; ++p) {
      using T = kloop::PhaseTimes;
      const auto& t = phases[p];
      std::printf("| %s | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.2fx |\n", protocols[p], median_of(t, &T::total),
                  median_of(t, &T::reference), median_of(t, &T::candidate), median_of(t, &T::compare),
                  median_of(t, &T::timed_checks), median_of(t, &T::activity_audit),
                  median_of(t, &T::total) / median_of(phases[0], &T::total));
    }
  }
  fs::remove_all(scratch);
  return 0;
}
