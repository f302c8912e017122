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
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
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
#include "evaluator/build/content_hash.h"
#include "evaluator/build/environment.h"
#include "evaluator/build/integrity.h"
#include "evaluator/isolation/subprocess.h"

namespace kloop {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr const char* kBuildFormat = "kloop-build-2";

// Holds an exclusive flock for its lifetime.
class FileLock {
 public:
  explicit FileLock(const std::string& path) : fd_(open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644)) {
    if (fd_ < 0) throw std::runtime_error(path + ": cannot open the build lock");
    while (flock(fd_, LOCK_EX) != 0) {
      if (errno != EINTR) throw std::runtime_error(path + ": cannot take the build lock");
    }
  }
  ~FileLock() {
    flock(fd_, LOCK_UN);
    close(fd_);
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_;
};

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw std::runtime_error(path + ": cannot write");
}

const char* source_name(ModuleRole role, BuildTarget target) {
  if (role == ModuleRole::kReference) return "reference.cpp";
  return target == BuildTarget::kCuda ? "candidate.cu" : "candidate.cpp";
}

enum class EntryState { kMissing, kTrusted, kUntrusted };

std::string file_or_empty(const fs::path& p) {
  std::error_code ec;
  if (!fs::exists(p, ec)) return "";
  return read_file(p.string());
}

// The MAC of a build entry: which key it answers for, what it says, and the
// bytes it hands out (the library) or feeds back (the log).
std::string entry_tag(const IntegrityKey& ik, const std::string& key, const nlohmann::json& meta,
                      const std::string& log, const std::string& library) {
  return ik.tag({kBuildFormat, "build-entry", key, meta.dump(), log, library});
}

// Loads a finished cache entry into `r` when its MAC holds; `why` says what
// is wrong with an untrusted one.
EntryState load_entry(const fs::path& dir, const std::string& key, const IntegrityKey& ik, BuildResult& r,
                      std::string& why) {
  std::ifstream in(dir / "result.json");
  if (!in) {
    std::error_code ec;
    if (!fs::exists(dir, ec)) return EntryState::kMissing;
    why = "no result.json";
    return EntryState::kUntrusted;
  }
  nlohmann::json j;
  try {
    in >> j;
  } catch (const nlohmann::json::exception&) {
    why = "result.json is not JSON";
    return EntryState::kUntrusted;
  }
  if (!j.is_object() || !j.contains("mac") || !j["mac"].is_string()) {
    why = "result.json has no MAC (made before kloop signed its cache, or not by kloop)";
    return EntryState::kUntrusted;
  }
  const std::string mac = j["mac"].get<std::string>();
  j.erase("mac");
  const bool ok = j.value("ok", false);
  const std::string log = file_or_empty(dir / "build.log");
  const std::string library = ok ? file_or_empty(dir / "module.so") : "";
  if (!ik.verify(mac, {kBuildFormat, "build-entry", key, j.dump(), log, library})) {
    why = "its MAC does not match module.so, build.log and result.json";
    return EntryState::kUntrusted;
  }
  r.ok = ok;
  r.command = j.value("command", "");
  r.compile_seconds = j.value("compile_seconds", 0.0);
  r.log = log;
  r.diagnostics = parse_compiler_output(r.log);
  r.library_path = ok ? (dir / "module.so").string() : "";
  return EntryState::kTrusted;
}

