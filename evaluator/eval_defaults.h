// The evaluation defaults every front end (kloop eval, run configs, kloop
// rescore) starts from, written once.
#pragma once

namespace kloop {

inline constexpr double kDefaultRunTimeoutSeconds = 120;  // per worker command (tests, timing)
inline constexpr double kDefaultMemoryLimitGb = 8;        // address space of the candidate process

}  // namespace kloop
