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
// Every attempt costs 1000 input and 200 output tokens and $0.01, and its
// answer ended with finish reason stop at the first HTTP attempt.
std::string write_synthetic_run(const std::string& runs_dir, const std::string& name);

// Writes runs_dir/name, a strict run of 1 sample x 2 turns whose provider
// misbehaved, and returns its folder (records; calls.jsonl lines as
// status/error_class):
//   19_ReLU      turn 1 correct 1.3x, finish stop, 3 HTTP attempts
//                  (429 transient, 503 transient, 200); 1000 input tokens, 600 written to the cache
//                turn 2 context_overflow (400 context_overflow); the chain ended
//   23_Softmax   turn 1 refused, finish content_filter (400 content_policy); the chain ended
//   21_Sigmoid   turn 1 compile_error, finish length, 2 HTTP attempts (200 malformed, 200);
//                  1200 input tokens, 600 read from the cache
//                turn 2 no record: the call gave up (500 transient, a blank line, 502 transient,
//                  a torn line)
//   12_Gemm_Multiply_LeakyReLU   no record: quota (429 quota)
// Sigmoid's and Gemm's chains are incomplete.
std::string write_synthetic_provider_run(const std::string& runs_dir, const std::string& name);

// Adds rescore-kernelbench.jsonl as `kloop rescore` would: under the looser
// tolerance 23_Softmax's turn 1 is correct at 1.05x; the rest is unchanged.
void write_synthetic_rescore(const std::string& run_dir);

}  // namespace kloop::testing
