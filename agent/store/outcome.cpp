#include "agent/store/outcome.h"

namespace kloop {

const char* outcome_name(Outcome o) {
  switch (o) {
    case Outcome::kRefused: return "refused";
    case Outcome::kContextOverflow: return "context_overflow";
    case Outcome::kNoCode: return "no_code";
    case Outcome::kUnevaluated: return "unevaluated";
    case Outcome::kCompileError: return verdict_name(VerdictClass::kCompileError);
    case Outcome::kLoadError: return verdict_name(VerdictClass::kLoadError);
    case Outcome::kRuntimeError: return verdict_name(VerdictClass::kRuntimeError);
    case Outcome::kTimeout: return verdict_name(VerdictClass::kTimeout);
    case Outcome::kIncorrect: return verdict_name(VerdictClass::kIncorrect);
    case Outcome::kIntegrityViolation: return verdict_name(VerdictClass::kIntegrityViolation);
    case Outcome::kCorrect: return verdict_name(VerdictClass::kCorrect);
  }
  return "?";
}

std::optional<Outcome> outcome_from_name(std::string_view name) {
  for (Outcome o : kEveryOutcome) {
    if (name == outcome_name(o)) return o;
  }
  return std::nullopt;
}

std::string outcome_names() {
  std::string out;
  for (Outcome o : kEveryOutcome) out += (out.empty() ? "" : ", ") + std::string(outcome_name(o));
  return out;
}

Outcome outcome_of(VerdictClass v) {
  switch (v) {
    case VerdictClass::kCompileError: return Outcome::kCompileError;
    case VerdictClass::kLoadError: return Outcome::kLoadError;
    case VerdictClass::kRuntimeError: return Outcome::kRuntimeError;
    case VerdictClass::kTimeout: return Outcome::kTimeout;
    case VerdictClass::kIncorrect: return Outcome::kIncorrect;
    case VerdictClass::kIntegrityViolation: return Outcome::kIntegrityViolation;
    case VerdictClass::kCorrect: return Outcome::kCorrect;
  }
  return Outcome::kRuntimeError;
}

bool codeless(Outcome o) {
  return o == Outcome::kNoCode || o == Outcome::kRefused || o == Outcome::kContextOverflow;
}

bool compiled(Outcome o) { return o != Outcome::kCompileError && !codeless(o); }

}  // namespace kloop
