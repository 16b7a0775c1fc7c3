// ReadGuardedFile against what a user can leave in their folder: links (to /dev/zero, to a
// file), FIFOs, devices, folders and files larger than the cap. None may block or grow the
// reader; each refusal names the path.
#include "storage/guarded_read.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>

#include "tests/temp_dir.h"

namespace deepnet::storage {
namespace {

using ::testing::HasSubstr;

void Write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

TEST(GuardedReadTest, ReadsARegularFileWhole) {
  testing::TempDir dir;
  Write(dir / "latest", "step_000000100\n");
  absl::StatusOr<std::string> text = ReadGuardedFile(dir / "latest", 64);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "step_000000100\n");
}

TEST(GuardedReadTest, AFileOfExactlyTheCapIsReadAndOneByteMoreIsRefused) {
  testing::TempDir dir;
  Write(dir / "at", std::string(16, 'a'));
  Write(dir / "over", std::string(17, 'a'));
  EXPECT_TRUE(ReadGuardedFile(dir / "at", 16).ok());
  absl::StatusOr<std::string> over = ReadGuardedFile(dir / "over", 16);
  EXPECT_EQ(over.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(over.status().message(), HasSubstr(dir / "over"));
  EXPECT_THAT(over.status().message(), HasSubstr("larger than 16 bytes"));
}

TEST(GuardedReadTest, AMissingFileIsNotFound) {
  testing::TempDir dir;
  EXPECT_EQ(ReadGuardedFile(dir / "absent", 64).status().code(), absl::StatusCode::kNotFound);
}

TEST(GuardedReadTest, ALinkToDevZeroIsRefusedWithoutReading) {
  testing::TempDir dir;
  ASSERT_EQ(::symlink("/dev/zero", (dir / "latest").c_str()), 0);
  absl::StatusOr<std::string> text = ReadGuardedFile(dir / "latest", 1 << 20);
  EXPECT_EQ(text.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(text.status().message(), HasSubstr("symbolic link"));
}

TEST(GuardedReadTest, ALinkToARegularFileIsRefusedToo) {
  testing::TempDir dir;
  Write(dir / "real", "step_000000001\n");
  ASSERT_EQ(::symlink((dir / "real").c_str(), (dir / "latest").c_str()), 0);
  EXPECT_EQ(ReadGuardedFile(dir / "latest", 64).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(GuardedReadTest, AFifoIsRefusedAtOnceWithNoWriterAttached) {
  testing::TempDir dir;
  ASSERT_EQ(::mkfifo((dir / "latest").c_str(), 0600), 0);
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<std::string> text = ReadGuardedFile(dir / "latest", 64);
  EXPECT_EQ(text.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(text.status().message(), HasSubstr("a FIFO"));
  // Not a timing threshold: a blocking open would never return at all.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::minutes(1));
}

TEST(GuardedReadTest, DevicesAndFoldersAreNotRegularFiles) {
  testing::TempDir dir;
  absl::StatusOr<std::string> zero = ReadGuardedFile("/dev/zero", 64);
  EXPECT_EQ(zero.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(zero.status().message(), HasSubstr("character device"));
  absl::StatusOr<std::string> folder = ReadGuardedFile(dir.path(), 64);
  EXPECT_EQ(folder.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(folder.status().message(), HasSubstr("a folder"));
}

}  // namespace
}  // namespace deepnet::storage
