// The mutation catalogue and the generator (operators.h). Operators are
// written against the idioms correct kernels use (a `for` loop over a
// bound, `(n + B - 1) / B` grids, row offsets, accumulators named acc/sum,
// `return out;`), so each one injects the fault its class names at every
// place such an idiom appears.
#include "agent/mutate/operators.h"

#include <regex>
#include <sstream>
#include <stdexcept>

namespace kloop::mutate {

namespace {

constexpr unsigned kNative = kLangCpp | kLangCuda;

std::vector<MutationOperator> build_catalogue() {
  // {class, name, edit, languages, pattern, replacement, include}
  return {
      // boundaries
      {"boundaries", "drop_tail", "a loop stops one short of its bound (the last element, row or column is never computed)",
       kNative, R"(for \(([^;]*); (\w+) < ([^;]+);)", "for ($1; $2 < ($3) - 1;", ""},
      {"boundaries", "one_past_the_end", "a loop runs one past its bound (<= for <)", kNative,
       R"(for \(([^;]*); (\w+) < ([^;]+);)", "for ($1; $2 <= $3;", ""},
      {"boundaries", "guard_off_by_one", "a bounds guard lets one more index through (<= for <)", kNative,
       R"(if \((\w+) < ([\w.]+)\))", "if ($1 <= $2)", ""},
      {"boundaries", "grid_rounds_down", "a grid or chunk count rounds down: an odd size's last block is never run",
       kNative, R"(\(([\w.]+) \+ (\w+) - 1\) / (\w+))", "$1 / $3", ""},
      {"boundaries", "py_drop_tail", "a Python loop stops one short (range(n - 1))", kLangPython,
       R"(in range\((.+)\):$)", "in range($1 - 1):", ""},
      {"boundaries", "py_last_column_unwritten", "the last column of the output is never computed (left zero)",
       kLangPython, R"(^(\s*)return (\w+)$)", "$1return torch.cat([$2[..., :-1], torch.zeros_like($2[..., -1:])], dim=-1)",
       ""},
      // indexing
      {"indexing", "transposed_index", "a row-major index i * ld + j read as j * ld + i (swapped strides)", kNative,
       R"(\[(\w+) \* (\w+) \+ (\w+)\])", "[$3 * $2 + $1]", ""},
      {"indexing", "first_row_for_every_row", "every batch or row reads the first one's data (offset b * stride -> 0)",
       kNative, R"(\b(b|batch|row|r) \* )", "0 * ", ""},
      {"indexing", "py_first_batch_for_every_batch", "every batch uses batch 0 (x[b] -> x[0])", kLangPython,
       R"((\w+)\[(b|batch|i)\])", "$1[0]", ""},
      {"indexing", "py_reduction_wrong_axis", "a reduction along dim 0 instead of its own", kLangPython,
       R"(\bdim=(-?[1-9]\d*))", "dim=0", ""},
      // precision
      {"precision", "fp16_accumulator", "the accumulator is fp16 (c10::Half) instead of float", kNative,
       R"(\bfloat (\w*(acc|sum|total)\w*) = )", "c10::Half $1 = ", "c10/util/Half.h"},
      {"precision", "bf16_accumulator", "the accumulator is bf16 (c10::BFloat16) instead of float", kNative,
       R"(\bfloat (\w*(acc|sum|total)\w*) = )", "c10::BFloat16 $1 = ", "c10/util/BFloat16.h"},
      {"precision", "fp16_loads", "a loaded value is rounded through fp16", kNative,
       R"(const float (\w+) = ([^;]+);)", "const float $1 = static_cast<float>(c10::Half($2));", "c10/util/Half.h"},
      {"precision", "approx_exp", "exp(t) replaced by (1 + t/1024)^1024 (relative error about t^2/2048)", kNative,
       R"(\b(std::exp|expf|__expf)\()", "[](float t) { return powf(1.f + t / 1024.f, 1024.f); }(", ""},
      {"precision", "rounded_log", "log(t) computed as 0.6931 * log2(t) (ln 2 rounded to 4 digits)", kNative,
       R"(\b(std::log|logf|__logf)\()", "0.6931f * log2f(", ""},
      {"precision", "erf_as_tanh", "erf(t) replaced by the tanh approximation of GELU", kNative,
       R"(\b(std::erf|erff)\()", "[](float t) { return tanhf(1.1283792f * t * (1.f + 0.0894296f * t * t)); }(", ""},
      {"precision", "reciprocal_multiply", "fast-math: a / b computed as a * (1 / b)", kNative,
       R"( / ([A-Za-z_]\w*)\b)", " * (1.0f / $1)", ""},
      {"precision", "py_bf16_matmul", "a matmul's operands rounded to bf16", kLangPython,
       R"(torch\.matmul\(([^,()]+(\[\w+\])?), ([^,()]+)\))", "torch.matmul($1.bfloat16(), $3.bfloat16()).float()", ""},
      {"precision", "py_fp16_input", "the first input rounded through fp16 on entry", kLangPython,
       R"(^(\s*)def forward\(self, (\w+)(.*):$)", "$1def forward(self, $2$3:\n$1    $2 = $2.half().float()", ""},
      {"precision", "py_approx_exp", "exp(t) replaced by (1 + t/1024)^1024", kLangPython, R"(\btorch\.exp\()",
       "(lambda t: torch.pow(1 + t / 1024, 1024))(", ""},
      {"precision", "py_rounded_log", "log(t) computed as 0.6931 * log2(t)", kLangPython, R"(\btorch\.log\()",
       "0.6931 * torch.log2(", ""},
      {"precision", "py_erf_as_tanh", "erf(t) replaced by the tanh approximation of GELU", kLangPython,
       R"(\btorch\.erf\()", "(lambda t: torch.tanh(1.1283792 * t * (1 + 0.0894296 * t * t)))(", ""},
      {"precision", "py_reciprocal_multiply", "fast-math: a / b computed as a * (1 / b)", kLangPython,
       R"( / (\w+(\.\w+)*(\([\w.]*\))?))", " * (1.0 / $1)", ""},
      {"precision", "py_tf32", "TF32 matmuls allowed where the task is fp32 (GPU only: no effect on the CPU)",
       kLangPython, R"(^(\s*)def forward\(self(.*)$)",
       "$1def forward(self$2\n$1    torch.backends.cuda.matmul.allow_tf32 = True", ""},
      // synchronisation (CUDA code only)
      {"synchronisation", "drop_syncthreads", "a __syncthreads() removed", kLangCuda, R"(__syncthreads\(\);)", "", ""},
      {"synchronisation", "drop_stream_join", "a stream or event join removed (the work may finish after the call)",
       kLangCuda, R"((cudaStreamWaitEvent|cudaStreamSynchronize|cudaEventSynchronize)\([^;]*\);)", "", ""},
      {"synchronisation", "racy_atomic", "an atomicAdd made a plain read-modify-write (a race)", kLangCuda,
       R"(atomicAdd\(&([^,]+), (.+)\);)", "$1 += $2;", ""},
      // partial work
      {"partial_work", "skip_every_other", "a loop skips every other iteration (++i -> i += 2)", kNative,
       R"(\+\+(\w+)\))", "$1 += 2)", ""},
      {"partial_work", "half_the_work", "a loop covers only the first half of its range", kNative,
       R"(for \(([^;]*); (\w+) < ([^;]+);)", "for ($1; $2 < ($3) / 2;", ""},
      {"partial_work", "grid_stride_skips", "a grid-stride loop skips every other stride", kLangCuda,
       R"((\w+) \+= blockDim\.x \* gridDim\.x)", "$1 += 2 * blockDim.x * gridDim.x", ""},
      {"partial_work", "py_skip_every_other", "a Python loop skips every other iteration", kLangPython,
       R"(in range\((.+)\):$)", "in range(0, $1, 2):", ""},
      {"partial_work", "py_half_the_rows", "only the first half of the rows is computed (the rest left zero)",
       kLangPython, R"(^(\s*)return (\w+)$)",
       "$1return torch.cat([$2[: $2.shape[0] // 2], torch.zeros_like($2[$2.shape[0] // 2 :])])", ""},
      // state
      {"state", "empty_not_zeros", "an output or accumulator allocated with empty instead of zeros (uninitialised)",
       kNative, R"(at::zeros(_like)?\()", "at::empty$1(", "ATen/ops/empty.h\nATen/ops/empty_like.h"},
      {"state", "memset_dropped", "an output or accumulator's zeroing memset made to set no bytes (uninitialised)", kNative,
       R"(cudaMemsetAsync\((\w+), 0, (\w+),)", "cudaMemsetAsync($1, 0, 0 * $2,", ""},
      {"state", "uninitialised_accumulator", "an accumulator left uninitialised", kNative,
       R"(\bfloat (\w*(acc|sum|total)\w*) = [^;]+;)", "float $1;", ""},
      {"state", "buffer_reused_across_calls", "a buffer allocated once (static) and reused by every call", kNative,
       R"(^(\s*)at::Tensor (\w+) = at::)", "$1static at::Tensor $2 = at::", ""},
      {"state", "result_kept_from_first_call", "the first call's result returned by every later call", kNative,
       R"(^(\s*)return (\w+);)", "$1static const at::Tensor kept_result = $2.clone();\n$1return kept_result;", ""},
      {"state", "py_empty_not_zeros", "torch.empty instead of torch.zeros (uninitialised)", kLangPython,
       R"(torch\.zeros(_like)?\()", "torch.empty$1(", ""},
      {"state", "py_result_kept_from_first_call", "the first call's result returned by every later call", kLangPython,
       R"(^(\s*)return (.+)$)", "$1return self.__dict__.setdefault(\"_kept\", $2)", ""},
      {"state", "py_buffer_reused_across_calls", "every call returns the same output buffer, copied into", kLangPython,
       R"(^(\s*)return (\w+)$)",
       "$1self.__dict__.setdefault(\"_buf\", torch.empty_like($2)).copy_($2)\n$1return self.__dict__[\"_buf\"]", ""},
      // constants
      {"constants", "zeros_output", "the output replaced by zeros", kNative, R"(^(\s*)return (\w+);)",
       "$1return at::zeros_like($2);", "ATen/ops/zeros_like.h"},
      {"constants", "ones_output", "the output replaced by ones", kNative, R"(^(\s*)return (\w+);)",
       "$1return at::ones_like($2);", "ATen/ops/ones_like.h"},
      {"constants", "mean_output", "the output replaced by a constant: its own mean", kNative, R"(^(\s*)return (\w+);)",
       "$1return at::full_like($2, $2.mean().item<float>());", "ATen/ops/full_like.h\nATen/ops/mean.h"},
      {"constants", "py_zeros_output", "the output replaced by zeros", kLangPython, R"(^(\s*)return (.+)$)",
       "$1return torch.zeros_like($2)", ""},
      {"constants", "py_ones_output", "the output replaced by ones", kLangPython, R"(^(\s*)return (.+)$)",
       "$1return torch.ones_like($2)", ""},
      {"constants", "py_mean_output", "the output replaced by a constant: its own mean", kLangPython,
       R"(^(\s*)return (.+)$)", "$1return torch.full_like($2, ($2).mean().item())", ""},
  };
}

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> lines;
  std::string cur;
  for (char c : s) {
    if (c == '\n') {
      lines.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) lines.push_back(cur);
  return lines;
}

unsigned languages_of(SourceKind kind, const std::string& source) {
  switch (kind) {
    case SourceKind::kCpp: return kLangCpp;
    case SourceKind::kCuda: return kLangCpp | kLangCuda;
    case SourceKind::kPython:
      // load_inline sources are C++ and CUDA inside Python strings.
      return kLangPython | (source.find("load_inline") != std::string::npos ? kNative : 0u);
  }
  return 0;
}

// A Python file's lines that lie wholly inside a triple-quoted string (a
// load_inline source, a docstring): the C++/CUDA operators edit only those,
// the Python operators only the others (a Python edit of a C++ line, or a
// C++ edit of a Python one, only makes a mutant that does not build).
std::vector<bool> inside_python_strings(const std::vector<std::string>& lines) {
  std::vector<bool> inside(lines.size(), false);
  std::string open;  // the delimiter of the string the scan is in, if any
  for (std::size_t ln = 0; ln < lines.size(); ++ln) {
    const std::string& line = lines[ln];
    bool crossed = false;
    for (std::size_t at = 0; at + 3 <= line.size();) {
      const std::string three = line.substr(at, 3);
      if ((open.empty() && (three == "\"\"\"" || three == "'''")) || (!open.empty() && three == open)) {
        open = open.empty() ? three : "";
        crossed = true;
        at += 3;
      } else {
        ++at;
      }
    }
    inside[ln] = !crossed && !open.empty();
  }
  return inside;
}

}  // namespace

const std::vector<std::string>& fault_classes() {
  static const std::vector<std::string> classes = {"boundaries",   "indexing", "precision", "synchronisation",
                                                   "partial_work", "state",    "constants"};
  return classes;
}

const std::vector<MutationOperator>& operator_catalogue() {
  static const std::vector<MutationOperator> catalogue = build_catalogue();
  return catalogue;
}

SourceKind source_kind(const std::string& path, const std::string& source) {
  auto ends_with = [&](const std::string& suffix) {
    return path.size() >= suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (ends_with(".py")) return SourceKind::kPython;
  if (ends_with(".cu") || ends_with(".cuh") || source.find("__global__") != std::string::npos) return SourceKind::kCuda;
  return SourceKind::kCpp;
}

std::string Mutant::diff() const {
  std::ostringstream out;
  out << "@@ line " << line << " (" << operator_name << ") @@\n- " << before << "\n";
  std::istringstream added(after);
  for (std::string l; std::getline(added, l);) out << "+ " << l << "\n";
  return out.str();
}

std::vector<Mutant> generate_mutants(const std::string& stem, const std::string& source, SourceKind kind,
                                     int max_sites) {
  const unsigned langs = languages_of(kind, source);
  const std::vector<std::string> lines = split_lines(source);
  const std::vector<bool> in_string =
      kind == SourceKind::kPython ? inside_python_strings(lines) : std::vector<bool>(lines.size(), false);
  std::vector<Mutant> mutants;
  for (const auto& op : operator_catalogue()) {
    if ((op.languages & langs) == 0) continue;
    if (!op.include.empty() && kind == SourceKind::kPython) continue;  // no header line to add inside a string
    const std::regex re(op.pattern, std::regex::ECMAScript);
    int site = 0;
    for (std::size_t ln = 0; ln < lines.size(); ++ln) {
      if (kind == SourceKind::kPython && in_string[ln] != ((op.languages & kLangPython) == 0)) continue;
      const std::string& line = lines[ln];
      for (auto it = std::sregex_iterator(line.begin(), line.end(), re); it != std::sregex_iterator(); ++it) {
        if (max_sites > 0 && site >= max_sites) break;
        const std::smatch& m = *it;
        // Positions, not prefix()/suffix(): after the first match those are
        // relative to the previous match, not to the line.
        const auto at = static_cast<std::size_t>(m.position(0));
        const std::string edited =
            line.substr(0, at) + m.format(op.replacement) + line.substr(at + static_cast<std::size_t>(m.length(0)));
        if (edited == line) continue;
        ++site;
        Mutant mu;
        mu.id = stem + "." + op.name + "." + std::to_string(site);
        mu.fault_class = op.fault_class;
        mu.operator_name = op.name;
        mu.edit = op.edit;
        mu.line = static_cast<int>(ln) + 1;
        mu.before = line;
        mu.after = edited;
        std::string out;
        if (!op.include.empty()) {
          std::istringstream includes(op.include);
          for (std::string h; std::getline(includes, h);) out += "#include <" + h + ">\n";
        }
        for (std::size_t k = 0; k < lines.size(); ++k) out += (k == ln ? edited : lines[k]) + "\n";
        mu.source = std::move(out);
        mutants.push_back(std::move(mu));
      }
    }
  }
  return mutants;
}

}  // namespace kloop::mutate
