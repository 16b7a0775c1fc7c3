// FolderLock (the checkpoint fence's lock) waits a bounded time for a holder within its lease,
// takes the lock from a holder stopped past its lease (which then finds out it lost it), and is
// free at once when its holder dies, however it dies.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

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

TEST(FolderLockTest, AHolderStuckPastItsLeaseLosesTheLockAndKnowsIt) {
  testing::TempDir dir;
  std::optional<FolderLock> stuck;
  {
    absl::StatusOr<FolderLock> taken =
        FolderLock::Acquire(dir.path(), std::chrono::seconds(5), std::chrono::milliseconds(300));
    ASSERT_TRUE(taken.ok()) << taken.status();
    stuck.emplace(*std::move(taken));
  }
  EXPECT_TRUE(stuck->StillHeld().ok());
  // The holder never lets go (stopped): a waiter gets the lock once the lease has run out.
  absl::StatusOr<FolderLock> next = FolderLock::Acquire(dir.path(), std::chrono::seconds(60));
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_TRUE(next->StillHeld().ok());
  const absl::Status lost = stuck->StillHeld();
  EXPECT_EQ(lost.code(), absl::StatusCode::kAborted);
  EXPECT_THAT(lost.message(), HasSubstr("lost the lock"));
  // The stuck holder letting go later does not free the new holder's lock.
  stuck.reset();
  EXPECT_TRUE(next->StillHeld().ok());
  absl::StatusOr<FolderLock> third =
      FolderLock::Acquire(dir.path(), std::chrono::milliseconds(300));
  EXPECT_EQ(third.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(third.status().message(), HasSubstr("pid "));
}

// The category, with a real process: a trainer stopped (SIGSTOP) while it holds the lock, and one
// killed while it holds it.
TEST(FolderLockTest, AStoppedProcessLosesTheLockAfterItsLeaseAndADeadOneAtOnce) {
  testing::TempDir dir;
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    absl::StatusOr<FolderLock> held =
        FolderLock::Acquire(dir.path(), std::chrono::seconds(5), std::chrono::milliseconds(500));
    const char ok = held.ok() ? '1' : '0';
    (void)!write(ready[1], &ok, 1);
    raise(SIGSTOP);
    _exit(held.ok() ? 0 : 1);
  }
  char ok = 0;
  ASSERT_EQ(read(ready[0], &ok, 1), 1);
  ASSERT_EQ(ok, '1');
  {
    absl::StatusOr<FolderLock> next = FolderLock::Acquire(dir.path(), std::chrono::seconds(60));
    EXPECT_TRUE(next.ok()) << next.status();
  }
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);

  // A holder killed within its lease (a minute) frees the lock at once (the kernel drops it).
  const pid_t killed = fork();
  ASSERT_GE(killed, 0);
  if (killed == 0) {
    absl::StatusOr<FolderLock> held = FolderLock::Acquire(dir.path());
    const char ok2 = held.ok() ? '1' : '0';
    (void)!write(ready[1], &ok2, 1);
    pause();
    _exit(0);
  }
  ASSERT_EQ(read(ready[0], &ok, 1), 1);
  ASSERT_EQ(ok, '1');
  kill(killed, SIGKILL);
  waitpid(killed, nullptr, 0);
  absl::StatusOr<FolderLock> after_kill =
      FolderLock::Acquire(dir.path(), std::chrono::seconds(10));
  EXPECT_TRUE(after_kill.ok()) << after_kill.status();
  close(ready[0]);
  close(ready[1]);
}

}  // namespace
}  // namespace deepnet::storage
