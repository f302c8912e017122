// Reading and writing stages.jsonl (stage_journal.h).
#include "agent/scaffold/stage_journal.h"

#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <iostream>

namespace kloop {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

Stage later(Stage a, Stage b) { return static_cast<int>(a) > static_cast<int>(b) ? a : b; }

// One line read back onto its attempt; `open` is the request no answer or
// failure has followed yet.
void apply(StoredAttempt& a, const json& line, std::string& open) {
  const std::string event = line.value("event", "");
  if (event == "planned") {
    a.planned = {{"parents", line.value("parents", json::array())}, {"step", line.value("step", "")}};
    a.reached = later(a.reached, Stage::kPlanned);
  } else if (event == "requested") {
    if (!open.empty()) a.in_flight_at_stop.push_back(open);
    open = line.value("request", "?");
    ++a.requests;
  } else if (event == "call") {
    json call = line.value("call", json::object());
    call["request"] = line.value("request", "");
    a.calls.push_back(std::move(call));
  } else if (event == "answered") {
    open.clear();
    if (line.contains("call")) {  // the answer's own call, stored with it
      json call = line["call"];
      call["request"] = line.value("request", "");
      a.calls.push_back(std::move(call));
    }
    a.answered = line;
    a.reached = later(a.reached, Stage::kAnswered);
  } else if (event == "unanswered") {
    open.clear();
  } else if (event == "extracted") {
    a.extracted = line;
    a.reached = later(a.reached, Stage::kExtracted);
  } else if (event == "built") {
    a.reached = later(a.reached, Stage::kBuilt);
  } else if (event == "judged" && line.contains("record")) {
    a.judged = AttemptRecord::from_json(line["record"]);
    a.feedback_file = line.value("feedback", "");
    a.reached = later(a.reached, Stage::kJudged);
  } else if (event == "kloop_error") {
    // Evaluated again from its code (or its answer) by the next run.
    ++a.kloop_errors;
    a.judged.reset();
    a.reached = a.extracted.is_null() ? Stage::kAnswered : Stage::kExtracted;
  }
}

AttemptId id_of(const json& line) {
  return {line.value("problem", ""), line.value("sample", 0), line.value("turn", 1)};
}

}  // namespace

const char* stage_name(Stage s) {
  switch (s) {
    case Stage::kNone: return "none";
    case Stage::kPlanned: return "planned";
    case Stage::kRequested: return "requested";
    case Stage::kAnswered: return "answered";
    case Stage::kExtracted: return "extracted";
    case Stage::kBuilt: return "built";
    case Stage::kJudged: return "judged";
    case Stage::kRecorded: return "recorded";
  }
  return "?";
}

StageJournal::StageJournal(RunStore& store) : store_(store) {
  std::map<AttemptId, std::string> open;
  for (const json& line : store_.load_lines(RunStore::kStagesFile)) {
    const AttemptId id = id_of(line);
    try {
      apply(attempts_[id], line, open[id]);
    } catch (const std::exception&) {
      // A judged line whose record this kloop cannot read: judged again.
    }
  }
  for (const auto& [id, request] : open) {
    if (!request.empty()) attempts_[id].in_flight_at_stop.push_back(request);
  }
  for (const AttemptRecord& r : store_.load_results()) attempts_[{r.problem, r.sample, r.turn}].reached = Stage::kRecorded;
}

StoredAttempt StageJournal::stored(const AttemptId& id) const {
  const auto it = attempts_.find(id);
  return it == attempts_.end() ? StoredAttempt{} : it->second;
}

void StageJournal::write(const AttemptId& id, const std::string& event, json fields) {
  fields["problem"] = std::get<0>(id);
  fields["sample"] = std::get<1>(id);
  fields["turn"] = std::get<2>(id);
  fields["event"] = event;
  fields["at"] = utc_timestamp();
  store_.append_line(fields, RunStore::kStagesFile);
  stop_point_for_tests(event);
}

CallLedger StageJournal::ledger() const {
  CallLedger l;
  for (const auto& [id, a] : attempts_) {
    l.requests += a.requests;
    l.in_flight_at_stop += static_cast<int>(a.in_flight_at_stop.size());
    if (a.reached == Stage::kAnswered || a.reached == Stage::kExtracted || a.reached == Stage::kBuilt ||
        a.reached == Stage::kJudged) {
      ++l.answered_not_recorded;
      if (a.kloop_errors > 0) ++l.kloop_errors_pending;
    }
    for (const json& c : a.calls) {
      ++l.calls;
      const double cost = c.value("cost_usd", 0.0);
      l.cost_usd += cost;
      if (c.value("billed", false)) ++l.billed_calls;
      if (c.value("usage_estimated", false)) ++l.estimated_calls;
      if (c.contains("transport_fault")) {
        ++l.transport_faults;
        l.transport_fault_cost_usd += cost;
      }
    }
  }
  return l;
}

RunLedger read_run_ledger(const std::string& run_dir) {
  RunLedger out;
  try {
    fs::path folder = fs::absolute(run_dir).lexically_normal();
    if (folder.filename().empty()) folder = folder.parent_path();
    RunStore store(folder.parent_path().string(), folder.filename().string());
    if (store.record_files(RunStore::kStagesFile).empty()) return out;
    const StageJournal journal(store);
    out.ledger = journal.ledger();
    out.read = true;
  } catch (const std::exception&) {
  }
  return out;
}

void stop_point_for_tests(const std::string& event) {
  struct Point {
    std::string event;
    int n = 0;
    int signal = 0;
    std::atomic<int> seen{0};
  };
  static Point* point = [] {
    const char* spec = std::getenv("KLOOP_TEST_STOP_AT");
    if (!spec || !*spec) return static_cast<Point*>(nullptr);
    const std::string s = spec;
    const std::size_t a = s.find(':'), b = s.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) return static_cast<Point*>(nullptr);
    auto* p = new Point;
    p->event = s.substr(0, a);
    p->n = std::atoi(s.substr(a + 1, b - a - 1).c_str());
    p->signal = s.substr(b + 1) == "INT" ? SIGINT : SIGKILL;
    return p;
  }();
  if (!point || event != point->event) return;
  if (++point->seen == point->n) {
    std::cerr << "kloop: test stop point: " << event << " #" << point->n << std::endl;
    // raise(): delivered to this thread before it returns, so the stop is
    // seen by the very next check of this attempt.
    if (point->signal == SIGKILL) kill(getpid(), SIGKILL);
    raise(point->signal);
  }
}

}  // namespace kloop
