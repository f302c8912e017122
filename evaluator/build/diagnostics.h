// Compiler output parsed into `file:line: message` diagnostics, the form the
// feedback turn shows a model (gcc, clang, nvcc and linker formats).
#pragma once

#include <string>
#include <vector>

namespace kloop {

struct CompilerDiagnostic {
  std::string file;
  int line = 0;  // 0 when the tool gives none (linker)
  int column = 0;
  std::string severity;  // "error", "warning", "note"
  std::string message;

  std::string format() const;  // "candidate.cu:12:5: error: ..."
};

std::vector<CompilerDiagnostic> parse_compiler_output(const std::string& log);

// Errors first, then warnings, at most max_count, one per line.
std::string summarize_diagnostics(const std::vector<CompilerDiagnostic>& diagnostics,
                                  std::size_t max_count);

}  // namespace kloop
