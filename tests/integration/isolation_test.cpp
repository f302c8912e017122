// The candidate sandbox under attack (docs/isolation.md): each fixture
// in tests/fixtures/attacks tries one class of escape from inside the
// candidate's worker and throws "blocked: ..." when the sandbox stopped it,
// "ESCAPED: ..." when it got through. Every attack must end in its verdict
// (runtime_error "blocked", compile_error, or correct for the output flood),
// never "ESCAPED", and kloop must go on evaluating afterwards.
//
// Modes:
//   strict, as root, in this process (kloop::Evaluator): every class.
//   weak, as root, in this process: the classes weak promises to stop
//     (memory, signals, other processes' descriptors, inherited descriptors,
//     the environment, a daemon). Weak has no mount or network namespace, so
//     the filesystem classes (trusted files, path-named and abstract
//     sockets, a secret file, a compile-time #include) are not expected to be
//     blocked there and are not run.
//   strict and weak again through the CLI as uid 65534 (setpriv), when this
//     runs as root: the driver itself unprivileged, so the strict candidate
//     gets a user namespace instead of a uid of its own, and the weak one
//     shares the driver's uid (the driver must then be undumpable).
#include <dirent.h>
#include <elf.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/python_support.h"
#include "evaluator/evaluate.h"
#include "evaluator/isolation/subprocess.h"
#include "evaluator/problem/registry.h"
#include "tests/support/shell.h"

namespace kloop {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr uid_t kNobody = 65534;

std::string random_hex(int n) {
  std::random_device rd;
  std::string out;
  const char* digits = "0123456789abcdef";
  for (int i = 0; i < n; ++i) out += digits[rd() % 16];
  return out;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_text(const std::string& path, const std::string& text, fs::perms perms) {
  std::ofstream(path, std::ios::binary) << text;
  fs::permissions(path, perms);
}

constexpr fs::perms k0755 = fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                            fs::perms::others_read | fs::perms::others_exec;
constexpr fs::perms k0644 = fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                            fs::perms::others_read;
constexpr fs::perms k0666 = k0644 | fs::perms::group_write | fs::perms::others_write;

int listen_unix(const std::string& name, bool abstract) {
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (s < 0) return -1;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::size_t off = abstract ? 1 : 0;
  memcpy(addr.sun_path + off, name.data(), name.size());
  const socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + off + name.size());
  if (bind(s, reinterpret_cast<sockaddr*>(&addr), len) != 0 || listen(s, 16) != 0) {
    close(s);
    return -1;
  }
  return s;
}

// True when a connection is waiting on the listening socket (and takes it).
bool was_connected(int listener) {
  int c = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (c < 0) return false;
  close(c);
  return true;
}

// What the attacks need from outside, made once per test process: a secret
// in kloop's environment and in a file, listening sockets, and copies of
// the fixtures (readable by uid 65534) with those names baked in. Unique
// names mean the fixtures that carry them compile afresh in each process;
// the others keep their content and stay cached.
class Scratch {
 public:
  Scratch() {
    char tmpl[] = "/tmp/kloop-isolation-XXXXXX";
    if (!mkdtemp(tmpl)) std::abort();
    dir = tmpl;
    fs::permissions(dir, k0755);
    secret = "kloop_secret_" + random_hex(32);
    setenv("KLOOP_TEST_API_KEY", secret.c_str(), 1);
    secret_file = dir + "/included.h";
    write_text(secret_file, secret + " " + secret + ";\n", k0644);
    abstract_name = "kloop-isolation-" + std::to_string(getpid()) + "-" + random_hex(8);
    abstract_fd = listen_unix(abstract_name, true);
    socket_path = dir + "/listen.sock";
    path_fd = listen_unix(socket_path, false);
    chmod(socket_path.c_str(), 0777);  // so that uid 65534 would get in, were it visible

    // Stable across runs (so the fixture that names them stays cached): a
    // run store and a baseline anyone could write, and uid 65534's cache.
    base = std::string(KLOOP_TEST_CACHE) + "-isolation";
    std::error_code ec;
    fs::create_directories(base, ec);
    if (access(base.c_str(), W_OK) != 0) base = dir + "/stable";  // not ours (run as another user)
    fs::create_directories(base + "/store/runs/r1");
    fs::create_directories(base + "/store/baselines");
    write_text(base + "/store/runs/r1/results.jsonl", "{}\n", k0666);
    write_text(base + "/store/baselines/cpu.json", "{}\n", k0666);
    for (const auto& d : {base + "/store", base + "/store/runs", base + "/store/runs/r1", base + "/store/baselines"}) {
      fs::permissions(d, fs::perms::all);
    }
    nobody_home = base + "/uid65534";
    nobody_cache = nobody_home + "/cache";
    fs::create_directories(nobody_cache);
    if (geteuid() == 0) {
      (void)!chown(nobody_home.c_str(), kNobody, kNobody);
      (void)!chown(nobody_cache.c_str(), kNobody, kNobody);
    }
    source_root = fs::weakly_canonical(fs::path(KLOOP_TEST_FIXTURES) / ".." / "..").string();
  }
  ~Scratch() {
    if (abstract_fd >= 0) close(abstract_fd);
    if (path_fd >= 0) close(path_fd);
    std::error_code ec;
    fs::remove_all(dir, ec);
  }

