// The storage matrix: what a user may read and write under the storage root, and that every
// refusal reads the same whether or not the path exists.
#include "storage/storage_policy.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "tests/temp_dir.h"

namespace deepnet::storage {
namespace {

namespace fs = std::filesystem;

class StoragePolicyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = tmp_.path() + "/root";
    for (const char* dir : {"users/alice/runs", "users/bob/runs", "teams/nlp/data",
                            "teams/vision/data", "datasets/wmt"}) {
      fs::create_directories(root_ + "/" + dir);
    }
    std::ofstream(root_ + "/users/alice/train.tsv") << "a\tb\n";
    std::ofstream(root_ + "/users/bob/secret.tsv") << "a\tb\n";
    std::ofstream(root_ + "/teams/nlp/data/train.tsv") << "a\tb\n";
    std::ofstream(root_ + "/teams/vision/data/train.tsv") << "a\tb\n";
    std::ofstream(root_ + "/datasets/wmt/train.tsv") << "a\tb\n";
    absl::StatusOr<StoragePolicy> policy = StoragePolicy::Create(root_, "--storage-root");
    ASSERT_TRUE(policy.ok()) << policy.status();
    policy_.emplace(*policy);
  }

  absl::Status Read(const std::string& path) const {
    return policy_->Check(alice_, "data.train_path", path, PathAccess::kReadFile);
  }
  absl::Status ReadDir(const std::string& path) const {
    return policy_->Check(alice_, "data.shard_dir", path, PathAccess::kReadDir);
  }
  absl::Status Write(const std::string& path) const {
    return policy_->Check(alice_, "checkpoint.dir", path, PathAccess::kWriteDir);
  }

  testing::TempDir tmp_;
  std::string root_;
  std::optional<StoragePolicy> policy_;
  StorageUser alice_{"alice", {"nlp"}};
};

TEST_F(StoragePolicyTest, OwnFolderAndTeamFolderMayBeWritten) {
  EXPECT_TRUE(Write(root_ + "/users/alice/runs").ok());
  EXPECT_TRUE(Write(root_ + "/users/alice/runs/new/deeper").ok());  // Created by the trainer.
  EXPECT_TRUE(Write(root_ + "/users/alice").ok());
  EXPECT_TRUE(Write(root_ + "/teams/nlp/runs/x").ok());
  EXPECT_TRUE(Read(root_ + "/users/alice/train.tsv").ok());
  EXPECT_TRUE(Read(root_ + "/teams/nlp/data/train.tsv").ok());
  EXPECT_TRUE(Read(root_ + "/datasets/wmt/train.tsv").ok());
  EXPECT_TRUE(ReadDir(root_ + "/datasets/wmt").ok());
}

TEST_F(StoragePolicyTest, NormalisesDoubleSlashesDotsAndTrailingSlashes) {
  EXPECT_TRUE(Write(root_ + "//users/alice/./runs/").ok());
  EXPECT_TRUE(ReadDir(root_ + "/datasets//wmt/").ok());
  // ... but they never lead elsewhere.
  EXPECT_FALSE(Write(root_ + "//users//bob/runs/").ok());
  EXPECT_FALSE(Write(root_ + "/users/bob/").ok());
}

TEST_F(StoragePolicyTest, SharedDataIsReadOnly) {
  EXPECT_FALSE(Write(root_ + "/datasets/wmt").ok());
  EXPECT_FALSE(Write(root_ + "/runs").ok());
  EXPECT_FALSE(Write(root_).ok());
  EXPECT_FALSE(Write(root_ + "/users").ok());
  EXPECT_FALSE(Write(root_ + "/teams").ok());
}

TEST_F(StoragePolicyTest, OtherUsersAndOtherTeamsAreRefused) {
  EXPECT_FALSE(Write(root_ + "/users/bob/runs").ok());
  EXPECT_FALSE(Read(root_ + "/users/bob/secret.tsv").ok());
  EXPECT_FALSE(ReadDir(root_ + "/users/bob").ok());
  EXPECT_FALSE(Write(root_ + "/teams/vision/runs").ok());
  EXPECT_FALSE(Read(root_ + "/teams/vision/data/train.tsv").ok());
  // A prefix of a name is not the name.
  EXPECT_FALSE(Write(root_ + "/users/alicex/runs").ok());
  EXPECT_FALSE(Write(root_ + "/teams/nlpx/runs").ok());
}

TEST_F(StoragePolicyTest, DotDotIsRefusedEvenWhenItWouldStayInside) {
  EXPECT_FALSE(Write(root_ + "/users/alice/../bob/runs").ok());
  EXPECT_FALSE(Write(root_ + "/users/alice/runs/../runs").ok());
  EXPECT_FALSE(Read(root_ + "/users/bob/../alice/train.tsv").ok());
}

