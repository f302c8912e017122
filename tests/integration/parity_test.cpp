// kloop problems parity against upstream-format task files written for the
// test (tests/fixtures/upstream): ports that compute what their upstream
// file computes match (bit for bit here, weights loaded by state_dict
// name), a wrong upstream file is a mismatch, a module with another
// parameter a key mismatch, a missing file is said. Needs a python3 with
// torch (Debian's python3-torch); without one the tests skip, unless
// KLOOP_REQUIRE_PYTHON_TORCH=1 (CI), where they fail.
#include "evaluator/parity.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "evaluator/build/content_hash.h"
#include "evaluator/isolation/subprocess.h"
#include "evaluator/problem/registry.h"

namespace kloop {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

class ParityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    try {
      python_ = find_python_with_torch("");
    } catch (const std::exception& e) {
      const char* require = std::getenv("KLOOP_REQUIRE_PYTHON_TORCH");
      if (require && std::string(require) == "1") FAIL() << e.what();
      GTEST_SKIP() << e.what();
    }
  }
  ParityResult parity(const std::string& name, UpstreamHost* host = nullptr,
                      const std::string& upstream = std::string(KLOOP_TEST_FIXTURES) + "/upstream",
                      bool seeded = false) {
    ProblemRegistry registry(KLOOP_TEST_PROBLEMS);
    Builder builder(BuilderConfig::from_environment());
    EvalOptions o;
    o.worker_path = KLOOP_TEST_WORKER;
    o.measure_time = false;
    Evaluator evaluator(builder, o);
    ParityOptions po;
    po.upstream_root = upstream;
    po.python = python_;
    po.host = host;
    po.seeded = seeded;
    return check_parity(evaluator, registry.load(name), po);
  }
  std::string python_;
};

// One python3 serves every task (UpstreamHost), as the command runs them.
TEST_F(ParityTest, PortsThatComputeTheUpstreamTaskMatch) {
  UpstreamHost host(python_, (fs::temp_directory_path() / ("kloop-parity-" + std::to_string(getpid()) + ".log")).string());
  for (const char* name : {"19_ReLU", "23_Softmax", "12_Gemm_Multiply_LeakyReLU"}) {
    const ParityResult r = parity(name, &host);
    EXPECT_EQ(r.status, "match") << name << ": " << (r.details.empty() ? "" : r.details.front());
    EXPECT_TRUE(r.bitwise) << name << ": same weights, same inputs, same LibTorch: max abs " << r.max_abs_error;
  }
  EXPECT_EQ(host.starts(), 1);
}