  // A copy of tests/fixtures/attacks/NAME (or of `source`) in the scratch
  // folder, with `defines` in front of it; readable by everyone.
  std::string fixture(const std::string& name, const std::string& defines = "", const std::string& source = "") {
    const std::string from = source.empty() ? std::string(KLOOP_TEST_FIXTURES) + "/attacks/" + name : source;
    const std::string text = read_text(from);
    EXPECT_FALSE(text.empty()) << from;
    const std::string out = dir + "/" + std::to_string(counter_++) + "_" + fs::path(from).filename().string();
    write_text(out, defines.empty() ? text : defines + "#line 1\n" + text, k0644);
    return out;
  }
  std::string trusted_paths() const {
    return std::string(KLOOP_TEST_PROBLEMS) + ":" + KLOOP_TEST_CACHE + ":" + nobody_cache + ":" + base + "/store:" +
           source_root;
  }
  std::string trusted_files_fixture() {
    std::string devs;
    const std::string paths = trusted_paths();
    for (std::size_t b = 0; b <= paths.size();) {
      std::size_t e = paths.find(':', b);
      if (e == std::string::npos) e = paths.size();
      struct stat st;
      const std::string p = paths.substr(b, e - b);
      devs += (b ? ":" : "") + std::to_string(!p.empty() && stat(p.c_str(), &st) == 0 ? st.st_dev : 0);
      b = e + 1;
    }
    return fixture("attack_trusted_files.cpp", "#define KLOOP_ATTACK_PATHS \"" + paths + "\"\n#define KLOOP_ATTACK_DEVS \"" +
                                                   devs + "\"\n");
  }
  std::string unix_fixture() {
    return unique(fixture("attack_unix_connect.cpp", "#define KLOOP_ATTACK_ABSTRACT \"" + abstract_name +
                                                         "\"\n#define KLOOP_ATTACK_SOCKET_PATH \"" + socket_path + "\"\n"));
  }
  std::string secret_fixture(const std::string& name, bool with_file = true, const std::string& file = "") {
    const std::string path = with_file ? (file.empty() ? secret_file : file) : "";
    return unique(fixture(name, "#define KLOOP_ATTACK_SECRET_FILE \"" + path + "\"\n"));
  }
  // A build of a fixture that exists only in this process leaves no entry
  // in the cache behind.
  void forget_build(const std::string& fixture, const std::string& cache, const std::string& key) {
    if (unique_.count(fixture) && !key.empty()) {
      std::error_code ec;
      fs::remove_all(fs::path(cache) / "builds" / key, ec);
      fs::remove(fs::path(cache) / "builds" / (key + ".lock"), ec);
    }
  }
  std::string honest_fixture() {
    return fixture("", "", std::string(KLOOP_TEST_FIXTURES) + "/../../examples/cpu/19_ReLU_loop.cpp");
  }

  std::string dir, secret, secret_file, abstract_name, socket_path, base, nobody_home, nobody_cache, source_root;
  int abstract_fd = -1, path_fd = -1;

 private:
  std::string unique(const std::string& path) {
    unique_.insert(path);
    return path;
  }
  int counter_ = 0;
  std::set<std::string> unique_;
};

Scratch& scratch() {
  static Scratch s;
  return s;
}

// Whether process `pid` exists and is not a zombie (a zombie is dead).
bool alive(pid_t pid) {
  const std::string stat = read_text("/proc/" + std::to_string(pid) + "/stat");
  const auto paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] != 'Z';
}

// Host processes named "kloopdaemonx" (the daemon fixture's name).
std::vector<pid_t> live_daemons() {
  std::vector<pid_t> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string comm = read_text(e.path().string() + "/comm");
    if (comm.rfind("kloopdaemonx", 0) != 0) continue;
    if (!alive(static_cast<pid_t>(std::stol(name)))) continue;
    out.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return out;
}

