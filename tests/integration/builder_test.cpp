// The builder against the real host compiler: caching, invalidation,
// diagnostics, concurrent builds of one source, the timeout, and cache
// entries planted or changed behind kloop's back.
#include "evaluator/build/builder.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "evaluator/build/cache_entry.h"
#include "evaluator/build/content_hash.h"

namespace kloop {
namespace {

namespace fs = std::filesystem;

class BuilderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kloop-builder-test-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    config_ = BuilderConfig::from_environment();
    config_.cache_dir = (dir_ / "cache").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string source(const std::string& name, const std::string& text) {
    fs::path p = dir_ / name;
    std::ofstream(p) << text;
    return p.string();
  }
  static std::string fixture(const std::string& name) {
    return std::string(KLOOP_TEST_FIXTURES) + "/relu/" + name;
  }
  // A candidate source that compiles in a fraction of a second (the cache
  // tests are about entries, not about what the library does).
  std::string tiny(const std::string& name, int value) {
    return source(name, "extern \"C\" int kloop_f() { return " + std::to_string(value) + "; }\n");
  }
  int entries() const {
    int n = 0;
    for (const auto& e : fs::directory_iterator(fs::path(config_.cache_dir) / "builds")) {
      if (e.is_directory()) ++n;
    }
    return n;
  }

