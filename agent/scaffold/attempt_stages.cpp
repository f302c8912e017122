// The stages of one attempt (attempt_stages.h).
#include "agent/scaffold/attempt_stages.h"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>

#include "agent/scaffold/environment_retry.h"
#include "agent/scaffold/redaction.h"
#include "evaluator/build/content_hash.h"

namespace kloop {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// A phase of one attempt, on the status line while it lasts.
struct Phase {
  StatusLine& line;
  const char* name;
  Phase(StatusLine& l, const char* n) : line(l), name(n) { line.begin(name); }
  ~Phase() { line.end(name); }
};

AttemptId id_of(const Attempt& a) { return {a.spec->name, a.plan.at.sample, a.plan.at.turn}; }

std::string what(const Attempt& a) {
  return a.spec->name + " sample " + std::to_string(a.plan.at.sample) + " turn " + std::to_string(a.plan.at.turn);
}

std::string read_or_empty(const fs::path& p) {
  try {
    return read_file(p.string());
  } catch (const std::exception&) {
    return "";
  }
}

// A request's id in the ledger: random, so that every request of a run
// (and its resends after a stop) is told apart.
std::string new_request_id() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{:016x}", rng());
}

void append_text(const std::string& path, const std::string& line) {
  std::ofstream out(path, std::ios::app | std::ios::binary);
  out << line << "\n";
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The record's spend: every call of the attempt, whichever request and
// whichever run made it (resends and broken streams included).
void add_spend(AttemptRecord& rec, const json& calls) {
  for (const json& c : calls) {
    const json t = c.value("tokens", json::object());
    rec.input_tokens += t.value("input", 0LL);
    rec.output_tokens += t.value("output", 0LL);
    rec.reasoning_tokens += t.value("reasoning", 0LL);
    rec.cached_input_tokens += t.value("cached_input", 0LL);
    rec.cache_write_tokens += t.value("cache_write", 0LL);
    rec.cost_usd += c.value("cost_usd", 0.0);
  }
  rec.provider_attempts = static_cast<int>(calls.size());
}

std::string candidate_extension(const RunConfig& c) {
  return c.candidate_format == "kernelbench_python" ? ".py" : c.device == "cpu" ? ".cpp" : ".cu";
}

}  // namespace

AttemptEnd AttemptStages::carry(Attempt& a) {
  a.reached = a.stored.reached;
  a.dir = c_.store.attempt_dir(a.spec->name, a.plan.at.sample, a.plan.at.turn);
  a.calls = a.stored.calls;
  auto before = [&](Stage s) { return static_cast<int>(a.reached) < static_cast<int>(s); };
  if (before(Stage::kPlanned)) {
    if (!plan(a)) return AttemptEnd::kStopped;
    a.reached = Stage::kPlanned;
  }
  if (before(Stage::kAnswered)) {
    if (auto end = request(a)) return *end;
    a.reached = Stage::kAnswered;
  } else {
    restore_answer(a);
  }
  if (before(Stage::kExtracted)) {
    if (c_.scheduler.stopped()) return AttemptEnd::kStopped;
    extract(a);
    a.reached = Stage::kExtracted;
  } else {
    restore_extracted(a);
  }
  if (before(Stage::kJudged)) {
    if (auto end = judge(a)) return *end;
    a.reached = Stage::kJudged;
  } else {
    restore_judged(a);
  }
  return record(a);
}

bool AttemptStages::plan(Attempt& a) {
  if (c_.scheduler.stopped()) return false;
  json prompt = {{"system", c_.system}, {"messages", json::array()}};
  // Again at sending: a resumed turn's feedback comes from the run folder.
  for (auto& m : a.plan.messages) {
    m.content = c_.redactor.redact(std::move(m.content));
    prompt["messages"].push_back({{"role", m.role}, {"content", m.content}});
  }
  RunStore::write_text(a.dir + "/prompt.json", prompt.dump(2) + "\n");
  json parents = json::array();
  for (const auto& p : a.plan.parents) parents.push_back({p.sample, p.turn});
  c_.journal.write(id_of(a), "planned", {{"parents", parents}, {"step", a.plan.step}});
  return true;
}

