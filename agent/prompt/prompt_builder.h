// PromptBuilder: renders the prompt files of prompts/ into the system
// message, the task message and the feedback message for each verdict,
// honouring which feedback kinds a scaffold enables and the length caps.
#pragma once

#include <set>
#include <string>

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
  const PromptSettings& settings() const { return settings_; }

 private:
  std::string file(const std::string& name) const;
  std::string render(const std::string& name, const TemplateValues& values) const;

  PromptSettings settings_;
  TemplateValues files_;  // file name -> contents
};

}  // namespace kloop
