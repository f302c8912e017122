// Task and feedback rendering. The values here are computed from the spec
// and the verdict; the wording lives in prompts/.
#include "agent/prompt/prompt_builder.h"

#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <sstream>
#include <stdexcept>

#include "evaluator/build/content_hash.h"

namespace kloop {
namespace {

namespace fs = std::filesystem;

// Every file a style renders from, read up front.
std::vector<std::string> prompt_files(const std::string& style) {
  std::vector<std::string> files = {"feedback_compile_error.txt", "feedback_load_error.txt",
                                    "feedback_runtime_error.txt", "feedback_timeout.txt",
                                    "feedback_incorrect.txt",     "feedback_integrity_violation.txt",
                                    "feedback_correct.txt"};
  if (style == "kernelbench") {
    for (const char* f : {"system_kernelbench.txt", "task_kernelbench.txt", "hardware_kernelbench_cpu.txt",
                          "hardware_kernelbench_cuda.txt", "example_reference_kernelbench.py",
                          "example_candidate_kernelbench_cpu.py", "example_candidate_kernelbench_cuda.py",
                          "feedback_no_code_kernelbench.txt"}) {
      files.push_back(f);
    }
  } else {
    for (const char* f : {"system.txt", "task.txt", "contract_cpu.txt", "contract_cuda.txt", "hardware_cpu.txt",
                          "hardware_cuda.txt", "example_reference.cpp", "example_candidate_cpu.cpp",
                          "example_candidate_cuda.cu", "feedback_no_code.txt"}) {
      files.push_back(f);
    }
  }
  return files;
}

std::string fmt_time(double s) {
  if (s < 1e-3) return fmt::format("{:.2f} us", s * 1e6);
  if (s < 1) return fmt::format("{:.3f} ms", s * 1e3);
  return fmt::format("{:.3f} s", s);
}

std::string precision_note(bool cuda, DType precision) {
  if (precision != DType::kFloat32) {
    // An fp16/bf16 run (KernelBench's precision option): the weights too.
    const std::string t = dtype_name(precision);
    return "This run is in " + t + ": the floating-point inputs, the weights and the expected outputs are " + t +
           " tensors, and the outputs must be " + t + " (the tolerance is 1e-2; precision below " + t +
           "'s own is not accurate enough).\n";
  }
  return cuda ? "Inputs and outputs are float32 unless stated; TF32 and lower precisions are not accurate enough for "
                "the 1e-3 tolerance.\n"
              : "Inputs and outputs are float32 unless stated.\n";
}

std::string dims_text(const DimValues& d) {
  std::string s;
  for (const auto& [k, v] : d) s += (s.empty() ? "" : ", ") + k + " = " + std::to_string(v);
  return s;
}

std::string interface_text(const ProblemSpec& spec, bool cuda) {
  std::ostringstream out;
  const DimValues dims = spec.resolve_dims(!cuda);
  out << "forward(";
  for (std::size_t i = 0; i < spec.inputs.size(); ++i) {
    const auto& in = spec.inputs[i];
    std::string shape;
    for (auto n : spec.resolve_shape(in, dims)) shape += (shape.empty() ? "" : ", ") + std::to_string(n);
    out << (i ? ", " : "") << in.name << ": " << dtype_name(in.dtype) << "[" << shape << "]";
  }
  out << ") returns " << spec.outputs << " tensor" << (spec.outputs > 1 ? "s" : "") << ".\n";
  out << "Sizes in this example: " << dims_text(dims) << " (other shapes are tested too).\n";
  if (!spec.args.empty()) {
    out << "Constructor arguments:";
    for (const auto& a : spec.resolve_args(dims)) {
      out << " " << a.name << " (" << arg_type_name(a.type) << ") = ";
      switch (a.type) {
        case ArgType::kInt: out << a.int_value; break;
        case ArgType::kFloat: out << a.float_value; break;
        case ArgType::kBool: out << (a.bool_value ? "true" : "false"); break;
        case ArgType::kInts: {
          std::string l;
          for (auto v : a.ints) l += (l.empty() ? "" : ", ") + std::to_string(v);
          out << "[" << l << "]";
          break;
        }
        case ArgType::kString: out << a.string_value; break;
      }
      out << ";";
    }
    out << "\n";
  }
  return out.str();
}

std::string mismatch_details(const Verdict& v, std::size_t cap) {
  std::ostringstream out;
  int failed = 0;
  for (const auto& t : v.tests) failed += t.passed ? 0 : 1;
  out << failed << " of " << v.tests.size() << " test calls failed (tolerance atol = rtol = "
      << v.protocol.value("atol", 0.0) << ").\n";
  for_each_failure(
      v.tests, 3,
      [&](const TestOutcome& t) {
        out << "- Test with " << t.label << " (call " << t.call + 1 << " of the same model instance):";
        if (!t.problem.empty()) out << " " << t.problem;
        out << "\n";
      },
      [&](const TensorComparison& c) {
        if (!c.problem.empty()) {
          out << "  " << c.name << ": " << c.problem << "\n";
          return;
        }
        out << "  " << c.name << ": " << c.mismatches << " of " << c.numel << " values wrong; max abs error "
            << fmt::format("{:.4g}", c.max_abs_error) << ", max rel error " << fmt::format("{:.4g}", c.max_rel_error);
        if (c.non_finite) out << "; " << c.non_finite << " NaN/Inf values";
        out << "\n";
        for (const auto& m : c.first_mismatches) {
          std::string idx;
          for (auto i : m.index) idx += (idx.empty() ? "" : ", ") + std::to_string(i);
          out << "    at [" << idx << "]: expected " << fmt::format("{:.6g}", m.expected) << ", got "
              << fmt::format("{:.6g}", m.actual) << "\n";
        }
      });
  return cap_text(out.str(), cap);
}

}  // namespace

const char* feedback_kind_name(FeedbackKind kind) {
  switch (kind) {
    case FeedbackKind::kCompiler: return "compiler";
    case FeedbackKind::kCorrectness: return "correctness";
    case FeedbackKind::kTiming: return "timing";
    case FeedbackKind::kProfiler: return "profiler";
  }
  return "?";
}

FeedbackKind parse_feedback_kind(const std::string& name) {
  for (auto k : {FeedbackKind::kCompiler, FeedbackKind::kCorrectness, FeedbackKind::kTiming, FeedbackKind::kProfiler}) {
    if (name == feedback_kind_name(k)) return k;
  }
  throw std::invalid_argument("unknown feedback kind '" + name + "'; expected compiler, correctness, timing or profiler");
}

PromptBuilder::PromptBuilder(PromptSettings settings) : settings_(std::move(settings)) {
  if (settings_.style != "kloop" && settings_.style != "kernelbench") {
    throw std::runtime_error("prompt style '" + settings_.style + "' is unknown; use kloop or kernelbench");
  }
  for (const std::string& f : prompt_files(settings_.style)) {
    fs::path p = fs::path(settings_.dir) / f;
    if (!fs::exists(p)) throw std::runtime_error(p.string() + ": prompt file missing (prompts dir: " + settings_.dir + ")");
    files_[f] = read_file(p.string());
  }
}

std::string PromptBuilder::file(const std::string& name) const { return files_.at(name); }

std::string PromptBuilder::render(const std::string& name, const TemplateValues& values) const {
  TemplateValues all = values;
  all.emplace("fence", kernelbench() ? "python" : "cpp");  // the code block an answer goes in
  return render_template(file(name), all, (fs::path(settings_.dir) / name).string());
}

std::string PromptBuilder::system() const {
  return render(kernelbench() ? "system_kernelbench.txt" : "system.txt",
                {{"device_kind", settings_.cuda ? "CUDA GPU" : "CPU"}});
}

std::string PromptBuilder::task(const ProblemSpec& spec) const {
  const bool cuda = settings_.cuda;
  if (kernelbench()) return kernelbench_task(spec);
  TemplateValues v = {
      {"problem_name", spec.name},
      {"description", spec.description},
      {"reference_source", cap_text(read_file(spec.reference_path), settings_.max_reference_chars)},
      {"interface", interface_text(spec, cuda)},
      {"contract", file(cuda ? "contract_cuda.txt" : "contract_cpu.txt")},
      {"hardware", file(cuda ? "hardware_cuda.txt" : "hardware_cpu.txt")},
      {"precision", precision_note(cuda, spec.precision)},
      {"example_reference", file("example_reference.cpp")},
      {"example_candidate", file(cuda ? "example_candidate_cuda.cu" : "example_candidate_cpu.cpp")},
      {"source_ext", cuda ? ".cu" : ".cpp"},
  };
  return render("task.txt", v);
}

std::string PromptBuilder::feedback(const Verdict& v) const {
  const auto& kinds = settings_.feedback;
  const bool compiler = kinds.count(FeedbackKind::kCompiler) > 0;
  const bool correctness = kinds.count(FeedbackKind::kCorrectness) > 0;
  const bool timing = kinds.count(FeedbackKind::kTiming) > 0;
  const bool profiler = kinds.count(FeedbackKind::kProfiler) > 0;
  const std::size_t cap = settings_.max_feedback_chars;
  switch (v.verdict) {
    case VerdictClass::kCompileError: {
      std::string d;
      if (compiler) {
        d = summarize_diagnostics(v.build.diagnostics, 20);
        if (d.empty()) d = v.build.log;
        if (v.build.timed_out) d = "the compiler did not finish in time\n" + d;
      }
      return render("feedback_compile_error.txt", {{"diagnostics", cap_text(d, cap)}});
    }
    case VerdictClass::kLoadError:
      return render("feedback_load_error.txt", {{"message", cap_text(v.message, cap)}});
    case VerdictClass::kRuntimeError:
      return render("feedback_runtime_error.txt", {{"message", correctness ? cap_text(v.message, cap) : ""},
                                                   {"log_tail", correctness ? cap_text(v.log_tail, cap / 2) : ""}});
    case VerdictClass::kTimeout:
      return render("feedback_timeout.txt", {{"message", correctness ? cap_text(v.message, cap) : ""}});
    case VerdictClass::kIncorrect:
      return render("feedback_incorrect.txt", {{"details", correctness ? mismatch_details(v, cap) : ""}});
    case VerdictClass::kIntegrityViolation: {
      std::string check = v.integrity.empty() ? "integrity" : v.integrity.front().check;
      std::string msg = v.integrity.empty() ? v.message : v.integrity.front().message;
      return render("feedback_integrity_violation.txt", {{"check", check}, {"message", cap_text(msg, cap)}});
    }
    case VerdictClass::kCorrect: {
      std::string t;
      if (timing && v.speedup && v.candidate_time && v.reference_time) {
        const std::string& st = v.timing_statistic;
        t = "Your time: " + fmt_time(v.candidate_time->headline(st)) + " (" + st + " of " +
            std::to_string(v.candidate_time->n) + " runs); reference: " + fmt_time(v.reference_time->headline(st)) +
            "; speedup " + fmt::format("{:.3f}", *v.speedup) + "x" +
            (*v.speedup < 1 ? " (slower than the reference)." : ".");
      }
      // The digests come from the GPU profiling phase; a CPU run has none.
      std::string profile;
      if (profiler && !v.profile_digest.empty()) {
        profile = v.profile_digest;
        if (!v.reference_digest.empty()) profile += "\nWhat the reference runs:\n" + v.reference_digest;
      }
      return render("feedback_correct.txt", {{"timing", t}, {"profile", cap_text(profile, cap)}});
    }
  }
  return "";
}

std::string PromptBuilder::no_code() const {
  return render(kernelbench() ? "feedback_no_code_kernelbench.txt" : "feedback_no_code.txt", {});
}

// KernelBench's one-shot structure: the example pair, the PyTorch
// architecture (the upstream task file when a checkout is given), the
// instruction to write ModelNew with inline kernels.
std::string PromptBuilder::kernelbench_task(const ProblemSpec& spec) const {
  const bool cuda = settings_.cuda;
  std::string source, language = "python", note;
  const auto file_it = spec.provenance.find("file");
  const fs::path upstream = settings_.upstream.empty() || file_it == spec.provenance.end()
                                ? fs::path()
                                : fs::path(settings_.upstream) / file_it->second;
  std::error_code ec;
  if (!upstream.empty() && fs::is_regular_file(upstream, ec)) {
    source = read_file(upstream.string());
  } else {
    std::string args;
    for (const auto& a : spec.args) args += (args.empty() ? "" : ", ") + a.name;
    source = read_file(spec.reference_path);
    language = "cpp";
    note = "Its PyTorch source is not at hand, so here is its LibTorch C++ port, which computes the same: `Model` "
           "has the same submodules and state_dict names, and its constructor takes (" +
           (args.empty() ? std::string("no arguments") : args) + ") in this order.";
  }
  TemplateValues v = {
      {"problem_name", spec.name},
      {"reference_note", note},
      {"reference_language", language},
      {"reference_source", cap_text(source, settings_.max_reference_chars)},
      {"interface", interface_text(spec, cuda)},
      {"hardware", file(cuda ? "hardware_kernelbench_cuda.txt" : "hardware_kernelbench_cpu.txt")},
      {"precision", precision_note(cuda, spec.precision)},
      {"example_reference", file("example_reference_kernelbench.py")},
      {"example_candidate", file(cuda ? "example_candidate_kernelbench_cuda.py" : "example_candidate_kernelbench_cpu.py")},
      {"kernel_language", cuda ? "CUDA" : "C++"},
  };
  return render("task_kernelbench.txt", v);
}

std::string PromptBuilder::evolve(const std::string& task, const std::vector<ShownCandidate>& shown, bool crossover,
                                  const std::string& instruction) const {
  // Read when first needed: only an evolve run needs these files.
  auto optional_file = [&](const std::string& name) {
    const fs::path p = fs::path(settings_.dir) / name;
    if (!fs::exists(p)) throw std::runtime_error(p.string() + ": prompt file missing (the evolve scaffold needs it)");
    return read_file(p.string());
  };
  const std::string fence = settings_.cuda ? "cuda" : "cpp";
  std::string candidates;
  for (const auto& c : shown) {
    std::string speedup;
    if (c.speedup) speedup = fmt::format("{:.3f}", *c.speedup);
    candidates += render_template(optional_file("evolve_candidate.txt"),
                                  {{"label", c.label},
                                   {"verdict", c.verdict},
                                   {"speedup", speedup},
                                   {"fence", fence},
                                   {"code", cap_text(c.code, settings_.max_reference_chars)},
                                   {"feedback", cap_text(c.feedback, settings_.max_feedback_chars)}},
                                  (fs::path(settings_.dir) / "evolve_candidate.txt").string()) +
                  "\n";
  }
  const std::string how = crossover ? "evolve_crossover.txt" : "evolve_mutate.txt";
  const std::string said = !crossover && !instruction.empty()
                               ? instruction + "\n"
                               : render_template(optional_file(how), {{"fence", fence}}, (fs::path(settings_.dir) / how).string());
  return render_template(optional_file("evolve.txt"), {{"task", task}, {"candidates", candidates}, {"instruction", said}},
                         (fs::path(settings_.dir) / "evolve.txt").string());
}

}  // namespace kloop
