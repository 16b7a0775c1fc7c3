// FolderLock (the checkpoint fence's lock) waits a bounded time: a holder that never lets go,
// such as a stale trainer stopped while it committed, makes the new attempt fail with a message
// naming the lock instead of hanging for ever.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <thread>

#include "storage/checkpoint_fence.h"
#include "tests/temp_dir.h"

namespace deepnet::storage {
namespace {

using ::testing::HasSubstr;

TEST(FolderLockTest, AHeldLockTimesOutNamingItAndIsFreeOnceReleased) {
  testing::TempDir dir;
  std::optional<FolderLock> held;
  {
    absl::StatusOr<FolderLock> first = FolderLock::Acquire(dir.path());
    ASSERT_TRUE(first.ok()) << first.status();
    held.emplace(*std::move(first));
  }
  // A second open file description conflicts even within one process (flock semantics).
  absl::StatusOr<FolderLock> blocked =
      FolderLock::Acquire(dir.path(), std::chrono::milliseconds(300));
  EXPECT_EQ(blocked.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(blocked.status().message(), HasSubstr(dir / ".fence.lock"));
  EXPECT_THAT(blocked.status().message(), HasSubstr("more than 0.3 s"));
  // Released while another waits: the waiter gets it.
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    held.reset();
  });
  absl::StatusOr<FolderLock> next = FolderLock::Acquire(dir.path(), std::chrono::seconds(60));
  release.join();
  EXPECT_TRUE(next.ok()) << next.status();
}

}  // namespace
}  // namespace deepnet::storage
