// Outcome: how one attempt ended, as the run store, the scaffolds and the
// reports know it. Most attempts end in the evaluator's verdict class; the
// rest never reached the evaluator: the provider gave no answer (refused,
// context_overflow), the answer held no code (no_code), or an attempt
// imported from KernelBench had no result kloop could use (unevaluated).
// A provider failure that retries did not mend records nothing: a resumed
// run makes that attempt again.
//
// results.jsonl keeps the names (field "verdict"), so files from before
// the type existed read unchanged.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "evaluator/verdict.h"

namespace kloop {

// In the order reports list them: from no answer at all to correct, then
// what kloop has no result for.
enum class Outcome {
  kRefused,
  kContextOverflow,
  kNoCode,
  kCompileError,
  kLoadError,
  kRuntimeError,
  kTimeout,
  kIncorrect,
  kIntegrityViolation,
  kCorrect,
  kUnevaluated,
};

inline constexpr Outcome kEveryOutcome[] = {
    Outcome::kRefused,      Outcome::kContextOverflow, Outcome::kNoCode,           Outcome::kCompileError,
    Outcome::kLoadError,    Outcome::kRuntimeError,    Outcome::kTimeout,          Outcome::kIncorrect,
    Outcome::kIntegrityViolation, Outcome::kCorrect,   Outcome::kUnevaluated};

const char* outcome_name(Outcome o);
// nullopt for a name no kloop writes.
std::optional<Outcome> outcome_from_name(std::string_view name);
// "no_code, refused, ..., correct": for errors that list the choices.
std::string outcome_names();

Outcome outcome_of(VerdictClass v);

// No code to evaluate: the answer held none, or there was no answer.
bool codeless(Outcome o);
// Counts as having compiled: everything but compile_error and the codeless
// outcomes (an unevaluated import counts, as its file is there to build).
bool compiled(Outcome o);

}  // namespace kloop
