// Cached compilation of model sources into shared objects.
//
// Cache layout: <cache>/builds/<key>/{module.so, build.log, result.json,
// <role>.cpp|.cu}. A build happens in a private temporary folder that is
// renamed into place, so readers never see a half-written entry, and an
// flock on <key>.lock keeps two processes from compiling the same key.
// result.json carries a MAC (integrity.h) over the entry's key, module.so,
// build.log and its own fields; an entry that fails it was not made by
// kloop (or was changed since), so it is moved to <cache>/untrusted/ and
// built again. The shared PCH entries are signed the same way.
#include "evaluator/build/builder.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/untrusted_tree.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <nlohmann/json.hpp>

#include "evaluator/build/build_config.h"
#include "evaluator/build/cache_entry.h"
#include "evaluator/build/content_hash.h"
#include "evaluator/build/environment.h"
#include "evaluator/build/integrity.h"
#include "evaluator/build/python_env.h"
#include "evaluator/isolation/subprocess.h"

namespace kloop {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace build_cache;

const char* source_name(ModuleRole role, BuildTarget target) {
  if (role == ModuleRole::kReference) return "reference.cpp";
  return target == BuildTarget::kCuda ? "candidate.cu" : "candidate.cpp";
}

}  // namespace

const char* role_name(ModuleRole role) { return role == ModuleRole::kCandidate ? "candidate" : "reference"; }

Builder::Builder(BuilderConfig config) : config_(std::move(config)) {
  const std::string api = config_.include_dirs.empty() ? "" : config_.include_dirs.front();
  for (const char* h : {"/kloop/kernel_api.h", "/kloop/reference_api.h"}) {
    std::string path = api + h;
    if (!fs::exists(path)) throw std::runtime_error("kernel API header " + path + " is missing (KLOOP_KERNEL_API_DIR)");
    api_headers_ += read_file(path);
  }
  // The light API's headers (a test's minimal API folder may lack them).
  for (const char* h : {"/kloop/light_api.h", "/kloop/light_abi.h"}) {
    if (fs::exists(api + h)) api_headers_ += read_file(api + h);
  }
}

// `COMPILER --version`, part of every cache key. Running it costs clang
// about 0.1 s, in every process that builds or looks up a build; so the
// answer is kept in the cache, under the binary's resolved path and stat
// (another or a rebuilt compiler gets another entry) and signed like the
// builds.
std::string Builder::compiler_identity(const std::string& compiler) {
  const std::string resolved = resolve_executable(compiler);
  std::error_code ec;
  const fs::path real = fs::canonical(resolved, ec);
  struct stat st {};
  std::string key;
  if (!ec && ::stat(real.c_str(), &st) == 0) {
    ContentHash h;
    h.add(kBuildFormat).add("compiler-identity").add(compiler).add(resolved).add(real.string());
    for (long long v : {static_cast<long long>(st.st_dev), static_cast<long long>(st.st_ino),
                        static_cast<long long>(st.st_size), static_cast<long long>(st.st_mtim.tv_sec),
                        static_cast<long long>(st.st_mtim.tv_nsec), static_cast<long long>(st.st_ctim.tv_sec),
                        static_cast<long long>(st.st_ctim.tv_nsec)}) {
      h.add(std::to_string(v));
    }
    key = h.hex();
  }
  const fs::path file = fs::path(config_.cache_dir) / "compilers" / key;
  const IntegrityKey ik = IntegrityKey::for_cache(config_.cache_dir);
  if (!key.empty()) {
    const std::string text = file_or_empty(file);
    const std::size_t nl = text.find('\n');
    if (nl != std::string::npos && ik.verify(text.substr(0, nl), {"compiler-identity", key, text.substr(nl + 1)})) {
      return text.substr(nl + 1);
    }
  }
  CommandResult r = run_command({compiler, "--version"}, "", std::chrono::seconds(30));
  if (!r.status.exited || r.status.code != 0) {
    throw std::runtime_error("cannot run the compiler '" + compiler + "': " + r.output);
  }
  if (!key.empty()) {
    fs::create_directories(file.parent_path(), ec);
    write_text_atomically(file, ik.tag({"compiler-identity", key, r.output}) + "\n" + r.output);
  }
  return r.output;
}

// Flags shared by a host compile and the reference header's PCH; they must
// match exactly for GCC to use the PCH.
std::vector<std::string> Builder::host_compile_flags(ModuleRole role) const {
  std::vector<std::string> f = {"-std=c++17", config_.optimization, "-fPIC", "-fvisibility=hidden",
                                "-fdiagnostics-color=never"};
  for (const auto& d : config_.defines) f.push_back("-D" + d);
  f.push_back(role == ModuleRole::kCandidate ? "-DKLOOP_ROLE_CANDIDATE" : "-DKLOOP_ROLE_REFERENCE");
  for (const auto& i : config_.include_dirs) {
    // Re-adding the compiler's own system folders breaks #include_next.
    if (i == "/usr/include" || i == "/usr/local/include") continue;
    f.push_back("-isystem" + i);
  }
  return f;
}