// The daemon tests of every mode (and of other runs of this suite) one at a
// time: each looks for any live daemon of that name.
class DaemonLock {
 public:
  DaemonLock() : fd_(open((scratch().base + "/daemon.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)) {
    if (fd_ >= 0) flock(fd_, LOCK_EX);
  }
  ~DaemonLock() {
    if (fd_ >= 0) close(fd_);
  }

 private:
  int fd_;
};

// Asserts no daemon outlived its evaluation (a second after the verdict),
// and ends any that did (they are this test's own).
void expect_no_daemon() {
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const std::vector<pid_t> alive = live_daemons();
  EXPECT_TRUE(alive.empty()) << "ESCAPED: " << alive.size() << " kloopdaemonx process(es) outlived the evaluation";
  for (pid_t p : alive) kill(p, SIGKILL);
}

void expect_blocked(const std::string& verdict, const std::string& message, const std::string& detail) {
  std::printf("  attack -> %s: %s\n", verdict.c_str(), message.substr(0, 600).c_str());
  EXPECT_EQ(message.find("ESCAPED"), std::string::npos) << message << "\n" << detail;
  EXPECT_EQ(verdict, "runtime_error") << message << "\n" << detail;
  EXPECT_NE(message.find("blocked"), std::string::npos) << message << "\n" << detail;
}

// ---------------------------------------------------------------------------
// In this process, as whoever runs the tests (root in CI).

class IsolationTest : public ::testing::Test {
 protected:
  ProblemSpec relu() { return ProblemRegistry(ProblemRegistry::default_root()).load("19_ReLU"); }

  Verdict evaluate(Isolation level, const std::string& fixture, EvalOptions options = base_options()) {
    BuilderConfig config = BuilderConfig::from_environment();
    config.isolation = level;
    Builder builder(config);
    options.isolation = level;
    Verdict v = Evaluator(builder, options).evaluate(relu(), fixture);
    scratch().forget_build(fixture, config.cache_dir, v.build.key);
    if (v.verdict != VerdictClass::kCompileError) {
      EXPECT_EQ(v.isolation, isolation_name(level));
    }
    return v;
  }
  static EvalOptions base_options() {
    EvalOptions o;
    o.worker_path = KLOOP_TEST_WORKER;
    o.threads = 2;
    o.measure_time = false;
    o.run_timeout = std::chrono::seconds(60);
    return o;
  }
  void expect_blocked_verdict(const Verdict& v) {
    expect_blocked(verdict_name(v.verdict), v.message, v.to_text());
  }
  void expect_honest_correct(Isolation level) {
    Verdict v = evaluate(level, std::string(KLOOP_TEST_FIXTURES) + "/../../examples/cpu/19_ReLU_loop.cpp");
    EXPECT_EQ(v.verdict, VerdictClass::kCorrect) << v.to_text();
  }
  // No trace of the secret anywhere in what goes back to a model.
  void expect_no_secret(const Verdict& v) {
    const std::string& s = scratch().secret;
    EXPECT_EQ(v.message.find(s), std::string::npos) << "ESCAPED: the secret is in the message";
    EXPECT_EQ(v.log_tail.find(s), std::string::npos) << "ESCAPED: the secret is in the log tail";
    EXPECT_EQ(v.build.log.find(s), std::string::npos) << "ESCAPED: the secret is in the compile log";
    EXPECT_EQ(v.to_json().dump().find(s), std::string::npos) << "ESCAPED: the secret is in the verdict";
    EXPECT_EQ(v.to_text().find(s), std::string::npos) << "ESCAPED: the secret is in the report";
  }
};

TEST_F(IsolationTest, HonestCandidateIsCorrectUnderStrictAndWeak) {
  expect_honest_correct(Isolation::kStrict);
  expect_honest_correct(Isolation::kWeak);
}

struct AttackCase {
  std::string fixture;
  Isolation level;
};
void PrintTo(const AttackCase& c, std::ostream* os) { *os << c.fixture << " under " << isolation_name(c.level); }

class IsolationAttackTest : public IsolationTest, public ::testing::WithParamInterface<AttackCase> {};

// Memory, signals, other processes' descriptors and inherited descriptors:
// blocked under both levels. After the signals, kloop still evaluates.
TEST_P(IsolationAttackTest, IsBlocked) {
  const AttackCase& c = GetParam();
  Verdict v = evaluate(c.level, std::string(KLOOP_TEST_FIXTURES) + "/attacks/" + c.fixture);
  expect_blocked_verdict(v);
  if (c.fixture == "attack_signal_reference.cpp") expect_honest_correct(c.level);
}

INSTANTIATE_TEST_SUITE_P(
    Attacks, IsolationAttackTest,
    ::testing::Values(AttackCase{"attack_reference_memory.cpp", Isolation::kStrict},
                      AttackCase{"attack_reference_memory.cpp", Isolation::kWeak},
                      AttackCase{"attack_signal_reference.cpp", Isolation::kStrict},
                      AttackCase{"attack_signal_reference.cpp", Isolation::kWeak},
                      AttackCase{"attack_reopen_channel.cpp", Isolation::kStrict},
                      AttackCase{"attack_reopen_channel.cpp", Isolation::kWeak},
                      AttackCase{"attack_inherited_fds.cpp", Isolation::kStrict},
                      AttackCase{"attack_inherited_fds.cpp", Isolation::kWeak}),
    [](const ::testing::TestParamInfo<AttackCase>& info) {
      std::string name = info.param.fixture.substr(7, info.param.fixture.size() - 11);  // attack_X.cpp -> X
      return name + "_" + isolation_name(info.param.level);
    });

// Run store, caches, baselines, the problems folder, kloop's tree and the
// reference's shared folder: invisible or read-only.
TEST_F(IsolationTest, StrictHidesTrustedFiles) {
  const std::string store = scratch().base + "/store/runs/r1/results.jsonl";
  const std::string before = read_text(store);
  Verdict v = evaluate(Isolation::kStrict, scratch().trusted_files_fixture());
  expect_blocked_verdict(v);
  EXPECT_EQ(read_text(store), before);
}

// A CPU evaluation's strict sandbox has no GPU device node: the candidate
// cannot move its work to a GPU of the host. Where the host has none (CI),
// a stand-in /dev/nvidia-kloop-test (a plain file, which the sandbox would
// bind like a device node) makes the check bite; on the H200 the real
// nodes do.
TEST_F(IsolationTest, CpuEvaluationSeesNoGpuDevice) {
  const std::string stand_in = "/dev/nvidia-kloop-test-" + std::to_string(getpid());
  const bool made = std::ofstream(stand_in).good();
  bool host_has_one = made;
  for (const auto& e : std::filesystem::directory_iterator("/dev")) {
    host_has_one = host_has_one || e.path().filename().string().rfind("nvidia", 0) == 0;
  }
  Verdict v = evaluate(Isolation::kStrict, std::string(KLOOP_TEST_FIXTURES) + "/attacks/attack_gpu_devices.cpp");
  if (made) std::filesystem::remove(stand_in);
  if (!host_has_one) GTEST_SKIP() << "no /dev/nvidia* on this host and /dev is not writable: nothing to hide";
  expect_blocked_verdict(v);
}

// Strict: the daemon's setsid works, but it dies with the PID namespace.
// Weak: setsid is refused, and the daemon dies with the process group.
TEST_F(IsolationTest, DaemonDiesWithTheSandbox) {
  for (Isolation level : {Isolation::kStrict, Isolation::kWeak}) {
    DaemonLock lock;
    Verdict v = evaluate(level, std::string(KLOOP_TEST_FIXTURES) + "/attacks/attack_daemon.cpp");
    expect_blocked_verdict(v);
    EXPECT_NE(v.message.find("daemon started"), std::string::npos) << v.message;
    expect_no_daemon();
  }
}

// The listeners are kloop-side sockets of the host; neither hears a thing.
TEST_F(IsolationTest, StrictBlocksUnixSockets) {
  ASSERT_GE(scratch().abstract_fd, 0);
  ASSERT_GE(scratch().path_fd, 0);
  Verdict v = evaluate(Isolation::kStrict, scratch().unix_fixture());
  expect_blocked_verdict(v);
  EXPECT_FALSE(was_connected(scratch().abstract_fd)) << "ESCAPED: the abstract socket got a connection";
  EXPECT_FALSE(was_connected(scratch().path_fd)) << "ESCAPED: the path-named socket got a connection";
}

TEST_F(IsolationTest, StrictKeepsSecretsFromTheCandidateAtRunTime) {
  Verdict v = evaluate(Isolation::kStrict, scratch().secret_fixture("attack_env_secret.cpp"));
  expect_blocked_verdict(v);
  expect_no_secret(v);
}

// Weak: the allow-listed environment, and the trusted processes' environ
// out of reach (the secret file is visible there: no mount namespace).
TEST_F(IsolationTest, WeakKeepsTheEnvironmentSecret) {
  Verdict v = evaluate(Isolation::kWeak, scratch().secret_fixture("attack_env_secret.cpp", /*with_file=*/false));
  expect_blocked_verdict(v);
  expect_no_secret(v);
}

// The compiler sees neither a secret file nor the cache's integrity key:
// both are missing (not merely unreadable) in its sandbox.
TEST_F(IsolationTest, StrictCompilerCannotIncludeASecretFile) {
  for (const char* name : {"attack_include_secret.cpp", "attack_incbin_secret.cpp"}) {
    Verdict v = evaluate(Isolation::kStrict, scratch().secret_fixture(name));
    EXPECT_EQ(v.verdict, VerdictClass::kCompileError) << name << "\n" << v.to_text();
    EXPECT_EQ(v.message.find("ESCAPED"), std::string::npos) << v.message;
    EXPECT_NE(v.build.log.find(scratch().secret_file), std::string::npos)
        << name << ": the log should say which file is missing:\n" << v.build.log;
    // gcc says the file does not exist; gas only that it found none.
    const std::string missing = std::string(name).find("incbin") != std::string::npos ? "file not found" : "No such file or directory";
    EXPECT_NE(v.build.log.find(missing), std::string::npos) << v.build.log;
    expect_no_secret(v);
  }
  const std::string key = std::string(KLOOP_TEST_CACHE) + "/integrity.key";
  ASSERT_TRUE(fs::exists(key));
  Verdict v = evaluate(Isolation::kStrict, scratch().secret_fixture("attack_include_secret.cpp", true, key));
  EXPECT_EQ(v.verdict, VerdictClass::kCompileError) << v.to_text();
  EXPECT_NE(v.build.log.find(key + ": No such file or directory"), std::string::npos) << v.build.log;
}

// What a sandboxed child may write it may also move between its folders:
// a Landlock domain refuses a rename into another folder (EXDEV) unless it
// grants that right (Triton's cache renames each finished file into place;
// before the grant, Triton candidates failed on the H200).
TEST_F(IsolationTest, RenamesBetweenWritableFoldersWork) {
  const fs::path dir = fs::path(scratch().dir) / ("rename-" + std::to_string(getpid()));
  for (Isolation level : {Isolation::kStrict, Isolation::kWeak}) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    SandboxSpec s;
    s.level = level;
    s.writable = {dir.string()};
    const std::string from = (dir / "a" / "f").string(), to = (dir / "b" / "f").string();
    const std::string script = "import os\nos.makedirs('" + (dir / "a").string() + "')\nos.makedirs('" +
                               (dir / "b").string() + "')\nopen('" + from + "', 'w').write('x')\nos.replace('" +
                               from + "', '" + to + "')\nprint('moved')";
    CommandResult r = run_command({"/usr/bin/python3", "-I", "-c", script}, dir.string(), std::chrono::seconds(60), s);
    EXPECT_NE(r.output.find("moved"), std::string::npos) << isolation_name(level) << ": " << r.output;
  }
  fs::remove_all(dir);
}

// Six forked children touch 1 GiB each under a 2 GiB limit: RLIMIT_AS is
// per process, so only a group limit (a cgroup: root and a memory
// controller) stops the tree. Where no cgroup can be made the attack is out
// of reach of this machine's kloop, and the test says so.
TEST_F(IsolationTest, ForkedChildrenShareTheMemoryLimit) {
  if (SandboxGroup::create(1u << 30, 0).empty()) GTEST_SKIP() << "no cgroup memory controller kloop can use here";
  for (Isolation level : {Isolation::kStrict, Isolation::kWeak}) {
    EvalOptions o = base_options();
    o.memory_limit_bytes = 1280ull << 20;
    Verdict v = evaluate(level, std::string(KLOOP_TEST_FIXTURES) + "/attacks/attack_fork_memory.cpp", o);
    expect_blocked_verdict(v);
  }
}

// 200 MiB of output: drained and capped, the verdict unaffected.
TEST_F(IsolationTest, StrictOutputFloodIsCapped) {
  EvalOptions o = base_options();
  o.work_root = scratch().dir + "/flood";
  o.keep_work_dir = true;
  fs::create_directories(o.work_root);
  Verdict v = evaluate(Isolation::kStrict, std::string(KLOOP_TEST_FIXTURES) + "/attacks/attack_output_flood.cpp", o);
  EXPECT_EQ(v.verdict, VerdictClass::kCorrect) << v.to_text().substr(0, 4000);
  EXPECT_LT(v.log_tail.size(), 64u << 10);
  EXPECT_LT(v.to_json().dump().size(), 1u << 20);
  int logs = 0;
  for (const auto& work : fs::directory_iterator(o.work_root)) {
    const fs::path log = work.path() / "candidate.log";
    if (!fs::exists(log)) continue;
    ++logs;
    EXPECT_LT(fs::file_size(log), 9ull << 20) << log;
    EXPECT_GT(fs::file_size(log), 1ull << 20) << "the flood should have been captured up to the cap";
  }
  EXPECT_EQ(logs, 1);
  std::error_code ec;
  fs::remove_all(o.work_root, ec);
}

// The worker is linked with full RELRO: a GNU_RELRO segment and BIND_NOW,
// so its GOT is read-only once it runs (attack_slow_clock must mprotect it).
TEST(WorkerHardeningTest, WorkerHasFullRelro) {
  std::ifstream in(KLOOP_TEST_WORKER, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GE(bytes.size(), sizeof(Elf64_Ehdr));
  const auto* eh = reinterpret_cast<const Elf64_Ehdr*>(bytes.data());
  ASSERT_EQ(std::memcmp(eh->e_ident, ELFMAG, SELFMAG), 0);
  ASSERT_EQ(eh->e_ident[EI_CLASS], ELFCLASS64);
  bool relro = false, now = false;
  for (int i = 0; i < eh->e_phnum; ++i) {
    const std::size_t at = eh->e_phoff + static_cast<std::size_t>(i) * eh->e_phentsize;
    ASSERT_LE(at + sizeof(Elf64_Phdr), bytes.size());
    const auto* ph = reinterpret_cast<const Elf64_Phdr*>(bytes.data() + at);
    if (ph->p_type == PT_GNU_RELRO) relro = true;
    if (ph->p_type != PT_DYNAMIC) continue;
    ASSERT_LE(ph->p_offset + ph->p_filesz, bytes.size());
    for (std::size_t k = 0; k + sizeof(Elf64_Dyn) <= ph->p_filesz; k += sizeof(Elf64_Dyn)) {
      const auto* d = reinterpret_cast<const Elf64_Dyn*>(bytes.data() + ph->p_offset + k);
      if (d->d_tag == DT_BIND_NOW) now = true;
      if (d->d_tag == DT_FLAGS && (d->d_un.d_val & DF_BIND_NOW)) now = true;
      if (d->d_tag == DT_FLAGS_1 && (d->d_un.d_val & DF_1_NOW)) now = true;
    }
  }
  EXPECT_TRUE(relro) << KLOOP_TEST_WORKER << " has no GNU_RELRO segment";
  EXPECT_TRUE(now) << KLOOP_TEST_WORKER << " is not linked with -z now";
}

// ---------------------------------------------------------------------------
// The strict attacks again with kloop itself running as uid 65534 (the CLI
// under setpriv): the candidate then runs in a user namespace.

// stdout of `cmd`, its exit code in *status.
std::string shell(const std::string& cmd, int* status) {
  const kloop::test::ShellResult r = kloop::test::shell(cmd);
  *status = r.code;
  return r.output;
}

bool have_setpriv() {
  int status = 0;
  shell("command -v setpriv >/dev/null 2>&1", &status);
  return status == 0;
}

struct CliResult {
  json verdict;
  std::string out, err;
};

CliResult eval_as_nobody(const std::string& fixture, const std::string& isolation = "strict") {
  Scratch& s = scratch();
  const std::string err_path = s.dir + "/stderr-" + std::to_string(getpid()) + ".txt";
  const std::string cmd = "cd " + s.dir + " && setpriv --reuid=65534 --regid=65534 --clear-groups env HOME=" +
                          s.nobody_home + " KLOOP_CACHE_DIR=" + s.nobody_cache + " " + KLOOP_TEST_BINARY +
                          " eval -p 19_ReLU --device cpu -c " + fixture +
                          " --isolation " + isolation + " --json --no-timing --threads 2 --timeout 60 2>" + err_path;
  CliResult r;
  int status = 0;
  r.out = shell(cmd, &status);
  r.err = read_text(err_path);
  EXPECT_EQ(status, 0) << "kloop must give a verdict, not fail:\n" << r.out << "\n" << r.err;
  try {
    r.verdict = json::parse(r.out);
  } catch (const json::exception&) {
    ADD_FAILURE() << "not JSON:\n" << r.out << "\n" << r.err;
    r.verdict = json::object();
  }
  if (r.verdict.contains("build") && r.verdict["build"].is_object()) {
    s.forget_build(fixture, s.nobody_cache, r.verdict["build"].value("key", ""));
  }
  return r;
}

class UnprivilegedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root to become uid 65534";
    if (!have_setpriv()) GTEST_SKIP() << "setpriv is missing";
    // A checkout under a folder uid 65534 cannot enter (/root) cannot run
    // there: say so rather than fail on the layout.
    int status = 0;
    shell(std::string("setpriv --reuid=65534 --regid=65534 --clear-groups test -x ") + KLOOP_TEST_BINARY + " -a -r " +
              KLOOP_TEST_FIXTURES + "/relu/correct.cpp",
          &status);
    if (status != 0) GTEST_SKIP() << "uid 65534 cannot reach " << KLOOP_TEST_BINARY << " (the checkout's folders are closed to it)";
  }
  void expect_blocked_cli(const CliResult& r, const std::string& isolation = "strict") {
    expect_blocked(r.verdict.value("verdict", ""), r.verdict.value("message", ""), r.err.substr(0, 2000));
    EXPECT_EQ(r.verdict.value("isolation", ""), isolation);
  }
  void expect_no_secret(const CliResult& r) {
    EXPECT_EQ(r.out.find(scratch().secret), std::string::npos) << "ESCAPED: the secret is in the verdict";
    EXPECT_EQ(r.err.find(scratch().secret), std::string::npos) << "ESCAPED: the secret is in kloop's stderr";
  }
};