  fs::path dir_;
  BuilderConfig config_;
};

// A relative KLOOP_CACHE_DIR names the cache from where kloop started:
// compiles run in the entries' own folders, and the reference PCH's flags
// name it, so the builder holds it as an absolute path.
TEST(BuilderConfigTest, ARelativeCacheDirIsMadeAbsolute) {
  const char* before = std::getenv("KLOOP_CACHE_DIR");
  const std::string saved = before ? before : "";
  setenv("KLOOP_CACHE_DIR", "relative/cache", 1);
  const BuilderConfig c = BuilderConfig::from_environment();
  if (before) setenv("KLOOP_CACHE_DIR", saved.c_str(), 1); else unsetenv("KLOOP_CACHE_DIR");
  EXPECT_EQ(c.cache_dir, (fs::current_path() / "relative/cache").string());
}

// `COMPILER --version` is part of every cache key and costs clang 0.1 s a
// process, so its answer is kept in the cache: believed under its MAC and
// the binary's stat, asked again when the compiler file changes, and a
// planted answer is not believed.
TEST_F(BuilderTest, CompilerIdentityIsKeptUnderItsMacAndTheBinarysStat) {
  const fs::path compiler = dir_ / "fake-cxx";
  const fs::path answer = dir_ / "answer";
  const fs::path asked = dir_ / "asked";
  auto write_compiler = [&](const std::string& extra) {
    std::ofstream(compiler) << "#!/bin/sh\necho x >> '" << asked.string() << "'\ncat '" << answer.string()
                            << "'\n" << extra;
    fs::permissions(compiler, fs::perms::owner_all);
  };
  auto times_asked = [&] {
    std::ifstream in(asked);
    return static_cast<int>(std::count(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>(), '\n'));
  };
  write_compiler("");
  std::ofstream(answer) << "fake compiler 1\n";
  config_.cxx = compiler.string();
  const std::string first = Builder(config_).cache_key("int x;", ModuleRole::kCandidate, BuildTarget::kCpu);
  EXPECT_EQ(times_asked(), 1);
  EXPECT_EQ(Builder(config_).cache_key("int x;", ModuleRole::kCandidate, BuildTarget::kCpu), first);
  EXPECT_EQ(times_asked(), 1) << "a second builder asks the compiler again";

  // A planted answer (no valid MAC) is not believed: the compiler is asked.
  const fs::path kept = fs::path(config_.cache_dir) / "compilers";
  ASSERT_TRUE(fs::is_directory(kept));
  for (const auto& e : fs::directory_iterator(kept)) std::ofstream(e.path()) << "0000\nfake compiler 2\n";
  EXPECT_EQ(Builder(config_).cache_key("int x;", ModuleRole::kCandidate, BuildTarget::kCpu), first);
  EXPECT_EQ(times_asked(), 2);

  // Another compiler in the same file: a new answer, a new key.
  std::ofstream(answer) << "fake compiler 3\n";
  write_compiler("# rebuilt\n");
  EXPECT_NE(Builder(config_).cache_key("int x;", ModuleRole::kCandidate, BuildTarget::kCpu), first);
  EXPECT_EQ(times_asked(), 3);
}

TEST_F(BuilderTest, BuildsThenServesFromCache) {
  Builder b(config_);
  BuildResult first = b.build(fixture("correct.cpp"), ModuleRole::kCandidate, BuildTarget::kCpu);
  ASSERT_TRUE(first.ok) << first.log;
  EXPECT_FALSE(first.cached);
  EXPECT_TRUE(fs::exists(first.library_path));
  BuildResult again = Builder(config_).build(fixture("correct.cpp"), ModuleRole::kCandidate, BuildTarget::kCpu);
  EXPECT_TRUE(again.ok);
  EXPECT_TRUE(again.cached);
  EXPECT_EQ(again.library_path, first.library_path);
}

TEST_F(BuilderTest, KeyCoversSourceRoleAndFlags) {
  config_.use_reference_pch = false;  // a reference key would otherwise build the PCH in this fresh cache
  Builder b(config_);
  const std::string text = "int x;\n";
  std::string k = b.cache_key(text, ModuleRole::kCandidate, BuildTarget::kCpu);
  EXPECT_EQ(k, b.cache_key(text, ModuleRole::kCandidate, BuildTarget::kCpu));
  EXPECT_NE(k, b.cache_key(text + " ", ModuleRole::kCandidate, BuildTarget::kCpu));
  EXPECT_NE(k, b.cache_key(text, ModuleRole::kReference, BuildTarget::kCpu));
  BuilderConfig o3 = config_;
  o3.optimization = "-O3";
  EXPECT_NE(k, Builder(o3).cache_key(text, ModuleRole::kCandidate, BuildTarget::kCpu));
}

// References go through the shared precompiled header of reference_api.h
// (clang's instantiating PCH when clang is installed, else GCC's), and the
// key records which, so a build with the PCH never answers for one without.
TEST_F(BuilderTest, ReferencesUseThePrecompiledHeader) {
  config_ = BuilderConfig::from_environment();  // the suite's shared cache: the PCH is built once per run
  const std::string reference = std::string(KLOOP_TEST_PROBLEMS) + "/kernelbench/level1/19_ReLU.cpp";
  Builder b(config_);
  BuildResult r = b.build(reference, ModuleRole::kReference, BuildTarget::kCpu);
  ASSERT_TRUE(r.ok) << r.log;
  const bool clang = r.command.find("-include-pch") != std::string::npos;
  const bool gcc = r.command.find("-include ") != std::string::npos && r.command.find("-Winvalid-pch") != std::string::npos;
  EXPECT_TRUE(clang || gcc) << r.command;
  if (clang) {
    EXPECT_EQ(r.command.rfind(config_.reference_cxx, 0), 0u) << "clang builds references: " << r.command;
  }
  BuilderConfig without = config_;
  without.use_reference_pch = false;
  std::string text = "// same text\n";
  EXPECT_NE(b.cache_key(text, ModuleRole::kReference, BuildTarget::kCpu),
            Builder(without).cache_key(text, ModuleRole::kReference, BuildTarget::kCpu));
}

TEST_F(BuilderTest, CompileErrorsAreParsedAndCached) {
  Builder b(config_);
  BuildResult r = b.build(fixture("compile_error.cpp"), ModuleRole::kCandidate, BuildTarget::kCpu);
  EXPECT_FALSE(r.ok);
  ASSERT_FALSE(r.diagnostics.empty()) << r.log;
  bool found = false;
  for (const auto& d : r.diagnostics) {
    if (d.severity == "error" && d.file == "candidate.cpp" && d.line == 9 &&
        d.message.find("undeclared_function") != std::string::npos) {
      found = true;
    }
  }
  EXPECT_TRUE(found) << r.log;
  BuildResult again = b.build(fixture("compile_error.cpp"), ModuleRole::kCandidate, BuildTarget::kCpu);
  EXPECT_TRUE(again.cached);
  EXPECT_FALSE(again.ok);
  EXPECT_EQ(again.log, r.log);
}

TEST_F(BuilderTest, TwoProcessesBuildingOneSourceShareOneEntry) {
  std::string src = source("shared.cpp", "#include <kloop/kernel_api.h>\nextern \"C\" int f() { return 1; }\n");
  pid_t kids[2];
  for (pid_t& k : kids) {
    k = fork();
    ASSERT_GE(k, 0);
    if (k == 0) {
      BuildResult r = Builder(config_).build(src, ModuleRole::kCandidate, BuildTarget::kCpu);
      _exit(r.ok && fs::exists(r.library_path) ? 0 : 1);
    }
  }
  for (pid_t k : kids) {
    int status = 0;
    waitpid(k, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  EXPECT_EQ(entries(), 1);  // no leftover temporary folders, no duplicate
  BuildResult r = Builder(config_).build(src, ModuleRole::kCandidate, BuildTarget::kCpu);
  EXPECT_TRUE(r.cached);
}

TEST_F(BuilderTest, TimeoutIsReportedAndNotCached) {
  config_.timeout = std::chrono::seconds(1);
  // The full ATen header takes far longer than a second to compile.
  std::string src = source("slow.cpp", "#include <ATen/ATen.h>\nint y;\n");
  BuildResult r = Builder(config_).build(src, ModuleRole::kCandidate, BuildTarget::kCpu);
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(entries(), 0);
}

int untrusted_entries(const std::string& cache_dir) {
  const fs::path aside = fs::path(cache_dir) / "untrusted";
  if (!fs::exists(aside)) return 0;
  int n = 0;
  for (const auto& e : fs::directory_iterator(aside)) n += e.is_directory() ? 1 : 0;
  return n;
}

void flip_a_byte(const std::string& path) {
  std::string bytes = read_file(path);
  ASSERT_GT(bytes.size(), 100u);
  bytes[bytes.size() / 2] ^= 0x5a;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// Attack: code that can write the cache patches a cached library (say, a
// reference whose forward returns what the candidate wants). The next build
// sees that the library is not the one it compiled and compiles again.
TEST_F(BuilderTest, TamperedCachedLibraryIsRebuiltNotLoaded) {
  const std::string victim = tiny("victim.cpp", 1);
  BuildResult first = Builder(config_).build(victim, ModuleRole::kCandidate, BuildTarget::kCpu);
  ASSERT_TRUE(first.ok) << first.log;
  flip_a_byte(first.library_path);
  const std::string tampered = read_file(first.library_path);

  ::testing::internal::CaptureStderr();
  BuildResult again = Builder(config_).build(victim, ModuleRole::kCandidate, BuildTarget::kCpu);
  const std::string warning = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(again.ok) << again.log;
  EXPECT_FALSE(again.cached) << "a tampered entry must be compiled again, not served";
  EXPECT_NE(read_file(again.library_path), tampered);
  EXPECT_NE(warning.find(first.key), std::string::npos) << "the warning names the entry: " << warning;
  EXPECT_NE(warning.find("not trusted"), std::string::npos) << warning;
  EXPECT_EQ(untrusted_entries(config_.cache_dir), 1) << "the bad entry is kept aside for inspection";
  EXPECT_EQ(entries(), 1);
  EXPECT_TRUE(Builder(config_).build(victim, ModuleRole::kCandidate, BuildTarget::kCpu).cached)
      << "the rebuilt entry is trusted";
}

// Attack: a forged result.json (no MAC, or another entry's genuine one) over
// a library of the attacker's choosing, or a failed build made to look ok.
TEST_F(BuilderTest, ForgedEntriesAreRebuiltNotLoaded) {
  const std::string victim = tiny("victim.cpp", 1);
  const std::string other = tiny("other.cpp", 2);
  BuildResult v = Builder(config_).build(victim, ModuleRole::kCandidate, BuildTarget::kCpu);
  BuildResult o = Builder(config_).build(other, ModuleRole::kCandidate, BuildTarget::kCpu);
  ASSERT_TRUE(v.ok && o.ok) << v.log << o.log;
  const fs::path builds = fs::path(config_.cache_dir) / "builds";
  const fs::path entry = builds / v.key;
  const std::string victim_library = read_file(v.library_path);

  // 1. The whole entry of another source, signed by kloop, moved under the
  //    victim's key: its MAC names the key it was built for.
  fs::remove_all(entry);
  fs::copy(builds / o.key, entry, fs::copy_options::recursive);
  ::testing::internal::CaptureStderr();
  BuildResult r1 = Builder(config_).build(victim, ModuleRole::kCandidate, BuildTarget::kCpu);
  EXPECT_NE(::testing::internal::GetCapturedStderr().find(v.key), std::string::npos);
  EXPECT_FALSE(r1.cached);
  EXPECT_NE(read_file(r1.library_path), read_file(o.library_path)) << "the planted library was served";

  // 2. result.json rewritten by hand, without a MAC.
  nlohmann::json meta = nlohmann::json::parse(read_file((entry / "result.json").string()));
  meta.erase("mac");
  meta["command"] = "g++ (trust me)";
  std::ofstream(entry / "result.json", std::ios::trunc) << meta.dump(2);
  BuildResult r2 = Builder(config_).build(victim, ModuleRole::kCandidate, BuildTarget::kCpu);
  EXPECT_FALSE(r2.cached);
  EXPECT_NE(r2.command, "g++ (trust me)");

  // 3. A compile error turned into "ok" with a library of the attacker's.
  const std::string broken = source("broken.cpp", "extern \"C\" int kloop_f() { return undeclared_function(); }\n");
  BuildResult bad = Builder(config_).build(broken, ModuleRole::kCandidate, BuildTarget::kCpu);
  ASSERT_FALSE(bad.ok);
  const fs::path bad_entry = builds / bad.key;
  nlohmann::json forged = nlohmann::json::parse(read_file((bad_entry / "result.json").string()));
  forged["ok"] = true;
  std::ofstream(bad_entry / "result.json", std::ios::trunc) << forged.dump(2);
  fs::copy_file(r2.library_path, bad_entry / "module.so");
  BuildResult r3 = Builder(config_).build(broken, ModuleRole::kCandidate, BuildTarget::kCpu);
  EXPECT_FALSE(r3.ok) << "a forged ok must not turn a compile error into a library";
  EXPECT_FALSE(r3.cached);
  EXPECT_TRUE(r3.library_path.empty());
  EXPECT_EQ(untrusted_entries(config_.cache_dir), 3);
}

// Attack: the shared precompiled header is code every reference compiles
// with. A changed one is not used: it is set aside and built again.
// The extension PCH (hundreds of MB) is hashed once, when kloop makes it;
// afterwards its MAC holds only while the file is the one kloop made:
// reading it keeps its identity, any write, a chmod or a copy put in its
// place does not, even with the same bytes and mtime.
TEST_F(BuilderTest, AKeptFilesIdentityChangesWithAnyWriteButNotWithReads) {
  const fs::path f = dir_ / "kloop_extension_pch.h.gch";
  std::ofstream(f) << "precompiled";
  const std::string made = build_cache::file_identity(f);
  ASSERT_FALSE(made.empty());
  EXPECT_EQ(read_file(f.string()), "precompiled");
  EXPECT_EQ(build_cache::file_identity(f), made) << "reading it";
  const auto mtime = fs::last_write_time(f);
  fs::permissions(f, fs::status(f).permissions());
  EXPECT_NE(build_cache::file_identity(f), made) << "a chmod to the same mode";
  const std::string chmodded = build_cache::file_identity(f);
  { std::ofstream(f, std::ios::in | std::ios::out) << "P"; }
  fs::last_write_time(f, mtime);
  EXPECT_NE(build_cache::file_identity(f), chmodded) << "one byte written, mtime set back";
  const std::string written = build_cache::file_identity(f);
  const fs::path copy = dir_ / "copy";
  fs::copy_file(f, copy);
  fs::last_write_time(copy, mtime);
  fs::rename(copy, f);
  EXPECT_NE(build_cache::file_identity(f), written) << "the same bytes put in its place";
  EXPECT_EQ(build_cache::file_identity(dir_ / "missing"), "");
}

TEST_F(BuilderTest, TamperedPrecompiledHeaderIsRebuilt) {
  // A tiny reference API keeps the PCH cheap to build twice.
  const fs::path api = dir_ / "api";
  fs::create_directories(api / "kloop");
  std::ofstream(api / "kloop" / "kernel_api.h") << "#pragma once\nint kloop_candidate_api();\n";
  std::ofstream(api / "kloop" / "reference_api.h") << "#pragma once\ninline int kloop_reference_api() { return 1; }\n";
  config_.include_dirs.front() = api.string();
  const std::string key = Builder(config_).cache_key("int x;\n", ModuleRole::kReference, BuildTarget::kCpu);
  fs::path pch;
  for (const auto& d : fs::directory_iterator(fs::path(config_.cache_dir) / "pch")) {
    if (!d.is_directory()) continue;
    for (const char* name : {"reference.pch", "kloop_reference_pch.h.gch"}) {
      if (fs::exists(d.path() / name)) pch = d.path() / name;
    }
  }
  ASSERT_FALSE(pch.empty()) << "no PCH was built";
  flip_a_byte(pch.string());
  const std::string tampered = read_file(pch.string());

  // The PCH is checked when a reference compiles with it.
  ::testing::internal::CaptureStderr();
  BuildResult r = Builder(config_).build(source("ref.cpp", "int kloop_x = kloop_reference_api();\n"),
                                         ModuleRole::kReference, BuildTarget::kCpu);
  const std::string warning = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(r.ok) << r.log;
  EXPECT_NE(warning.find("reference PCH"), std::string::npos) << warning;
  EXPECT_NE(warning.find("not trusted"), std::string::npos) << warning;
  EXPECT_EQ(Builder(config_).cache_key("int x;\n", ModuleRole::kReference, BuildTarget::kCpu), key)
      << "a rebuilt PCH lives under the same key";
  EXPECT_EQ(untrusted_entries(config_.cache_dir), 1);
  ASSERT_TRUE(fs::exists(pch));
  EXPECT_NE(read_file(pch.string()), tampered);
}

// A checkout that rewrites the reference API's headers with the same text
// (a newer mtime, the same content, so the same PCH key) must not break
// every reference: clang's PCH records no timestamps, and a compile that
// fails with a PCH is tried again without it.
TEST_F(BuilderTest, TouchedReferenceHeadersKeepReferencesBuilding) {
  const fs::path api = dir_ / "api";
  fs::create_directories(api / "kloop");
  std::ofstream(api / "kloop" / "kernel_api.h") << "#pragma once\nint kloop_candidate_api();\n";
  std::ofstream(api / "kloop" / "reference_api.h") << "#pragma once\ninline int kloop_reference_api() { return 2; }\n";
  config_.include_dirs.front() = api.string();
  BuildResult first = Builder(config_).build(source("ref1.cpp", "int kloop_a = kloop_reference_api();\n"),
                                             ModuleRole::kReference, BuildTarget::kCpu);
  ASSERT_TRUE(first.ok) << first.log;
  // Every header the PCH was made from, kloop's own wrapper of it included.
  std::vector<fs::path> headers = {api / "kloop" / "reference_api.h", api / "kloop" / "kernel_api.h"};
  for (const auto& e : fs::directory_iterator(fs::path(config_.cache_dir) / "pch")) {
    if (e.path().extension() == ".h") headers.push_back(e.path());
  }
  ASSERT_GT(headers.size(), 2u) << "no PCH header in the cache";
  for (const auto& h : headers) fs::last_write_time(h, fs::last_write_time(h) + std::chrono::hours(1));
  BuildResult second = Builder(config_).build(source("ref2.cpp", "int kloop_b = kloop_reference_api();\n"),
                                              ModuleRole::kReference, BuildTarget::kCpu);
  EXPECT_TRUE(second.ok) << second.log;
  EXPECT_EQ(second.log.find("modified since the precompiled header"), std::string::npos) << second.log;
}

// A CPU candidate that includes kloop/kernel_api.h first compiles with a
// precompiled copy of it once the cache has built 16 modules (making it
// costs about two compiles). The module is the same byte for byte, so the
// key leaves the PCH out; a compile error is the source's, found once; a
// candidate with anything but #include lines before the header compiles
// without it (a #define there could change what the header means).
TEST_F(BuilderTest, KernelApiCandidatesUseThePrecompiledHeader) {
  if (config_.isolation != Isolation::kStrict && geteuid() != 0) GTEST_SKIP() << "weak and unprivileged: no PCH";
  const std::string api = "#include <ATen/ops/empty_like.h>\n#include <kloop/kernel_api.h>  // the API\n";
  const std::string body = "extern \"C\" int kloop_g(const at::Tensor& t) { return static_cast<int>(t.dim()); }\n";
  auto uses_pch = [](const BuildResult& r) { return r.command.find("kloop_kernel_api_pch.h") != std::string::npos; };
  ASSERT_EQ(config_.kernel_api_pch_after, 16);
  config_.kernel_api_pch_after = 4;  // four builds here, not sixteen
  Builder b(config_);
  const BuildResult early = b.build(source("early.cpp", "// early\n" + api + body), ModuleRole::kCandidate, BuildTarget::kCpu);
  ASSERT_TRUE(early.ok) << early.log;
  EXPECT_FALSE(uses_pch(early)) << "a fresh cache compiles without: " << early.command;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(b.build(tiny("t" + std::to_string(i) + ".cpp", i), ModuleRole::kCandidate, BuildTarget::kCpu).ok);
  }

  const BuildResult with = b.build(source("with.cpp", "// with\n" + api + body), ModuleRole::kCandidate, BuildTarget::kCpu);
  ASSERT_TRUE(with.ok) << with.log;
  EXPECT_TRUE(uses_pch(with)) << with.command;
  EXPECT_EQ(read_file(with.library_path), read_file(early.library_path)) << "the PCH changed the module";
  BuilderConfig off = config_;
  off.use_kernel_api_pch = false;
  EXPECT_EQ(b.cache_key(api + body, ModuleRole::kCandidate, BuildTarget::kCpu),
            Builder(off).cache_key(api + body, ModuleRole::kCandidate, BuildTarget::kCpu));

  const BuildResult defined =
      b.build(source("defined.cpp", "#define private public\n" + api + body), ModuleRole::kCandidate, BuildTarget::kCpu);
  EXPECT_FALSE(uses_pch(defined)) << defined.command;

  const BuildResult error = b.build(fixture("compile_error.cpp"), ModuleRole::kCandidate, BuildTarget::kCpu);
  EXPECT_FALSE(error.ok);
  EXPECT_TRUE(uses_pch(error)) << error.command;
  EXPECT_EQ(error.log.find("failed with kloop's PCH"), std::string::npos) << "compiled twice:\n" << error.log;
  BuilderConfig elsewhere = off;
  elsewhere.cache_dir = (dir_ / "cache-without").string();
  const BuildResult plain = Builder(elsewhere).build(fixture("compile_error.cpp"), ModuleRole::kCandidate, BuildTarget::kCpu);
  ASSERT_EQ(plain.diagnostics.size(), error.diagnostics.size()) << plain.log << "\n---\n" << error.log;
  for (std::size_t i = 0; i < plain.diagnostics.size(); ++i) {
    EXPECT_EQ(plain.diagnostics[i].line, error.diagnostics[i].line);
    EXPECT_EQ(plain.diagnostics[i].message, error.diagnostics[i].message);
  }

  // A PCH written since kloop made it (its file's identity no longer the
  // signed one) is set aside and made again before any compile uses it.
  fs::path gch;
  for (const auto& d : fs::directory_iterator(fs::path(config_.cache_dir) / "pch")) {
    if (fs::exists(d.path() / "kloop_kernel_api_pch.h.gch")) gch = d.path() / "kloop_kernel_api_pch.h.gch";
  }
  ASSERT_FALSE(gch.empty());
  flip_a_byte(gch.string());
  const std::string tampered = read_file(gch.string());
  ::testing::internal::CaptureStderr();
  const BuildResult after = Builder(config_).build(source("after.cpp", "// after\n" + api + body), ModuleRole::kCandidate,
                                                   BuildTarget::kCpu);
  const std::string warning = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(after.ok) << after.log;
  EXPECT_NE(warning.find("kernel API PCH"), std::string::npos) << warning;
  EXPECT_TRUE(uses_pch(after)) << after.command;
  ASSERT_TRUE(fs::exists(gch));
  EXPECT_NE(read_file(gch.string()), tampered);
}

}  // namespace
}  // namespace kloop