std::vector<std::string> Builder::command(ModuleRole role, BuildTarget target, const std::string& source,
                                          const std::string& output) const {
  std::vector<std::string> cmd;
  // References are plain LibTorch code: the host compiler builds them for
  // either target (only the libraries they link differ). Candidates for
  // CUDA go through nvcc.
  const bool nvcc = target == BuildTarget::kCuda && role == ModuleRole::kCandidate;
  if (!nvcc) {
    cmd.push_back(compiler_for(role, target));
    for (auto& f : host_compile_flags(role)) cmd.push_back(std::move(f));
    cmd.insert(cmd.end(), {"-shared", "-Wl,--no-undefined"});
  } else {
    if (config_.nvcc.empty()) throw std::runtime_error("CUDA builds need nvcc (set KLOOP_NVCC)");
    std::string arch = config_.cuda_arch.empty() ? "sm_90" : config_.cuda_arch;
    std::string compute = "compute_" + arch.substr(3);
    cmd = {config_.nvcc, "-std=c++17", config_.optimization, "-shared", "-Xcompiler=-fPIC,-fvisibility=hidden",
           "-gencode=arch=" + compute + ",code=" + arch, "--expt-relaxed-constexpr", "-Xlinker=--no-undefined",
           "-DKLOOP_ROLE_CANDIDATE"};
    for (const auto& d : config_.defines) cmd.push_back("-D" + d);
    for (const auto& i : config_.include_dirs) {
      if (i != "/usr/include" && i != "/usr/local/include") cmd.push_back("-I" + i);
    }
  }
  cmd.push_back(source);
  cmd.push_back("-o");
  cmd.push_back(output);
  for (const auto& l : config_.library_dirs) {
    cmd.push_back("-L" + l);
    cmd.push_back(nvcc ? "-Xlinker=-rpath," + l : "-Wl,-rpath," + l);
  }
  for (const auto& l : config_.libraries) cmd.push_back("-l" + l);
  if (target == BuildTarget::kCuda) {
    for (const auto& l : config_.cuda_libraries) cmd.push_back("-l" + l);
  }
  return cmd;
}

const std::string& Builder::compiler_for(ModuleRole role, BuildTarget target) const {
  if (target == BuildTarget::kCuda && role == ModuleRole::kCandidate) return config_.nvcc;
  if (role == ModuleRole::kReference && !config_.reference_cxx.empty()) return config_.reference_cxx;
  return config_.cxx;
}

std::string Builder::compiler_identity_cached(const std::string& compiler) {
  auto it = identities_.find(compiler);
  if (it == identities_.end()) it = identities_.emplace(compiler, compiler_identity(compiler)).first;
  return it->second;
}

// The reference header (all of torch::nn) dominates a reference's compile
// time. A precompiled copy per configuration cuts it: with GCC by about half
// (each file still instantiates the header's templates), with clang by about
// five times (-fpch-instantiate-templates does that work once, in the PCH).
// A candidate written against kloop's ATen kernel API compiles
// kloop/kernel_api.h first the same way (GCC only; about a third of its
// compile). A failed PCH build only costs speed: modules then compile without it.
//
// A PCH is code every module of its role compiles with: one planted here
// would replace every one, so it is believed only under its MAC. Hashing it
// (over 100 MB with clang) is left to when a module really compiles with
// it; naming it in a cache key only needs its signed files present.
std::vector<std::string> Builder::reference_pch_flags(bool verified) {
  if (!config_.use_reference_pch) return {};
  return header_pch_flags(reference_pch_, ModuleRole::kReference, verified);
}

std::vector<std::string> Builder::kernel_api_pch_flags(bool verified) {
  // Making it costs about two compiles: a cache that has built only a few
  // modules (a one-off evaluation, a short run, a test's own cache)
  // compiles without.
  const int after = config_.kernel_api_pch_after;
  int entries = 0;
  std::error_code ec;
  for (fs::directory_iterator it(fs::path(config_.cache_dir) / "builds", ec), end; !ec && it != end && entries < after;
       it.increment(ec)) {
    entries += it->is_directory(ec) ? 1 : 0;
  }
  return header_pch_flags(kernel_api_pch_, ModuleRole::kCandidate, verified, entries >= after);
}

