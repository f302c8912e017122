// For the tests of KernelBench-format (Python) candidates: they need the
// python3 with torch that kloop's Python host was built for. Without it a
// test skips, unless KLOOP_REQUIRE_PYTHON_TORCH=1 (CI), where it fails.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <exception>
#include <string>

#include "evaluator/build/python_env.h"

namespace kloop::test_support {

// Why Python candidates cannot run here; "" when they can.
inline std::string python_candidates_unavailable() {
  try {
    (void)python_environment();
    return "";
  } catch (const std::exception& e) {
    return e.what();
  }
}

inline bool python_torch_required() {
  const char* require = std::getenv("KLOOP_REQUIRE_PYTHON_TORCH");
  return require && std::string(require) == "1";
}

}  // namespace kloop::test_support

// At the start of a test body (or SetUp): skip or fail as above.
#define KLOOP_NEED_PYTHON_CANDIDATES()                                                                  \
  do {                                                                                                  \
    if (const std::string why = ::kloop::test_support::python_candidates_unavailable(); !why.empty()) { \
      if (::kloop::test_support::python_torch_required()) FAIL() << why;                                \
      GTEST_SKIP() << why;                                                                              \
    }                                                                                                   \
  } while (0)
