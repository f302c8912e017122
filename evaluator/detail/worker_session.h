// The driver's side of an evaluation's processes: the scratch folder one
// evaluation works in, a worker session and what went wrong with it, and
// the failures that unwind an evaluation step. For evaluate.cpp and the
// candidate's timing (candidate_timing.h); not part of the evaluator's API.
#pragma once

#include <chrono>
#include <csignal>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator/judge.h"
#include "evaluator/evaluate.h"
#include "evaluator/isolation/subprocess.h"
#include "evaluator/isolation/wire.h"

namespace kloop::detail {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

inline double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// True when the filesystem of `path` is mounted noexec.
bool noexec(const std::string& path);

// Work folders are named kloop-work-OWNER-XXXXXX (OWNER: base/process.h's
// owner_tag), so that what a killed kloop left can be told apart.
constexpr const char* kWorkFolderPrefix = "kloop-work-";

// Removes the work folders under `base` whose kloop is gone (this user's,
// or anyone's as root); returns them. WorkDir runs it once per base.
std::vector<std::string> remove_dead_kloops_work_folders(const std::string& base);

// A per-evaluation scratch folder, removed on scope exit unless kept:
//   shared/   written by the reference (weights, published inputs), read-only
//             to the candidate;
//   sandbox/  the candidate's own folder (its outputs), writable by it;
//   *.log     the workers' logs, written by the driver, unseen by the candidate.
class WorkDir {
 public:
  WorkDir(const std::string& root, bool keep);

  ~WorkDir();

  WorkDir(const WorkDir&) = delete;
  WorkDir& operator=(const WorkDir&) = delete;
  const std::string& path() const { return path_; }
  std::string shared() const { return path_ + "/shared"; }
  std::string sandbox() const { return path_ + "/sandbox"; }

 private:
  std::string path_;
  bool keep_;
};

// The last phase a worker announced on its log ("forward, case 2 call 0").
std::string last_phase(const std::string& log);

// Whether a worker's log (its first 64 KiB) holds a phase it announced.
bool announced_a_phase(const std::string& log_path);

// The last n lines of a text (the whole text when it has fewer).
std::string last_lines(const std::string& text, int n);

// Workers' OpenMP threads sleep as soon as a parallel region ends
// (OMP_WAIT_POLICY=PASSIVE, unless the environment says otherwise): a pool
// that spins after each region would burn CPU time between the timed calls,
// which the trusted timer counts as the candidate's work outside them. The
// reference's worker gets the same, for its baseline.
void passive_thread_pools();

// A worker and what went wrong with it, if anything. Replies are untrusted
// input: a line that is not a JSON object, or an over-long one, is a
// protocol violation, not an exception.
class WorkerSession {
 public:
  WorkerSession(const std::string& worker, const std::string& role, const WorkDir& dir, const std::string& cwd,
                const SandboxSpec& sandbox)
      : log_path_(dir.path() + "/" + role + ".log"), process_((passive_thread_pools(), std::vector<std::string>{worker}), cwd, log_path_, sandbox) {}
  // A trusted worker (reference, calibration): no sandbox.
  WorkerSession(const std::string& worker, const std::string& role, const WorkDir& dir)
      : WorkerSession(worker, role, dir, dir.shared(), SandboxSpec{}) {}

  // The reply to `cmd` (wire.h), or nullopt when the worker died, timed
  // out or broke the protocol (a reply that is not the command's reply);
  // failure() then describes it. Descriptors that came with the reply are
  // in fds() until the next call.
  template <class Command>
  std::optional<wire::Outcome<typename Command::Reply>> call(const Command& cmd, std::chrono::milliseconds timeout,
                                                            const std::vector<int>& send_fds = {}) {
    if (!send(cmd, send_fds)) return died(timeout);
    return await<typename Command::Reply>(timeout);
  }

  // call() in two halves, for a command that runs while another worker
  // does (the timed calls: the candidate serves while the timer measures).
  // send() is false when the worker is gone; await()'s nullopt as call()'s.
  template <class Command>
  bool send(const Command& cmd, const std::vector<int>& send_fds = {}) {
    fds_.clear();
    return process_.send(wire::command_json(cmd).dump(), send_fds);
  }
  template <class Reply>
  std::optional<wire::Outcome<Reply>> await(std::chrono::milliseconds timeout) {
    return read<Reply>(reply(timeout));
  }
  std::nullopt_t lost(std::chrono::milliseconds timeout) { return died(timeout); }