void AttemptStages::heard_call(Attempt& a, const std::string& request_id, const json& call) {
  c_.journal.write(id_of(a), "call", {{"request", request_id}, {"call", call}});
  append_text(a.dir + "/calls.jsonl", call.dump());
  a.calls.push_back(call);
  std::lock_guard<std::mutex> lock(c_.tally.mutex);
  c_.tally.cost_usd += call.value("cost_usd", 0.0);
  if (call.contains("transport_fault")) {
    ++c_.tally.transport_faults;
    c_.tally.transport_fault_cost_usd += call.value("cost_usd", 0.0);
  }
}

std::optional<AttemptEnd> AttemptStages::request(Attempt& a) {
  GenerationRequest req;
  req.system = c_.system;
  // The prompt the plan stored (a resumed attempt's is on disk).
  const json prompt = json::parse(read_or_empty(fs::path(a.dir) / "prompt.json"), nullptr, false);
  if (prompt.is_object() && prompt.contains("messages")) {
    for (const auto& m : prompt["messages"]) req.messages.push_back({m.value("role", ""), m.value("content", "")});
  } else {
    req.messages = a.plan.messages;
  }
  req.key = {a.spec->name, a.plan.at.sample, a.plan.at.turn};
  req.cancel = &c_.scheduler.aborted();
  const std::string request_id = new_request_id();
  req.on_call = [&](const json& call) { heard_call(a, request_id, call); };
  try {
    const Phase waiting(c_.status, "model");
    const Scheduler::RequestSlot slot = c_.scheduler.request_slot();
    if (c_.scheduler.stopped()) return AttemptEnd::kStopped;
    c_.journal.write(id_of(a), "requested", {{"request", request_id}});
    a.answer = c_.provider.generate(req);
  } catch (const ContextOverflowError& e) {
    a.codeless = Outcome::kContextOverflow;
    a.codeless_message = e.what();
    a.answer.finish_reason = "context_overflow";
  } catch (const std::exception& e) {
    return unanswered(a, request_id, e);
  }
  if (!a.answer.refusal.empty() || (a.answer.finish_reason == "content_filter" && a.answer.text.empty())) {
    a.codeless = Outcome::kRefused;
    a.codeless_message = "the provider refused: " + (a.answer.refusal.empty() ? a.answer.finish_reason : a.answer.refusal);
  }
  store_answer(a, request_id);
  return std::nullopt;
}

std::optional<AttemptEnd> AttemptStages::unanswered(Attempt& a, const std::string& request_id, const std::exception& e) {
  const auto* failure = dynamic_cast<const ProviderFailure*>(&e);
  c_.journal.write(id_of(a), "unanswered", {{"request", request_id},
                                            {"error_class", failure ? failure->error_class() : "kloop"},
                                            {"message", c_.redactor.redact(e.what())}});
  std::lock_guard<std::mutex> lock(c_.tally.mutex);
  if (dynamic_cast<const ProviderCancelled*>(&e)) {
    ++c_.tally.requests_cut;
    return AttemptEnd::kStopped;
  }
  if (dynamic_cast<const FatalProviderError*>(&e)) {
    // Every later call would fail too: nothing new starts.
    if (c_.tally.fatal_error.empty()) c_.tally.fatal_error = e.what();
    c_.scheduler.stop("the provider refused for good");
    return AttemptEnd::kStopped;
  }
  c_.tally.errors.push_back(what(a) + ": " + e.what());
  return AttemptEnd::kFailed;
}

