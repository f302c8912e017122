// Redactor: replaces secret values (API keys, provider header values,
// credentials from the environment) with [REDACTED] in text and JSON, so
// that no secret reaches a log, a run folder or a prompt. Providers say
// which values are theirs (LlmProvider::secrets); the scaffold adds the
// environment's and passes everything that goes back into a prompt through
// one Redactor.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace kloop {

constexpr const char* kRedacted = "[REDACTED]";

class Redactor {
 public:
  Redactor() = default;
  explicit Redactor(std::vector<std::string> secrets) { add(secrets); }

  // Empty values are ignored; a secret that contains another is replaced whole.
  void add(const std::vector<std::string>& secrets);
  bool empty() const { return secrets_.empty(); }

  std::string redact(std::string text) const;
  // Every string in the value, object keys included.
  nlohmann::json redact_json(const nlohmann::json& value) const;

 private:
  std::vector<std::string> secrets_;  // longest first
};

// Values of environment variables whose name contains KEY, TOKEN, SECRET
// or PASSWORD (in any case) and that are at least kMinSecretLength long:
// a shorter value is no credential, and blanking it would garble feedback.
constexpr std::size_t kMinSecretLength = 8;
std::vector<std::string> environment_secrets();

}  // namespace kloop
