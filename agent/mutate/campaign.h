// A mutation campaign (kloop mutate, README: Mutation testing): correct
// seed kernels, their mutants (operators.h), each evaluated under each
// protocol through the real Evaluator, an fp64 oracle that tells
// equivalent mutants apart, and the kill rate per fault class and protocol.
// The oracle is independent of the judge under test: it reads only the
// error figures of an fp64 run of the reference, never a verdict.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agent/mutate/operators.h"
#include "evaluator/evaluate.h"
#include "evaluator/problem/spec.h"

namespace kloop::mutate {

// One correct kernel and the task it solves.
struct Seed {
  std::string problem;  // a problem name the registry finds
  std::string path;     // the candidate file (.cpp, .cu or .py)
  // Only these operators' mutants (a fixed list for CI); empty: every operator.
  std::vector<std::string> operators;
};

// A set file (YAML): `seeds: [{problem: NAME, candidate: FILE, operators:
// [NAME, ...]}, ...]`, candidate paths relative to the set file, operators
// optional. Throws std::invalid_argument naming the file, the entry and the
// field.
std::vector<Seed> load_seed_set(const std::string& path);

// The seed's mutants (its operators only, when it names some).
std::vector<Mutant> seed_mutants(const Seed& seed, int max_sites);

struct CampaignOptions {
  std::vector<std::string> protocols = {"kernelbench", "verified", "strict"};
  EvalOptions eval;     // device, seed, limits, timing; its protocol is set per evaluation
  int max_sites = 0;    // per operator and seed; 0 = every site
  int jobs = 1;         // mutants evaluated at once
  bool oracle = true;   // run the fp64 oracle on mutants that survive some protocol
  // A mutant is equivalent when, on every call of every case, its max and
  // RMS errors against the fp64 reference are within this factor of the
  // fp32 reference's own, or within kOracleFloorUlps fp32 units of the
  // fp64 output's max or RMS.
  double oracle_factor = 2.0;
  std::string out_dir;  // mutant files go to out_dir/mutants/
  std::map<std::string, long long> set_dims;  // NAME=VALUE at every size the run uses
};

constexpr double kOracleFloorUlps = 4;

// The oracle's finding on one mutant.
enum class Equivalence { kNotRun, kEquivalent, kDistinct };

struct MutantOutcome {
  Mutant mutant;
  std::string seed_path;
  std::string problem;
  std::string file;  // where the mutant was written
  // Per protocol: the verdict class and its one-line message.
  std::map<std::string, std::string> verdict;
  std::map<std::string, std::string> message;
  bool stillborn = false;  // it does not build: no protocol is measured by it
  Equivalence equivalence = Equivalence::kNotRun;
  std::string oracle_detail;  // the worst row, or why no evidence
  bool killed_by(const std::string& protocol) const;
};

// Kill counts of one (protocol, class) cell.
struct KillTally {
  int mutants = 0;  // counted: neither stillborn nor equivalent
  int killed = 0;
  double rate() const { return mutants ? static_cast<double>(killed) / mutants : 0.0; }
};

struct CampaignReport {
  std::vector<std::string> protocols;
  std::vector<Seed> seeds;
  std::vector<MutantOutcome> outcomes;
  std::string device;
  double seconds = 0;

  int generated() const { return static_cast<int>(outcomes.size()); }
  int stillborn() const;
  int equivalent() const;
  // Equivalent mutants a protocol killed anyway (a false alarm of its judge).
  int killed_equivalent(const std::string& protocol) const;
  KillTally tally(const std::string& protocol, const std::string& fault_class) const;
  // Every class but precision.
  KillTally functional(const std::string& protocol) const;
  KillTally all(const std::string& protocol) const;

  nlohmann::json to_json() const;
  std::string to_markdown() const;
};

// The seed's own errors against fp64 (the oracle run on the seed), per
// case label and output: the worst max and RMS error over the case's calls.
// A correct kernel may round differently from the reference (another
// summation order): a mutant is held to the larger of the two errors.
using SeedErrors = std::map<std::pair<std::string, int>, std::pair<double, double>>;
SeedErrors seed_errors(const Verdict& v);

// The oracle on an evaluation run with fp64_every_call: kEquivalent only
// with figures for every call and every output, each within `factor` of
// the larger of the fp32 reference's and the seed's own error (or
// kOracleFloorUlps fp32 units of the output); else kDistinct, with why.
std::pair<Equivalence, std::string> judge_equivalence(const Verdict& v, double factor, const SeedErrors& seed = {});

// A protocol's kill whose evidence lies where the oracle's run does not
// look (outputs wrong only after the timed repetitions: corrupt_after_repeat,
// an uninitialised accumulator): the mutant is distinct whatever the
// oracle's own calls showed, and the kill is no false alarm. Why, or nullopt.
std::optional<std::string> evidence_beyond_the_oracle(const MutantOutcome& o);

// Floors (a JSON file): {"generated": N, "protocols": {"strict":
// {"functional": 0.99, "precision": 0.95, "classes": {"state": 1.0}}}}.
// Every shortfall, as a line; empty when the report meets every floor.
// A floor on a class with no counted mutants is a shortfall (the set lost
// what measured it). Throws std::invalid_argument for a malformed file.
std::vector<std::string> check_floors(const CampaignReport& report, const std::string& floors_path);

// Evaluates every seed (each must be correct under every protocol, else
// EvaluationError naming it) and every mutant. `progress` hears one line
// per finished mutant.
CampaignReport run_campaign(const std::vector<Seed>& seeds, const CampaignOptions& options,
                            const std::string& problems_dir,
                            const std::function<void(const std::string&)>& progress = {});

}  // namespace kloop::mutate
