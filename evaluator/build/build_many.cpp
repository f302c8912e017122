// Reference bundles (one shared object for many references, builder.h)
// and the pool that builds many sources or bundles at once.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "evaluator/build/builder.h"
#include "evaluator/build/content_hash.h"
#include "evaluator/build/environment.h"

namespace kloop {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::optional<std::string> reference_bundle_source(const std::vector<std::string>& paths) {
  std::vector<std::string> includes;
  std::string body;
  for (std::size_t i = 0; i < paths.size(); ++i) {
    if (paths[i].find_first_of("\"\\\n") != std::string::npos) return std::nullopt;  // not for #line
    const std::string tag = "e" + std::to_string(i);
    body += "\nnamespace kloop_bundle_" + tag +
            " {\n#undef KLOOP_REGISTER_REFERENCE\n"
            "#define KLOOP_REGISTER_REFERENCE(CLASS) KLOOP_DETAIL_EXPORT(reference_" +
            tag + ", kloop::detail::ReferenceAdapter, CLASS)\n#line 1 \"" + paths[i] + "\"\n";
    std::istringstream in(read_file(paths[i]));
    for (std::string line; std::getline(in, line);) {
      const auto first = line.find_first_not_of(" \t");
      if (first != std::string::npos && line[first] == '#') {
        // An #include moves to the top (blanked here, so line numbers
        // hold); any other directive could change its neighbours.
        if (line.compare(first, 8, "#include") != 0) return std::nullopt;
        if (std::find(includes.begin(), includes.end(), line) == includes.end()) includes.push_back(line);
        line.clear();
      }
      if (line.find("R\"") != std::string::npos) return std::nullopt;
      body += line + "\n";
    }
    body += "}  // namespace kloop_bundle_" + tag + "\n";
  }
  std::string text = "// kloop reference bundle: " + std::to_string(paths.size()) +
                     " references, each in its own namespace, each registered under its entry tag.\n";
  for (const auto& inc : includes) text += inc + "\n";
  return text + body;
}

BuildResult Builder::build_reference_bundle(const std::vector<std::string>& paths, std::size_t member,
                                            BuildTarget target) {
  if (member >= paths.size()) throw std::invalid_argument("build_reference_bundle: member out of range");
  const auto start = Clock::now();
  if (paths.size() > 1) {
    if (const auto text = reference_bundle_source(paths)) {
      BuildResult r = build_text(*text,
                                 "bundle of " + std::to_string(paths.size()) + " references from " +
                                     fs::path(paths.front()).parent_path().string(),
                                 ModuleRole::kReference, target);
      if (r.ok) {
        r.entry = "e" + std::to_string(member);
        return r;
      }
      if (r.timed_out) return r;  // the member alone would not have fared better
    }
  }
  // Not bundleable, or the bundle does not compile (one member's error
  // fails them all): the member builds alone, with its own diagnostics.
  BuildResult single = build(paths[member], ModuleRole::kReference, target);
  single.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return single;
}

namespace {

// `count` builds, `jobs` at a time, each pool thread with its own Builder.
std::vector<BuildResult> build_in_pool(const BuilderConfig& config, std::size_t count, int jobs,
                                       const std::function<BuildResult(Builder&, std::size_t)>& build_one,
                                       const std::function<std::string(std::size_t)>& source_of,
                                       const BuildProgress& on_built) {
  if (jobs <= 0) jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<BuildResult> results(count);
  std::atomic<std::size_t> next{0};
  std::mutex report;
  std::size_t finished = 0;
  std::vector<std::thread> pool;
  for (int j = 0; j < std::min<int>(jobs, static_cast<int>(count)); ++j) {
    pool.emplace_back([&] {
      Builder builder(config);
      for (std::size_t i = next++; i < count; i = next++) {
        try {
          results[i] = build_one(builder, i);
        } catch (const std::exception& e) {
          results[i].log = e.what();
        }
        if (on_built) {
          std::lock_guard<std::mutex> lock(report);
          on_built(++finished, count, source_of(i), results[i]);
        }
      }
    });
  }
  for (auto& t : pool) t.join();
  return results;
}

}  // namespace

std::vector<BuildResult> build_many(const BuilderConfig& config, const std::vector<std::string>& sources,
                                    ModuleRole role, BuildTarget target, int jobs, const BuildProgress& on_built) {
  return build_in_pool(
      config, sources.size(), jobs, [&](Builder& b, std::size_t i) { return b.build(sources[i], role, target); },
      [&](std::size_t i) { return sources[i]; }, on_built);
}

std::vector<BuildResult> build_bundles_many(const BuilderConfig& config,
                                            const std::vector<std::vector<std::string>>& bundles, BuildTarget target,
                                            int jobs, const BuildProgress& on_built) {
  return build_in_pool(
      config, bundles.size(), jobs,
      [&](Builder& b, std::size_t i) { return b.build_reference_bundle(bundles[i], 0, target); },
      [&](std::size_t i) { return bundles[i].front(); }, on_built);
}

BuildProgress build_progress_on_stderr(const std::string& what) {
  auto compiled = std::make_shared<std::size_t>(0);
  return [what, compiled](std::size_t done, std::size_t total, const std::string& source, const BuildResult& r) {
    if (!r.cached) {
      ++*compiled;
      std::fprintf(stderr, "kloop: [%zu/%zu] %s %s: %s (%.1f s)\n", done, total, what.c_str(),
                   fs::path(source).stem().c_str(), r.ok ? "built" : "FAILED to build", r.seconds);
    }
    if (done == total) {
      std::fprintf(stderr, "kloop: %zu %s ready: %zu compiled, %zu from the cache\n", total, what.c_str(), *compiled,
                   total - *compiled);
    }
  };
}

}  // namespace kloop
