// Mutation operators: deterministic, source-level edits that inject one
// fault of a named class into a correct kernel (kloop mutate, README:
// Mutation testing). Each operator is a regular expression matched line by
// line and a replacement; every match is one mutant, so the same file and
// catalogue always give the same mutants in the same order.
#pragma once

#include <string>
#include <vector>

namespace kloop::mutate {

// What a seed file is, which decides the operators that apply to it.
enum class SourceKind {
  kCpp,     // kloop's kernel API in plain C++ (CPU)
  kCuda,    // kloop's kernel API in CUDA C++ (.cu)
  kPython,  // KernelBench's Python ModelNew; its load_inline sources get the C++/CUDA operators too
};

// The languages an operator edits (a bit set).
enum Language : unsigned { kLangCpp = 1, kLangCuda = 2, kLangPython = 4 };

struct MutationOperator {
  std::string fault_class;  // boundaries, indexing, precision, synchronisation, partial_work, state, constants
  std::string name;         // unique in the catalogue, e.g. drop_tail
  std::string edit;         // the edit in words, for the report
  unsigned languages = 0;   // Language bits
  std::string pattern;      // ECMAScript regex, matched within one line
  std::string replacement;  // std::regex_replace format ($1, $2, ...)
  // A header the edited code needs (C++ and CUDA files only: the line is
  // added at the top of the file; operators with one skip Python files).
  std::string include;
};

// One mutant: a seed with exactly one operator applied at one site.
struct Mutant {
  std::string id;  // <seed stem>.<operator>.<site>, stable across runs
  std::string fault_class;
  std::string operator_name;
  std::string edit;
  int line = 0;  // 1-based, in the seed
  std::string before;
  std::string after;
  std::string source;  // the whole mutated file
  // "- before / + after" with the line number (and the added include).
  std::string diff() const;
};

// The fault classes, in report order.
const std::vector<std::string>& fault_classes();
// The catalogue, in application order.
const std::vector<MutationOperator>& operator_catalogue();

// What a seed is, from its name and contents (.py: Python; .cu: CUDA).
SourceKind source_kind(const std::string& path, const std::string& source);

// Every mutant of `source` the catalogue makes, in catalogue order then by
// line; at most `max_sites` per operator when it is positive. A site whose
// edit leaves the line unchanged is not a mutant. `stem` names the seed in
// the ids. The synchronisation operators match CUDA code only.
std::vector<Mutant> generate_mutants(const std::string& stem, const std::string& source, SourceKind kind,
                                     int max_sites = 0);

}  // namespace kloop::mutate
