// Failure kinds from a verdict's tests (their case and problem_kind fields;
// the label and problem texts for verdict files written before those), or,
// without a verdict file, from its message.
#include "agent/report/failure_kind.h"

namespace kloop::report {
namespace {

using json = nlohmann::json;

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// What an output's problem is: the verdict's problem_kind, or for verdict
// files written before it had one, the problem text.
std::string output_problem_kind(const json& output) {
  const std::string kind = output.value("problem_kind", std::string());
  if (!kind.empty()) return kind;
  const std::string problem = output.value("problem", std::string());
  if (problem.empty()) return "";
  if (contains(problem, "dtype mismatch")) return "dtype";
  if (contains(problem, "shape mismatch")) return "shape";
  if (contains(problem, "constant output")) return "constant_output";
  if (contains(problem, "broadcast output")) return "broadcast_output";
  return "output_count";
}

// The same for a test call's own problem (count, device, precision).
std::string test_problem_kind(const json& test) {
  const std::string kind = test.value("problem_kind", std::string());
  if (!kind.empty()) return kind;
  const std::string problem = test.value("problem", std::string());
  if (problem.empty()) return "";
  return contains(problem, "precision:") ? "precision" : "output_count";
}

// Which inputs a test call had: the verdict's case fields, or for older
// verdict files the label ("seed 3, inputs x1, shape variant 'odd'").
struct CaseInputs {
  bool variant = false;
  bool centered = false;
  bool plain = false;  // x1 at the default shape
};

CaseInputs case_inputs(const json& test) {
  CaseInputs c;
  if (test.contains("scaling")) {
    c.variant = !test.value("variant", std::string()).empty();
    c.centered = test.value("centered", false);
    c.plain = !c.variant && !c.centered && test.value("scaling", std::string()) == "x1";
    return c;
  }
  const std::string label = test.value("label", std::string());
  c.variant = contains(label, "shape variant");
  c.centered = !c.variant && ends_with(label, "inputs centered");
  c.plain = !c.variant && ends_with(label, "inputs x1");
  return c;
}

std::string incorrect_kind_from_tests(const json& tests) {
  bool plain = false, scaled = false, centered = false, variant = false, non_finite = false, precision = false;
  std::string structural, degenerate;
  for (const auto& t : tests) {
    if (t.value("passed", true)) continue;
    const std::string own = test_problem_kind(t);
    if (own == "precision") {
      precision = true;
      continue;  // within the tolerance: the inputs do not tell more
    }
    if (!own.empty() && structural.empty()) structural = own == "device" ? "output_count" : own;
    for (const auto& o : t.value("outputs", json::array())) {
      if (o.value("passed", true)) continue;
      const std::string k = output_problem_kind(o);
      if (k == "constant_output" || k == "broadcast_output") {
        if (degenerate.empty()) degenerate = k;
      } else if (!k.empty() && structural.empty()) {
        structural = k;
      }
      non_finite = non_finite || o.value("non_finite", 0) > 0;
    }
    const CaseInputs c = case_inputs(t);
    if (c.variant) {
      variant = true;
    } else if (c.plain) {
      plain = true;
    } else if (c.centered) {
      centered = true;
    } else {
      scaled = true;
    }
  }
  if (!structural.empty()) return structural;
  if (non_finite) return "non_finite";
  if (!degenerate.empty()) return degenerate;
  if (plain) return "wrong_values";
  if (scaled) return "input_scaling";
  if (centered) return "centered_inputs";
  if (variant) return "hidden_shape";
  if (precision) return "precision";
  return "unclassified";
}

// "N of M test calls failed; first: seed 9, inputs x1, shape variant 'odd': ..."
std::string incorrect_kind_from_message(const std::string& m) {
  if (contains(m, "output(s), expected") || contains(m, " is on ")) return "output_count";
  if (contains(m, "precision:")) return "precision";
  if (contains(m, "constant output")) return "constant_output";
  if (contains(m, "broadcast output")) return "broadcast_output";
  if (contains(m, "dtype mismatch")) return "dtype";
  if (contains(m, "shape mismatch")) return "shape";
  if (contains(m, "shape variant")) return "hidden_shape";
  if (contains(m, "inputs x1:") || contains(m, "inputs x1,")) return "wrong_values";
  if (contains(m, "inputs centered")) return "centered_inputs";
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

std::string failure_kind(Outcome outcome, const std::string& message, const json* verdict_json) {
  if (outcome == Outcome::kIntegrityViolation) return integrity_check(message, verdict_json);
  if (outcome != Outcome::kIncorrect) return "";
  if (verdict_json && verdict_json->contains("tests") && (*verdict_json)["tests"].is_array()) {
    const std::string kind = incorrect_kind_from_tests((*verdict_json)["tests"]);
    if (kind != "unclassified") return kind;
  }
  return incorrect_kind_from_message(message);
}

}  // namespace kloop::report
