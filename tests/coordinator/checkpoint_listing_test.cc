// Listing a job's checkpoint folder, which its user controls: `latest` as a link to /dev/zero or
// a FIFO must neither grow nor block the coordinator, and a folder with too many entries or too
// slow to walk ends the listing with an error naming it.
#include "coordinator/core/checkpoint_listing.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/temp_dir.h"

namespace deepnet::coordinator {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// Two complete checkpoints (steps 10 and 20) and one being written.
void MakeCheckpoints(const testing::TempDir& dir) {
  for (const char* step : {"step_000000010", "step_000000020"}) {
    fs::create_directory(dir / step);
    std::ofstream(dir / step + "/MANIFEST.json") << "{}";
  }
  fs::create_directory(dir / "step_000000030.tmp-1");
}

TEST(CheckpointListingTest, MarksTheFolderLatestNames) {
  testing::TempDir dir;
  MakeCheckpoints(dir);
  std::ofstream(dir / "latest") << "step_000000010\n";
  absl::StatusOr<std::vector<CheckpointView>> found = ListCheckpointFolders(dir.path());
  ASSERT_TRUE(found.ok()) << found.status();
  ASSERT_EQ(found->size(), 2u);
  EXPECT_TRUE((*found)[0].latest);
  EXPECT_FALSE((*found)[1].latest);
  EXPECT_EQ(ReadLatestPointer(dir.path()), "step_000000010");
}

// The resume step without a listing: `latest` when it names a complete checkpoint, else none
// (the caller then lists the folder for the newest complete one).
TEST(CheckpointListingTest, LatestCompleteStepNeedsTheNamedFoldersManifest) {
  testing::TempDir dir;
  MakeCheckpoints(dir);
  EXPECT_EQ(LatestCompleteStep(dir.path()), std::nullopt);  // no `latest`
  std::ofstream(dir / "latest") << "step_000000010\n";
  EXPECT_EQ(LatestCompleteStep(dir.path()), 10);
  std::ofstream(dir / "latest", std::ios::trunc) << "step_000000030\n";  // no manifest there
  EXPECT_EQ(LatestCompleteStep(dir.path()), std::nullopt);
}

TEST(CheckpointListingTest, ALatestLinkedToDevZeroIsIgnoredNotRead) {
  testing::TempDir dir;
  MakeCheckpoints(dir);
  ASSERT_EQ(::symlink("/dev/zero", (dir / "latest").c_str()), 0);
  absl::StatusOr<std::vector<CheckpointView>> found = ListCheckpointFolders(dir.path());
  ASSERT_TRUE(found.ok()) << found.status();
  ASSERT_EQ(found->size(), 2u);
  EXPECT_FALSE((*found)[0].latest || (*found)[1].latest);
  EXPECT_EQ(ReadLatestPointer(dir.path()), "");
}

TEST(CheckpointListingTest, AFifoLatestDoesNotBlock) {
  testing::TempDir dir;
  MakeCheckpoints(dir);
  ASSERT_EQ(::mkfifo((dir / "latest").c_str(), 0600), 0);
  absl::StatusOr<std::vector<CheckpointView>> found = ListCheckpointFolders(dir.path());
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->size(), 2u);
  EXPECT_EQ(ReadLatestPointer(dir.path()), "");
}

TEST(CheckpointListingTest, ALatestThatNamesNoStepFolderIsIgnored) {
  testing::TempDir dir;
  MakeCheckpoints(dir);
  std::ofstream(dir / "latest") << "../../etc\n";
  EXPECT_EQ(ReadLatestPointer(dir.path()), "");
  std::ofstream(dir / "latest", std::ios::trunc) << std::string(5000, 'x');
  EXPECT_EQ(ReadLatestPointer(dir.path()), "");
}

TEST(CheckpointListingTest, TooManyEntriesEndTheListingNamingTheFolder) {
  testing::TempDir dir;
  MakeCheckpoints(dir);
  ListingLimits limits;
  limits.max_entries = 2;
  absl::StatusOr<std::vector<CheckpointView>> found =
      ListCheckpointFolders(dir.path(), /*with_sizes=*/true, limits);
  EXPECT_EQ(found.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(found.status().message(), HasSubstr(dir.path()));
}

TEST(CheckpointListingTest, APassedDeadlineEndsALongWalk) {
  testing::TempDir dir;
  MakeCheckpoints(dir);
  for (int i = 0; i < 200; ++i) std::ofstream(dir / ("junk-" + std::to_string(i))) << "";
  ListingLimits limits;
  limits.deadline = std::chrono::steady_clock::now() - std::chrono::seconds(1);
  absl::StatusOr<std::vector<CheckpointView>> found =
      ListCheckpointFolders(dir.path(), /*with_sizes=*/false, limits);
  EXPECT_EQ(found.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(found.status().message(), HasSubstr(dir.path()));
}

}  // namespace
}  // namespace deepnet::coordinator
