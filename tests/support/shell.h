// A shell command run as a user would run it, for tests that drive the
// kloop binary: its exit code and its stdout (stderr apart; commands that
// want it in the output say 2>&1).
#pragma once

#include <chrono>
#include <string>

#include "base/process.h"

namespace kloop::test {

struct ShellResult {
  int code = -1;  // the exit status; -1 when a signal ended it
  std::string output;
  std::string error;
};

inline ShellResult shell(const std::string& command) {
  CommandIo io;
  io.separate_stderr = true;
  const CommandResult r = run_process({"sh", "-c", command}, std::chrono::hours(1), io);
  return {r.status.exited ? r.status.code : -1, r.output, r.error};
}

}  // namespace kloop::test