TEST_F(StoragePolicyTest, SymlinkEscapesAreRefused) {
  fs::create_directory_symlink(root_ + "/users/bob/runs", root_ + "/users/alice/to-bob");
  fs::create_directory_symlink("/etc", root_ + "/users/alice/to-etc");
  fs::create_directory_symlink("/etc", root_ + "/datasets/etc");
  fs::create_symlink(root_ + "/users/bob/secret.tsv", root_ + "/users/alice/secret.tsv");
  fs::create_symlink(root_ + "/users/bob/missing", root_ + "/users/alice/dangling");
  EXPECT_FALSE(Write(root_ + "/users/alice/to-bob").ok());
  EXPECT_FALSE(Write(root_ + "/users/alice/to-bob/new").ok());
  EXPECT_FALSE(Write(root_ + "/users/alice/to-etc/new").ok());
  EXPECT_FALSE(Read(root_ + "/users/alice/to-etc/passwd").ok());
  EXPECT_FALSE(Read(root_ + "/datasets/etc/passwd").ok());
  EXPECT_FALSE(Read(root_ + "/users/alice/secret.tsv").ok());
  EXPECT_FALSE(Write(root_ + "/users/alice/dangling").ok());
  EXPECT_FALSE(Write(root_ + "/users/alice/dangling/x").ok());
  // A link that stays in a readable place is followed.
  fs::create_symlink(root_ + "/datasets/wmt/train.tsv", root_ + "/users/alice/wmt.tsv");
  EXPECT_TRUE(Read(root_ + "/users/alice/wmt.tsv").ok());
}

TEST_F(StoragePolicyTest, PlacesOutsideTheRootAreRefused) {
  for (const std::string path : {"/etc", "/etc/shadow", "/proc", "/proc/self/environ", "/dev/zero",
                                 "/", "/root", "relative/path", ""}) {
    EXPECT_FALSE(Read(path).ok()) << path;
    EXPECT_FALSE(Write(path).ok()) << path;
  }
  std::string with_nul = root_ + "/datasets/wmt/train.tsv";
  with_nul.push_back('\0');
  with_nul += "x";
  EXPECT_FALSE(Read(with_nul).ok());
}

TEST_F(StoragePolicyTest, OnlyRegularFilesAndDirectories) {
  const std::string fifo = root_ + "/users/alice/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_FALSE(Read(fifo).ok());
  EXPECT_FALSE(ReadDir(fifo).ok());
  EXPECT_FALSE(Write(fifo).ok());
  fs::create_symlink("/dev/zero", root_ + "/users/alice/zero");
  EXPECT_FALSE(Read(root_ + "/users/alice/zero").ok());
  EXPECT_FALSE(Read(root_ + "/users/alice/runs").ok());  // A directory is not a file.
  EXPECT_FALSE(ReadDir(root_ + "/users/alice/train.tsv").ok());
  EXPECT_FALSE(Write(root_ + "/users/alice/train.tsv").ok());
  EXPECT_FALSE(Write(root_ + "/users/alice/train.tsv/sub").ok());
}

TEST_F(StoragePolicyTest, OneMessageWhetherOrNotThePathExists) {
  const absl::Status existing = Read(root_ + "/users/bob/secret.tsv");
  const absl::Status missing = Read(root_ + "/users/bob/nothing.tsv");
  ASSERT_FALSE(existing.ok());
  EXPECT_EQ(existing.code(), absl::StatusCode::kInvalidArgument);
  auto without_path = [](const absl::Status& s) {
    const std::string m(s.message());
    return m.substr(0, m.rfind("(got"));
  };
  EXPECT_EQ(without_path(existing), without_path(missing));
  EXPECT_EQ(without_path(existing), without_path(Read("/etc/shadow")));
  EXPECT_EQ(without_path(existing), without_path(Read("/etc/no-such-file")));
  EXPECT_EQ(without_path(existing), without_path(Read(root_ + "/users/alice/nothing.tsv")));
  EXPECT_EQ(without_path(Write(root_ + "/users/bob/runs")),
            without_path(Write(root_ + "/users/bob/none")));
  // The message names the field and the rule.
  EXPECT_NE(existing.message().find("data.train_path: refused by the storage policy"),
            std::string::npos)
      << existing;
  EXPECT_NE(Write("/x").message().find(root_ + "/users/alice/"), std::string::npos);
}

TEST_F(StoragePolicyTest, RootMayBeReachedThroughALink) {
  const std::string link = tmp_.path() + "/root-link";
  fs::create_directory_symlink(root_, link);
  absl::StatusOr<StoragePolicy> policy = StoragePolicy::Create(link, "--storage-root");
  ASSERT_TRUE(policy.ok()) << policy.status();
  EXPECT_TRUE(
      policy->Check(alice_, "checkpoint.dir", link + "/users/alice/runs", PathAccess::kWriteDir)
          .ok());
  EXPECT_TRUE(
      policy->Check(alice_, "checkpoint.dir", root_ + "/users/alice/runs", PathAccess::kWriteDir)
          .ok());
  EXPECT_FALSE(
      policy->Check(alice_, "checkpoint.dir", link + "/users/bob/runs", PathAccess::kWriteDir)
          .ok());
}

TEST(StoragePolicyCreateTest, RootMustBeAnAbsoluteExistingDirectory) {
  testing::TempDir tmp;
  std::ofstream(tmp / "file") << "x";
  EXPECT_FALSE(StoragePolicy::Create("relative", "--storage-root").ok());
  EXPECT_FALSE(StoragePolicy::Create(tmp / "missing", "--storage-root").ok());
  EXPECT_FALSE(StoragePolicy::Create(tmp / "file", "--storage-root").ok());
  EXPECT_FALSE(StoragePolicy::Create(tmp.path() + "/../x", "--storage-root").ok());
  const absl::Status status = StoragePolicy::Create(tmp / "missing", "--storage-root").status();
  EXPECT_NE(status.message().find("--storage-root"), std::string::npos) << status;
  EXPECT_TRUE(StoragePolicy::Create(tmp.path(), "--storage-root").ok());
}

}  // namespace
}  // namespace deepnet::storage
