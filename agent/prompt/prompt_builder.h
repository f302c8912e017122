// PromptBuilder: renders the prompt files of prompts/ into the system
// message, the task message and the feedback message for each verdict,
// honouring which feedback kinds a scaffold enables and the length caps.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/prompt/template.h"
#include "evaluator/problem/spec.h"
#include "evaluator/verdict.h"

namespace kloop {

// What a feedback turn may tell the model (the KernelBench paper's ablations).
enum class FeedbackKind { kCompiler, kCorrectness, kTiming, kProfiler };

const char* feedback_kind_name(FeedbackKind kind);
// Throws std::invalid_argument listing the names on an unknown one.
FeedbackKind parse_feedback_kind(const std::string& name);

struct PromptSettings {
  std::string dir;  // the prompts folder
  bool cuda = false;
  std::size_t max_feedback_chars = 6000;   // each variable part of a feedback message
  std::size_t max_reference_chars = 30000;
  // kloop: the C++ reference and kloop's kernel API (task.txt). kernelbench:
  // KernelBench's one-shot structure for a Python ModelNew (task_kernelbench.txt):
  // the PyTorch reference (the upstream file under `upstream`, a KernelBench
  // checkout, as the spec's provenance names it; without one, kloop's C++
  // port), an example pair, the instruction to write ModelNew with inline kernels.
  std::string style = "kloop";
  std::string upstream;
  std::set<FeedbackKind> feedback = {FeedbackKind::kCompiler, FeedbackKind::kCorrectness, FeedbackKind::kTiming,
                                     FeedbackKind::kProfiler};
};

class PromptBuilder {
 public:
  // Reads every template up front so a broken prompt folder fails before
  // the first LLM call. Throws TemplateError / std::runtime_error.
  explicit PromptBuilder(PromptSettings settings);

  std::string system() const;
  std::string task(const ProblemSpec& spec) const;
  std::string feedback(const Verdict& verdict) const;
  std::string no_code() const;

  // The evolutionary scaffold's prompt: the task, then the candidates shown
  // (each with its verdict, speedup, code and the feedback it got), then
  // the instruction: combine them (`crossover`), or improve on the one
  // shown; `instruction`, when not empty, replaces the shipped wording of
  // the latter (scaffold.mutate_prompt). From evolve*.txt, which only an
  // evolve run needs.
  struct ShownCandidate {
    std::string label;  // "1 (round 2, slot 3)"
    std::string verdict;
    std::optional<double> speedup;
    std::string code;
    std::string feedback;
  };
  std::string evolve(const std::string& task, const std::vector<ShownCandidate>& shown, bool crossover,
                     const std::string& instruction) const;
  const PromptSettings& settings() const { return settings_; }

 private:
  bool kernelbench() const { return settings_.style == "kernelbench"; }
  std::string kernelbench_task(const ProblemSpec& spec) const;
  std::string file(const std::string& name) const;
  std::string render(const std::string& name, const TemplateValues& values) const;

  PromptSettings settings_;
  TemplateValues files_;  // file name -> contents
};

}  // namespace kloop