// KernelBench's construction on both sides (--weights seeded): kloop's
// reference built after torch.manual_seed(S) has upstream's Model's
// parameters under the same seed, bit for bit, whatever the layers (a
// Linear's Kaiming draws, BatchNorm's ones and zeros); a port that draws
// in another order than upstream's __init__ is named tensor by tensor.
TEST_F(ParityTest, SeededConstructionGivesUpstreamsWeightsBitForBit) {
  UpstreamHost host(python_, (fs::temp_directory_path() / ("kloop-parity-" + std::to_string(getpid()) + ".log")).string());
  const ParityResult linear = parity("12_Gemm_Multiply_LeakyReLU", &host, std::string(KLOOP_TEST_FIXTURES) + "/upstream",
                                     /*seeded=*/true);
  EXPECT_EQ(linear.status, "match") << (linear.details.empty() ? "" : linear.details.front());
  EXPECT_EQ(linear.weights, "equal");
  EXPECT_EQ(linear.weights_compared, 2) << "gemm.weight and gemm.bias";
  EXPECT_TRUE(linear.bitwise);

  // Upstream draws a tensor before building its Linear, the port does not: same names and
  // shapes, other values.
  const fs::path root = fs::temp_directory_path() / ("kloop-parity-order-" + std::to_string(getpid()));
  fs::remove_all(root);
  fs::create_directories(root / "KernelBench" / "level2");
  std::ofstream(root / "KernelBench" / "level2" / "12_Gemm_Multiply_LeakyReLU.py")
      << "import torch\n"
         "class Model(torch.nn.Module):\n"
         "    def __init__(self, in_features, out_features, multiplier, negative_slope):\n"
         "        super().__init__()\n"
         "        first = torch.randn(3)\n"
         "        self.gemm = torch.nn.Linear(in_features, out_features)\n"
         "        self.multiplier, self.negative_slope = multiplier, negative_slope\n"
         "    def forward(self, x):\n"
         "        return torch.nn.functional.leaky_relu(self.gemm(x) * self.multiplier, self.negative_slope)\n";
  const ParityResult order = parity("12_Gemm_Multiply_LeakyReLU", &host, root.string(), /*seeded=*/true);
  EXPECT_EQ(order.status, "weights_mismatch");
  EXPECT_EQ(order.weights, "differ");
  ASSERT_FALSE(order.details.empty());
  EXPECT_NE(order.details.front().find("gemm.weight"), std::string::npos) << order.details.front();
  fs::remove_all(root);

  // 33_VanillaRNN: upstream draws its hidden state (at the module-level
  // batch size) before its Linears; the port keeps none, and its spec's
  // upstream_init_draws makes that draw for it (the real upstream file).
  const ParityResult rnn = parity("33_VanillaRNN", &host,
                                  std::string(KLOOP_TEST_FIXTURES) + "/kernelbench/versions/head", /*seeded=*/true);
  EXPECT_EQ(rnn.status, "match") << (rnn.details.empty() ? "" : rnn.details.front());
  EXPECT_EQ(rnn.weights, "equal");
  EXPECT_EQ(rnn.weights_compared, 4) << "i2h and h2o, weight and bias";
}

TEST_F(ParityTest, WrongUpstreamResultsAndOtherParametersAreFound) {
  const ParityResult wrong = parity("21_Sigmoid");
  EXPECT_EQ(wrong.status, "mismatch");
  EXPECT_FALSE(wrong.bitwise);
  EXPECT_GT(wrong.max_abs_error, 0.1);
  ASSERT_FALSE(wrong.details.empty());
  EXPECT_NE(wrong.details.front().find("outside atol"), std::string::npos) << wrong.details.front();
  const ParityResult keys = parity("33_BatchNorm");
  EXPECT_EQ(keys.status, "key_mismatch");
  ASSERT_FALSE(keys.details.empty());
  EXPECT_NE(keys.details.front().find("upstream_only: [\"extra_scale\"]"), std::string::npos) << keys.details.front();
  const ParityResult missing = parity("20_LeakyReLU");
  EXPECT_EQ(missing.status, "missing");
  EXPECT_FALSE(missing.deviations.empty()) << "the spec's deviations travel with every row";
}

// kloop's references run in full FP32; upstream runs so too (PyTorch's
// default lets cuDNN convolutions use TF32, on the CPU as on a GPU). A task
// file that turns TF32 on in its forward is refused, not compared.
TEST_F(ParityTest, UpstreamRunsInFullFp32OrTheRowIsRefused) {
  const fs::path root = fs::temp_directory_path() / ("kloop-parity-tf32-" + std::to_string(getpid()));
  fs::remove_all(root);
  fs::create_directories(root / "KernelBench" / "level1");
  std::ofstream(root / "KernelBench" / "level1" / "19_ReLU.py") << "import torch\n"
                                                                   "class Model(torch.nn.Module):\n"
                                                                   "    def forward(self, x):\n"
                                                                   "        torch.backends.cudnn.allow_tf32 = True\n"
                                                                   "        return torch.relu(x)\n";
  const ParityResult r = parity("19_ReLU", nullptr, root.string());
  EXPECT_EQ(r.status, "error");
  ASSERT_FALSE(r.details.empty());
  EXPECT_NE(r.details.front().find("TF32"), std::string::npos) << r.details.front();
  fs::remove_all(root);
}

