// Line-by-line recognisers for the diagnostic formats kloop's compilers emit.
#include "evaluator/build/diagnostics.h"

#include <regex>
#include <sstream>

namespace kloop {

std::string CompilerDiagnostic::format() const {
  std::string s = file;
  if (line > 0) s += ":" + std::to_string(line);
  if (column > 0) s += ":" + std::to_string(column);
  return s + ": " + severity + ": " + message;
}

std::vector<CompilerDiagnostic> parse_compiler_output(const std::string& log) {
  // gcc/clang: file:line:col: error: msg   (column optional)
  static const std::regex kGcc(R"(^([^:\s][^:]*):(\d+):(?:(\d+):)?\s*(fatal error|error|warning|note):\s*(.*)$)");
  // nvcc front end: file(line): error #20: msg
  static const std::regex kNvcc(R"(^(.+?)\((\d+)\):\s*(error|warning|remark)(?:\s*#[\w-]+(?:-D)?)?:\s*(.*)$)");
  // linker: ... undefined reference to `x'
  static const std::regex kLinker(R"(^(?:.*?:\s*)?(undefined reference to .*|cannot find -l\S+.*|multiple definition of .*)$)");
  // ptxas fatal etc.: "ptxas fatal   : message"
  static const std::regex kTool(R"(^(ptxas|nvlink|nvcc|cc1plus)\s*(fatal|error|warning)?[^:]*:\s*(.*)$)");

  std::vector<CompilerDiagnostic> out;
  std::istringstream in(log);
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (std::regex_match(line, m, kGcc)) {
      CompilerDiagnostic d;
      d.file = m[1];
      d.line = std::stoi(m[2]);
      d.column = m[3].matched ? std::stoi(m[3]) : 0;
      d.severity = m[4] == "fatal error" ? "error" : std::string(m[4]);
      d.message = m[5];
      out.push_back(std::move(d));
    } else if (std::regex_match(line, m, kNvcc)) {
      CompilerDiagnostic d;
      d.file = m[1];
      d.line = std::stoi(m[2]);
      d.severity = m[3] == "remark" ? "note" : std::string(m[3]);
      d.message = m[4];
      out.push_back(std::move(d));
    } else if (std::regex_match(line, m, kLinker)) {
      out.push_back({"ld", 0, 0, "error", m[1]});
    } else if (std::regex_match(line, m, kTool) && (m[2] == "fatal" || m[2] == "error")) {
      out.push_back({m[1], 0, 0, "error", m[3]});
    }
  }
  return out;
}

std::string summarize_diagnostics(const std::vector<CompilerDiagnostic>& diagnostics,
                                  std::size_t max_count) {
  std::string s;
  std::size_t shown = 0;
  for (const char* sev : {"error", "warning"}) {
    for (const auto& d : diagnostics) {
      if (d.severity != sev) continue;
      if (shown == max_count) return s + "... (more diagnostics in the full build log)\n";
      s += d.format() + "\n";
      ++shown;
    }
  }
  return s;
}

}  // namespace kloop
