#include "cli/parent_watch.h"

#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace deepnet::cli {
namespace {

// test (subreaper) -> middle -> watched. When `middle` dies, `watched` is re-parented to the
// test process and must notice and exit 70 by itself; while its parent lives it keeps running.
TEST(ParentWatchTest, ExitsOnceTheParentIsGoneAndNotBefore) {
  ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const pid_t middle = fork();
  ASSERT_GE(middle, 0);
  if (middle == 0) {
    const pid_t watched = fork();
    if (watched == 0) {
      ExitWhenParentDies(getppid(), std::chrono::milliseconds(50));
      std::this_thread::sleep_for(std::chrono::seconds(60));
      _exit(0);
    }
    (void)!write(pipe_fds[1], &watched, sizeof(watched));
    // Live long enough for the watcher to have checked a few times.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    _exit(0);
  }
  pid_t watched = 0;
  ASSERT_EQ(read(pipe_fds[0], &watched, sizeof(watched)), static_cast<ssize_t>(sizeof(watched)));
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  // Still running while `middle` lives (it is middle's child, not ours, until middle dies).
  EXPECT_EQ(kill(watched, 0), 0);
  int status = 0;
  ASSERT_EQ(waitpid(middle, &status, 0), middle);
  // Re-parented to us (the subreaper): it must exit on its own, promptly.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  pid_t reaped = 0;
  while (reaped == 0 && std::chrono::steady_clock::now() < deadline) {
    reaped = waitpid(watched, &status, WNOHANG);
    if (reaped == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (reaped == 0) {
    kill(watched, SIGKILL);
    waitpid(watched, &status, 0);
    FAIL() << "the orphaned process kept running";
  }
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 70);
  prctl(PR_SET_CHILD_SUBREAPER, 0);
}

}  // namespace
}  // namespace deepnet::cli