// Moves an untrusted entry out of the way (kept for inspection) and says so.
void quarantine(const fs::path& cache_dir, const fs::path& dir, const std::string& what, const std::string& why) {
  static std::atomic<int> counter{0};
  const fs::path aside = cache_dir / "untrusted";
  const fs::path target =
      aside / (dir.filename().string() + "-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
  std::error_code ec;
  fs::create_directories(aside, ec);
  fs::rename(dir, target, ec);
  if (ec) fs::remove_all(dir, ec);
  warn_untrusted(what + " " + dir.string() + " is not trusted (" + why + "); moved to " + target.string() +
                 " and built again");
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

std::string Builder::compiler_identity(const std::string& compiler) {
  CommandResult r = run_command({compiler, "--version"}, "", std::chrono::seconds(30));
  if (!r.status.exited || r.status.code != 0) {
    throw std::runtime_error("cannot run the compiler '" + compiler + "': " + r.output);
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

bool Builder::reference_compiler_is_clang() {
  return compiler_identity_cached(compiler_for(ModuleRole::kReference, BuildTarget::kCpu)).find("clang version") !=
         std::string::npos;
}

// The reference header (all of torch::nn) dominates a reference's compile
// time. A precompiled copy per configuration cuts it: with GCC by about half
// (each file still instantiates the header's templates), with clang by about
// five times (-fpch-instantiate-templates does that work once, in the PCH).
// A failed PCH build only costs speed: references then compile without it.
//
// A PCH is code every reference compiles with: one planted here would
// replace every reference, so it is believed only under its MAC. Hashing it
// (over 100 MB with clang) is left to when a reference really compiles with
// it; naming it in a cache key only needs its signed files present.
std::vector<std::string> Builder::reference_pch_flags(bool verified) {
  if (pch_checked_ && (!verified || pch_verified_)) return pch_flags_;
  pch_checked_ = true;
  pch_flags_.clear();
  if (!config_.use_reference_pch) return pch_flags_;
  const std::string& compiler = compiler_for(ModuleRole::kReference, BuildTarget::kCpu);
  const bool clang = reference_compiler_is_clang();
  ContentHash h;
  h.add(kBuildFormat).add("reference-pch").add(compiler_identity_cached(compiler)).add(api_headers_);
  for (const auto& f : host_compile_flags(ModuleRole::kReference)) h.add(f);
  const std::string key = h.hex();
  const fs::path root = fs::path(config_.cache_dir) / "pch";
  const fs::path dir = root / key;
  // Clang records the header's absolute path in the PCH, so the header lives
  // beside the entry rather than in the folder that gets renamed into place.
  const fs::path header = root / (key + ".h");
  const std::string output = clang ? "reference.pch" : "kloop_reference_pch.h.gch";
  auto flags = [&]() -> std::vector<std::string> {
    if (clang) return {"-include-pch", (dir / output).string()};
    return {"-include", (dir / "kloop_reference_pch.h").string(), "-Winvalid-pch"};
  };
  const std::string header_text = "#pragma once\n#include <kloop/reference_api.h>\n";
  const IntegrityKey ik = IntegrityKey::for_cache(config_.cache_dir);
  const fs::path used_header = clang ? header : dir / "kloop_reference_pch.h";
  bool usable = false;
  std::string why;
  auto state = [&]() -> EntryState {
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
      const std::string pch = ok ? file_or_empty(dir / output) : "";
      if (!ik.verify(mac, {kBuildFormat, "pch-entry", key, ok ? "ok" : "failed", pch})) {
        why = "its MAC does not match " + output;
        return EntryState::kUntrusted;
      }
    }
    usable = ok;
    return EntryState::kTrusted;
  };
  auto trusted = [&] {
    pch_verified_ = verified;
    if (usable) pch_flags_ = flags();
    return pch_flags_;
  };
  fs::create_directories(root);
  if (state() == EntryState::kTrusted) return trusted();
  FileLock lock((root / (key + ".lock")).string());
  const EntryState locked = state();
  if (locked == EntryState::kTrusted) return trusted();
  if (locked == EntryState::kUntrusted) quarantine(config_.cache_dir, dir, "reference PCH", why);
  static std::atomic<int> counter{0};
  const fs::path tmp = root / (key + ".tmp-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  write_text(header.string(), header_text);
  std::vector<std::string> cmd = {compiler};
  for (auto& f : host_compile_flags(ModuleRole::kReference)) cmd.push_back(std::move(f));
  if (clang) {
    cmd.push_back("-fpch-instantiate-templates");
  } else {  // GCC finds NAME.gch beside the NAME it is told to include
    write_text((tmp / "kloop_reference_pch.h").string(), header_text);
  }
  cmd.insert(cmd.end(), {"-x", "c++-header", clang ? header.string() : "kloop_reference_pch.h", "-o", output});
  CommandResult c = run_command(cmd, tmp.string(), config_.timeout);
  std::string log = c.output;
  if (c.timed_out) {  // retry next time rather than remember the failure
    fs::remove_all(tmp);
    return pch_flags_;
  }
  bool ok = c.status.exited && c.status.code == 0 && fs::exists(tmp / output);
  if (ok) {
    // Prove the PCH usable where it will live before anyone relies on it.
    write_text((tmp / "probe.cpp").string(), "#include <kloop/reference_api.h>\n");
    std::vector<std::string> probe = {compiler};
    for (auto& f : host_compile_flags(ModuleRole::kReference)) probe.push_back(std::move(f));
    if (clang) {
      probe.insert(probe.end(), {"-include-pch", (tmp / output).string()});
    } else {
      probe.insert(probe.end(), {"-include", (tmp / "kloop_reference_pch.h").string(), "-Winvalid-pch", "-Werror"});
    }
    probe.insert(probe.end(), {"-fsyntax-only", "probe.cpp"});
    CommandResult pc = run_command(probe, tmp.string(), config_.timeout);
    log += pc.output;
    ok = !pc.timed_out && pc.status.exited && pc.status.code == 0;
  }
  write_text((tmp / "build.log").string(), log);
  write_text((tmp / (ok ? "ok" : "failed")).string(), "");
  write_text((tmp / "mac").string(),
             ik.tag({kBuildFormat, "pch-entry", key, ok ? "ok" : "failed", ok ? read_file((tmp / output).string()) : ""}));
  std::error_code ec;
  fs::rename(tmp, dir, ec);
  if (ec) {
    fs::remove_all(tmp);
    if (state() == EntryState::kTrusted) return trusted();
  } else if (ok) {
    pch_verified_ = true;  // what was just built and signed
    pch_flags_ = flags();
  }
  return pch_flags_;
}

std::string Builder::cache_key(const std::string& source_text, ModuleRole role, BuildTarget target) {
  ContentHash h;
  h.add(kBuildFormat).add(role_name(role)).add(target == BuildTarget::kCpu ? "cpu" : "cuda");
  h.add(compiler_identity_cached(compiler_for(role, target)));
  for (const auto& part : command(role, target, "SOURCE", "OUTPUT")) h.add(part);
  // The PCH in use (its folder is a hash of what built it), so that a build
  // made with one is never confused with a build made without.
  if (role == ModuleRole::kReference) {
    for (const auto& part : reference_pch_flags()) h.add(part);
  }
  h.add(api_headers_).add(source_text);
  return h.hex();
}

BuildResult Builder::build(const std::string& source_path, ModuleRole role, BuildTarget target) {
  return build_text(read_file(source_path), source_path, role, target);
}

BuildResult Builder::build_text(const std::string& source, const std::string& source_path, ModuleRole role,
                                BuildTarget target) {
  const auto start = Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  BuildResult r;
  r.key = cache_key(source, role, target);
  const fs::path builds = fs::path(config_.cache_dir) / "builds";
  const fs::path entry = builds / r.key;
  fs::create_directories(builds);

  const IntegrityKey ik = IntegrityKey::for_cache(config_.cache_dir);
  std::string why;
  if (load_entry(entry, r.key, ik, r, why) == EntryState::kTrusted) {
    r.cached = true;
    r.seconds = elapsed();
    return r;
  }
  FileLock lock((builds / (r.key + ".lock")).string());
  // Checked again under the lock: another process may have finished it
  // while we waited, and only a lock holder moves a bad entry aside (so a
  // fresh entry another process just made is never taken for a bad one).
  const EntryState locked = load_entry(entry, r.key, ik, r, why);
  if (locked == EntryState::kTrusted) {
    r.cached = true;
    r.seconds = elapsed();
    return r;
  }
  if (locked == EntryState::kUntrusted) quarantine(config_.cache_dir, entry, "build cache entry", why);

  static std::atomic<int> counter{0};
  const fs::path tmp = builds / (r.key + ".tmp-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  const std::string src_name = source_name(role, target);
  write_text((tmp / src_name).string(), source);
  std::vector<std::string> cmd = command(role, target, src_name, "module.so");
  if (role == ModuleRole::kReference) {
    std::vector<std::string> pch = reference_pch_flags(/*verified=*/true);
    cmd.insert(cmd.begin() + 1, pch.begin(), pch.end());
  }
  for (const auto& part : cmd) r.command += (r.command.empty() ? "" : " ") + part;

  // The compiler reads model-written source: a candidate's compile runs in
  // the sandbox (its folder writable, the headers and libraries it links
  // read-only), so an #include of a file elsewhere fails.
  SandboxSpec sandbox;
  if (role == ModuleRole::kCandidate) {
    sandbox.level = config_.isolation;
    sandbox.read_only = config_.include_dirs;
    sandbox.read_only.insert(sandbox.read_only.end(), config_.library_dirs.begin(), config_.library_dirs.end());
    sandbox.writable = {tmp.string()};
    sandbox.file_size_bytes = 4ull << 30;
  }
  CommandResult c = run_command(cmd, tmp.string(), config_.timeout, sandbox);
  if (role == ModuleRole::kCandidate && geteuid() == 0) {
    // Back from the sandbox's uid to ours, before the entry is trusted.
    std::error_code ec;
    (void)!chown(tmp.c_str(), 0, 0);
    for (const auto& f : fs::recursive_directory_iterator(tmp, ec)) (void)!lchown(f.path().c_str(), 0, 0);
  }
  r.log = c.output;
  r.compile_seconds = c.seconds;
  r.diagnostics = parse_compiler_output(r.log);
  if (c.timed_out) {  // not cached: a rerun on a quieter machine may finish
    r.timed_out = true;
    fs::remove_all(tmp);
    r.seconds = elapsed();
    return r;
  }
  r.ok = c.status.exited && c.status.code == 0 && fs::exists(tmp / "module.so");
  if (!r.ok && r.log.empty()) r.log = "the compiler " + c.status.describe() + " without output";
  write_text((tmp / "build.log").string(), r.log);
  nlohmann::json meta = {{"ok", r.ok}, {"command", r.command}, {"compile_seconds", r.compile_seconds},
                         {"role", role_name(role)}, {"source", source_path}};
  const std::string library = r.ok ? read_file((tmp / "module.so").string()) : "";
  // The tag is over the fields as they will read back (a JSON number
  // round-trips to the same text).
  meta = nlohmann::json::parse(meta.dump());
  nlohmann::json signed_meta = meta;
  signed_meta["mac"] = entry_tag(ik, r.key, meta, r.log, library);
  write_text((tmp / "result.json").string(), signed_meta.dump(2));
  std::error_code ec;
  fs::rename(tmp, entry, ec);
  if (ec) {  // someone else's entry won the race: use it
    fs::remove_all(tmp);
    load_entry(entry, r.key, ik, r, why);
  } else {
    r.library_path = r.ok ? (entry / "module.so").string() : "";
  }
  r.seconds = elapsed();
  return r;
}

}  // namespace kloop
