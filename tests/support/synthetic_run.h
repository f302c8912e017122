// A small run store written by a test, without any LLM or evaluation:
// config.json, results.jsonl and attempt folders with code, feedback and
// verdict files, for report and export tests.
#pragma once

#include <string>

namespace kloop::testing {

// Writes runs_dir/name, a strict run of 1 sample x 3 turns selecting four
// problems, and returns its folder:
//   19_ReLU (level 1)      integrity_violation, correct 0.9x, correct 1.6x
//   23_Softmax (level 1)   incorrect (hidden shape), correct 1.2x, correct 1.1x
//   21_Sigmoid (level 1)   no record at all (a failure in the denominator)
//   12_Gemm_Multiply_LeakyReLU (level 2)   compile_error, runtime_error, correct 2.5x
// Every attempt costs 1000 input and 200 output tokens and $0.01.
std::string write_synthetic_run(const std::string& runs_dir, const std::string& name);

// Adds rescore-kernelbench.jsonl as `kloop rescore` would: under the looser
// tolerance 23_Softmax's turn 1 is correct at 1.05x; the rest is unchanged.
void write_synthetic_rescore(const std::string& run_dir);

}  // namespace kloop::testing
