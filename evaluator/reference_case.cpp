// Evaluator::hold_reference_case and the held case's judge: the
// evaluation's own reference steps (prepare, expect with the inputs
// published as files, judge on the worker's device) for a program other
// than a candidate.
#include "evaluator/reference_case.h"

#include "evaluator/detail/cases.h"
#include "evaluator/detail/worker_session.h"
#include "evaluator/evaluate.h"

namespace kloop {

using json = nlohmann::json;
using namespace detail;

namespace {

// What a failed worker call says: its message, else how the worker failed,
// and the end of its log.
template <class Reply>
std::string failure_text(const std::optional<wire::Outcome<Reply>>& r, const WorkerSession& worker) {
  return (r ? r->message() : worker.failure()) + "\n" + worker.log_tail();
}

}  // namespace

HeldReferenceCase::HeldReferenceCase(std::unique_ptr<WorkDir> work, std::unique_ptr<WorkerSession> worker,
                                     std::chrono::milliseconds run_timeout)
    : work_(std::move(work)), worker_(std::move(worker)), run_timeout_(run_timeout) {}

HeldReferenceCase::~HeldReferenceCase() {
  if (worker_) worker_->finish();
}

std::string HeldReferenceCase::folder() const { return work_->path(); }

HeldJudgement HeldReferenceCase::judge(const std::string& outputs_file, const Tolerance& tol) {
  wire::Judge cmd;
  // Outputs only: the other program's inputs after its call are not judged.
  cmd.exchange = {{"transport", "file"}, {"outputs", {{"path", outputs_file}}}};
  cmd.tolerance = to_json(tol);
  cmd.identity = true;
  const auto r = worker_->call(cmd, run_timeout_);
  if (!r || !r->ok()) throw EvaluationError("judging " + outputs_file + ": " + failure_text(r, *worker_));
  HeldJudgement out;
  for (const auto& c : r->reply.outputs) out.outputs.push_back(comparison_from_json(c));
  out.identical = r->reply.identical.value_or(std::vector<bool>{});
  out.output_count = r->reply.output_count;
  out.expected_count = r->reply.expected_count;
  return out;
}

std::unique_ptr<HeldReferenceCase> Evaluator::hold_reference_case(const ProblemSpec& given, bool seeded) {
  const ProblemSpec spec = spec_at_precision(given, options_.precision);
  const wire::Construction construction = seeded ? wire::Construction::kSeeded : wire::Construction::kDrawn;
  const bool cpu = options_.device == "cpu";
  const BuildResult rb = build_reference(spec, /*bundled=*/true);
  if (!rb.ok) throw EvaluationError("the reference of " + spec.name + " " + build_failure_text(rb));
  const DimValues dims = spec.resolve_dims(cpu || options_.small_dims);
  const wire::Case c = generate_case(spec, dims, 0, options_.seed, options_.seed, 1.0, 1, false, false, construction);
  auto work = std::make_unique<WorkDir>(options_.work_root, options_.keep_work_dir);
  auto worker = std::make_unique<WorkerSession>(options_.worker_path, "reference", *work);
  auto fail = [&](const std::string& what) {
    worker->finish();
    throw EvaluationError("the reference of " + spec.name + " failed " + what);
  };
  const auto loaded = worker->call(load_command(rb, "reference", spec, options_), options_.load_timeout);
  if (!loaded || !loaded->ok()) fail("to load: " + failure_text(loaded, *worker));
  const auto prepared = worker->call(wire::Prepare{work->shared(), c, /*write_weights=*/true}, options_.run_timeout);
  if (!prepared || !prepared->ok()) fail("to draw its weights: " + failure_text(prepared, *worker));
  wire::Expect expect;
  expect.dir = work->shared();
  expect.c = c;
  expect.publish_inputs = "file";
  const auto expected = worker->call(expect, options_.run_timeout);
  if (!expected || !expected->ok()) fail("on its inputs: " + failure_text(expected, *worker));
  if (!expected->reply.inputs_exchange) {
    fail("to write its inputs: " + expected->reply.inputs_exchange_error.value_or("no reason given"));
  }
  auto held = std::make_unique<HeldReferenceCase>(std::move(work), std::move(worker), options_.run_timeout);
  held->weights_file_ = wire::weights_file(held->work_->shared(), c.id);
  held->inputs_file_ = expected->reply.inputs_exchange->at("inputs").at("path").get<std::string>();
  held->args_ = c.args;
  held->dims_ = json(dims);
  held->device_ = loaded->reply.device;
  held->construction_seed_ = c.construction_seed();
  return held;
}

}  // namespace kloop