std::vector<std::string> Builder::header_pch_flags(HeaderPch& state, ModuleRole role, bool verified, bool make) {
  if (state.checked && (!verified || state.verified)) return state.flags;
  state.flags.clear();
  const bool reference = role == ModuleRole::kReference;
  const std::string& compiler = compiler_for(role, BuildTarget::kCpu);
  const bool clang = compiler_identity_cached(compiler).find("clang version") != std::string::npos;
  // A candidate's compile runs in its sandbox, which sees the PCH's folder
  // only (clang's PCH also names its header, which lives beside it), and
  // its key leaves the PCH out, which only GCC's byte-identical modules allow.
  if (!reference && clang) {
    state.checked = true;
    return state.flags;
  }
  const std::string stem = reference ? "kloop_reference_pch" : "kloop_kernel_api_pch";
  ContentHash h;
  h.add(kBuildFormat).add(reference ? "reference-pch-no-timestamp" : "kernel-api-pch");
  h.add(compiler_identity_cached(compiler)).add(api_headers_);
  for (const auto& f : host_compile_flags(role)) h.add(f);
  const std::string key = h.hex();
  const fs::path root = fs::path(config_.cache_dir) / "pch";
  const fs::path dir = root / key;
  // Clang records the header's absolute path in the PCH, so the header lives
  // beside the entry rather than in the folder that gets renamed into place.
  const fs::path header = root / (key + ".h");
  const std::string output = clang ? "reference.pch" : stem + ".h.gch";
  auto flags = [&]() -> std::vector<std::string> {
    if (clang) return {"-include-pch", (dir / output).string()};
    return {"-include", (dir / (stem + ".h")).string(), "-Winvalid-pch"};
  };
  const std::string api = reference ? "kloop/reference_api.h" : "kloop/kernel_api.h";
  const std::string header_text = "#pragma once\n#include <" + api + ">\n";
  const IntegrityKey ik = IntegrityKey::for_cache(config_.cache_dir);
  // What the MAC covers: the reference PCH's bytes; the candidates' (130 MB,
  // checked by every process that compiles one) its file's identity, as the
  // extension PCH's (cache_entry.h: any write changes it).
  auto proof = [&](const fs::path& f) { return reference ? file_or_empty(f) : file_identity(f); };
  const fs::path used_header = clang ? header : dir / (stem + ".h");
  bool usable = false;
  std::string why;
  auto state_of = [&]() -> EntryState {
    std::error_code ec;
    if (!fs::exists(dir, ec)) return EntryState::kMissing;
    const bool ok = fs::exists(dir / "ok", ec);
    const std::string mac = file_or_empty(dir / "mac");
    if (mac.empty()) {
      why = "no MAC (made before kloop signed its cache, or not by kloop)";
      return EntryState::kUntrusted;
    }
    if (!ok && !fs::exists(dir / "failed", ec)) {
      why = "neither ok nor failed";
      return EntryState::kUntrusted;
    }
    if (ok && file_or_empty(used_header) != header_text) {
      why = used_header.string() + " is not the header kloop wrote";
      return EntryState::kUntrusted;
    }
    if (verified || !ok) {
      const std::string pch = ok ? proof(dir / output) : "";
      if (!ik.verify(mac, {kBuildFormat, "pch-entry", key, ok ? "ok" : "failed", pch})) {
        why = "its MAC does not match " + output;
        return EntryState::kUntrusted;
      }
    }
    usable = ok;
    return EntryState::kTrusted;
  };
  auto trusted = [&] {
    state.verified = verified;
    if (usable) state.flags = flags();
    return state.flags;
  };
  fs::create_directories(root);
  const EntryState first = state_of();
  if (first == EntryState::kMissing && !make) return state.flags;  // looked again at the next compile
  state.checked = true;
  if (first == EntryState::kTrusted) return trusted();
  FileLock lock((root / (key + ".lock")).string());
  const EntryState locked = state_of();
  if (locked == EntryState::kTrusted) return trusted();
  if (locked == EntryState::kUntrusted) {
    quarantine(config_.cache_dir, dir, reference ? "reference PCH" : "kernel API PCH", why);
  }
  static std::atomic<int> counter{0};
  const fs::path tmp = root / (key + ".tmp-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  write_text(header.string(), header_text);
  std::vector<std::string> cmd = {compiler};
  for (auto& f : host_compile_flags(role)) cmd.push_back(std::move(f));
  if (clang) {
    // No header timestamps in the PCH: its key is the headers' content, and a
    // checkout that only touches them must not make it stale.
    cmd.insert(cmd.end(), {"-fpch-instantiate-templates", "-Xclang", "-fno-pch-timestamp"});
  } else {  // GCC finds NAME.gch beside the NAME it is told to include
    write_text((tmp / (stem + ".h")).string(), header_text);
  }
  cmd.insert(cmd.end(), {"-x", "c++-header", clang ? header.string() : stem + ".h", "-o", output});
  CommandResult c = run_command(cmd, tmp.string(), config_.timeout);
  std::string log = c.output;
  if (c.timed_out) {  // retry next time rather than remember the failure
    fs::remove_all(tmp);
    return state.flags;
  }
  bool ok = c.status.exited && c.status.code == 0 && fs::exists(tmp / output);
  if (ok) {
    // Prove the PCH usable where it will live before anyone relies on it.
    write_text((tmp / "probe.cpp").string(), "#include <" + api + ">\n");
    std::vector<std::string> probe = {compiler};
    for (auto& f : host_compile_flags(role)) probe.push_back(std::move(f));
    if (clang) {
      probe.insert(probe.end(), {"-include-pch", (tmp / output).string()});
    } else {
      probe.insert(probe.end(), {"-include", (tmp / (stem + ".h")).string(), "-Winvalid-pch", "-Werror"});
    }
    probe.insert(probe.end(), {"-fsyntax-only", "probe.cpp"});
    CommandResult pc = run_command(probe, tmp.string(), config_.timeout);
    log += pc.output;
    ok = !pc.timed_out && pc.status.exited && pc.status.code == 0;
  }
  write_text((tmp / "build.log").string(), log);
  write_text((tmp / (ok ? "ok" : "failed")).string(), "");
  write_text((tmp / "mac").string(),
             ik.tag({kBuildFormat, "pch-entry", key, ok ? "ok" : "failed", ok ? proof(tmp / output) : ""}));
  std::error_code ec;
  fs::rename(tmp, dir, ec);
  if (ec) {
    fs::remove_all(tmp);
    if (state_of() == EntryState::kTrusted) return trusted();
  } else if (ok) {
    state.verified = true;  // what was just built and signed
    state.flags = flags();
  }
  return state.flags;
}

std::string Builder::cache_key(const std::string& source_text, ModuleRole role, BuildTarget target) {
  ContentHash h;
  h.add(kBuildFormat).add(role_name(role)).add(target == BuildTarget::kCpu ? "cpu" : "cuda");
  h.add(compiler_identity_cached(compiler_for(role, target)));
  // A candidate's compile runs in the sandbox of its level, which decides
  // what it could read: a weak build never serves a strict evaluation.
  if (role == ModuleRole::kCandidate) h.add("isolation").add(isolation_name(config_.isolation));
  for (const auto& part : command(role, target, "SOURCE", "OUTPUT")) h.add(part);
  // The PCH in use (its folder is a hash of what built it), so that a build
  // made with one is never confused with a build made without.
  if (role == ModuleRole::kReference) {
    for (const auto& part : reference_pch_flags()) h.add(part);
  }
  // Not the kernel API's PCH: with GCC's a module is the same byte for byte
  // (BuilderTest.KernelApiCandidatesUseThePrecompiledHeader), so a build
  // made with it or without answers for both, and the PCH can come later.
  h.add(api_headers_).add(source_text);
  return h.hex();
}

bool Builder::uses_kernel_api_pch(const std::string& source, ModuleRole role, BuildTarget target) const {
  if (role != ModuleRole::kCandidate || target != BuildTarget::kCpu || !config_.use_kernel_api_pch) return false;
  // A build that runs with the user's uid (weak, unprivileged) could rewrite
  // the PCH between its check and another candidate's compile.
  if (config_.isolation != Isolation::kStrict && geteuid() != 0) return false;
  std::istringstream lines(source);
  bool in_comment = false;
  for (std::string line; std::getline(lines, line);) {
    const std::size_t b = line.find_first_not_of(" \t\r");
    const std::string t = b == std::string::npos ? "" : line.substr(b);
    if (in_comment) {
      in_comment = t.find("*/") == std::string::npos;
      continue;
    }
    if (t.empty() || t.rfind("//", 0) == 0) continue;
    if (t.rfind("/*", 0) == 0) {
      in_comment = t.find("*/", 2) == std::string::npos;
      continue;
    }
    for (const char* api : {"#include <kloop/kernel_api.h>", "#include \"kloop/kernel_api.h\""}) {
      if (t.rfind(api, 0) != 0) continue;
      const std::size_t rest = t.find_first_not_of(" \t\r", std::strlen(api));
      return rest == std::string::npos || t.compare(rest, 2, "//") == 0;
    }
    // Another #include may come first: the API's header guards itself and
    // does not depend on what was included before it. Anything else (a
    // #define, code) could change what the header means.
    if (t.rfind("#include <", 0) != 0 && t.rfind("#include \"", 0) != 0) return false;
    if (t.find("/*") != std::string::npos || t.find('\\') != std::string::npos) return false;
  }
  return false;
}

BuildResult Builder::build(const std::string& source_path, ModuleRole role, BuildTarget target) {
  return build_text(read_file(source_path), source_path, role, target);
}

BuildResult Builder::build_text(const std::string& source, const std::string& source_path, ModuleRole role,
                                BuildTarget target) {
  Recipe recipe;
  recipe.key = cache_key(source, role, target);
  const std::string src_name = source_name(role, target);
  recipe.files = {{src_name, source}};
  recipe.command = command(role, target, src_name, "module.so");
  if (role == ModuleRole::kReference) recipe.compile_only_flags = [this] { return reference_pch_flags(true); };
  if (uses_kernel_api_pch(source, role, target)) {
    recipe.compile_only_flags = [this] { return kernel_api_pch_flags(true); };
    // Its folder, read-only in the sandbox (which hides the rest of the cache).
    recipe.before_build = [this](std::vector<std::string>& read_only, std::vector<std::string>&) {
      const std::vector<std::string> flags = kernel_api_pch_flags(true);
      if (flags.size() > 1) read_only.push_back(fs::path(flags[1]).parent_path().string());
    };
  }
  recipe.product = "module.so";
  // The compiler reads model-written source: a candidate's compile runs in
  // the sandbox (its folder writable, the headers and libraries it links
  // read-only), so an #include of a file elsewhere fails.
  recipe.sandboxed = role == ModuleRole::kCandidate;
  recipe.read_only = config_.include_dirs;
  recipe.read_only.insert(recipe.read_only.end(), config_.library_dirs.begin(), config_.library_dirs.end());
  recipe.meta = {{"role", role_name(role)}, {"source", source_path}};
  return build_entry(recipe);
}

namespace {

std::string not_a_verdict(const CommandResult& c);

}  // namespace

// torch/extension.h costs the main.cpp of every load_inline extension most
// of its compile (all of LibTorch's C++ frontend and pybind11). kloop
// precompiles it once, with the flags torch gives that main.cpp (read from
// the build.ninja torch writes for a probe extension, so they are torch's
// own whatever its version), outside the sandbox: a header a candidate's
// build could have written would be code that every later candidate
// compiles. The entry is signed: its manifest, the header and the .gch's
// identity (file_identity; kloop has just made it, and hashing its 650 MB
// on every use would cost more than a second) under the cache's MAC.
std::string Builder::extension_pch(BuildTarget target, std::string& note, bool make) {
  const PythonEnvironment& py = python_environment();
  const fs::path scripts = fs::path(candidate_host_script()).parent_path();
  const char* target_name = target == BuildTarget::kCpu ? "cpu" : "cuda";
  ContentHash h;
  h.add(kBuildFormat).add("extension-pch").add(target_name).add(py.executable).add(py.version).add(py.torch_version);
  h.add(compiler_identity_cached("c++")).add(read_file((scripts / "extension_build.py").string()));
  const std::string key = h.hex();
  const fs::path root = fs::path(config_.cache_dir) / "pch";
  const fs::path dir = root / ("extension-" + key);
  const IntegrityKey ik = IntegrityKey::for_cache(config_.cache_dir);
  std::string why;
  auto state = [&]() -> EntryState {
    std::error_code ec;
    if (!fs::exists(dir, ec)) return EntryState::kMissing;
    const std::string mac = file_or_empty(dir / "mac");
    const std::string failed = file_or_empty(dir / "failed");
    if (!failed.empty()) {
      if (ik.verify(mac, {kBuildFormat, "extension-pch", key, "failed", failed})) {
        why = "precompiling torch/extension.h failed (" + (dir / "failed").string() + ")";
        return EntryState::kTrusted;
      }
    } else {
      const std::string manifest = file_or_empty(dir / "manifest.json");
      const std::string header = file_or_empty(dir / "kloop_extension_pch.h");
      const std::string identity = file_identity(dir / "kloop_extension_pch.h.gch");
      if (!manifest.empty() && !identity.empty() &&
          ik.verify(mac, {kBuildFormat, "extension-pch", key, "ok", manifest, header, identity})) {
        why.clear();
        return EntryState::kTrusted;
      }
    }
    why = "its MAC does not match its files (changed since kloop made it, or not made by kloop)";
    return EntryState::kUntrusted;
  };
  auto answer = [&](EntryState s) -> std::string {
    if (s == EntryState::kTrusted && why.empty()) return dir.string();
    note = s == EntryState::kMissing ? "kloop has not precompiled torch/extension.h here" : why;
    return "";
  };
  std::error_code ec;
  fs::create_directories(root, ec);
  EntryState s = state();
  if (s == EntryState::kTrusted || (!make && s == EntryState::kMissing)) return answer(s);
  FileLock lock((root / ("extension-" + key + ".lock")).string());
  s = state();
  if (s == EntryState::kTrusted) return answer(s);
  if (s == EntryState::kUntrusted) {
    quarantine(config_.cache_dir, dir, "extension PCH", why);
    if (!make) {
      note = "kloop's precompiled torch/extension.h was set aside: " + why;
      return "";
    }
  }
  static std::atomic<int> counter{0};
  const fs::path tmp = root / ("extension-" + key + ".tmp-" + owner_tag() + "-" + std::to_string(counter++));
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp);
  // As in the candidate's build, whose sandbox passes no CXX or CC: torch's `c++`.
  std::vector<std::string> cmd = {"env", "-u", "CXX", "-u", "CC"};
  // The arch list the build gives torch (its probe computes nvcc's flags too).
  if (target == BuildTarget::kCuda && config_.cuda_arch.rfind("sm_", 0) == 0 && config_.cuda_arch.size() > 4) {
    const std::string digits = config_.cuda_arch.substr(3);
    cmd.push_back("TORCH_CUDA_ARCH_LIST=" + digits.substr(0, 1) + "." + digits.substr(1));
  }
  cmd.insert(cmd.end(), {py.executable, "-I", candidate_host_script(), "pch", (tmp / "pch").string(), target_name});
  CommandResult c = run_command(cmd, tmp.string(), std::max(config_.timeout, std::chrono::seconds(600)));
  if (c.timed_out || !not_a_verdict(c).empty()) {  // the machine's fault: try again next time
    fs::remove_all(tmp, ec);
    note = "precompiling torch/extension.h did not finish: " + (c.timed_out ? "timed out" : not_a_verdict(c));
    return "";
  }
  const fs::path made = tmp / "pch";
  fs::create_directories(made, ec);
  const bool ok = c.status.exited && c.status.code == 0 && fs::exists(made / "kloop_extension_pch.h.gch", ec) &&
                  fs::exists(made / "manifest.json", ec);
  std::string mac;
  if (ok) {
    const std::string manifest = file_or_empty(made / "manifest.json");
    const std::string header = file_or_empty(made / "kloop_extension_pch.h");
    made_seconds_ = c.seconds;
    mac = ik.tag({kBuildFormat, "extension-pch", key, "ok", manifest, header,
                  file_identity(made / "kloop_extension_pch.h.gch")});
  } else {
    const std::string log = "exit: " + c.status.describe() + "\n" + c.output;
    write_text((made / "failed").string(), log);
    mac = ik.tag({kBuildFormat, "extension-pch", key, "failed", log});
  }
  write_text((made / "mac").string(), mac);
  fs::rename(made, dir, ec);
  fs::remove_all(tmp);
  s = state();
  return answer(s);
}

