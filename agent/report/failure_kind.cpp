// Failure kinds from a verdict's tests, or from its message.
#include "agent/report/failure_kind.h"

namespace kloop::report {
namespace {

using json = nlohmann::json;

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// A structural problem of one output: shape or dtype.
std::string output_problem_kind(const std::string& problem) {
  if (contains(problem, "dtype")) return "dtype";
  if (contains(problem, "shape")) return "shape";
  return problem.empty() ? "" : "output_count";
}

std::string incorrect_kind_from_tests(const json& tests) {
  bool plain = false, scaled = false, variant = false, non_finite = false;
  std::string structural;
  for (const auto& t : tests) {
    if (t.value("passed", true)) continue;
    if (!t.value("problem", std::string()).empty()) structural = "output_count";
    for (const auto& o : t.value("outputs", json::array())) {
      if (o.value("passed", true)) continue;
      const std::string k = output_problem_kind(o.value("problem", std::string()));
      if (!k.empty() && structural.empty()) structural = k;
      non_finite = non_finite || o.value("non_finite", 0) > 0;
    }
    // Labels are "seed 3, inputs x1" with ", shape variant 'odd'" for hidden shapes.
    const std::string label = t.value("label", std::string());
    if (contains(label, "shape variant")) {
      variant = true;
    } else if (ends_with(label, "inputs x1")) {
      plain = true;
    } else {
      scaled = true;
    }
  }
  if (!structural.empty()) return structural;
  if (non_finite) return "non_finite";
  if (plain) return "wrong_values";
  if (scaled) return "input_scaling";
  if (variant) return "hidden_shape";
  return "unclassified";
}

// "N of M test calls failed; first: seed 9, inputs x1, shape variant 'odd': ..."
std::string incorrect_kind_from_message(const std::string& m) {
  if (contains(m, "output(s), expected") || contains(m, " is on ")) return "output_count";
  if (contains(m, "dtype mismatch")) return "dtype";
  if (contains(m, "shape mismatch")) return "shape";
  if (contains(m, "shape variant")) return "hidden_shape";
  if (contains(m, "inputs x1:") || contains(m, "inputs x1,")) return "wrong_values";
  if (contains(m, "inputs x")) return "input_scaling";
  return "unclassified";
}

std::string integrity_check(const std::string& message, const json* verdict_json) {
  if (verdict_json) {
    const json integrity = verdict_json->value("integrity", json::array());
    if (!integrity.empty()) return integrity[0].value("check", std::string("unclassified"));
  }
  // The message starts with the check: "output_aliases_input: output 0 shares ...".
  const auto colon = message.find(':');
  const std::string head = message.substr(0, colon);
  const bool is_name = colon != std::string::npos && !head.empty() &&
                       head.find_first_not_of("abcdefghijklmnopqrstuvwxyz_0123456789") == std::string::npos;
  return is_name ? head : "unclassified";
}

}  // namespace

std::string failure_kind(const std::string& verdict, const std::string& message, const json* verdict_json) {
  if (verdict == "integrity_violation") return integrity_check(message, verdict_json);
  if (verdict != "incorrect") return "";
  if (verdict_json && verdict_json->contains("tests") && (*verdict_json)["tests"].is_array()) {
    const std::string kind = incorrect_kind_from_tests((*verdict_json)["tests"]);
    if (kind != "unclassified") return kind;
  }
  return incorrect_kind_from_message(message);
}

}  // namespace kloop::report
