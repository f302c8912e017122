// The mutation operators: deterministic, one edit per mutant, every fault
// class reached by the shipped seeds, the CUDA-only classes only in CUDA.
#include "agent/mutate/operators.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

namespace kloop::mutate {
namespace {

std::string read_fixture(const std::string& rel) {
  std::ifstream in(std::string(KLOOP_TEST_FIXTURES) + "/mutate/" + rel);
  std::stringstream s;
  s << in.rdbuf();
  EXPECT_FALSE(s.str().empty()) << rel;
  return s.str();
}

std::set<std::string> classes_of(const std::vector<Mutant>& ms) {
  std::set<std::string> out;
  for (const auto& m : ms) out.insert(m.fault_class);
  return out;
}

TEST(MutationOperators, SameSeedSameMutantsInTheSameOrder) {
  const std::string src = read_fixture("cpu/logsoftmax.cpp");
  const auto a = generate_mutants("logsoftmaxcpp", src, SourceKind::kCpp);
  const auto b = generate_mutants("logsoftmaxcpp", src, SourceKind::kCpp);
  ASSERT_EQ(a.size(), b.size());
  ASSERT_GT(a.size(), 20u);
  std::set<std::string> ids;
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].id, b[i].id);
    EXPECT_EQ(a[i].source, b[i].source);
    EXPECT_NE(a[i].source, src) << a[i].id;
    EXPECT_TRUE(ids.insert(a[i].id).second) << "duplicate id " << a[i].id;
  }
}

TEST(MutationOperators, EachMutantChangesExactlyItsLine) {
  const std::string src = read_fixture("cpu/matmul3d.cpp");
  for (const auto& m : generate_mutants("matmul3dcpp", src, SourceKind::kCpp)) {
    std::string expected;
    const auto* op = [&]() -> const MutationOperator* {
      for (const auto& o : operator_catalogue()) {
        if (o.name == m.operator_name) return &o;
      }
      return nullptr;
    }();
    ASSERT_NE(op, nullptr) << m.id;
    std::istringstream includes(op->include);
    for (std::string h; std::getline(includes, h);) expected += "#include <" + h + ">\n";
    std::istringstream lines(src);
    int n = 0;
    for (std::string l; std::getline(lines, l);) expected += (++n == m.line ? m.after : l) + "\n";
    EXPECT_EQ(m.source, expected) << m.id;
    EXPECT_NE(m.before, m.after) << m.id;
  }
}

TEST(MutationOperators, TwoSitesOnOneLineAreTwoMutantsEachEditingItsOwnSite) {
  // transposed_index matches twice on this line; the second mutant must keep
  // the first site as it was (a match's prefix() is relative to the previous
  // match, not to the line).
  const std::string src = "acc += a_b[i * K + k] * pb[k * L + j];\n";
  std::vector<Mutant> ms;
  for (auto& m : generate_mutants("line", src, SourceKind::kCpp)) {
    if (m.operator_name == "transposed_index") ms.push_back(m);
  }
  ASSERT_EQ(ms.size(), 2u);
  EXPECT_EQ(ms[0].after, "acc += a_b[k * K + i] * pb[k * L + j];");
  EXPECT_EQ(ms[1].after, "acc += a_b[i * K + k] * pb[j * L + k];");
}

TEST(MutationOperators, MaxSitesCapsEachOperator) {
  const std::string src = read_fixture("cpu/logsoftmax.cpp");
  std::map<std::string, int> per_operator;
  for (const auto& m : generate_mutants("s", src, SourceKind::kCpp, 1)) ++per_operator[m.operator_name];
  ASSERT_FALSE(per_operator.empty());
  for (const auto& [op, n] : per_operator) EXPECT_EQ(n, 1) << op;
}

TEST(MutationOperators, TheCpuSetReachesEveryClassButSynchronisation) {
  std::set<std::string> reached;
  for (const char* f : {"cpu/logsoftmax.cpp", "cpu/matmul3d.cpp"}) {
    const std::string src = read_fixture(f);
    for (const auto& c : classes_of(generate_mutants("s", src, source_kind(f, src), 1))) reached.insert(c);
  }
  for (const auto& c : fault_classes()) {
    if (c == "synchronisation") {
      EXPECT_EQ(reached.count(c), 0u) << "CPU code has no CUDA synchronisation to remove";
    } else {
      EXPECT_EQ(reached.count(c), 1u) << c << " is not reached by the C++ seeds";
    }
  }
  std::set<std::string> python;
  for (const char* f : {"cpu/gelu.py", "cpu/logsoftmax.py", "cpu/matmul3d.py"}) {
    const std::string src = read_fixture(f);
    ASSERT_EQ(source_kind(f, src), SourceKind::kPython);
    for (const auto& m : generate_mutants("s", src, SourceKind::kPython, 1)) {
      python.insert(m.fault_class);
      EXPECT_EQ(m.operator_name.rfind("py_", 0), 0u) << m.id << ": a C++ operator edited pure Python";
    }
  }
  for (const char* c : {"boundaries", "indexing", "precision", "partial_work", "state", "constants"}) {
    EXPECT_EQ(python.count(c), 1u) << c << " is not reached by the Python seeds";
  }
}

TEST(MutationOperators, CudaSeedsGetTheSynchronisationClass) {
  std::set<std::string> ops;
  for (const char* f : {"gpu/logsoftmax.cu", "gpu/sum_atomic.cu", "gpu/matmul3d_streams.cu"}) {
    const std::string src = read_fixture(f);
    ASSERT_EQ(source_kind(f, src), SourceKind::kCuda);
    for (const auto& m : generate_mutants("s", src, SourceKind::kCuda)) ops.insert(m.operator_name);
  }
  for (const char* op : {"drop_syncthreads", "drop_stream_join", "racy_atomic", "approx_exp", "rounded_log", "memset_dropped"}) {
    EXPECT_EQ(ops.count(op), 1u) << op;
  }
  // The atomic seed zeroes its output with a memset (strict judges ATen's
  // fill kernel a library kernel): dropping it is its uninitialised state.
  for (const auto& m : generate_mutants("s", read_fixture("gpu/sum_atomic.cu"), SourceKind::kCuda)) {
    if (m.operator_name != "memset_dropped") continue;
    EXPECT_EQ(m.fault_class, "state");
    EXPECT_NE(m.after.find("cudaMemsetAsync(sums, 0, 0 * bytes, stream)"), std::string::npos) << m.after;
  }
  // load_inline sources inside a Python file get the C++/CUDA operators
  // that need no header line, and the Python ones.
  const std::string py = read_fixture("gpu/gelu_load_inline.py");
  std::set<std::string> py_ops;
  for (const auto& m : generate_mutants("s", py, SourceKind::kPython)) {
    py_ops.insert(m.operator_name);
    EXPECT_EQ(m.source.find("#include <c10/util/Half.h>\nimport"), std::string::npos) << m.id;
    // Python operators edit the Python lines, C++/CUDA ones the source
    // strings' (a `return out;` edited as Python would not build).
    const bool cxx_line = m.before.find(';') != std::string::npos || m.before.find('{') != std::string::npos;
    EXPECT_EQ(m.operator_name.rfind("py_", 0) == 0, !cxx_line) << m.id << ": " << m.before;
  }
  for (const char* op : {"erf_as_tanh", "grid_rounds_down", "guard_off_by_one", "py_zeros_output"}) {
    EXPECT_EQ(py_ops.count(op), 1u) << op;
  }
  EXPECT_EQ(py_ops.count("fp16_loads"), 0u) << "an operator that adds a header line edited a Python file";
}

}  // namespace
}  // namespace kloop::mutate
