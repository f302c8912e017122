// Redaction by literal replacement, longest secret first.
#include "agent/llm/redactor.h"

#include <algorithm>
#include <cctype>

extern char** environ;

namespace kloop {
namespace {

std::string replace_all(std::string text, const std::string& needle) {
  const std::string with = kRedacted;
  for (std::size_t pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos + with.size())) {
    text.replace(pos, needle.size(), with);
  }
  return text;
}

bool names_a_credential(std::string name) {
  for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const char* word : {"KEY", "TOKEN", "SECRET", "PASSWORD"}) {
    if (name.find(word) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

void Redactor::add(const std::vector<std::string>& secrets) {
  for (const auto& s : secrets) {
    if (!s.empty() && std::find(secrets_.begin(), secrets_.end(), s) == secrets_.end()) secrets_.push_back(s);
  }
  std::stable_sort(secrets_.begin(), secrets_.end(),
                   [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
}

std::string Redactor::redact(std::string text) const {
  for (const auto& s : secrets_) {
    if (text.find(s) != std::string::npos) text = replace_all(std::move(text), s);
  }
  return text;
}

nlohmann::json Redactor::redact_json(const nlohmann::json& value) const {
  if (secrets_.empty()) return value;
  if (value.is_string()) return redact(value.get<std::string>());
  if (value.is_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& v : value) out.push_back(redact_json(v));
    return out;
  }
  if (value.is_object()) {
    nlohmann::json out = nlohmann::json::object();
    for (auto it = value.begin(); it != value.end(); ++it) out[redact(it.key())] = redact_json(it.value());
    return out;
  }
  return value;
}

std::vector<std::string> environment_secrets() {
  std::vector<std::string> out;
  for (char** e = environ; e && *e; ++e) {
    const std::string entry = *e;
    const std::size_t eq = entry.find('=');
    if (eq == std::string::npos) continue;
    if (names_a_credential(entry.substr(0, eq)) && entry.size() - eq - 1 >= kMinSecretLength) {
      out.push_back(entry.substr(eq + 1));
    }
  }
  return out;
}

}  // namespace kloop