TEST_F(UnprivilegedTest, HonestCandidateIsCorrect) {
  CliResult r = eval_as_nobody(scratch().honest_fixture());
  EXPECT_EQ(r.verdict.value("verdict", ""), "correct") << r.out.substr(0, 4000) << r.err;
}

// A KernelBench-format (Python) candidate with kloop unprivileged: its
// build and its worker both run its code; under strict neither reaches the
// driver's environment or writes beside its folder (uid 65534's own cache
// at build time). Weak as an unprivileged user without Landlock leaves the
// candidate that user's rights, by design (docs/isolation.md).
TEST_F(UnprivilegedTest, PythonCandidateStaysInsideUnderStrict) {
  KLOOP_NEED_PYTHON_CANDIDATES();
  const fs::path target = fs::path(scratch().nobody_cache) / "builds" / "kloop-python-escape";
  fs::remove(target);
  CliResult r = eval_as_nobody(std::string(KLOOP_TEST_FIXTURES) + "/kernelbench/relu_escapes.py");
  EXPECT_EQ(r.verdict.value("verdict", ""), "correct") << "the candidate got out:\n" << r.out.substr(0, 4000) << r.err;
  EXPECT_FALSE(fs::exists(target)) << "the build wrote into uid 65534's cache";
  fs::remove(target);
}

