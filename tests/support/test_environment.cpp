// Linked into every kloop test binary: points kloop at this build's test
// cache, problems and worker, whether the binary runs under ctest or by hand.
#include <cstdlib>

namespace {

struct TestEnvironment {
  TestEnvironment() {
    setenv("KLOOP_CACHE_DIR", KLOOP_TEST_CACHE, 0);
    setenv("KLOOP_PROBLEMS_DIR", KLOOP_TEST_PROBLEMS, 0);
    setenv("KLOOP_WORKER", KLOOP_TEST_WORKER, 0);
  }
};
const TestEnvironment kTestEnvironment;

}  // namespace