// The answer's files, then one line that holds its call (its bill) and
// says it is answered: a stop between the two cannot lose the bill.
void AttemptStages::store_answer(Attempt& a, const std::string& request_id) {
  const GenerationResult& g = a.answer;
  if (a.codeless != Outcome::kContextOverflow) {
    RunStore::write_text(a.dir + "/response.txt", g.text);
    if (!g.reasoning.empty()) RunStore::write_text(a.dir + "/reasoning.txt", g.reasoning);
    RunStore::write_text(a.dir + "/raw_response.json", g.raw_response.dump(2) + "\n");
  }
  // A provider without HTTP calls of its own (command, replay): its answer as one call.
  json call = !g.calls.empty() ? g.calls.back()
                               : json{{"attempt", 1}, {"provider", c_.config.provider.kind}, {"billed", g.cost_usd > 0},
                                      {"tokens", {{"input", g.input_tokens}, {"output", g.output_tokens},
                                                  {"reasoning", g.reasoning_tokens}}},
                                      {"cost_usd", g.cost_usd}};
  if (a.codeless != Outcome::kContextOverflow) {
    if (!g.calls.empty()) append_text(a.dir + "/calls.jsonl", call.dump());
    a.calls.push_back(call);
    std::lock_guard<std::mutex> lock(c_.tally.mutex);
    c_.tally.cost_usd += call.value("cost_usd", 0.0);
  }
  json line = {{"request", request_id},     {"finish_reason", g.finish_reason}, {"llm_seconds", g.total_seconds},
               {"provider_attempts", g.attempts}};
  if (a.codeless != Outcome::kContextOverflow) line["call"] = call;
  if (a.codeless) line["outcome"] = outcome_name(*a.codeless);
  if (!a.codeless_message.empty()) line["message"] = c_.redactor.redact(a.codeless_message);
  c_.journal.write(id_of(a), "answered", line);
}

void AttemptStages::restore_answer(Attempt& a) {
  const json& line = a.stored.answered;
  a.answer.text = read_or_empty(fs::path(a.dir) / "response.txt");
  a.answer.reasoning = read_or_empty(fs::path(a.dir) / "reasoning.txt");
  a.answer.finish_reason = line.value("finish_reason", "");
  a.answer.total_seconds = line.value("llm_seconds", 0.0);
  a.answer.attempts = line.value("provider_attempts", 1);
  if (line.contains("outcome")) a.codeless = outcome_from_name(line.value("outcome", ""));
  a.codeless_message = line.value("message", "");
}

void AttemptStages::extract(Attempt& a) {
  const bool python = c_.config.candidate_format == "kernelbench_python";
  a.code = !a.codeless ? extract_code(a.answer.text, python) : ExtractedCode{};
  if (a.code.found) RunStore::write_text(a.dir + "/candidate" + candidate_extension(c_.config), a.code.code);
  c_.journal.write(id_of(a), "extracted", {{"found", a.code.found}, {"method", a.code.method}});
}

void AttemptStages::restore_extracted(Attempt& a) {
  a.code.found = a.stored.extracted.value("found", false);
  a.code.method = a.stored.extracted.value("method", "");
  if (a.code.found) a.code.code = read_or_empty(fs::path(a.dir) / ("candidate" + candidate_extension(c_.config)));
}

std::optional<AttemptEnd> AttemptStages::judge(Attempt& a) {
  AttemptRecord& rec = a.record;
  rec = AttemptRecord{};
  rec.run = c_.config.name;
  rec.problem = a.spec->name;
  rec.level = a.spec->level;
  rec.sample = a.plan.at.sample;
  rec.turn = a.plan.at.turn;
  rec.parents = a.plan.parents;
  rec.step = a.plan.step;
  rec.protocol = c_.config.protocol;
  rec.device = c_.config.device == "cuda" ? c_.devices.front() : c_.config.device;
  rec.model = c_.config.provider.model;
  rec.attempt_dir = c_.store.relative_attempt_dir(a.spec->name, a.plan.at.sample, a.plan.at.turn);
  rec.finish_reason = a.answer.finish_reason;
  rec.llm_seconds = a.answer.total_seconds;
  add_spend(rec, a.calls);
  const auto eval_start = Clock::now();
  if (a.codeless) {
    rec.outcome = *a.codeless;
    rec.message = a.codeless_message;
  } else if (!a.code.found) {
    rec.outcome = Outcome::kNoCode;
    rec.message = "the response contained no code defining ModelNew";
    a.feedback = c_.prompts.no_code();
  } else {
    const std::string source = a.dir + "/candidate" + candidate_extension(c_.config);
    try {
      if (c_.scheduler.stopped()) return AttemptEnd::kStopped;
      build(a, source);
      if (c_.scheduler.stopped()) return AttemptEnd::kStopped;
      evaluate(a, source);
    } catch (const std::exception& e) {  // kloop's side: the reference, the spec, the machine
      return kloop_error(a, e);
    }
  }
  rec.eval_seconds = seconds_since(eval_start);
  RunStore::write_text(a.dir + "/feedback.txt", a.feedback);
  const std::optional<double>& early = c_.config.scaffold.early_stop_speedup;
  const bool stop_early = early && rec.outcome == Outcome::kCorrect && rec.speedup && *rec.speedup >= *early;
  rec.chain_done = stop_early || a.codeless || a.last_turn;
  rec.stop_reason = a.codeless ? outcome_name(*a.codeless) : stop_early ? "early_stop" : (rec.chain_done ? "turns" : "");
  rec.timestamp = utc_timestamp();
  c_.journal.write(id_of(a), "judged", {{"record", rec.to_json()}, {"feedback", "feedback.txt"}});
  return std::nullopt;
}