BuildResult Builder::build_python(const std::string& source_path, BuildTarget target,
                                  const std::string& runtime_requests) {
  const PythonEnvironment& py = python_environment();
  const std::string source = read_file(source_path);
  const std::string host = read_file(candidate_host_script());
  const std::string extension_build =
      read_file((fs::path(candidate_host_script()).parent_path() / "extension_build.py").string());
  Recipe recipe;
  ContentHash h;
  h.add(kBuildFormat).add("python-candidate").add(target == BuildTarget::kCpu ? "cpu" : "cuda");
  h.add(py.executable).add(py.version).add(py.torch_version).add(compiler_identity_cached(config_.cxx));
  h.add("isolation").add(isolation_name(config_.isolation)).add("utf8");
  if (target == BuildTarget::kCuda) h.add(compiler_identity_cached(config_.nvcc)).add(config_.cuda_arch);
  // Not the extension PCH: main.o is the same byte for byte with it or without.
  h.add(host).add(extension_build).add(source).add(config_.light_cuda_headers ? "light-cuda-headers" : "");
  if (!runtime_requests.empty()) h.add("runtime-build-requests").add(runtime_requests);
  recipe.key = h.hex();
  recipe.files = {{"module.py", source}, {"candidate_host.py", host}, {"extension_build.py", extension_build}};
  // UTF-8 mode, as in the worker (python_host.cpp), whatever the locale.
  recipe.command = {py.executable, "-I", "-X", "utf8", "candidate_host.py", "build", "module.py", "extensions"};
  if (!runtime_requests.empty()) {
    recipe.files.push_back({"runtime_builds.json", runtime_requests});
    recipe.command.push_back("runtime_builds.json");
  }
  recipe.product = "module.py";
  recipe.sandboxed = true;
  recipe.runs_model_code = true;
  recipe.read_only = py.installation;
  recipe.read_only.insert(recipe.read_only.end(), config_.include_dirs.begin(), config_.include_dirs.end());
  recipe.read_only.insert(recipe.read_only.end(), config_.library_dirs.begin(), config_.library_dirs.end());
  recipe.meta = {{"role", "candidate"}, {"source", source_path}, {"format", "python"}};
  // load_inline compiles for the device's architecture ("sm_90a" -> "9.0a").
  if (target == BuildTarget::kCuda && config_.cuda_arch.rfind("sm_", 0) == 0 && config_.cuda_arch.size() > 4) {
    const std::string digits = config_.cuda_arch.substr(3);
    recipe.environment.push_back("TORCH_CUDA_ARCH_LIST=" + digits.substr(0, 1) + "." + digits.substr(1));
  }
  if (!config_.light_cuda_headers) recipe.environment.push_back("KLOOP_LIGHT_CUDA_HEADERS=0");
  // Only where the sandbox cannot write it (read-only under strict; owned
  // by root, which the sandbox's uid is not, under weak as root): a
  // candidate that could change it would change every later main.cpp.
  const bool extensions = source.find("load_inline") != std::string::npos ||
                          source.find("cpp_extension") != std::string::npos || !runtime_requests.empty();
  if (!config_.use_extension_pch) recipe.environment.push_back("KLOOP_EXTENSION_PCH_NOTE=KLOOP_EXTENSION_PCH=0");
  if (config_.use_extension_pch && extensions) {
    recipe.before_build = [this, target](std::vector<std::string>& read_only, std::vector<std::string>& environment) {
      std::string note;
      std::string pch;
      if (config_.isolation == Isolation::kStrict || geteuid() == 0) {
        made_seconds_ = 0;
        pch = extension_pch(target, note);
        if (made_seconds_ > 0) environment.push_back("KLOOP_EXTENSION_PCH_MADE=" + std::to_string(made_seconds_));
      } else {
        note = "no precompiled header where the candidate's build runs with your uid (--isolation weak)";
      }
      if (!pch.empty()) {
        read_only.push_back(pch);
        environment.push_back("KLOOP_EXTENSION_PCH=" + pch);
      } else {
        environment.push_back("KLOOP_EXTENSION_PCH_NOTE=" + note);
      }
    };
  }
  return build_entry(recipe);
}