// A task that ends the python3 costs that task (an error, with why) and a
// restart, not the tasks after it. Tasks that need no tensors (a
// constructor kloop's args cannot fill), so only the host is timed.
TEST_F(ParityTest, ATaskThatKillsTheHostCostsOnlyItself) {
  const fs::path dir = fs::temp_directory_path() / ("kloop-parity-host-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "args.json") << "[]";
  std::ofstream(dir / "needs_width.py") << "import torch\n"
                                            "class Model(torch.nn.Module):\n"
                                            "    def __init__(self, width):\n"
                                            "        super().__init__()\n";
  std::ofstream(dir / "exits.py") << "import os\nos._exit(3)\n";
  auto request = [&](const std::string& task) {
    return nlohmann::json{{"task", (dir / task).string()}, {"args", (dir / "args.json").string()},
                          {"weights", ""}, {"inputs", ""}, {"out", ""}, {"device", "cpu"}};
  };
  UpstreamHost host(python_, (dir / "host.log").string());
  EXPECT_EQ(host.run(request("needs_width.py"), 120s).value("kind", ""), "arg_mismatch");
  EXPECT_EQ(host.run(request("needs_width.py"), 120s).value("kind", ""), "arg_mismatch");
  EXPECT_EQ(host.starts(), 1);
  const nlohmann::json killed = host.run(request("exits.py"), 120s);
  EXPECT_EQ(killed.value("kind", ""), "error");
  EXPECT_NE(killed.value("error", "").find("ended without an answer"), std::string::npos) << killed.dump();
  EXPECT_EQ(host.run(request("needs_width.py"), 120s).value("kind", ""), "arg_mismatch");
  EXPECT_EQ(host.starts(), 2);
  fs::remove_all(dir);
}

// The command: a table that --resume continues without comparing again.
TEST_F(ParityTest, TheCommandWritesATableThatResumes) {
  const fs::path dir = fs::temp_directory_path() / ("kloop-parity-cli-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string table = (dir / "parity.json").string();
  const std::string upstream = std::string(KLOOP_TEST_FIXTURES) + "/upstream";
  CommandResult first = run_command({KLOOP_TEST_BINARY, "problems", "parity", "--upstream", upstream, "19_ReLU",
                                     "21_Sigmoid", "--json", table, "--python", python_},
                                    dir.string(), 600s);
  EXPECT_EQ(first.status.code, 1) << "a mismatch: exit 1\n" << first.output;
  EXPECT_NE(first.output.find("1 match, 1 mismatch"), std::string::npos) << first.output;
  CommandResult second = run_command({KLOOP_TEST_BINARY, "problems", "parity", "--upstream", upstream, "19_ReLU",
                                      "21_Sigmoid", "23_Softmax", "--resume", table, "--json", table, "--markdown",
                                      (dir / "parity.md").string(), "--python", python_},
                                     dir.string(), 600s);
  EXPECT_EQ(second.status.code, 0) << second.output;
  EXPECT_NE(second.output.find("1 task(s) compared"), std::string::npos) << second.output;
  EXPECT_NE(second.output.find("2 kept from"), std::string::npos) << second.output;
  const std::string md = read_file((dir / "parity.md").string());
  for (const char* row : {"| 1 | 19_ReLU | match | yes |", "| 1 | 21_Sigmoid | mismatch | no |", "| 1 | 23_Softmax | match | yes |"}) {
    EXPECT_NE(md.find(row), std::string::npos) << md;
  }
  // Each row says where its time went, and so does the progress.
  for (const auto& row : nlohmann::json::parse(read_file(table))) {
    const nlohmann::json seconds = row.value("seconds", nlohmann::json());
    ASSERT_TRUE(seconds.is_object()) << row.dump();
    EXPECT_GT(seconds.value("reference", 0.0), 0) << row.dump();
    EXPECT_GT(seconds.value("upstream", 0.0), 0) << row.dump();
    EXPECT_GT(seconds.value("compare", 0.0), 0) << row.dump();
    EXPECT_EQ(row.value("gpu", std::string("absent")), "") << "the GPU's name, none on the CPU: " << row.dump();
  }
  EXPECT_NE(second.output.find("kloop: 23_Softmax: reference "), std::string::npos) << second.output;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kloop
