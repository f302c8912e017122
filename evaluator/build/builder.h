// CandidateBuild: compiles one model source file (candidate or reference)
// into a shared object with g++ (CPU) or nvcc (CUDA). Builds are cached by a
// content hash of everything that affects the output, are safe when several
// processes build the same source at once, have a timeout, and keep the full
// log plus parsed diagnostics for feedback.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/untrusted_tree.h"
#include "evaluator/build/diagnostics.h"
#include "evaluator/isolation/sandbox.h"

namespace kloop {

enum class ModuleRole { kCandidate, kReference };
enum class BuildTarget { kCpu, kCuda };

const char* role_name(ModuleRole role);

// What a candidate's build may use: the limits its worker runs under
// (EvalOptions; the Evaluator sets them), since the build runs model-written
// code too (a Python file's top level, a compiler fed `#include "/dev/zero"`).
struct BuildLimits {
  uint64_t memory_bytes = 8ull << 30;  // each process's data (RLIMIT_DATA); the tree's memory where a cgroup can be made
  uint64_t processes = 512;            // the tree's processes (a pids cgroup; else RLIMIT_NPROC)
  uint64_t file_size_bytes = 4ull << 30;  // each file written (RLIMIT_FSIZE)
  // What the build's folder may hold when it ends (else the build fails,
  // uncached): depth, entries, bytes (sparse files count in full).
  TreeLimits entry;
};

struct BuilderConfig {
  std::string cache_dir;  // builds live in <cache_dir>/builds
  std::string cxx;        // host compiler for CPU candidates
  std::string reference_cxx;  // host compiler for references (clang when present); empty: cxx
  std::string nvcc;       // empty: CUDA builds unavailable
  std::string cuda_arch;  // e.g. "sm_90a"; set from the device before CUDA builds
  std::vector<std::string> include_dirs;
  std::vector<std::string> library_dirs;
  std::vector<std::string> libraries;       // linked into every module
  std::vector<std::string> cuda_libraries;  // added for CUDA builds
  std::vector<std::string> defines;         // e.g. _GLIBCXX_USE_CXX11_ABI=1
  std::string optimization = "-O2";
  bool use_reference_pch = true;  // precompile reference_api.h once per configuration
  // Precompile kernel_api.h for CPU candidates that include it first, once
  // per configuration (KLOOP_CANDIDATE_PCH=0: off).
  bool use_kernel_api_pch = true;
  // ... once the cache holds this many builds (making it costs about two
  // compiles, which a one-off evaluation or a short run would not win back).
  int kernel_api_pch_after = 16;
  // Precompile torch/extension.h for load_inline's main.cpp, once per
  // python, torch, compiler and target (KLOOP_EXTENSION_PCH=0: off).
  bool use_extension_pch = true;
  // A load_inline .cu that includes torch/extension.h but uses only what
  // torch/types.h declares compiles with torch/types.h in its place
  // (extension_build.py; KLOOP_LIGHT_CUDA_HEADERS=0: off).
  bool light_cuda_headers = true;
  std::chrono::seconds timeout{300};
  // The sandbox a candidate's compile runs in (references are kloop's own);
  // part of a candidate's cache key, so a weak build never serves strict.
  Isolation isolation = Isolation::kStrict;
  BuildLimits limits;

  // Compiler, LibTorch and kernel API locations found when kloop was configured;
  // KLOOP_CACHE_DIR, KLOOP_CXX, KLOOP_REFERENCE_CXX and KLOOP_NVCC override.
  static BuilderConfig from_environment();
};

struct BuildResult {
  bool ok = false;
  bool cached = false;
  bool timed_out = false;
  // Why a failed build is no verdict of the compiler's and was not cached
  // (killed by a signal, a limit of the sandbox hit, the machine's fault, a
  // folder unfit to keep): "" for a build the compiler itself judged.
  std::string failure;
  std::string key;
  std::string library_path;  // the .so when ok
  // The module's entry tag in a reference bundle ("e3": its symbols are
  // kloop_reference_e3_*); empty for a module built alone.
  std::string entry;
  std::string log;           // full compiler output
  std::string command;       // the compile command, for the log
  std::vector<CompilerDiagnostic> diagnostics;
  double seconds = 0;        // wall time of this call (lookup or compile)
  double compile_seconds = 0;  // the compiler's own time when it ran (or when first built)
};

class Builder {
 public:
  explicit Builder(BuilderConfig config);

  BuildResult build(const std::string& source_path, ModuleRole role, BuildTarget target);
  // A KernelBench-format candidate (python_env.h's python3): the file and
  // candidate_host.py copied into the entry, and the candidate imported once
  // in the compile sandbox, so that its load_inline calls compile their
  // extensions into the entry's extensions/. library_path is the entry's
  // module.py; a failed import or compile is a failed build with the
  // traceback and the compiler's output as its log. Throws
  // std::runtime_error when there is no usable python (python_env.h).
  // `runtime_requests`: the runtime build requests (JSON) an evaluation of
  // this file's worker wrote for extensions ModelNew asked for after the
  // import (candidate_host.py); the build makes them after importing, and
  // they are part of the entry's key.
  BuildResult build_python(const std::string& source_path, BuildTarget target,
                           const std::string& runtime_requests = "");
  // References `paths` compiled as one file (reference_bundle_source), and
  // the result for paths[member] (its `entry` set). Compiling references in
  // bundles costs about a tenth of compiling them one by one (the frontend
  // work on LibTorch's headers is done once per bundle). A bundle that
  // cannot be made or does not compile falls back to building the member
  // alone (entry empty).
  BuildResult build_reference_bundle(const std::vector<std::string>& paths, std::size_t member, BuildTarget target);
  // The cache key (also used by tests to check what invalidates a build).
  std::string cache_key(const std::string& source_text, ModuleRole role, BuildTarget target);
  const BuilderConfig& config() const { return config_; }
  void set_cuda_arch(const std::string& arch) { config_.cuda_arch = arch; }
  void set_isolation(Isolation level) { config_.isolation = level; }
  void set_limits(const BuildLimits& limits) { config_.limits = limits; }