  void finish() {
    process_.send(wire::command_json(wire::Exit{}).dump());
    process_.wait(std::chrono::milliseconds(5000));
  }

  // Why the last call gave no reply, for the judge (judge_failure).
  WorkerFailure failure_observed() const {
    WorkerFailure f;
    f.kind = failure_kind_;
    // A violation's failure text is "protocol_violation: " + what broke it.
    f.message = failure_kind_ == WorkerFailure::Kind::kProtocolViolation
                    ? failure_.substr(std::string("protocol_violation: ").size())
                    : failure_;
    return f;
  }
  const std::string& failure() const { return failure_; }
  std::string log_tail() const { return last_lines(file_tail(log_path_, 16384), 30); }
  // Whether the worker announced a phase on its log: one that died before
  // it did never got as far as loading a module (nothing the candidate
  // wrote ran), so its death is the machine's (it could not start).
  bool started() const { return announced_a_phase(log_path_); }
  std::vector<UniqueFd>& fds() { return fds_; }
  pid_t pid() const { return process_.pid(); }

 private:
  // A reply line read as `Reply`; a reply of the wrong form breaks the protocol.
  template <class Reply>
  std::optional<wire::Outcome<Reply>> read(const std::optional<json>& r) {
    if (!r) return std::nullopt;
    try {
      return wire::read_reply<Reply>(*r);
    } catch (const std::exception& e) {
      return violated(e.what());
    }
  }

  std::optional<json> reply(std::chrono::milliseconds timeout) {
    auto message = process_.receive(timeout);
    if (!message) {
      if (process_.overflowed()) return violated("the worker sent a reply line of more than 64 MiB");
      return died(timeout);
    }
    fds_ = std::move(message->fds);
    try {
      json j = json::parse(message->line);
      if (!j.is_object()) return violated("the worker's reply is not a JSON object");
      return j;
    } catch (const json::exception&) {
      return violated("the worker sent a malformed reply (the module wrote to fd 3?)");
    }
  }

  std::nullopt_t violated(const std::string& what) {
    process_.kill();
    failure_kind_ = WorkerFailure::Kind::kProtocolViolation;
    failure_ = "protocol_violation: " + what;
    return std::nullopt;
  }

  std::nullopt_t died(std::chrono::milliseconds timeout) {
    std::string phase = last_phase(file_tail(log_path_, 65536));
    if (process_.timed_out()) {
      process_.kill();
      failure_kind_ = WorkerFailure::Kind::kTimedOut;
      failure_ = "no result within " + std::to_string(timeout.count() / 1000.0).substr(0, 5) + " s (during " +
                 phase + "); the process was killed";
      return std::nullopt;
    }
    ExitStatus st = process_.wait(std::chrono::milliseconds(5000));
    failure_kind_ = WorkerFailure::Kind::kDied;
    if (st.exited) {
      failure_ = "the process exited with status " + std::to_string(st.code) + " during " + phase +
                 " without returning a result (a module must not call exit())";
    } else {
      failure_ = "the process was " + st.describe() + " during " + phase;
      if (st.signal == SIGKILL) failure_ += " (possibly out of memory)";
    }
    return std::nullopt;
  }

  std::string log_path_;
  WorkerProcess process_;
  WorkerFailure::Kind failure_kind_ = WorkerFailure::Kind::kDied;
  std::string failure_;
  std::vector<UniqueFd> fds_;
};

// What became of a call, whatever its reply type: no reply (the session's
// failure() says why), a failure the worker reported, or done.
struct CallStatus {
  bool replied = false;
  std::optional<wire::Status> failure;
  template <class Reply>
  static CallStatus of(const std::optional<wire::Outcome<Reply>>& r) {
    return {r.has_value(), r ? r->failure : std::nullopt};
  }
  bool ok() const { return replied && !failure; }
};
// Turns a call that did not succeed into the candidate's verdict (throws).
using ReplyCheck = std::function<void(const CallStatus&)>;

// The verified module, copied into the evaluation's shared folder, which
// the candidate cannot write: what it loads is what the cache's MAC checked
// (no window to swap the file), and readable by the sandbox's uid.
std::string stage_module(const WorkDir& work, const std::string& library);

// The candidate broke the worker protocol (a reply that is not what was
// asked for, an index out of range, a transport kloop did not offer).
struct ProtocolViolation : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// The reference worker died or hung after the candidate's process started.
struct ReferenceDied : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// A candidate failure found deep inside a step, carried out as its verdict.
struct CandidateFailed {
  Verdict verdict;
};

}  // namespace kloop::detail
