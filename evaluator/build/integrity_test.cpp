#include "evaluator/build/integrity.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "evaluator/build/content_hash.h"

namespace kloop {
namespace {

namespace fs = std::filesystem;

class IntegrityKeyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kloop-integrity-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(IntegrityKeyTest, KeyIsMadeOncePrivateAndReused) {
  const std::string path = (dir_ / "sub" / kIntegrityKeyFile).string();
  EXPECT_FALSE(IntegrityKey::exists(path));
  IntegrityKey a = IntegrityKey::open_or_create(path);
  ASSERT_TRUE(IntegrityKey::exists(path));
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_size, 32);
  IntegrityKey b = IntegrityKey::open_or_create(path);
  EXPECT_EQ(a.tag({"x"}), b.tag({"x"})) << "a second open reads the same key";
  EXPECT_EQ(a.tag({"x"}).size(), 64u);
}

TEST_F(IntegrityKeyTest, TagsDependOnKeyAndOnHowDataSplitsIntoParts) {
  IntegrityKey a = IntegrityKey::for_cache((dir_ / "a").string());
  IntegrityKey b = IntegrityKey::for_cache((dir_ / "b").string());
  const std::string t = a.tag({"ab", "c"});
  EXPECT_TRUE(a.verify(t, {"ab", "c"}));
  EXPECT_FALSE(a.verify(t, {"a", "bc"}));
  EXPECT_FALSE(a.verify(t, {"ab", "d"}));
  EXPECT_FALSE(b.verify(t, {"ab", "c"})) << "another key cannot vouch for it";
  EXPECT_FALSE(a.verify("", {"ab", "c"}));
  EXPECT_FALSE(a.verify(t.substr(0, 63), {"ab", "c"}));
}

TEST_F(IntegrityKeyTest, ProcessesRacingToCreateAgreeOnOneKey) {
  const std::string path = (dir_ / kIntegrityKeyFile).string();
  const fs::path tags = dir_ / "tags";
  fs::create_directories(tags);
  pid_t kids[4];
  for (int i = 0; i < 4; ++i) {
    kids[i] = fork();
    ASSERT_GE(kids[i], 0);
    if (kids[i] == 0) {
      std::ofstream(tags / std::to_string(i)) << IntegrityKey::open_or_create(path).tag({"same"});
      _exit(0);
    }
  }
  for (pid_t k : kids) waitpid(k, nullptr, 0);
  const std::string first = read_file((tags / "0").string());
  EXPECT_EQ(first.size(), 64u);
  for (int i = 1; i < 4; ++i) EXPECT_EQ(read_file((tags / std::to_string(i)).string()), first);
}

TEST_F(IntegrityKeyTest, AKeyOthersCanReadOrABrokenFileIsRefused) {
  const std::string path = (dir_ / kIntegrityKeyFile).string();
  IntegrityKey::open_or_create(path);
  chmod(path.c_str(), 0644);
  EXPECT_THROW(IntegrityKey::open_or_create(path), std::runtime_error);
  fs::remove(path);
  fs::create_directories(dir_);
  std::ofstream(path) << "short";
  chmod(path.c_str(), 0600);
  try {
    IntegrityKey::open_or_create(path);
    FAIL() << "a 5-byte key was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kloop
