// FileInFolder: the entries of shards.json and of a checkpoint manifest resolve only inside
// their own folder, whatever the entry says and whatever links the folder holds.
#include "storage/folder_entry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/temp_dir.h"

namespace deepnet::storage {
namespace {

using ::testing::HasSubstr;

TEST(FolderEntryTest, PlainFileNamesOnly) {
  EXPECT_TRUE(IsPlainFileName("train.en-de.bin"));
  EXPECT_TRUE(IsPlainFileName("..hidden"));
  for (const std::string bad : {"", ".", "..", "../x", "a/b", "/etc/shadow", "x/"}) {
    EXPECT_FALSE(IsPlainFileName(bad)) << "'" << bad << "'";
  }
  EXPECT_FALSE(IsPlainFileName(std::string("a\0b", 3)));
}

TEST(FolderEntryTest, JoinsAPlainNameAndPassesAMissingFile) {
  testing::TempDir dir;
  std::ofstream(dir / "spm.model") << "x";
  absl::StatusOr<std::string> model = FileInFolder(dir.path(), "spm.model", "shards.json");
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(*model, dir / "spm.model");
  EXPECT_TRUE(FileInFolder(dir.path() + "/", "absent.bin", "shards.json").ok());
}

TEST(FolderEntryTest, RefusesAbsoluteAndParentEntriesNamingTheEntry) {
  testing::TempDir dir;
  for (const std::string bad : {"/etc/shadow", "../other-user/train.bin", "sub/x.bin", ".."}) {
    absl::StatusOr<std::string> path = FileInFolder(dir.path(), bad, "data.shard_dir: shards.json");
    EXPECT_EQ(path.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(path.status().message(), HasSubstr("data.shard_dir: shards.json"));
    EXPECT_THAT(path.status().message(), HasSubstr(bad));
  }
}

TEST(FolderEntryTest, RefusesALinkOutOfTheFolderAndKeepsOneWithinIt) {
  testing::TempDir dir;
  testing::TempDir elsewhere;
  std::ofstream(elsewhere / "secret") << "x";
  std::ofstream(dir / "real.bin") << "x";
  ASSERT_EQ(::symlink((elsewhere / "secret").c_str(), (dir / "out.bin").c_str()), 0);
  ASSERT_EQ(::symlink("real.bin", (dir / "in.bin").c_str()), 0);
  absl::StatusOr<std::string> out = FileInFolder(dir.path(), "out.bin", "shards.json");
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("outside the folder"));
  EXPECT_TRUE(FileInFolder(dir.path(), "in.bin", "shards.json").ok());
}

TEST(FolderEntryTest, AFolderReachedThroughALinkStillHoldsItsOwnFiles) {
  testing::TempDir dir;
  std::filesystem::create_directory(dir / "shards");
  std::ofstream(dir / "shards" + "/spm.model") << "x";
  ASSERT_EQ(::symlink((dir / "shards").c_str(), (dir / "current").c_str()), 0);
  EXPECT_TRUE(FileInFolder(dir / "current", "spm.model", "shards.json").ok());
}

}  // namespace
}  // namespace deepnet::storage
