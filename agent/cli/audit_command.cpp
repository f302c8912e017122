// kloop audit: flags tasks whose outputs cannot tell a real answer from a
// degenerate one (all zeros pass, constant, seed-, input- or weight-invariant).
#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>

#include "agent/cli/commands.h"
#include "agent/cli/resumable_table.h"
#include "agent/scaffold/status_line.h"
#include "evaluator/problem/registry.h"

namespace kloop::cli {
namespace {

nlohmann::json row_of(const AuditReport& r, const ProblemSpec& spec, const std::string& device, const std::string& dims,
                      const std::string& precision) {
  nlohmann::json flags = nlohmann::json::array();
  for (const auto& f : r.flags) flags.push_back({{"check", f.check}, {"reason", f.reason}});
  nlohmann::json row = {{"problem", spec.name}, {"level", spec.level},     {"max_abs_output", r.max_abs_output},
                        {"flags", flags},        {"device", device},        {"dims", dims},
                        {"precision", precision}};
  if (!r.error.empty()) row["error"] = r.error;
  return row;
}

AuditReport report_of(const nlohmann::json& row) {
  AuditReport r;
  r.problem = row.value("problem", "");
  r.max_abs_output = row.value("max_abs_output", 0.0);
  for (const auto& f : row.value("flags", nlohmann::json::array())) {
    r.flags.push_back({f.value("check", ""), f.value("reason", "")});
  }
  return r;
}

// Each flag of the task with its spec's decision at the audit's precision
// (that precision's own, else fp32's), and the decisions of flags not
// raised; whether a flag has no decision yet.
bool print_decisions(const AuditReport& r, const ProblemSpec& spec, Precision precision) {
  const DType at = precision_dtype(precision);
  // Where a decision at this precision goes: its own block, or fp32's list.
  const std::string where = precision == Precision::kFp32
                                ? "an audit entry to " + spec.spec_path
                                : std::string("an entry under precisions.") + precision_name(precision) + ".audit in " +
                                      spec.spec_path;
  bool task_undecided = false;
  for (const auto& f : r.flags) {
    std::printf("    %s: %s\n", f.check.c_str(), f.reason.c_str());
    const AuditDecision* d = spec.audit_decision(f.check, at);
    if (f.check == "centered_ill_conditioned" && conditioning_decided_by_rule(precision)) {
      std::printf("      decision: accept at %s (rule): a candidate that fails this case is also more than the "
                  "tolerance (at least KernelBench's %.0e at %s) from the reference's own outputs there, which "
                  "KernelBench's check fails too; the case stays in\n",
                  precision_name(precision), kernelbench_tolerance(precision), precision_name(precision));
    } else if (f.check.rfind("centered_", 0) == 0) {
      // Decided by the spec's centered_inputs, not an audit entry; a resumed row keeps a flag
      // raised before the spec left the case out.
      if (!spec.centered_inputs) {
        std::printf("      decision: centered_inputs: false (strict leaves the zero-mean case out)\n");
      } else {
        task_undecided = true;
        std::printf("      decision: none yet (centered_inputs: false in %s leaves the case out)\n",
                    spec.spec_path.c_str());
      }
    } else if (!d) {
      task_undecided = true;
      std::printf("      decision: none yet (add %s)\n", where.c_str());
    } else if (d->decision == "fixed") {
      task_undecided = true;
      std::printf("      decision: fixed, but still flagged: %s\n", d->note.c_str());
    } else {
      std::printf("      decision: %s: %s\n", d->decision.c_str(), d->note.c_str());
    }
  }
  for (const auto& a : spec.audit_at(at)) {
    bool raised = std::any_of(r.flags.begin(), r.flags.end(), [&](const AuditFlag& f) { return f.check == a.flag; });
    if (!raised) std::printf("    (%s %s: %s)\n", a.flag.c_str(), a.decision.c_str(), a.note.c_str());
  }
  for (const auto& p : spec.excluded_from_at(at)) {
    std::printf("    (excluded from %s%s by its spec)\n", p.c_str(),
                precision == Precision::kFp32 ? "" : (std::string(" at ") + precision_name(precision)).c_str());
  }
  return task_undecided;
}

}  // namespace

namespace {

// The command's options.
struct AuditState {
  std::vector<std::string> names;
  std::string suite;
  int level = 0;
  std::string device = "cpu";
  std::string protocol = "strict";
  std::string precision = "fp32";
  std::string dims = "small";
  std::string json_out;
  std::string resume;
};

}  // namespace

Runner add_audit_command(CLI::App& app, const GlobalOptions& global) {
  auto st = std::make_shared<AuditState>();
  app.add_option("names", st->names, "problems to audit (default: all selected)");
  app.add_option("--suite", st->suite, "only this suite");
  app.add_option("--level", st->level, "only this level");
  app.add_option("--device", st->device, "cpu or cuda[:N]")->capture_default_str();
  app.add_option("--protocol", st->protocol, "whose tolerance decides what passes")->capture_default_str();
  app.add_option("--precision", st->precision,
                 "fp32, fp16 or bf16: inputs, weights and reference in that precision, and the protocol's tolerance "
                 "for it (zeros pass more tasks in bf16)")
      ->capture_default_str();
  app.add_option("--dims", st->dims, "small (the cpu dims) or full (upstream sizes; GPU)")
      ->capture_default_str()
      ->check(CLI::IsMember({"full", "small"}));
  app.add_option("--json", st->json_out, "write the findings here as they come (one row per task)");
  app.add_option("--resume", st->resume,
                 "a --json table of an earlier audit: its tasks (those that did not fail) are not audited again");
  return [st, &global]() {
    ProblemRegistry reg(global.problems_dir);
    const std::vector<ProblemEntry> entries =
        reg.select(st->names, st->suite, st->level > 0 ? std::optional<int>(st->level) : std::nullopt);
    Builder builder(BuilderConfig::from_environment());
    EvalOptions opts;
    opts.device = st->device;
    opts.protocol = canonical_protocol_name(st->protocol);
    opts.precision = parse_precision_option("--precision", st->precision);
    opts.small_dims = st->dims == "small";
    opts.measure_time = false;
    // Many references compile in bundles, a tenth of the cost; one alone.
    if (entries.size() > 1) opts.reference_bundle = kReferenceBundleSize;
    protocol_by_name(opts.protocol);
    Evaluator evaluator(builder, opts);
    ResumableTable table(st->json_out, st->resume, "problem", "an audit table written by kloop audit --json",
                         [&](const nlohmann::json& row) {
                           return !row.contains("error") && row.value("device", "") == opts.device &&
                                  row.value("dims", "") == st->dims &&
                                  row.value("precision", "fp32") == precision_name(opts.precision);
                         });
    table.only(entries);
    std::vector<std::string> sources;
    for (const auto& e : entries) {
      if (!table.earlier(e.name)) sources.push_back(reg.load(e).reference_path);
    }
    prebuild_references(builder.config(), sources, opts);
    int flagged = 0, failed = 0, undecided = 0, resumed = 0;
    std::printf("%-60s %-12s %s\n", "problem", "max |out|", "flags");
    StatusLine status(static_cast<int>(entries.size()));  // on a terminal: done, in flight, ETA
    for (const auto& e : entries) {
      ProblemSpec spec = reg.load(e);
      const nlohmann::json* earlier = table.earlier(e.name);
      AuditReport r;
      resumed += earlier ? 1 : 0;
      if (earlier) {
        r = report_of(*earlier);
      } else {
        status.begin("eval");
        r = evaluator.audit_reference(spec);
        status.end("eval");
      }
      status.done(0);
      auto quiet = status.quiet();
      table.add(earlier ? *earlier : row_of(r, spec, opts.device, st->dims, precision_name(opts.precision)));
      if (!r.error.empty()) {
        ++failed;
        std::printf("%-60s %-12s ERROR: %s\n", e.name.c_str(), "-", r.error.c_str());
        continue;
      }
      std::string flags;
      for (const auto& f : r.flags) flags += (flags.empty() ? "" : ", ") + f.check;
      std::printf("%-60s %-12.3g %s%s\n", e.name.c_str(), r.max_abs_output, flags.empty() ? "-" : flags.c_str(),
                  earlier ? "  (resumed)" : "");
      const bool task_undecided = print_decisions(r, spec, opts.precision);
      flagged += r.flags.empty() ? 0 : 1;
      undecided += task_undecided ? 1 : 0;
      std::fflush(stdout);
    }
    std::printf(
        "%zu problems audited (%s, %s dims, %s tolerance%s; %d resumed): %d flagged, %d without a decision, %d "
        "failed\n",
        entries.size(), opts.device.c_str(), st->dims.c_str(), opts.protocol.c_str(),
        opts.precision == Precision::kFp32 ? "" : (std::string(" at ") + precision_name(opts.precision)).c_str(),
        resumed, flagged,
        undecided, failed);
    return failed ? 1 : 0;
  };
}

}  // namespace kloop::cli