void AttemptStages::build(Attempt& a, const std::string& source) {
  // The evaluators' own configurations (the devices' architectures, the
  // sandbox), so the build the evaluation makes finds this one in the cache.
  const BuildTarget target = c_.config.device == "cpu" ? BuildTarget::kCpu : BuildTarget::kCuda;
  const Phase compiling(c_.status, "compile");
  for (const BuilderConfig& config : c_.build_configs) {
    Builder builder(config);
    {
      const CompilePool::Slot slot = c_.scheduler.compile_slot();
      a.record.compile_seconds += build_candidate_file(builder, source, c_.config.candidate_format, target).seconds;
    }
    // The reference too (built at run start; this waits for that build
    // when it is still running), so no evaluation holds a device while a
    // build finishes. No slot: a cache hit, or a wait on the run-start
    // build, which holds one; holding another would leave a core idle.
    const auto ref_start = Clock::now();
    builder.build(a.spec->reference_path, ModuleRole::kReference, target);
    a.reference_wait += seconds_since(ref_start);
  }
  c_.journal.write(id_of(a), "built", {{"compile_seconds", a.record.compile_seconds}});
}

void AttemptStages::evaluate(Attempt& a, const std::string& source) {
  AttemptRecord& rec = a.record;
  Verdict v;
  {
    const Phase evaluating(c_.status, "eval");
    const auto wait_start = Clock::now();
    const DeviceQueues::Lease lease = c_.scheduler.device();
    rec.queue_seconds = seconds_since(wait_start);
    rec.queue = lease.index();
    rec.device = c_.devices[static_cast<std::size_t>(lease.index())];
    Evaluator& evaluator = *c_.evaluators[static_cast<std::size_t>(lease.index())];
    v = evaluate_retrying_environment([&] { return evaluator.evaluate(*a.spec, source); },
                                      c_.config.environment_retries,
                                      [&](const std::string& why) {
                                        c_.status.print(c_.progress, what(a) + ": " + why + "\n");
                                      })
            .verdict;
    // Speedups against the other baselines the run asks for, the
    // torch.compile ones measured under the same lease (no candidate on
    // the device) the first time a problem needs them.
    if (!c_.config.baselines.empty() && v.verdict == VerdictClass::kCorrect) {
      std::map<std::string, TimingSummary> compiled;
      if (c_.compile_baselines) {
        std::vector<std::string> errors;
        compiled = c_.compile_baselines->times(evaluator, *a.spec, errors);
        for (const auto& e : errors) c_.status.print(c_.progress, what(a) + ": no baseline " + e + "\n");
      }
      rec.speedups = speedups_against(v, c_.config.baselines, compiled);
    }
  }
  if (v.environment.contains("device") && v.environment["device"].is_object()) {
    rec.gpu = v.environment["device"].value("name", "");
  }
  v = redact_verdict(std::move(v), c_.redactor);
  RunStore::write_text(a.dir + "/verdict.json", c_.redactor.redact_json(v.to_json()).dump(2) + "\n");
  RunStore::write_text(a.dir + "/build.log", v.build.log);
  rec.build_cached = v.build.cached;
  a.phases = v.phases;
  if (v.candidate_time && !v.candidate_time->converged && !v.candidate_time->stop_reason.empty()) {
    a.timing_cap = fmt::format("; timing {} calls, {:.2f}s timed, {}", v.candidate_time->n, v.candidate_time->total,
                               v.candidate_time->stop_reason.c_str());
  }
  rec.outcome = outcome_of(v.verdict);
  rec.speedup = v.speedup;
  rec.message = v.message;
  a.feedback = c_.redactor.redact(c_.prompts.feedback(v));
}

