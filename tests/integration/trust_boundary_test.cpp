// The trust boundary's second ring (issue 48): what the build runs, the
// trusted side's reading of what a candidate left, and the driver's own
// life. Each attack is a fixture in tests/fixtures/attacks (or a sandbox
// command here) with its exact outcome asserted: the victim file unchanged,
// the limit hit inside the sandbox, no process left, nothing cached that is
// not the compiler's verdict. In this process as whoever runs the tests
// (root in CI), and again through the CLI (or this binary) as uid 65534.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <functional>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/process.h"
#include "evaluator/detail/worker_session.h"
#include "evaluator/evaluate.h"
#include "evaluator/isolation/subprocess.h"
#include "evaluator/problem/registry.h"
#include "tests/support/python_support.h"
#include "tests/support/shell.h"

namespace kloop {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;

constexpr uid_t kNobody = 65534;

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_text(const std::string& path, const std::string& text, mode_t mode = 0644) {
  std::ofstream(path, std::ios::binary) << text;
  chmod(path.c_str(), mode);
}

// Whether this process runs as uid 65534 under the test's own re-exec
// (as_nobody below), where the in-process half of a test runs.
bool inner_run() {
  const char* v = std::getenv("KLOOP_TEST_AS_NOBODY");
  return v && std::string(v) == "1";
}

bool can_become_nobody(std::string& why) {
  if (geteuid() != 0) {
    why = "needs root to become uid 65534";
    return false;
  }
  if (test::shell("command -v setpriv >/dev/null 2>&1").code != 0) {
    why = "setpriv is missing";
    return false;
  }
  const std::string probe = std::string("setpriv --reuid=65534 --regid=65534 --clear-groups test -x ") +
                            KLOOP_TEST_BINARY + " -a -r " + KLOOP_TEST_FIXTURES + "/attacks/attack_daemon.cpp";
  if (test::shell(probe).code != 0) {
    why = "uid 65534 cannot reach this build (the checkout's folders are closed to it)";
    return false;
  }
  return true;
}

#define KLOOP_NEED_NOBODY()                        \
  do {                                             \
    std::string why_not;                           \
    if (!can_become_nobody(why_not)) GTEST_SKIP() << why_not; \
  } while (0)

// Scratch space for one test process: readable by uid 65534, with a home
// and a build cache of its own for it.
struct Scratch {
  Scratch() {
    char tmpl[] = "/tmp/kloop-trust-XXXXXX";
    if (!mkdtemp(tmpl)) std::abort();
    dir = tmpl;
    chmod(dir.c_str(), 0755);
    nobody_home = dir + "/home";
    nobody_cache = std::string(KLOOP_TEST_CACHE) + "-trust-uid65534";
    fs::create_directories(nobody_home);
    fs::create_directories(nobody_cache);
    if (geteuid() == 0) {
      (void)!chown(nobody_home.c_str(), kNobody, kNobody);
      (void)!chown(nobody_cache.c_str(), kNobody, kNobody);
    }
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  // A copy of tests/fixtures/attacks/NAME with `prefix` in front, readable by everyone.
  std::string fixture(const std::string& name, const std::string& prefix = "") {
    const std::string text = read_text(std::string(KLOOP_TEST_FIXTURES) + "/attacks/" + name);
    EXPECT_FALSE(text.empty()) << name;
    const std::string out = dir + "/" + std::to_string(counter++) + "_" + fs::path(name).filename().string();
    write_text(out, prefix + text);
    return out;
  }
  std::string dir, nobody_home, nobody_cache;
  int counter = 0;
};

Scratch& scratch() {
  static Scratch s;
  return s;
}

EvalOptions base_options(Isolation level) {
  EvalOptions o;
  o.worker_path = KLOOP_TEST_WORKER;
  o.threads = 2;
  o.measure_time = false;
  o.run_timeout = 60s;
  o.isolation = level;
  return o;
}

Verdict evaluate(const std::string& fixture, EvalOptions o, const std::string& problem = "19_ReLU") {
  Builder builder(BuilderConfig::from_environment());
  Evaluator evaluator(builder, o);
  return evaluator.evaluate(ProblemRegistry(ProblemRegistry::default_root()).load(problem), fixture);
}

struct CliResult {
  json verdict;
  std::string out, err;
  int code = -1;
};

// `kloop eval` of `fixture` as uid 65534, with its own home and cache.
CliResult eval_as_nobody(const std::string& fixture, const std::string& isolation, const std::string& extra = "") {
  Scratch& s = scratch();
  const std::string err_path = s.dir + "/stderr-" + std::to_string(s.counter++) + ".txt";
  const std::string cmd = "cd " + s.dir + " && setpriv --reuid=65534 --regid=65534 --clear-groups env HOME=" +
                          s.nobody_home + " KLOOP_CACHE_DIR=" + s.nobody_cache + " " + KLOOP_TEST_BINARY +
                          " eval -p 19_ReLU --device cpu -c " + fixture + " --isolation " + isolation +
                          " --json --no-timing --threads 2 --timeout 60 " + extra + " 2>" + err_path;
  CliResult r;
  const test::ShellResult sh = test::shell(cmd);
  r.code = sh.code;
  r.out = sh.output;
  r.err = read_text(err_path);
  try {
    r.verdict = json::parse(r.out);
  } catch (const json::exception&) {
    r.verdict = json::object();
  }
  return r;
}

// This test's own body again as uid 65534 (this binary, re-executed under
// setpriv with KLOOP_TEST_AS_NOBODY=1): its exit code and output.
test::ShellResult as_nobody(const std::string& test_name) {
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  return test::shell("cd " + scratch().dir + " && setpriv --reuid=65534 --regid=65534 --clear-groups env HOME=" +
                     scratch().nobody_home + " KLOOP_TEST_AS_NOBODY=1 " + self + " --gtest_filter=" + test_name +
                     " 2>&1");
}

// ---------------------------------------------------------------------------
// The build's folder: model-written code ran there.

std::string victim_prefix(const std::string& victim, const std::string& newfile) {
  return "VICTIM = \"" + victim + "\"\nNEWFILE = \"" + newfile + "\"\n";
}

void expect_links_not_followed(const std::string& verdict, const std::string& message, const std::string& victim,
                               const std::string& newfile, const std::string& original, const std::string& detail) {
  std::printf("  attack -> %s: %s\n", verdict.c_str(), message.substr(0, 300).c_str());
  EXPECT_EQ(read_text(victim), original) << "ESCAPED: the driver wrote through the build's link into " << victim;
  EXPECT_FALSE(fs::exists(newfile)) << "ESCAPED: the driver made " << newfile << " through the build's link";
  EXPECT_EQ(verdict, "compile_error") << message << "\n" << detail;
  EXPECT_NE(message.find("the build left a folder kloop does not keep"), std::string::npos) << message;
  EXPECT_NE(message.find("deeper than 32"), std::string::npos) << message;
  EXPECT_NE(message.find("not cached"), std::string::npos) << message;
}

// The critical one: a Python build plants a chain deeper than PATH_MAX and
// links named build.log and result.json; the driver (root in CI) must
// neither stop its clean-up at the chain nor write through the links.
TEST(BuildFolderTest, LinksPlantedByTheBuildAreNeverWrittenThrough) {
  KLOOP_NEED_PYTHON_CANDIDATES();
  for (Isolation level : {Isolation::kStrict, Isolation::kWeak}) {
    const std::string victim = scratch().dir + "/victim-" + isolation_name(level);
    const std::string newfile = scratch().dir + "/made-by-driver-" + isolation_name(level);
    const std::string original = "the driver's own 0600 file\n";
    write_text(victim, original, 0600);
    const Verdict v = evaluate(scratch().fixture("attack_build_links.py", victim_prefix(victim, newfile)),
                               base_options(level));
    expect_links_not_followed(verdict_name(v.verdict), v.message, victim, newfile, original, v.build.log);
    EXPECT_FALSE(v.build.cached);
    // Nothing of it in the cache: no entry, no leftover build folder.
    const fs::path builds = fs::path(KLOOP_TEST_CACHE) / "builds";
    EXPECT_FALSE(fs::exists(builds / v.build.key)) << "a folder kloop does not keep was cached";
    for (const auto& e : fs::directory_iterator(builds)) {
      EXPECT_NE(e.path().filename().string().rfind(v.build.key + ".tmp-", 0), 0u) << "left behind: " << e.path();
    }
  }
}

TEST(BuildFolderTest, LinksPlantedByTheBuildAreNeverWrittenThroughUnprivileged) {
  KLOOP_NEED_PYTHON_CANDIDATES();
  KLOOP_NEED_NOBODY();
  for (const char* isolation : {"strict", "weak"}) {
    const std::string victim = scratch().nobody_home + "/victim-" + isolation;
    const std::string newfile = scratch().nobody_home + "/made-by-driver-" + isolation;
    const std::string original = "uid 65534's own 0600 file\n";
    write_text(victim, original, 0600);
    (void)!chown(victim.c_str(), kNobody, kNobody);
    CliResult r = eval_as_nobody(scratch().fixture("attack_build_links.py", victim_prefix(victim, newfile)), isolation);
    EXPECT_EQ(r.code, 0) << r.out << r.err;
    expect_links_not_followed(r.verdict.value("verdict", ""), r.verdict.value("message", ""), victim, newfile, original,
                              r.err.substr(0, 2000));
  }
}

// ---------------------------------------------------------------------------
// The build's limits: the worker's (memory, processes, file size, time).

// A compile_error that says why and was not cached, twice in a row.
void expect_uncached_failure(const std::function<Verdict()>& run, const std::string& needle) {
  for (int round = 0; round < 2; ++round) {
    const Verdict v = run();
    std::printf("  attack -> %s: %s\n", verdict_name(v.verdict), v.message.substr(0, 300).c_str());
    EXPECT_EQ(v.verdict, VerdictClass::kCompileError) << v.message << "\n" << v.build.log.substr(0, 3000);
    EXPECT_FALSE(v.build.cached) << "round " << round << ": a failure that is no verdict of the compiler's was cached";
    EXPECT_NE(v.message.find("not cached"), std::string::npos) << v.message;
    EXPECT_EQ(v.message.find("0 error(s)"), std::string::npos) << v.message;
    EXPECT_NE((v.message + v.build.log).find(needle), std::string::npos) << v.message << "\n" << v.build.log;
  }
}

TEST(BuildLimitsTest, TheBuildShareTheEvaluationsMemoryLimit) {
  KLOOP_NEED_PYTHON_CANDIDATES();
  EvalOptions o = base_options(Isolation::kStrict);
  o.memory_limit_bytes = 1536ull << 20;
  const std::string fixture = scratch().fixture("attack_build_memory.py");
  expect_uncached_failure([&] { return evaluate(fixture, o); }, "MemoryError");
}

TEST(BuildLimitsTest, TheBuildsProcessesAreCappedInsideTheSandbox) {
  KLOOP_NEED_PYTHON_CANDIDATES();
  EvalOptions o = base_options(Isolation::kStrict);
  o.process_limit = 64;
  const std::string fixture = scratch().fixture("attack_build_processes.py");
  const Verdict v = evaluate(fixture, o);
  EXPECT_EQ(v.verdict, VerdictClass::kCompileError) << v.message << "\n" << v.build.log.substr(0, 3000);
  const auto at = v.build.log.find("forked ");
  ASSERT_NE(at, std::string::npos) << v.build.log.substr(0, 3000);
  const int forked = std::atoi(v.build.log.c_str() + at + 7);
  std::printf("  attack -> %s: forked %d of 1000\n", verdict_name(v.verdict), forked);
  EXPECT_LT(forked, 64) << "the build's processes were not capped at the evaluation's 64";
  EXPECT_GT(forked, 0);
  EXPECT_FALSE(v.build.cached);
}

TEST(BuildLimitsTest, ACompilerReadingDevZeroRunsOutOfTheLimit) {
  EvalOptions o = base_options(Isolation::kStrict);
  o.memory_limit_bytes = 1ull << 30;
  const std::string fixture = scratch().fixture("attack_include_dev_zero.cpp");
  const Verdict v = evaluate(fixture, o);
  std::printf("  attack -> %s: %s\n", verdict_name(v.verdict), v.message.substr(0, 300).c_str());
  EXPECT_EQ(v.verdict, VerdictClass::kCompileError) << v.message;
  EXPECT_FALSE(v.build.cached);
  EXPECT_NE(v.message.find("not cached"), std::string::npos) << v.message << "\n" << v.build.log.substr(0, 2000);
}

// Three sparse 1 GiB files: more than an entry may hold, refused without
// this process ever holding them (its peak memory stays far below).
TEST(BuildLimitsTest, SparseFilesLeftByTheBuildAreRefusedWithoutBeingRead) {
  KLOOP_NEED_PYTHON_CANDIDATES();
  const std::string fixture = scratch().fixture("attack_build_sparse.py");
  expect_uncached_failure([&] { return evaluate(fixture, base_options(Isolation::kStrict)); },
                          "MiB of files (sparse files count in full)");
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  EXPECT_LT(ru.ru_maxrss, 1024 * 1024) << "this process peaked at " << ru.ru_maxrss << " KiB";
}

// Found by the lead: a compile ended by SIGKILL was cached as the
// candidate's compile_error "0 error(s)" and reused ever after.
TEST(BuildLimitsTest, ABuildKilledByASignalIsNeverCached) {
  KLOOP_NEED_PYTHON_CANDIDATES();
  const std::string fixture = scratch().fixture("attack_build_killed.py");
  expect_uncached_failure([&] { return evaluate(fixture, base_options(Isolation::kStrict)); }, "killed by SIGSEGV");
}

TEST(BuildLimitsTest, TheBuildsLimitsHoldUnprivileged) {
  KLOOP_NEED_PYTHON_CANDIDATES();
  KLOOP_NEED_NOBODY();
  CliResult p = eval_as_nobody(scratch().fixture("attack_build_processes.py"), "strict", "--process-limit 64");
  EXPECT_EQ(p.verdict.value("verdict", ""), "compile_error") << p.out.substr(0, 3000) << p.err.substr(0, 2000);
  const std::string log = p.verdict.contains("build") ? p.verdict["build"].value("log", "") : "";
  const auto at = log.find("forked ");
  ASSERT_NE(at, std::string::npos) << p.out.substr(0, 3000);
  EXPECT_LT(std::atoi(log.c_str() + at + 7), 64) << log.substr(at, 100);
  CliResult z = eval_as_nobody(scratch().fixture("attack_include_dev_zero.cpp"), "strict", "--memory-limit-gb 1");
  EXPECT_EQ(z.verdict.value("verdict", ""), "compile_error") << z.out.substr(0, 2000) << z.err.substr(0, 2000);
  EXPECT_NE(z.verdict.value("message", "").find("not cached"), std::string::npos) << z.out.substr(0, 2000);
  CliResult k = eval_as_nobody(scratch().fixture("attack_build_killed.py"), "strict");
  EXPECT_EQ(k.verdict.value("verdict", ""), "compile_error") << k.out.substr(0, 2000);
  EXPECT_NE(k.verdict.value("message", "").find("not cached"), std::string::npos) << k.out.substr(0, 2000);
}

// A weak build could read what the weak sandbox does not hide; its cache
// entry never serves a strict evaluation (the key names the level), and as
// root it cannot read the cache's key (it runs as the sandbox's uid).
TEST(BuildCacheTest, WeakBuildsNeverServeStrictEvaluations) {
  const std::string fixture = scratch().fixture("../relu/correct.cpp", "// weak then strict " + std::to_string(getpid()) + "\n");
  const Verdict weak = evaluate(fixture, base_options(Isolation::kWeak));
  ASSERT_EQ(weak.verdict, VerdictClass::kCorrect) << weak.message;
  const Verdict strict = evaluate(fixture, base_options(Isolation::kStrict));
  ASSERT_EQ(strict.verdict, VerdictClass::kCorrect) << strict.message;
  EXPECT_NE(weak.build.key, strict.build.key);
  EXPECT_FALSE(strict.build.cached) << "the strict evaluation used the weak build";
  const Verdict again = evaluate(fixture, base_options(Isolation::kStrict));
  EXPECT_TRUE(again.build.cached);
  EXPECT_EQ(again.build.key, strict.build.key);
}

TEST(BuildCacheTest, AWeakCompileAsRootCannotIncbinTheCacheKey) {
  if (geteuid() != 0) GTEST_SKIP() << "as another user a weak compile has that user's rights (docs/isolation.md)";
  const std::string key = std::string(KLOOP_TEST_CACHE) + "/integrity.key";
  ASSERT_TRUE(fs::exists(key));
  const std::string fixture = scratch().fixture(
      "attack_incbin_secret.cpp", "#define KLOOP_ATTACK_SECRET_FILE \"" + key + "\"\n// " + std::to_string(getpid()) + "\n#line 1\n");
  const Verdict v = evaluate(fixture, base_options(Isolation::kWeak));
  std::printf("  attack -> %s: %s\n", verdict_name(v.verdict), v.message.substr(0, 300).c_str());
  EXPECT_EQ(v.verdict, VerdictClass::kCompileError) << "ESCAPED: the weak compile read " << key << ": " << v.message;
}

// As another user a weak candidate has that user's uid; where the kernel
// has Landlock the build cache (with its key) and the run key's folder stay
// closed to it and to its compiler.
TEST(BuildCacheTest, AWeakCandidateCannotReadTheKeysUnprivileged) {
  KLOOP_NEED_NOBODY();
  const std::string key = scratch().nobody_cache + "/integrity.key";
  // The first evaluation makes uid 65534's cache (and its key).
  CliResult first = eval_as_nobody(std::string(KLOOP_TEST_FIXTURES) + "/relu/correct.cpp", "weak");
  ASSERT_EQ(first.verdict.value("verdict", ""), "correct") << first.out.substr(0, 2000) << first.err.substr(0, 2000);
  ASSERT_TRUE(fs::exists(key));
  if (first.err.find("has no Landlock") != std::string::npos) {
    GTEST_SKIP() << "this kernel has no Landlock: weak gives the keys up (docs/isolation.md: What weak gives up)";
  }
  for (const char* name : {"attack_incbin_secret.cpp", "attack_include_secret.cpp"}) {
    const CliResult r = eval_as_nobody(
        scratch().fixture(name, "#define KLOOP_ATTACK_SECRET_FILE \"" + key + "\"\n// " + std::to_string(getpid()) +
                                    "\n#line 1\n"),
        "weak");
    std::printf("  attack -> %s: %s\n", r.verdict.value("verdict", "").c_str(),
                r.verdict.value("message", "").substr(0, 200).c_str());
    EXPECT_EQ(r.verdict.value("verdict", ""), "compile_error") << "ESCAPED: the weak compile read " << key << "\n"
                                                               << r.out.substr(0, 2000);
  }
}

// ---------------------------------------------------------------------------
// What the trusted side reads of a candidate's and of users' inputs.

// A sparse 3 GiB outputs file announced by a forged reply: refused before
// the judge allocates anything (the same fixture runs as root in
// eval_fixtures_test's attack list).
TEST(TrustedReadsTest, ASparseOutputsFileIsRefusedBeforeAllocationUnprivileged) {
  KLOOP_NEED_NOBODY();
  const CliResult r = eval_as_nobody(scratch().fixture("attack_sparse_outputs.cpp"), "strict");
  const std::string message = r.verdict.value("message", "");
  std::printf("  attack -> %s: %s\n", r.verdict.value("verdict", "").c_str(), message.substr(0, 300).c_str());
  EXPECT_EQ(r.verdict.value("verdict", ""), "integrity_violation") << r.out.substr(0, 2000) << r.err.substr(0, 2000);
  EXPECT_NE(message.find("the problem's tensors can have"), std::string::npos) << message;
}

TEST(TrustedReadsTest, TheSameSparseOutputsFileAsRoot) {
  const Verdict v = evaluate(scratch().fixture("attack_sparse_outputs.cpp"), base_options(Isolation::kStrict));
  std::printf("  attack -> %s: %s\n", verdict_name(v.verdict), v.message.substr(0, 300).c_str());
  EXPECT_EQ(v.verdict, VerdictClass::kIntegrityViolation) << v.message;
  EXPECT_NE(v.message.find("the problem's tensors can have"), std::string::npos) << v.message;
}

// `kloop import kernelbench` of a hostile folder by uid 65534 (the in-process
// test is RescoreTest.AHostileKernelBenchFolderIsData): the link to
// /proc/self/environ is skipped and its secret reaches no file of the run.
TEST(TrustedReadsTest, AHostileImportFolderIsDataUnprivileged) {
  KLOOP_NEED_NOBODY();
  const std::string gen = scratch().dir + "/hostile-" + std::to_string(getpid());
  fs::create_directories(gen);
  fs::create_symlink("/proc/self/environ", gen + "/level_1_problem_19_sample_0_kernel.py");
  fs::copy_file(std::string(KLOOP_TEST_FIXTURES) + "/kernelbench/relu_correct.py",
                gen + "/level_1_problem_19_sample_1_kernel.py");
  // The KernelBench checkout that tells the kernels' tasks, where uid 65534 reads it.
  const std::string checkout = scratch().dir + "/kernelbench-" + std::to_string(getpid());
  fs::copy(std::string(KLOOP_TEST_FIXTURES) + "/kernelbench/versions/head", checkout, fs::copy_options::recursive);
  const std::string runs = scratch().nobody_home + "/runs";
  const std::string secret = "kloop_import_secret_" + std::to_string(getpid());
  const test::ShellResult r = test::shell(
      "cd " + scratch().dir + " && setpriv --reuid=65534 --regid=65534 --clear-groups env HOME=" + scratch().nobody_home +
      " KLOOP_CACHE_DIR=" + scratch().nobody_cache + " KLOOP_TEST_IMPORT_API_KEY=" + secret + " " + KLOOP_TEST_BINARY +
      " import kernelbench " + gen + " --kernelbench " + checkout + " --name hostile --runs-dir " + runs + " 2>&1");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("imported 1 kernel file(s)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("skipped level_1_problem_19_sample_0_kernel.py: a link or not a regular file"),
            std::string::npos)
      << r.output;
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(runs, ec)) {
    if (e.is_regular_file()) {
      EXPECT_EQ(read_text(e.path().string()).find(secret), std::string::npos) << e.path();
    }
  }
}

// ---------------------------------------------------------------------------
// The sandbox's start and the driver's life.

void hang_forever(void*) {
  for (;;) pause();
}

TEST(SandboxLifeTest, ASetUpThatHangsIsKilledAtItsDeadline) {
  for (Isolation level : {Isolation::kStrict, Isolation::kWeak, Isolation::kNone}) {
    SandboxSpec spec;
    spec.level = level;
    spec.setup_timeout = 2s;
    PreparedSandbox prepared(spec, "");
    try {
      prepared.spawn({"/bin/true"}, hang_forever, nullptr);
      ADD_FAILURE() << isolation_name(level) << ": a set-up that never ends was waited out";
    } catch (const IsolationError& e) {
      EXPECT_NE(std::string(e.what()).find("set-up did not finish within 2"), std::string::npos) << e.what();
    }
  }
}

// The hook below writes to this descriptor (set before the spawn; the
// child only makes system calls).
int g_hook_ready = -1;
void signal_then_wait() {
  (void)!write(g_hook_ready, "x", 1);
  struct timespec t = {2, 0};
  while (nanosleep(&t, &t) != 0 && errno == EINTR) {
  }
}

// The driver (a forked stand-in, D) dies between the child's uid change,
// which clears the parent-death signal, and its re-arm: the child (C) must
// see it and never run its command, and must be gone (polled, bounded). A
// subreaper (R) between this process and D adopts C to report its end.
TEST(SandboxLifeTest, AChildWhoseDriverDiedBeforeTheReArmNeverRuns) {
  if (geteuid() != 0) GTEST_SKIP() << "only root changes the child's uid";
  const std::string folder = scratch().dir + "/rearm-" + std::to_string(getpid());
  fs::create_directories(folder);
  const std::string marker = folder + "/ran";
  int ready[2], driver_pid[2], result[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(driver_pid), 0);
  ASSERT_EQ(pipe(result), 0);
  const pid_t reaper = fork();
  ASSERT_GE(reaper, 0);
  if (reaper == 0) {
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    close(ready[0]);
    close(driver_pid[0]);
    close(result[0]);
    const pid_t driver = fork();
    if (driver == 0) {
      g_hook_ready = ready[1];
      SandboxSpec spec;
      spec.level = Isolation::kStrict;
      spec.writable = {folder};
      spec.after_credentials_for_test = signal_then_wait;
      try {
        PreparedSandbox prepared(spec, folder);
        prepared.spawn({"/bin/sh", "-c", "touch " + marker + "; sleep 30"}, nullptr, nullptr);
      } catch (...) {
      }
      for (;;) pause();
    }
    close(ready[1]);
    (void)!write(driver_pid[1], &driver, sizeof(driver));
    // D's end, then C's (adopted here), for at most 20 s.
    struct sigaction wake {};
    wake.sa_handler = [](int) {};
    sigaction(SIGALRM, &wake, nullptr);  // no SA_RESTART: waitpid returns
    alarm(20);
    std::string report;
    for (int ended = 0; ended < 2;) {
      int st = 0;
      const pid_t who = waitpid(-1, &st, 0);
      if (who < 0 && errno == EINTR) break;
      if (who < 0) break;
      ++ended;
      if (who == driver) continue;
      report = WIFEXITED(st) ? "exit " + std::to_string(WEXITSTATUS(st)) : "signal " + std::to_string(WTERMSIG(st));
    }
    if (report.empty()) report = "still running after 20 s";
    (void)!write(result[1], report.data(), report.size());
    _exit(0);
  }
  close(ready[1]);
  close(driver_pid[1]);
  close(result[1]);
  char byte = 0;
  ASSERT_EQ(read(ready[0], &byte, 1), 1) << "the child never reached its uid change";
  pid_t driver = 0;
  ASSERT_EQ(read(driver_pid[0], &driver, sizeof(driver)), static_cast<ssize_t>(sizeof(driver)));
  kill(driver, SIGKILL);  // while the child sleeps between its uid change and the re-arm
  std::string report(128, '\0');
  const ssize_t n = read(result[0], report.data(), report.size());
  report.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  int status = 0;
  waitpid(reaper, &status, 0);
  for (int fd : {ready[0], driver_pid[0], result[0]}) close(fd);
  std::printf("  the child of a dead driver: %s\n", report.c_str());
  EXPECT_EQ(report, "exit 125") << "ESCAPED: the child outlived its driver";
  EXPECT_FALSE(fs::exists(marker)) << "ESCAPED: the child ran its command after its driver died";
}

// 200 strict spawns while other threads come and go: none stalls (glibc's
// setresuid in the child of a raw clone once waited for threads the child
// does not have; 21 of 200 hung), each runs its command.
void spawn_under_thread_churn(int spawns) {
  std::atomic<bool> stop{false};
  std::vector<std::thread> churn;
  for (int i = 0; i < 3; ++i) {
    churn.emplace_back([&stop] {
      while (!stop) {
        std::thread t([] { std::this_thread::sleep_for(std::chrono::microseconds(200)); });
        t.join();
      }
    });
  }
  int ok = 0;
  std::string failures;
  for (int i = 0; i < spawns; ++i) {
    SandboxSpec spec;
    spec.level = Isolation::kStrict;
    spec.setup_timeout = 60s;
    try {
      const CommandResult r = run_command({"/bin/sh", "-c", "echo ran"}, "", 60s, spec);
      if (r.status.exited && r.status.code == 0 && r.output == "ran\n") {
        ++ok;
      } else {
        failures += "spawn " + std::to_string(i) + ": " + r.status.describe() + " " + r.output.substr(0, 200) + "\n";
      }
    } catch (const std::exception& e) {
      failures += "spawn " + std::to_string(i) + ": " + e.what() + "\n";
    }
  }
  stop = true;
  for (auto& t : churn) t.join();
  std::printf("  %d of %d strict spawns under thread churn ran\n", ok, spawns);
  EXPECT_EQ(ok, spawns) << failures.substr(0, 4000);
}

TEST(SandboxLifeTest, TwoHundredSpawnsUnderThreadChurnNeverStall) { spawn_under_thread_churn(200); }

TEST(SandboxLifeTest, TwoHundredSpawnsUnderThreadChurnNeverStallUnprivileged) {
  if (inner_run()) {
    spawn_under_thread_churn(200);
    return;
  }
  KLOOP_NEED_NOBODY();
  const test::ShellResult r = as_nobody("SandboxLifeTest.TwoHundredSpawnsUnderThreadChurnNeverStallUnprivileged");
  std::printf("%s", r.output.substr(r.output.find("  ") == std::string::npos ? 0 : r.output.find("  "), 200).c_str());
  EXPECT_EQ(r.code, 0) << r.output.substr(0, 6000);
  EXPECT_NE(r.output.find("[  PASSED  ] 1 test"), std::string::npos) << r.output.substr(0, 6000);
}

// Issue 50: concurrent evaluations do not share a process budget. One
// sandbox holds 16 processes while another, under the same limit of 24,
// starts 16 more: under a per-uid RLIMIT_NPROC (every sandbox of root's
// kloop is uid 65534) the second ran out of fork.
void concurrent_sandboxes_have_their_own_budget() {
  const std::string dir = scratch().dir + "/budget-" + std::to_string(getpid()) + "-" + std::to_string(geteuid());
  fs::create_directories(dir + "/a");
  fs::create_directories(dir + "/b");
  SandboxSpec spec;
  spec.level = Isolation::kStrict;
  spec.processes = 24;
  spec.group_processes = 24;
  spec.writable = {dir + "/a"};
  CommandResult held;
  std::thread holder([&] {
    held = run_command({"/bin/sh", "-c",
                        "pids=; for i in $(seq 16); do sleep 60 & pids=\"$pids $!\"; done; touch ready; "
                        "while [ ! -e done ]; do sleep 0.2; done; kill $pids; wait; echo held"},
                       dir + "/a", 120s, spec);
  });
  for (int i = 0; i < 3000 && !fs::exists(dir + "/a/ready"); ++i) std::this_thread::sleep_for(20ms);
  const bool ready = fs::exists(dir + "/a/ready");
  SandboxSpec second = spec;
  second.writable = {dir + "/b"};
  const CommandResult r =
      ready ? run_command({"/bin/sh", "-c", "n=0; for i in $(seq 16); do sleep 1 & n=$((n+1)); done; wait; echo started $n"},
                          dir + "/b", 60s, second)
            : CommandResult{};
  write_text(dir + "/a/done", "");
  holder.join();
  ASSERT_TRUE(ready) << held.output;
  std::printf("  second sandbox: %s", r.output.c_str());
  EXPECT_NE(r.output.find("started 16"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("fork"), std::string::npos) << "the second sandbox ran out of processes: " << r.output;
  EXPECT_NE(held.output.find("held"), std::string::npos) << held.output;
}

TEST(SandboxLifeTest, ConcurrentSandboxesDoNotShareAProcessBudget) { concurrent_sandboxes_have_their_own_budget(); }

TEST(SandboxLifeTest, ConcurrentSandboxesDoNotShareAProcessBudgetUnprivileged) {
  if (inner_run()) {
    concurrent_sandboxes_have_their_own_budget();
    return;
  }
  KLOOP_NEED_NOBODY();
  const test::ShellResult r = as_nobody("SandboxLifeTest.ConcurrentSandboxesDoNotShareAProcessBudgetUnprivileged");
  EXPECT_EQ(r.code, 0) << r.output.substr(0, 6000);
  EXPECT_NE(r.output.find("[  PASSED  ] 1 test"), std::string::npos) << r.output.substr(0, 6000);
}

void expect_blocked(const std::string& verdict, const std::string& message) {
  std::printf("  attack -> %s: %s\n", verdict.c_str(), message.substr(0, 400).c_str());
  EXPECT_EQ(message.find("ESCAPED"), std::string::npos) << message;
  EXPECT_EQ(verdict, "runtime_error") << message;
  EXPECT_NE(message.find("blocked"), std::string::npos) << message;
}

// The cgroup mounts under /sys are read-only inside a strict sandbox.
TEST(SandboxLifeTest, TheCgroupTreeIsReadOnlyInside) {
  const Verdict v = evaluate(scratch().fixture("attack_cgroup_write.cpp"), base_options(Isolation::kStrict));
  expect_blocked(verdict_name(v.verdict), v.message);
}

TEST(SandboxLifeTest, TheCgroupTreeIsReadOnlyInsideUnprivileged) {
  KLOOP_NEED_NOBODY();
  const CliResult r = eval_as_nobody(scratch().fixture("attack_cgroup_write.cpp"), "strict");
  expect_blocked(r.verdict.value("verdict", ""), r.verdict.value("message", "") + r.err.substr(0, 1000));
}

// Weak: the candidate may not change the driver's limits or CPUs (as an
// unprivileged user it shares the driver's uid, which the kernel allows).
TEST(SandboxLifeTest, AWeakCandidateCannotTouchTheDriversLimits) {
  const Verdict v = evaluate(scratch().fixture("attack_prlimit_driver.cpp"), base_options(Isolation::kWeak));
  expect_blocked(verdict_name(v.verdict), v.message);
  struct rlimit fsize {};
  getrlimit(RLIMIT_FSIZE, &fsize);
  EXPECT_EQ(fsize.rlim_cur, RLIM_INFINITY);
}

TEST(SandboxLifeTest, AWeakCandidateCannotTouchTheDriversLimitsUnprivileged) {
  KLOOP_NEED_NOBODY();
  const CliResult r = eval_as_nobody(scratch().fixture("attack_prlimit_driver.cpp"), "weak");
  EXPECT_EQ(r.code, 0) << "the driver failed (its writes refused?):\n" << r.out << r.err;
  expect_blocked(r.verdict.value("verdict", ""), r.verdict.value("message", "") + r.err.substr(0, 1000));
}

// Every descendant of `root` (children found through /proc/PID/task/*/children).
std::vector<pid_t> descendants(pid_t root) {
  std::vector<pid_t> out, todo = {root};
  while (!todo.empty()) {
    const pid_t p = todo.back();
    todo.pop_back();
    std::error_code ec;
    for (const auto& task : fs::directory_iterator("/proc/" + std::to_string(p) + "/task", ec)) {
      std::istringstream children(read_text(task.path().string() + "/children"));
      for (pid_t c; children >> c;) {
        out.push_back(c);
        todo.push_back(c);
      }
    }
  }
  return out;
}

bool alive(pid_t pid) {
  const std::string stat = read_text("/proc/" + std::to_string(pid) + "/stat");
  const auto paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] != 'Z';
}

// kill -9 of the driver while its candidate spins (having filled and
// locked its folder): no process of the evaluation is left (polled, 30 s
// at most), and the next kloop to start removes the dead one's work folder
// (and, as root, its cgroups).
void killed_driver_leaves_nothing(bool unprivileged) {
  const std::string fixture = scratch().fixture("attack_outlive_driver.cpp");
  const std::string prefix = unprivileged ? "setpriv --reuid=65534 --regid=65534 --clear-groups env HOME=" +
                                                scratch().nobody_home + " KLOOP_CACHE_DIR=" + scratch().nobody_cache + " "
                                          : std::string();
  const std::string command = "cd " + scratch().dir + " && exec " + prefix + KLOOP_TEST_BINARY +
                              " eval -p 19_ReLU --device cpu -c " + fixture +
                              " --json --no-timing --threads 2 --timeout 600 >/dev/null 2>&1";
  const pid_t shell = fork();
  ASSERT_GE(shell, 0);
  if (shell == 0) {
    setpgid(0, 0);
    execl("/bin/sh", "sh", "-c", command.c_str(), nullptr);
    _exit(127);
  }
  // The driver is the shell's exec'd self (setpriv and env exec too).
  std::string tag, work;
  for (int i = 0; i < 3000 && work.empty(); ++i) {
    std::this_thread::sleep_for(50ms);
    const std::string stat = read_text("/proc/" + std::to_string(shell) + "/stat");
    const auto paren = stat.rfind(')');
    if (paren == std::string::npos) break;
    std::istringstream rest(stat.substr(paren + 2));
    std::vector<std::string> fields;
    for (std::string f; rest >> f;) fields.push_back(f);
    if (fields.size() < 20) continue;
    tag = std::to_string(shell) + "-" + fields[19];
    std::error_code ec;
    for (const auto& e : fs::directory_iterator("/dev/shm", ec)) {
      const std::string name = e.path().filename().string();
      if (name.rfind(std::string(detail::kWorkFolderPrefix) + tag + "-", 0) == 0 &&
          fs::exists(e.path() / "sandbox" / "started")) {
        work = e.path().string();
      }
    }
  }
  ASSERT_FALSE(work.empty()) << "the candidate never started (driver " << tag << ")";
  const std::vector<pid_t> tree = descendants(shell);
  ASSERT_FALSE(tree.empty());
  kill(shell, SIGKILL);
  waitpid(shell, nullptr, 0);
  std::vector<pid_t> left;
  for (int i = 0; i < 600; ++i) {  // 30 s at most
    left.clear();
    for (pid_t p : tree) {
      if (alive(p)) left.push_back(p);
    }
    if (left.empty()) break;
    std::this_thread::sleep_for(50ms);
  }
  std::printf("  %zu process(es) of the killed driver's evaluation, %zu left\n", tree.size(), left.size());
  EXPECT_TRUE(left.empty()) << "ESCAPED: " << left.size() << " process(es) outlived the driver, e.g. "
                            << read_text("/proc/" + std::to_string(left.empty() ? 0 : left[0]) + "/cmdline");
  for (pid_t p : left) kill(p, SIGKILL);
  // The next kloop to start removes it: under ctest -j another test's kloop
  // may have started meanwhile and removed it already (seen in CI), which
  // is the behaviour under test; otherwise this one's next start must.
  if (!fs::exists(work)) std::printf("  the work folder was removed by a kloop started meanwhile\n");
  // The next kloop (of the same user) removes it at start-up.
  const std::string next = prefix + KLOOP_TEST_BINARY + " eval -p 19_ReLU --device cpu -c " +
                           std::string(KLOOP_TEST_FIXTURES) + "/relu/correct.cpp --json --no-timing --threads 2";
  const test::ShellResult r = test::shell("cd " + scratch().dir + " && " + next);
  EXPECT_EQ(r.code, 0) << r.output.substr(0, 2000) << r.error.substr(0, 2000);
  EXPECT_FALSE(fs::exists(work)) << "the dead driver's work folder " << work << " outlived the next start";
  if (!unprivileged && geteuid() == 0) {
    for (const char* parent : {"/sys/fs/cgroup", "/sys/fs/cgroup/memory", "/sys/fs/cgroup/pids"}) {
      std::error_code ec;
      for (const auto& e : fs::directory_iterator(parent, ec)) {
        EXPECT_EQ(e.path().filename().string().find(tag), std::string::npos) << "left behind: " << e.path();
      }
    }
  }
}

TEST(SandboxLifeTest, AKilledDriverLeavesNoProcessAndNoFolderBehind) { killed_driver_leaves_nothing(false); }

TEST(SandboxLifeTest, AKilledDriverLeavesNoProcessAndNoFolderBehindUnprivileged) {
  KLOOP_NEED_NOBODY();
  killed_driver_leaves_nothing(true);
}

}  // namespace
}  // namespace kloop
