// The worker daemon keeps its token from trainers that run as its own account (issue 25, item
// 1): once it calls KeepSecretsFromTrainers, a process of the same uid can no longer read its
// environment through /proc, and the token variables are gone from it.
#include "worker/daemon_secrets.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace deepnet::worker {
namespace {

constexpr uid_t kNobodyUid = 65534;

// In a child running as `kNobodyUid`: whether it can open /proc/`pid`/environ (0), else errno.
int ReadEnvironAsNobody(pid_t pid) {
  const pid_t reader = fork();
  if (reader == 0) {
    if (setresgid(kNobodyUid, kNobodyUid, kNobodyUid) != 0 || setresuid(kNobodyUid, kNobodyUid, kNobodyUid) != 0) {
      _exit(100);
    }
    const std::string path = "/proc/" + std::to_string(pid) + "/environ";
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      char c;
      const bool read_ok = read(fd, &c, 1) >= 0;
      _exit(read_ok ? 0 : (errno & 0x7f));
    }
    _exit(errno & 0x7f);
  }
  int status = 0;
  waitpid(reader, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(DaemonSecretsTest, AProcessOfTheSameUidCannotReadTheDaemonsEnvironmentAfterward) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run both sides as another account";
  int to_daemon[2], from_daemon[2];
  ASSERT_EQ(pipe(to_daemon), 0);
  ASSERT_EQ(pipe(from_daemon), 0);
  const pid_t daemon = fork();
  ASSERT_GE(daemon, 0);
  if (daemon == 0) {
    // The daemon's side: an unprivileged process holding a token in its environment, dumpable
    // again after the uid change (which clears the flag by itself).
    setenv("DEEPNET_TOKEN", "worker-secret-0123456789", 1);
    setenv("DEEPNET_TOKEN_FILE", "/etc/deepnet/token", 1);
    if (setresgid(kNobodyUid, kNobodyUid, kNobodyUid) != 0 || setresuid(kNobodyUid, kNobodyUid, kNobodyUid) != 0 ||
        prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) != 0) {
      _exit(1);
    }
    char go;
    const char ready = 'r';
    if (write(from_daemon[1], &ready, 1) != 1 || read(to_daemon[0], &go, 1) != 1) _exit(2);
    const bool kept = KeepSecretsFromTrainers().ok();
    const char done = kept && getenv("DEEPNET_TOKEN") == nullptr &&
                              getenv("DEEPNET_TOKEN_FILE") == nullptr
                          ? 'k'
                          : 'x';
    if (write(from_daemon[1], &done, 1) != 1 || read(to_daemon[0], &go, 1) != 1) _exit(3);
    _exit(0);
  }
  char c = 0;
  ASSERT_EQ(read(from_daemon[0], &c, 1), 1);
  // Before: a process of the same account reads it (the trainers' view without the call).
  EXPECT_EQ(ReadEnvironAsNobody(daemon), 0);
  ASSERT_EQ(write(to_daemon[1], "g", 1), 1);
  ASSERT_EQ(read(from_daemon[0], &c, 1), 1);
  EXPECT_EQ(c, 'k') << "KeepSecretsFromTrainers failed or left a token variable";
  // After: refused.
  EXPECT_EQ(ReadEnvironAsNobody(daemon), EACCES);
  ASSERT_EQ(write(to_daemon[1], "g", 1), 1);
  int status = 0;
  waitpid(daemon, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  for (int fd : {to_daemon[0], to_daemon[1], from_daemon[0], from_daemon[1]}) close(fd);
}

}  // namespace
}  // namespace deepnet::worker
