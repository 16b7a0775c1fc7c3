// deepnet-coordinator --backup-to: an online copy of the job store, taken while the store is open
// and has writes only in its WAL, holds every acknowledged job and opens as a store.
#include "coordinator/store/store_backup.h"

#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "coordinator/store/sqlite_job_store.h"
#include "tests/coordinator/test_util.h"

namespace deepnet::coordinator {
namespace {

using ::testing::HasSubstr;
using testing::NewJob;
using testing::SameRecord;
using testing::TempDir;

absl::StatusOr<std::unique_ptr<SqliteJobStore>> OpenStore(const std::string& path) {
  JobStoreOptions options;
  options.path = path;
  return SqliteJobStore::Open(options);
}

TEST(StoreBackupTest, CopyOfAnOpenStoreHasEveryJobAndOpensAsAStore) {
  TempDir dir;
  const std::string db = dir / "jobs.db";
  const std::string copy = dir / "backup.db";
  absl::StatusOr<std::unique_ptr<SqliteJobStore>> store = OpenStore(db);
  ASSERT_TRUE(store.ok()) << store.status();
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE((*store)->Create(NewJob("alice", absl::StrCat("k", i))).ok());
  ASSERT_TRUE((*store)->SetReason("j-000002", JobState::kQueued, "behind 1 job").ok());
  // The writes are still in the WAL of the open store (no checkpoint yet).
  ASSERT_TRUE(std::filesystem::exists(db + "-wal"));

  absl::StatusOr<int64_t> jobs = BackupJobStore(db, copy);
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_EQ(*jobs, 3);
  // One self-contained file, and no temporary left behind.
  EXPECT_FALSE(std::filesystem::exists(copy + "-wal"));
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    EXPECT_THAT(entry.path().filename().string(), ::testing::Not(HasSubstr(".tmp-")));
  }
  // The original store goes on working after the copy.
  ASSERT_TRUE((*store)->Create(NewJob("alice", "after")).ok());

  // Restore: a coordinator's store opened on the copy has the jobs as they were.
  absl::StatusOr<std::unique_ptr<SqliteJobStore>> restored = OpenStore(copy);
  ASSERT_TRUE(restored.ok()) << restored.status();
  for (const char* id : {"j-000001", "j-000002", "j-000003"}) {
    absl::StatusOr<JobRecord> original = (*store)->Get(id);
    absl::StatusOr<JobRecord> copied = (*restored)->Get(id);
    ASSERT_TRUE(original.ok() && copied.ok()) << id;
    EXPECT_TRUE(SameRecord(*copied, *original)) << id;
  }
  EXPECT_FALSE((*restored)->Get("j-000004").ok()) << "created after the backup";
}

TEST(StoreBackupTest, ErrorsNameThePathAndLeaveNoPartialCopy) {
  TempDir dir;
  absl::StatusOr<int64_t> missing = BackupJobStore(dir / "absent.db", dir / "copy.db");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("absent.db"));
  EXPECT_FALSE(std::filesystem::exists(dir / "copy.db"));

  const std::string db = dir / "jobs.db";
  ASSERT_TRUE(OpenStore(db).ok());
  absl::StatusOr<int64_t> unwritable = BackupJobStore(db, dir / "no-such-dir/copy.db");
  ASSERT_FALSE(unwritable.ok());
  EXPECT_THAT(std::string(unwritable.status().message()), HasSubstr("no-such-dir"));
}

}  // namespace
}  // namespace deepnet::coordinator
