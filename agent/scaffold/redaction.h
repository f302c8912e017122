// What the scaffold redacts before text goes back to the model: every
// verdict (its messages, compiler log and diagnostics, worker log tail,
// digests) passes through one Redactor holding the provider's secrets and
// the environment's credentials, before it is rendered into feedback (so a
// cap cannot cut a secret in half and leave a piece) and before it is
// stored in the run folder.
#pragma once

#include "agent/llm/provider.h"
#include "agent/llm/redactor.h"
#include "evaluator/verdict.h"

namespace kloop {

// provider.secrets() plus environment_secrets().
Redactor feedback_redactor(const LlmProvider& provider);

// The verdict with the secrets replaced in every text field.
Verdict redact_verdict(Verdict v, const Redactor& redactor);

}  // namespace kloop