 private:
  BuildResult build_text(const std::string& source, const std::string& source_path, ModuleRole role,
                         BuildTarget target);
  // How to make one cache entry: the files to write, the command, what it
  // makes, where it may read, and result.json's own fields.
  struct Recipe {
    std::string key;
    std::vector<std::pair<std::string, std::string>> files;  // name, contents
    std::vector<std::string> command;
    // Flags put after command[0] only when the compile really runs (the
    // reference PCH, whose 100 MB are hashed before a compile relies on it,
    // and which a cached entry does not need).
    std::function<std::vector<std::string>()> compile_only_flags;
    std::string product;  // module.so or module.py
    bool sandboxed = false;
    // Weak isolation as root: run as the sandbox uid, not as a root without
    // capabilities (the build runs model-written code, not only a compiler).
    bool runs_model_code = false;
    std::vector<std::string> read_only;
    std::vector<std::string> environment;  // NAME=VALUE added inside the sandbox
    // Run only when the build really runs, before it (not for a cached
    // entry): may add to what the sandbox reads and its environment.
    std::function<void(std::vector<std::string>& read_only, std::vector<std::string>& environment)> before_build;
    nlohmann::json meta;
  };
  BuildResult build_entry(const Recipe& recipe);
  std::vector<std::string> command(ModuleRole role, BuildTarget target, const std::string& source,
                                   const std::string& output) const;
  std::vector<std::string> host_compile_flags(ModuleRole role) const;
  std::string compiler_identity(const std::string& compiler);
  const std::string& compiler_for(ModuleRole role, BuildTarget target) const;
  std::string compiler_identity_cached(const std::string& compiler);
  // Flags that make a reference compile use the shared PCH; empty when
  // unavailable. `verified`: the PCH's bytes checked against its MAC (before
  // a compile relies on it), not only its signed files present (enough to
  // name it in a cache key).
  std::vector<std::string> reference_pch_flags(bool verified = false);
  // The same for a CPU candidate that includes kloop/kernel_api.h first
  // (uses_kernel_api_pch); empty with clang, when unavailable, or while the
  // cache holds fewer than kernel_api_pch_after builds (it is then not made yet).
  std::vector<std::string> kernel_api_pch_flags(bool verified = false);
  struct HeaderPch {
    bool checked = false;
    bool verified = false;
    std::vector<std::string> flags;
  };
  // `make`: false leaves a missing PCH unmade (and looks again next time).
  std::vector<std::string> header_pch_flags(HeaderPch& state, ModuleRole role, bool verified, bool make = true);
  // Whether a CPU candidate's compile uses the kernel API's PCH: it
  // includes kloop/kernel_api.h with only comments and #include lines
  // before it (so compiling the header first changes nothing), its build
  // runs where it cannot write the PCH (strict, or as root), and
  // KLOOP_CANDIDATE_PCH is not 0.
  bool uses_kernel_api_pch(const std::string& source, ModuleRole role, BuildTarget target) const;
 public:
  // The folder of kloop's precompiled torch/extension.h for a load_inline
  // extension's main.cpp on `target` (extension_build.py), made on first
  // use and signed; "" when it cannot be made, `note` then says why.
  // `make`: false only looks (a test of what is kept).
  std::string extension_pch(BuildTarget target, std::string& note, bool make = true);

 private:

  BuilderConfig config_;
  std::string api_headers_;  // contents of the kernel API headers, part of every key
  std::map<std::string, std::string> identities_;  // compiler path -> `--version` output
  double made_seconds_ = 0;  // extension_pch: what making it took, when it did
  HeaderPch reference_pch_;
  HeaderPch kernel_api_pch_;
};

// One source for the references at `paths`: each in namespace
// kloop_bundle_eN, its KLOOP_REGISTER_REFERENCE exporting
// kloop_reference_eN_*, its #include lines hoisted to the top. nullopt when
// a member has another preprocessor directive (a #define would reach the
// members after it) or a raw string literal (where a line starting with '#'
// is not a directive).
std::optional<std::string> reference_bundle_source(const std::vector<std::string>& paths);

// A compile pool: builds several sources at once, `jobs` at a time (0: one
// per core), each worker with its own Builder. Results come in input order.
// `on_built`, when given, hears of each finished build (from the pool's
// threads, one at a time): how many are done, of how many, and the result.
using BuildProgress = std::function<void(std::size_t done, std::size_t total, const std::string& source,
                                         const BuildResult& result)>;
std::vector<BuildResult> build_many(const BuilderConfig& config, const std::vector<std::string>& sources,
                                    ModuleRole role, BuildTarget target, int jobs = 0,
                                    const BuildProgress& on_built = {});

// The same for reference bundles (Builder::build_reference_bundle), one
// result per bundle (its first member's; the bundle's key when it built).
std::vector<BuildResult> build_bundles_many(const BuilderConfig& config,
                                            const std::vector<std::vector<std::string>>& bundles, BuildTarget target,
                                            int jobs = 0, const BuildProgress& on_built = {});

// A BuildProgress that prints one line per compiled (not cached) source on
// stderr, and one line when all are done.
BuildProgress build_progress_on_stderr(const std::string& what);

}  // namespace kloop
