#include "evaluator/build/diagnostics.h"

#include <gtest/gtest.h>

namespace kloop {
namespace {

TEST(DiagnosticsTest, ParsesGccErrorsWarningsAndNotes) {
  auto d = parse_compiler_output(
      "candidate.cpp: In member function 'at::Tensor ModelNew::forward(const at::Tensor&)':\n"
      "candidate.cpp:9:5: error: 'undeclared_function' was not declared in this scope\n"
      "    9 |     undeclared_function(out);\n"
      "candidate.cpp:4:10: warning: unused variable 'x' [-Wunused-variable]\n"
      "/usr/include/c++/12/bits/x.h:75:15: note: declared here\n"
      "candidate.cpp:1:10: fatal error: missing.h: No such file or directory\n");
  ASSERT_EQ(d.size(), 4u);
  EXPECT_EQ(d[0].file, "candidate.cpp");
  EXPECT_EQ(d[0].line, 9);
  EXPECT_EQ(d[0].column, 5);
  EXPECT_EQ(d[0].severity, "error");
  EXPECT_EQ(d[0].message, "'undeclared_function' was not declared in this scope");
  EXPECT_EQ(d[1].severity, "warning");
  EXPECT_EQ(d[2].severity, "note");
  EXPECT_EQ(d[3].severity, "error");  // fatal error counts as an error
  EXPECT_EQ(d[0].format(), "candidate.cpp:9:5: error: 'undeclared_function' was not declared in this scope");
}

TEST(DiagnosticsTest, ParsesNvccAndLinkerFormats) {
  auto d = parse_compiler_output(
      "candidate.cu(42): error: identifier \"blockIdx_x\" is undefined\n"
      "candidate.cu(7): warning #177-D: variable \"n\" was declared but never referenced\n"
      "/usr/bin/ld: module.o: in function `f': undefined reference to `missing_kernel()'\n"
      "ptxas fatal   : Unresolved extern function '_Z3foov'\n");
  ASSERT_EQ(d.size(), 4u);
  EXPECT_EQ(d[0].file, "candidate.cu");
  EXPECT_EQ(d[0].line, 42);
  EXPECT_EQ(d[0].severity, "error");
  EXPECT_EQ(d[0].message, "identifier \"blockIdx_x\" is undefined");
  EXPECT_EQ(d[1].severity, "warning");
  EXPECT_EQ(d[2].file, "ld");
  EXPECT_NE(d[2].message.find("undefined reference to `missing_kernel()'"), std::string::npos);
  EXPECT_EQ(d[3].file, "ptxas");
}

TEST(DiagnosticsTest, SummaryPutsErrorsFirstAndCaps) {
  std::vector<CompilerDiagnostic> d = {{"a.cpp", 1, 1, "warning", "w"},
                                       {"a.cpp", 2, 1, "error", "e1"},
                                       {"a.cpp", 3, 1, "error", "e2"}};
  EXPECT_EQ(summarize_diagnostics(d, 2), "a.cpp:2:1: error: e1\na.cpp:3:1: error: e2\n"
                                         "... (more diagnostics in the full build log)\n");
}

}  // namespace
}  // namespace kloop
