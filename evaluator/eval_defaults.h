// The evaluation defaults every front end (kloop eval, run configs, kloop
// rescore) starts from, written once.
#pragma once

namespace kloop {

inline constexpr double kDefaultRunTimeoutSeconds = 120;  // per worker command (tests, timing)
inline constexpr double kDefaultMemoryLimitGb = 8;        // address space of the candidate process
// References per bundle when a check or an audit goes through many
// (EvalOptions::reference_bundle): 25 level-1 references compile in about
// 7 s as one file, against about 88 s one by one.
inline constexpr int kReferenceBundleSize = 25;

}  // namespace kloop
