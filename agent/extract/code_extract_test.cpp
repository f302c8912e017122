#include "agent/extract/code_extract.h"

#include <gtest/gtest.h>

namespace kloop {
namespace {

TEST(CodeExtractTest, TakesTheLastCppBlock) {
  auto r = extract_code("First try:\n```cpp\nold();\n```\nBetter:\n```cuda\nstruct ModelNew {};\n```\nDone.");
  ASSERT_TRUE(r.found);
  EXPECT_EQ(r.code, "struct ModelNew {};\n");
  EXPECT_EQ(r.method, "fenced:cuda");
}

TEST(CodeExtractTest, TaggedBlockWinsOverLaterUntaggedOne) {
  auto r = extract_code("```c++\nstruct ModelNew { int a; };\n```\nRun it with:\n```\nkloop eval ...\n```\n");
  ASSERT_TRUE(r.found);
  EXPECT_EQ(r.code, "struct ModelNew { int a; };\n");
}

TEST(CodeExtractTest, UntaggedBlockDefiningModelNew) {
  auto r = extract_code("```\n#include <x>\nstruct ModelNew {};\n```\n```text\nnotes\n```");
  ASSERT_TRUE(r.found);
  EXPECT_EQ(r.method, "fenced:ModelNew");
}

TEST(CodeExtractTest, FencelessFallbackNeedsRegistration) {
  auto r = extract_code("#include <kloop/kernel_api.h>\nstruct ModelNew {};\nKLOOP_REGISTER_CANDIDATE(ModelNew)\n");
  ASSERT_TRUE(r.found);
  EXPECT_EQ(r.method, "unfenced");
  EXPECT_FALSE(extract_code("I would write a ModelNew class that fuses the ops.").found);
}

TEST(CodeExtractTest, NoCodeAndUnterminatedFence) {
  EXPECT_FALSE(extract_code("Sorry, I cannot help with that.").found);
  auto r = extract_code("```cpp\nstruct ModelNew {};\n");  // cut off by max_tokens
  ASSERT_TRUE(r.found);
  EXPECT_EQ(r.code, "struct ModelNew {};\n");
  EXPECT_TRUE(extract_code("~~~cpp\nstruct ModelNew {};\n~~~\n").found);
}

// KernelBench's format: the python block, not the C++ the answer quotes
// inside an explanation; C++ extraction ignores a python block.
TEST(CodeExtractTest, PythonFormatTakesThePythonBlock) {
  const std::string answer =
      "The kernel:\n```cpp\n__global__ void k() {}\n```\nThe module:\n```python\nimport torch\n"
      "class ModelNew(torch.nn.Module):\n    pass\n```\n";
  ExtractedCode py = extract_code(answer, true);
  ASSERT_TRUE(py.found);
  EXPECT_EQ(py.method, "fenced:python");
  EXPECT_NE(py.code.find("class ModelNew"), std::string::npos);
  ExtractedCode cpp = extract_code(answer);
  EXPECT_EQ(cpp.method, "fenced:cpp");
  const std::string bare = "import torch\nclass ModelNew(torch.nn.Module):\n    pass\n";
  EXPECT_EQ(extract_code(bare, true).method, "unfenced");
  EXPECT_FALSE(extract_code(bare).found) << "C++ needs the registration to take a whole text";
}

}  // namespace
}  // namespace kloop
