#include "evaluator/build/python_env.h"

#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>

#include "evaluator/build/build_config.h"
#include "evaluator/build/builder.h"
#include "evaluator/build/cache_entry.h"
#include "evaluator/build/content_hash.h"
#include "evaluator/build/environment.h"
#include "evaluator/build/integrity.h"
#include "evaluator/isolation/subprocess.h"

namespace kloop {
namespace {

namespace fs = std::filesystem;

constexpr const char* kProbeFormat = "kloop-python-probe-1";

// The probe imports torch, about a second of CPU (several on a loaded
// machine), and every kloop process that meets a Python candidate needs its
// answer. So the answer is kept in the cache folder, under the cache's MAC,
// with the identity (cache_entry.h's file_identity: device, inode, size,
// mtime, ctime) of everything it was read from: the executable, each
// folder of sys.path and of the installation, the .pth files in them (they
// extend sys.path), and torch's folder, __init__.py and version.py. It is
// believed again only while every one of them is as it was; an upgrade of
// python or torch, a package added or removed, a .pth edited, changes one
// of them, and the probe runs again.
std::map<std::string, std::string> probe_stamps(const std::string& executable, const nlohmann::json& answer) {
  std::vector<std::string> paths = {executable};
  for (const char* list : {"path", "install"}) {
    for (const auto& d : answer.value(list, std::vector<std::string>{})) paths.push_back(d);
  }
  const std::string torch_dir = answer.value("torch_dir", std::string());
  if (!torch_dir.empty()) {
    for (const char* f : {"", "/__init__.py", "/version.py"}) paths.push_back(torch_dir + f);
  }
  std::map<std::string, std::string> stamps;
  std::error_code ec;
  for (const auto& p : paths) {
    if (p.empty()) continue;
    stamps[p] = build_cache::file_identity(p);  // "" for a path that does not exist: it must stay so
    if (!fs::is_directory(p, ec)) continue;
    for (const auto& e : fs::directory_iterator(p, ec)) {
      if (e.path().extension() == ".pth") stamps[e.path().string()] = build_cache::file_identity(e.path());
    }
  }
  return stamps;
}

fs::path probe_file(const std::string& cache_dir, const std::string& executable) {
  ContentHash h;
  h.add(kProbeFormat).add(executable).add(KLOOP_PYTHON_VERSION);
  return fs::path(cache_dir) / "python" / (h.hex() + ".json");
}

// The kept answer for `executable`, when its MAC holds and every stamp is
// unchanged; nullopt otherwise (and when anything cannot be read).
std::optional<nlohmann::json> kept_probe(const std::string& cache_dir, const std::string& executable) {
  try {
    const fs::path file = probe_file(cache_dir, executable);
    std::error_code ec;
    if (!fs::exists(file, ec)) return std::nullopt;
    const nlohmann::json kept = nlohmann::json::parse(build_cache::file_or_empty(file), nullptr, false);
    if (!kept.is_object() || !kept.contains("body") || !kept["body"].is_string() || !kept.contains("mac") ||
        !kept["mac"].is_string()) {
      return std::nullopt;
    }
    const std::string body = kept["body"].get<std::string>();
    if (!IntegrityKey::for_cache(cache_dir).verify(kept["mac"].get<std::string>(), {kProbeFormat, executable, body})) {
      warn_untrusted("the kept answer of " + executable + "'s probe, " + file.string() +
                     ", does not carry the cache's MAC; probing again");
      return std::nullopt;
    }
    const nlohmann::json b = nlohmann::json::parse(body, nullptr, false);
    if (!b.is_object() || !b.contains("answer") || !b.contains("stamps") || !b["stamps"].is_object()) return std::nullopt;
    const auto now = probe_stamps(executable, b["answer"]);
    if (now != b["stamps"].get<std::map<std::string, std::string>>()) return std::nullopt;
    return b["answer"];
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// Keeps a fresh answer; a cache that cannot be written only costs the next
// process a probe.
void keep_probe(const std::string& cache_dir, const std::string& executable, const nlohmann::json& answer) {
  try {
    const fs::path file = probe_file(cache_dir, executable);
    fs::create_directories(file.parent_path());
    const std::string body = nlohmann::json{{"answer", answer}, {"stamps", probe_stamps(executable, answer)}}.dump();
    const std::string mac = IntegrityKey::for_cache(cache_dir).tag({kProbeFormat, executable, body});
    build_cache::write_text_atomically(file, nlohmann::json{{"body", body}, {"mac", mac}}.dump());
  } catch (const std::exception&) {
  }
}

PythonEnvironment query() {
  const std::string host_version = KLOOP_PYTHON_VERSION;
  if (host_version.empty()) {
    throw std::runtime_error(
        "this kloop was built without its Python host, so it cannot run KernelBench-format (Python) candidates: "
        "install a python3 that imports torch and its embedding headers (Debian: python3-dev python3-torch "
        "pybind11-dev) and configure kloop again");
  }
  PythonEnvironment p;
  const char* env = std::getenv("KLOOP_PYTHON");
  p.executable = env && *env ? env : KLOOP_PYTHON_EXECUTABLE;
  const std::string cache_dir = BuilderConfig::from_environment().cache_dir;
  nlohmann::json j;
  if (auto kept = kept_probe(cache_dir, p.executable)) j = std::move(*kept);
  if (!j.is_object()) {
    const std::string probe =
        "import json, os, sys\nimport torch\n"
        "print(json.dumps({'version': '%d.%d' % sys.version_info[:2], 'torch': torch.__version__, "
        "'torch_dir': os.path.dirname(os.path.realpath(torch.__file__)), "
        "'path': [p for p in sys.path if p], 'install': [os.path.realpath(sys.executable), "
        "sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]}))";
    CommandResult r = run_command({p.executable, "-I", "-c", probe}, "", std::chrono::seconds(120));
    const std::size_t line = r.output.rfind("{\"version\"");
    if (r.status.exited && r.status.code == 0 && line != std::string::npos) {
      j = nlohmann::json::parse(r.output.substr(line), nullptr, false);
    }
    if (!j.is_object()) {
      throw std::runtime_error(p.executable + " cannot run Python candidates (it must import torch): " + r.output +
                               "; give a python3 with torch in KLOOP_PYTHON");
    }
    if (j.value("version", "") == host_version) keep_probe(cache_dir, p.executable, j);
  }
  p.version = j.value("version", "");
  p.torch_version = j.value("torch", "");
  if (p.version != host_version) {
    throw std::runtime_error(p.executable + " is Python " + p.version + ", but kloop's Python host embeds Python " +
                             host_version + "; set KLOOP_PYTHON to a python" + host_version +
                             " with torch, or configure kloop with this one");
  }
  std::error_code ec;
  for (const auto& d : j.value("path", std::vector<std::string>{})) {
    if (fs::exists(d, ec)) p.sys_path.push_back(fs::absolute(d, ec).string());
  }
  p.installation = p.sys_path;
  for (const auto& d : j.value("install", std::vector<std::string>{})) {
    if (!d.empty() && fs::exists(d, ec)) p.installation.push_back(fs::absolute(d, ec).string());
  }
  return p;
}

}  // namespace

const PythonEnvironment& python_environment() {
  static std::mutex mutex;
  static std::unique_ptr<PythonEnvironment> cached;
  std::lock_guard<std::mutex> lock(mutex);
  if (!cached) cached = std::make_unique<PythonEnvironment>(query());
  return *cached;
}

bool is_python_module(const std::string& library) {
  return library.size() > 3 && library.compare(library.size() - 3, 3, ".py") == 0;
}

std::string python_host_library(const std::string& worker_path) {
  return (fs::path(worker_path).parent_path() / "libkloop_python_host.so").string();
}

std::string candidate_host_script() { return data_dir() + "/evaluator/isolation/python/candidate_host.py"; }

}  // namespace kloop