namespace {

// Whether a failed build is the compiler's own verdict on the source, to be
// cached like a success: it ran to its end and said so. A build ended by a
// signal, one of kloop's deadlines or limits, or the machine (no memory, no
// space) says nothing of the source, and is built again next time.
std::string not_a_verdict(const CommandResult& c) {
  if (!c.status.exited) return "the build was " + c.status.describe();
  for (const char* fault : {"signal terminated program", "died due to signal", "virtual memory exhausted",
                            "out of memory", "Cannot allocate memory", "MemoryError", "std::bad_alloc",
                            "No space left on device", "Disk quota exceeded", "File size limit exceeded",
                            "Resource temporarily unavailable", "BlockingIOError", "Killed"}) {
    if (c.output.find(fault) != std::string::npos) {
      return std::string("the build ran into a limit or a fault of the machine (its output says \"") + fault + "\")";
    }
  }
  return "";
}

}  // namespace

BuildResult Builder::build_entry(const Recipe& recipe) {
  const auto start = Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  BuildResult r;
  r.key = recipe.key;
  const fs::path builds = fs::path(config_.cache_dir) / "builds";
  const fs::path entry = builds / r.key;
  const TreeLimits& limits = config_.limits.entry;
  fs::create_directories(builds);

  const IntegrityKey ik = IntegrityKey::for_cache(config_.cache_dir);
  std::string why;
  if (load_entry(entry, r.key, ik, limits, r, why) == EntryState::kTrusted) {
    r.cached = true;
    r.seconds = elapsed();
    return r;
  }
  FileLock lock((builds / (r.key + ".lock")).string());
  // Checked again under the lock: another process may have finished it
  // while we waited, and only a lock holder moves a bad entry aside (so a
  // fresh entry another process just made is never taken for a bad one).
  const EntryState locked = load_entry(entry, r.key, ik, limits, r, why);
  if (locked == EntryState::kTrusted) {
    r.cached = true;
    r.seconds = elapsed();
    return r;
  }
  if (locked == EntryState::kUntrusted) quarantine(config_.cache_dir, entry, "build cache entry", why);

  static std::atomic<int> counter{0};
  const std::string tag = owner_tag() + "-" + std::to_string(counter++);
  const fs::path tmp = builds / (r.key + ".tmp-" + tag);
  // Model-written code runs in `tmp` (the sandbox's only writable folder)
  // and may leave anything there; a folder it could have changed is either
  // made fit to keep (sanitize_tree) or removed, and kloop's own files go
  // in by descriptor, never through a name it could have planted.
  auto discard = [&](const fs::path& dir) {
    const std::string left = remove_tree(dir.string());
    if (!left.empty()) throw std::runtime_error("cannot clean up the build folder " + dir.string() + ": " + left);
  };
  discard(tmp);
  fs::create_directories(tmp);
  for (const auto& [name, text] : recipe.files) replace_file(tmp.string(), name, text);
  std::vector<std::string> command = recipe.command;
  std::vector<std::string> pch_flags;
  if (recipe.compile_only_flags) {
    pch_flags = recipe.compile_only_flags();
    command.insert(command.begin() + 1, pch_flags.begin(), pch_flags.end());
  }
  for (const auto& part : command) r.command += (r.command.empty() ? "" : " ") + part;

  std::vector<std::string> read_only = recipe.read_only;
  std::vector<std::string> environment = recipe.environment;
  if (recipe.before_build) recipe.before_build(read_only, environment);
  SandboxSpec sandbox;
  if (recipe.sandboxed) {
    const BuildLimits& l = config_.limits;
    sandbox.level = config_.isolation;
    sandbox.read_only = read_only;
    sandbox.writable = {tmp.string()};
    sandbox.data_bytes = l.memory_bytes;
    sandbox.file_size_bytes = l.file_size_bytes;
    sandbox.processes = l.processes;
    sandbox.group_memory_bytes = l.memory_bytes;
    sandbox.group_processes = l.processes;
    sandbox.environment = environment;
    // Weak as root: the sandbox's uid, never a root without capabilities
    // (which still reads root's files: `.incbin "../../integrity.key"`).
    sandbox.weak_as_sandbox_uid = true;
    sandbox.hidden = {config_.cache_dir};  // its own folder, inside, stays open
  }
  CommandResult c = run_command(command, tmp.string(), config_.timeout, sandbox);
  // A candidate's compile error with GCC's PCH is the source's (GCC falls
  // back to the header's text when the PCH does not fit); only one that
  // names the PCH (which it could not read) is tried again.
  // (Both compilers' flags name the PCH's file second.)
  const bool pch_named = recipe.sandboxed && pch_flags.size() > 1 &&
                         c.output.find(fs::path(pch_flags[1]).filename().string()) != std::string::npos;
  if (!pch_flags.empty() && !c.timed_out && !(c.status.exited && c.status.code == 0) &&
      (!recipe.sandboxed || pch_named || !c.status.exited)) {
    // A PCH only saves time: a compile that fails with it (a header
    // touched since it was made, a compiler that refuses it) is tried again
    // without, and only that result is a verdict on the source.
    const std::string with_pch = c.output;
    c = run_command(recipe.command, tmp.string(), config_.timeout, sandbox);
    r.command.clear();
    for (const auto& part : recipe.command) r.command += (r.command.empty() ? "" : " ") + part;
    if (c.status.exited && c.status.code == 0) {
      c.output = "[kloop: the compile failed with kloop's PCH and passed without it; the PCH's log:]\n" +
                 with_pch.substr(0, 4000) + "\n" + c.output;
    }
  }
  r.log = c.output;
  r.compile_seconds = c.seconds;
  r.diagnostics = parse_compiler_output(r.log);
  auto uncached = [&](const std::string& failure) {
    discard(tmp);
    r.failure = failure;
    if (r.log.empty()) r.log = failure;
    r.seconds = elapsed();
    return r;
  };
  if (recipe.sandboxed) {
    // Back from the sandbox's uid to ours, links and special files gone,
    // within what an entry may hold.
    const std::string unfit = sanitize_tree(tmp.string(), geteuid() == 0 ? std::optional<uid_t>(0) : std::nullopt, limits);
    if (!unfit.empty()) {
      r.log += "\n[kloop: the build's folder is not kept: " + unfit + "]\n";
      return uncached("the build left a folder kloop does not keep: " + unfit);
    }
  }
  if (c.timed_out) {  // not cached: a rerun on a quieter machine may finish
    r.timed_out = true;
    return uncached("the build did not finish within " + std::to_string(config_.timeout.count()) + " s");
  }
  std::error_code ec;
  struct stat product {};
  r.ok = c.status.exited && c.status.code == 0 && lstat((tmp / recipe.product).c_str(), &product) == 0 &&
         S_ISREG(product.st_mode);
  if (!r.ok) {
    const std::string fault = not_a_verdict(c);
    if (!fault.empty()) return uncached(fault);
  }
  if (!r.ok && r.log.empty()) r.log = "the compiler " + c.status.describe() + " without output";
  nlohmann::json meta = recipe.meta;
  meta["ok"] = r.ok;
  meta["command"] = r.command;
  meta["compile_seconds"] = r.compile_seconds;
  // The tag is over the fields as they will read back (a JSON number
  // round-trips to the same text).
  meta = nlohmann::json::parse(meta.dump());
  std::string digest;
  try {
    digest = r.ok ? entry_digest(tmp, meta, limits) : "";
  } catch (const std::exception& e) {
    return uncached(std::string("the build's product cannot be signed: ") + e.what());
  }
  nlohmann::json signed_meta = meta;
  signed_meta["mac"] = entry_tag(ik, r.key, meta, r.log, digest);
  replace_file(tmp.string(), "build.log", r.log);
  replace_file(tmp.string(), "result.json", signed_meta.dump(2));
  fs::rename(tmp, entry, ec);
  if (ec) {  // someone else's entry won the race: use it
    discard(tmp);
    load_entry(entry, r.key, ik, limits, r, why);
  } else {
    r.library_path = r.ok ? (entry / recipe.product).string() : "";
  }
  r.seconds = elapsed();
  return r;
}

}  // namespace kloop
