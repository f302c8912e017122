// Trees a candidate left (untrusted_tree.h), built here as a candidate
// builds them: chains deeper than PATH_MAX, links to the driver's files,
// FIFOs, folders made read-only, sparse files.
#include "base/untrusted_tree.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <climits>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace kloop {
namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class UntrustedTreeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("kloop-tree-" + std::to_string(getpid()));
    remove_tree(root_.string());
    fs::create_directories(root_ / "tree");
    victim_ = (root_ / "victim").string();
    std::ofstream(victim_) << "the driver's own\n";
    chmod(victim_.c_str(), 0600);
  }
  void TearDown() override { remove_tree(root_.string()); }

  // A chain of `depth` folders of 200-character names under `dir`, made one
  // name at a time (its full path is longer than PATH_MAX).
  static void chain(const fs::path& dir, int depth) {
    int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY);
    ASSERT_GE(fd, 0);
    const std::string name(200, '0');
    for (int i = 0; i < depth; ++i) {
      ASSERT_EQ(mkdirat(fd, name.c_str(), 0755), 0);
      const int next = openat(fd, name.c_str(), O_RDONLY | O_DIRECTORY);
      close(fd);
      ASSERT_GE(next, 0);
      fd = next;
    }
    const int file = openat(fd, "deepest", O_WRONLY | O_CREAT, 0644);
    if (file >= 0) close(file);
    close(fd);
  }

  fs::path root_;
  std::string victim_;
};

TEST_F(UntrustedTreeTest, RemovesChainsDeeperThanPathMaxLinksAndReadOnlyFolders) {
  const fs::path tree = root_ / "tree";
  chain(tree, 40);  // 8 KB of path
  fs::create_symlink(victim_, tree / "build.log");
  fs::create_symlink(root_, tree / "up");
  ASSERT_EQ(mkfifo((tree / "fifo").c_str(), 0644), 0);
  fs::create_directories(tree / "locked" / "inner");
  std::ofstream(tree / "locked" / "inner" / "f") << "x";
  chmod((tree / "locked" / "inner").c_str(), 0500);
  chmod((tree / "locked").c_str(), 0500);
  chmod(tree.c_str(), 0500);
  EXPECT_LT(PATH_MAX, 40 * 201);
  EXPECT_EQ(remove_tree(tree.string()), "");
  EXPECT_FALSE(fs::exists(fs::symlink_status(tree)));
  EXPECT_EQ(read_text(victim_), "the driver's own\n") << "a link was followed";
  EXPECT_TRUE(fs::exists(root_)) << "a link to the parent was followed";
  EXPECT_EQ(remove_tree((root_ / "absent").string()), "") << "nothing there is done";
}

TEST_F(UntrustedTreeTest, ReplacingAFileNeverWritesThroughALink) {
  const fs::path tree = root_ / "tree";
  fs::create_symlink(victim_, tree / "build.log");
  fs::create_symlink(root_ / "made-by-driver", tree / "result.json");
  fs::create_directories(tree / "planted.json" / "sub");
  replace_file(tree.string(), "build.log", "log\n");
  replace_file(tree.string(), "result.json", "{}\n");
  replace_file(tree.string(), "planted.json", "ok\n");
  EXPECT_EQ(read_text(victim_), "the driver's own\n");
  EXPECT_FALSE(fs::exists(root_ / "made-by-driver"));
  EXPECT_FALSE(fs::is_symlink(tree / "build.log"));
  EXPECT_EQ(read_text(tree / "build.log"), "log\n");
  EXPECT_EQ(read_text(tree / "planted.json"), "ok\n");
  // A folder that is itself a link is refused, not followed.
  fs::create_symlink(root_, root_ / "link-to-root");
  EXPECT_THROW(replace_file((root_ / "link-to-root").string(), "x", "y"), std::runtime_error);
  EXPECT_FALSE(fs::exists(root_ / "x"));
}

TEST_F(UntrustedTreeTest, SanitizingRemovesWhatIsNotAFileOrFolderAndEnforcesLimits) {
  const fs::path tree = root_ / "tree";
  fs::create_directories(tree / "a" / "b");
  std::ofstream(tree / "a" / "b" / "module.py") << "x = 1\n";
  fs::create_symlink(victim_, tree / "a" / "link");
  ASSERT_EQ(mkfifo((tree / "fifo").c_str(), 0644), 0);
  std::ofstream(tree / "setuid") << "#!/bin/sh\n";
  chmod((tree / "setuid").c_str(), 04755);
  EXPECT_EQ(sanitize_tree(tree.string(), std::nullopt, TreeLimits{}), "");
  EXPECT_FALSE(fs::exists(fs::symlink_status(tree / "a" / "link")));
  EXPECT_FALSE(fs::exists(fs::symlink_status(tree / "fifo")));
  EXPECT_TRUE(fs::exists(tree / "a" / "b" / "module.py"));
  EXPECT_EQ(fs::status(tree / "setuid").permissions() & fs::perms::set_uid, fs::perms::none);
  const std::vector<TreeFile> files = list_tree(tree.string(), TreeLimits{});
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].path, "a/b/module.py");
  EXPECT_EQ(files[1].path, "setuid");

  chain(tree, 40);
  const std::string deep = sanitize_tree(tree.string(), std::nullopt, TreeLimits{});
  EXPECT_NE(deep.find("folders nested deeper than 32"), std::string::npos) << deep;
  EXPECT_THROW(list_tree(tree.string(), TreeLimits{}), std::runtime_error);
  EXPECT_EQ(remove_tree(tree.string()), "");

  fs::create_directories(tree);
  for (int i = 0; i < 3; ++i) {
    std::ofstream f(tree / ("sparse" + std::to_string(i)));
    f.close();
    fs::resize_file(tree / ("sparse" + std::to_string(i)), 1ull << 30);
  }
  const std::string big = sanitize_tree(tree.string(), std::nullopt, TreeLimits{});
  EXPECT_NE(big.find("more than 2048 MiB of files (sparse files count in full)"), std::string::npos) << big;
}

TEST_F(UntrustedTreeTest, ReadingRefusesLinksAndFilesOverTheLimit) {
  fs::create_symlink(victim_, root_ / "kernel.py");
  try {
    read_file_nofollow((root_ / "kernel.py").string(), 1 << 20);
    ADD_FAILURE() << "a link was read";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("it is a link"), std::string::npos) << e.what();
  }
  std::ofstream(root_ / "big");
  fs::resize_file(root_ / "big", 2ull << 30);
  try {
    read_file_nofollow((root_ / "big").string(), 4 << 20);
    ADD_FAILURE() << "a 2 GiB file was read";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("more than the 4194304 kloop reads"), std::string::npos) << e.what();
  }
  EXPECT_EQ(read_file_nofollow(victim_, 1 << 20), "the driver's own\n");
}

}  // namespace
}  // namespace kloop
