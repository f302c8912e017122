// The confinement a sandbox's child applies to itself between clone and
// exec (sandbox.cpp): the seccomp program, resource limits and a Landlock
// domain of its own. System calls only: no allocation, no locks.
#pragma once

#include <linux/filter.h>
#include <sys/types.h>

#include <cstdint>

namespace kloop::confine {

// The seccomp program: fixed size, filled in the child (the weak level
// needs the child's own pid). Denied calls fail with EPERM rather than kill,
// so a library probing for them keeps working.
constexpr int kMaxFilter = 160;

// Fills `out` (kMaxFilter entries): the calls that reach other processes'
// memory or leave the sandbox's namespaces and mounts are denied, and with
// `confine_signals` (no PID namespace) signals may only go to `self` or its
// own group. Returns the program's length, or -1 when it does not fit.
int build_filter(struct sock_filter* out, bool confine_signals, pid_t self);

void set_limit(int resource, uint64_t value);

// The kernel's Landlock ABI version; 0 without Landlock.
int landlock_abi();

// Enters a Landlock domain of the sandbox's own (see sandbox_confine.cpp).
// With `allowed` (n_allowed >= 0), the domain also handles every filesystem
// right and grants them (but making device nodes) beneath those paths only
// (`allowed_dirs[i]`: a folder; else a file, which takes file rights only):
// what is not beneath one of them cannot be opened at all. Paths that do
// not exist are skipped.
bool enter_landlock_domain(int abi, const char* const* allowed = nullptr, const unsigned char* allowed_dirs = nullptr,
                           int n_allowed = -1);

}  // namespace kloop::confine
