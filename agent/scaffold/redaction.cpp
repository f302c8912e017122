// Field-by-field redaction of a Verdict.
#include "agent/scaffold/redaction.h"

namespace kloop {

Redactor feedback_redactor(const LlmProvider& provider) {
  Redactor r(provider.secrets());
  r.add(environment_secrets());
  return r;
}

Verdict redact_verdict(Verdict v, const Redactor& redactor) {
  if (redactor.empty()) return v;
  auto text = [&](std::string& s) { s = redactor.redact(std::move(s)); };
  auto value = [&](nlohmann::json& j) { j = redactor.redact_json(j); };
  for (std::string* s :
       {&v.message, &v.problem, &v.device, &v.protocol_name, &v.candidate_path, &v.build.key, &v.build.command,
        &v.build.log, &v.baseline, &v.timing_statistic, &v.sol_bound, &v.profile_digest, &v.reference_digest,
        &v.exchange, &v.input_exchange, &v.isolation, &v.fp64_unavailable, &v.fp64_deferred, &v.log_tail}) {
    text(*s);
  }
  value(v.protocol);
  value(v.activity);
  value(v.error_analysis);
  for (auto& d : v.build.diagnostics) {
    text(d.file);
    text(d.severity);
    text(d.message);
  }
  for (auto& t : v.tests) {
    text(t.label);
    text(t.problem);
    for (auto& o : t.outputs) {
      text(o.name);
      text(o.problem);
    }
  }
  for (auto& f : v.integrity) {
    text(f.check);
    text(f.message);
  }
  for (auto& l : v.vendor_libraries) text(l);
  return v;
}

}  // namespace kloop