struct CliAttack {
  std::string fixture;
  std::string isolation;
};
void PrintTo(const CliAttack& c, std::ostream* os) { *os << c.fixture << " under " << c.isolation; }

class UnprivilegedAttackTest : public UnprivilegedTest, public ::testing::WithParamInterface<CliAttack> {};

// Whether the kernel speaks Landlock (the sandbox's ptrace and signal scope).
bool have_landlock() {
#ifdef SYS_landlock_create_ruleset
  return syscall(SYS_landlock_create_ruleset, nullptr, 0, 1u /* LANDLOCK_CREATE_RULESET_VERSION */) > 0;
#else
  return false;
#endif
}

// A dumpable process of uid 65534 outside any sandbox, standing for the
// moments a kloop process of the same user is dumpable: between its exec and
// its prctl, and a strict sandbox's child writing its user namespace's maps
// with a copy of the driver's memory (a concurrent strict evaluation reached
// so by a weak candidate was CI's failure). Without Landlock only
// undumpability guards kloop's processes, and a bystander is reachable.
class Bystander {
 public:
  Bystander() {
    pid_ = fork();
    if (pid_ == 0) {
      execlp("setpriv", "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sleep", "300", nullptr);
      _exit(127);
    }
    for (int i = 0; i < 500 && pid_ > 0; ++i) {
      std::ifstream comm("/proc/" + std::to_string(pid_) + "/comm");
      std::string name;
      if (std::getline(comm, name) && name == "sleep") return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  ~Bystander() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  Bystander(const Bystander&) = delete;
  Bystander& operator=(const Bystander&) = delete;

 private:
  pid_t pid_ = -1;
};

TEST_P(UnprivilegedAttackTest, IsBlocked) {
  const CliAttack& c = GetParam();
  std::unique_ptr<Bystander> bystander;
  if (c.fixture == "attack_reference_memory.cpp" && have_landlock()) bystander = std::make_unique<Bystander>();
  CliResult r = eval_as_nobody(scratch().fixture(c.fixture), c.isolation);
  expect_blocked_cli(r, c.isolation);
}

INSTANTIATE_TEST_SUITE_P(
    Attacks, UnprivilegedAttackTest,
    ::testing::Values(CliAttack{"attack_reference_memory.cpp", "strict"}, CliAttack{"attack_reference_memory.cpp", "weak"},
                      CliAttack{"attack_signal_reference.cpp", "strict"}, CliAttack{"attack_signal_reference.cpp", "weak"},
                      CliAttack{"attack_reopen_channel.cpp", "strict"}, CliAttack{"attack_reopen_channel.cpp", "weak"},
                      CliAttack{"attack_inherited_fds.cpp", "strict"}, CliAttack{"attack_inherited_fds.cpp", "weak"}),
    [](const ::testing::TestParamInfo<CliAttack>& info) {
      return info.param.fixture.substr(7, info.param.fixture.size() - 11) + "_" + info.param.isolation;
    });

TEST_F(UnprivilegedTest, TrustedFilesAreHidden) {
  const std::string store = scratch().base + "/store/runs/r1/results.jsonl";
  const std::string before = read_text(store);
  expect_blocked_cli(eval_as_nobody(scratch().trusted_files_fixture()));
  EXPECT_EQ(read_text(store), before);
}

TEST_F(UnprivilegedTest, DaemonDiesWithTheSandbox) {
  for (const char* isolation : {"strict", "weak"}) {
    DaemonLock lock;
    CliResult r = eval_as_nobody(scratch().fixture("attack_daemon.cpp"), isolation);
    expect_blocked_cli(r, isolation);
    expect_no_daemon();
  }
}

TEST_F(UnprivilegedTest, UnixSocketsAreUnreachable) {
  ASSERT_GE(scratch().abstract_fd, 0);
  ASSERT_GE(scratch().path_fd, 0);
  expect_blocked_cli(eval_as_nobody(scratch().unix_fixture()));
  EXPECT_FALSE(was_connected(scratch().abstract_fd)) << "ESCAPED: the abstract socket got a connection";
  EXPECT_FALSE(was_connected(scratch().path_fd)) << "ESCAPED: the path-named socket got a connection";
}

// The secret is in kloop's environment (and, for strict, in a file uid
// 65534 may read, and the cache's key is uid 65534's own): the candidate and
// its compiler see none of it. Weak: the environment only (no mount
// namespace), with the driver's /proc/PID/environ out of reach.
TEST_F(UnprivilegedTest, SecretsStayOut) {
  CliResult r = eval_as_nobody(scratch().secret_fixture("attack_env_secret.cpp"));
  expect_blocked_cli(r);
  expect_no_secret(r);
  CliResult w = eval_as_nobody(scratch().secret_fixture("attack_env_secret.cpp", /*with_file=*/false), "weak");
  expect_blocked_cli(w, "weak");
  expect_no_secret(w);
  for (const char* name : {"attack_include_secret.cpp", "attack_incbin_secret.cpp"}) {
    CliResult c = eval_as_nobody(scratch().secret_fixture(name));
    EXPECT_EQ(c.verdict.value("verdict", ""), "compile_error") << name << "\n" << c.out.substr(0, 4000);
    EXPECT_EQ(c.out.find("ESCAPED"), std::string::npos) << c.out.substr(0, 4000);
    const std::string missing = std::string(name).find("incbin") != std::string::npos ? "file not found" : "No such file or directory";
    EXPECT_NE(c.out.find(missing), std::string::npos) << c.out.substr(0, 4000);
    expect_no_secret(c);
  }
  const std::string key = scratch().nobody_cache + "/integrity.key";
  ASSERT_TRUE(fs::exists(key)) << "the evaluations above made uid 65534's cache";
  CliResult k = eval_as_nobody(scratch().secret_fixture("attack_include_secret.cpp", true, key));
  EXPECT_EQ(k.verdict.value("verdict", ""), "compile_error") << k.out.substr(0, 4000);
  EXPECT_NE(k.out.find(key + ": No such file or directory"), std::string::npos) << k.out.substr(0, 4000);
}

TEST_F(UnprivilegedTest, OutputFloodIsCapped) {
  CliResult r = eval_as_nobody(scratch().fixture("attack_output_flood.cpp"));
  EXPECT_EQ(r.verdict.value("verdict", ""), "correct") << r.out.substr(0, 4000) << r.err.substr(0, 2000);
  EXPECT_LT(r.out.size(), 1u << 20);
}

// A killed process gives its memory back, the GPU's included, only once it
// has exited, and 1 GiB takes tens of milliseconds after SIGKILL. What comes
// after a candidate (the deferred fp64 analysis, the next evaluation) needs
// that memory, so kill() returns only once no process of the worker's group
// is alive. (Strict leaves this to the kernel: its init ends only once its
// PID namespace is empty.)
TEST(WorkerProcessTest, KillReturnsOnceTheWholeGroupHasExited) {
  for (Isolation level : {Isolation::kWeak, Isolation::kNone}) {
    const std::string dir = scratch().base + "/leftover-" + isolation_name(level);
    fs::remove_all(dir);
    fs::create_directories(dir);
    SandboxSpec spec;
    spec.level = level;
    spec.writable = {dir};
    WorkerProcess worker(
        {"/bin/sh", "-c",
         "python3 -c 'import time; x = b\"a\" * (1 << 30); open(\"ready\", \"w\").close(); time.sleep(600)' & wait"},
        dir, dir + "/log", spec);
    while (!fs::exists(dir + "/ready") && alive(worker.pid())) {  // until then, or the shell ended
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ASSERT_TRUE(fs::exists(dir + "/ready")) << "the process did not get its 1 GiB";
    pid_t holder = 0;
    for (const auto& e : fs::directory_iterator("/proc")) {
      const std::string name = e.path().filename().string();
      if (name.find_first_not_of("0123456789") != std::string::npos || std::stol(name) == worker.pid()) continue;
      if (getpgid(static_cast<pid_t>(std::stol(name))) == worker.pid()) holder = static_cast<pid_t>(std::stol(name));
    }
    ASSERT_GT(holder, 0) << "the process holding the memory is not in the worker's group";
    worker.kill();
    const bool left = alive(holder);
    EXPECT_FALSE(left) << isolation_name(level) << ": the process holding 1 GiB was still alive when kill() returned: "
                       << read_text("/proc/" + std::to_string(holder) + "/stat");
    if (left) kill(holder, SIGKILL);
  }
}

// The CPU time the timing check trusts: the kernel's account of a process
// and everything below it, a grandchild still running and one reaped by
// its parent alike; nothing for a process that does not exist.
TEST(ProcessTreeCpuTest, CountsLiveAndReapedDescendants) {
  auto burn = [](double seconds) {  // CPU seconds of its own, however loaded the machine is
    auto used = [] {
      timespec t{};
      clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
      return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
    };
    volatile double x = 1;
    while (used() < seconds) x = x * 1.0000001 + 1e-9;
  };
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    setpgid(0, 0);
    const pid_t reaped = fork();
    if (reaped == 0) {
      burn(0.3);
      _exit(0);
    }
    waitpid(reaped, nullptr, 0);
    const pid_t live = fork();
    if (live == 0) {
      burn(0.3);
      if (write(ready[1], "x", 1) != 1) _exit(1);
      pause();
      _exit(0);
    }
    pause();
    _exit(0);
  }
  char byte = 0;
  ASSERT_EQ(read(ready[0], &byte, 1), 1);
  const std::optional<double> seconds = process_tree_cpu_seconds(child);
  kill(-child, SIGKILL);
  waitpid(child, nullptr, 0);
  close(ready[0]);
  close(ready[1]);
  ASSERT_TRUE(seconds.has_value());
  EXPECT_GE(*seconds, 0.5) << "0.3 s reaped plus 0.3 s live";
  EXPECT_FALSE(process_tree_cpu_seconds(child).has_value());
}

}  // namespace
}  // namespace kloop