AttemptEnd AttemptStages::kloop_error(Attempt& a, const std::exception& e) {
  // The answer stays: the next run judges it again from what is stored.
  const std::string error = c_.redactor.redact(e.what());
  const bool environment = dynamic_cast<const EnvironmentError*>(&e) != nullptr;
  const std::string folder = c_.store.relative_attempt_dir(a.spec->name, a.plan.at.sample, a.plan.at.turn);
  const std::string log = folder + "/kloop_error.log";
  append_text(c_.store.path() + "/" + log, "[" + utc_timestamp() + "] " +
                                               (environment ? "environment_error: " : "kloop_error: ") + error);
  c_.journal.write(id_of(a), "kloop_error", {{"message", error}, {"log", log}, {"environment", environment}});
  std::lock_guard<std::mutex> lock(c_.tally.mutex);
  ++c_.tally.kloop_errors;
  c_.tally.errors.push_back(what(a) + ": " + (environment ? "environment_error" : "kloop_error") +
                            " while evaluating the answered attempt (kept in " + folder + "; log " + log +
                            "); the next run evaluates it again without a request: " + error);
  return AttemptEnd::kFailed;
}

void AttemptStages::restore_judged(Attempt& a) {
  a.record = *a.stored.judged;
  a.feedback = read_or_empty(fs::path(a.dir) / (a.stored.feedback_file.empty() ? "feedback.txt" : a.stored.feedback_file));
}

AttemptEnd AttemptStages::record(Attempt& a) {
  // What a rescore re-judges or re-evaluates, and what fed the next turn,
  // under the run's key before the record that points at it.
  c_.store.seal_files(a.record.attempt_dir, {"candidate.cpp", "candidate.cu", "candidate.py", "verdict.json", "build.log",
                                             "feedback.txt", "response.txt"});
  c_.store.append(a.record);
  stop_point_for_tests("recorded");
  int index = 0;
  {
    std::lock_guard<std::mutex> lock(c_.tally.mutex);
    index = ++c_.tally.attempts_run;
    c_.tally.tokens += a.record.input_tokens + a.record.output_tokens;
  }
  c_.status.done(a.record.cost_usd);
  c_.status.print(c_.progress, progress_line(a, index));
  return AttemptEnd::kRecorded;
}

std::string AttemptStages::progress_line(const Attempt& a, int index) const {
  const AttemptRecord& rec = a.record;
  std::string queue_wait;
  if (a.reference_wait >= 0.05) queue_wait = fmt::format(", reference build {:.1f}s", a.reference_wait);
  if (c_.devices.size() > 1 || rec.queue_seconds >= 0.05) queue_wait += fmt::format(", queue {:.1f}s", rec.queue_seconds);
  // Where an evaluation's time went (builds it did itself, the reference's
  // and the candidate's processes, the judge), when it ran.
  std::string inside;
  if (a.phases.total > 0) {
    inside = fmt::format(": builds {:.1f}s, reference {:.1f}s, candidate {:.1f}s, judge {:.1f}s{}",
                         a.phases.build_candidate + a.phases.build_reference, a.phases.reference, a.phases.candidate,
                         a.phases.compare, a.timing_cap.c_str());
  }
  const bool early = rec.stop_reason == "early_stop";
  return fmt::format("[{}/{}] {} sample {} turn {}: {}{} (llm {:.1f}s, compile {:.1f}s{}, eval {:.1f}s{}){}\n", index,
                     c_.total_attempts, rec.problem.c_str(), rec.sample, rec.turn, outcome_name(rec.outcome),
                     rec.speedup ? (" " + std::to_string(*rec.speedup).substr(0, 5) + "x").c_str() : "",
                     rec.llm_seconds, rec.compile_seconds, queue_wait,
                     rec.eval_seconds - rec.compile_seconds - a.reference_wait - rec.queue_seconds, inside,
                     early ? " - early stop" : "");
}

}  // namespace kloop
