#include "evaluator/check/activity_audit.h"

#include <algorithm>
#include <map>
#include <set>

namespace kloop {
namespace {

// Which binary launched each kernel of a trace.
class Origins {
 public:
  Origins(const profiler::ActivityTrace& trace, const std::vector<std::string>& own_objects) : own_(own_objects) {
    for (const auto& o : trace.launches) {
      if (o.graph) {
        graph_calls_.insert(o.correlation_id);
        continue;
      }
      by_call_[o.correlation_id] = o.object;
      if (!o.mangled.empty() && !o.object.empty()) {
        by_name_[o.mangled].insert(o.object);
        by_name_[profiler::demangle(o.mangled)].insert(o.object);
      }
    }
  }

  // The library of kernel k ("custom": the module's own); *seen says
  // whether its launch was found; template libraries land in *templates.
  std::string library_of(const profiler::KernelRecord& k, bool* seen, std::set<std::string>* templates) const {
    std::set<std::string> objects;
    if (!graph_calls_.count(k.correlation_id)) {
      auto call = by_call_.find(k.correlation_id);
      if (call != by_call_.end() && !call->second.empty()) objects.insert(call->second);
    }
    for (const std::string* name : {&k.mangled, &k.name}) {
      auto named = by_name_.find(*name);
      if (!name->empty() && named != by_name_.end()) objects.insert(named->second.begin(), named->second.end());
    }
    const std::string& name = k.name.empty() ? k.mangled : k.name;
    *seen = !objects.empty();
    if (objects.empty()) return profiler::kernel_library(name);
    // One launch from a library binary is enough to call the kernel the library's.
    for (const auto& o : objects) {
      std::string lib = profiler::object_library(o, own_);
      if (lib != "custom") return lib;
    }
    if (std::string vendor = profiler::vendor_kernel_mark(name); !vendor.empty()) return vendor;
    if (std::string t = profiler::template_library(name); !t.empty()) templates->insert(t);
    return "custom";
  }

 private:
  std::vector<std::string> own_;
  std::map<uint32_t, std::string> by_call_;
  std::map<std::string, std::set<std::string>> by_name_;
  std::set<uint32_t> graph_calls_;
};

}  // namespace

ActivityAudit audit_activity(const profiler::ActivityTrace& trace, const std::vector<uint64_t>& stream_done_ns,
                             uint64_t flush_bytes, const std::vector<std::string>& own_objects) {
  ActivityAudit a;
  if (!trace.unavailable.empty()) {
    a.unavailable = trace.unavailable;
    return a;
  }
  // The legacy marker (the first 4-byte memset), then the flushes on the
  // stream of the first one after it.
  std::vector<const profiler::MemoryRecord*> opens;
  for (const auto& m : trace.memory) {
    if (m.kind != "memset") continue;
    if (opens.empty()) {
      if (m.bytes == kLegacyMarkerBytes) opens.push_back(&m);
    } else if (m.bytes == flush_bytes && flush_bytes != kLegacyMarkerBytes &&
               (opens.size() == 1 || m.stream_id == opens[1]->stream_id)) {
      opens.push_back(&m);
    }
  }
  if (opens.size() < 2 || opens.size() - 1 != stream_done_ns.size()) {
    a.unavailable = "the trace lacks kloop's markers, the legacy-stream memset and one " + std::to_string(flush_bytes) +
                    "-byte flush per call (" + std::to_string(opens.size()) + " marker(s) for " +
                    std::to_string(stream_done_ns.size()) + " calls)";
    return a;
  }
  const uint32_t legacy_stream = opens.front()->stream_id;
  opens.erase(opens.begin());
  const uint32_t kloop_stream = opens.front()->stream_id;
  a.calls = static_cast<int>(opens.size());
  // The call whose flush most recently started at or before `ns`.
  auto call_of = [&](uint64_t ns) {
    std::size_t call = 0;
    while (call + 1 < opens.size() && opens[call + 1]->start_ns <= ns) ++call;
    return call;
  };
  std::vector<uint64_t> ends(opens.size(), 0);
  for (const auto& m : trace.memory) {
    if (m.kind != "memset" || m.bytes != kCallEndMarkerBytes || m.stream_id != kloop_stream ||
        m.start_ns < opens[0]->start_ns) {
      continue;
    }
    const std::size_t call = call_of(m.start_ns);
    ends[call] = std::max(ends[call], m.start_ns);
  }
  for (std::size_t i = 0; i < ends.size(); ++i) {
    if (ends[i] == 0) {
      a.unavailable = "the trace lacks kloop's end-of-call marker (a " + std::to_string(kCallEndMarkerBytes) +
                      "-byte memset on kloop's stream) for call " + std::to_string(i + 1) + " of " +
                      std::to_string(opens.size());
      a.calls = 0;
      return a;
    }
  }
  const Origins origins(trace, own_objects);
  std::set<std::string> libraries, templates, other, late;
  std::vector<uint64_t> first(opens.size(), UINT64_MAX), last(opens.size(), 0);
  int kernels = 0;
  double busy_us = 0;
  for (const auto& k : trace.kernels) {
    if (k.start_ns < opens[0]->start_ns) continue;  // before the audit's first call
    const std::size_t call = call_of(k.start_ns);
    ++kernels;
    busy_us += k.duration_us();
    first[call] = std::min(first[call], k.start_ns);
    last[call] = std::max(last[call], k.end_ns);
    if (k.stream_id != kloop_stream && k.stream_id != legacy_stream) {
      if (k.end_ns <= ends[call]) {
        ++a.joined_stream_kernels;
      } else {
        ++a.other_stream_kernels;
        other.insert(k.name);
      }
    }
    if (k.end_ns > stream_done_ns[call]) {
      ++a.late_kernels;
      late.insert(k.name);
    }
    bool seen = false;
    const std::string lib = origins.library_of(k, &seen, &templates);
    if (!seen) ++a.unattributed_kernels;
    if (lib != "custom") libraries.insert(lib);
  }
  double span_us = 0;
  for (std::size_t i = 0; i < opens.size(); ++i) {
    if (last[i] > first[i]) span_us += (last[i] - first[i]) * 1e-3;
  }
  a.kernels_per_call = static_cast<double>(kernels) / a.calls;
  a.gpu_us_per_call = busy_us / a.calls;
  a.span_us_per_call = span_us / a.calls;
  a.libraries.assign(libraries.begin(), libraries.end());
  a.compiled_in.assign(templates.begin(), templates.end());
  a.other_stream_names.assign(other.begin(), other.end());
  a.late_names.assign(late.begin(), late.end());
  return a;
}

}  // namespace kloop
