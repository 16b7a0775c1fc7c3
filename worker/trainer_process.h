#pragma once
// One trainer process started by the worker daemon, in a process group of its own so that a
// stop reaches its children too. Torch-free.

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace deepnet::worker {

// An unprivileged account a trainer runs as (never 0).
struct TrainerAccount {
  uid_t uid = 0;
  gid_t gid = 0;
};

// One resource limit for a trainer: RLIMIT_CORE, RLIMIT_NOFILE, RLIMIT_AS, ... and its value
// (soft and hard alike).
struct TrainerLimit {
  int resource = 0;
  uint64_t value = 0;
};

struct TrainerLaunch {
  // Absolute (or PATH-relative when it has no '/') path of the program.
  std::string executable;
  // argv[1..]; argv[0] is the executable.
  std::vector<std::string> args;
  // The complete environment of the child, NAME=VALUE each.
  std::vector<std::string> env;
  // Working directory of the child; must exist.
  std::string work_dir;
  // The child's stdout is piped to the line callback and appended to this file.
  std::string stdout_log;
  // The child's stderr is appended to this file (its tail becomes TrainerExitStatus::message).
  std::string stderr_log;
  // When set, the child drops to this account (supplementary groups: gid alone) between fork
  // and exec; needs a root daemon. Unset: it runs as the daemon.
  std::optional<TrainerAccount> account;
  // Resource limits (setrlimit, soft and hard) set in the child before the exec.
  std::vector<TrainerLimit> limits;
};

// How a trainer ended.
struct TrainerExitStatus {
  // Exit status when it exited, else 0.
  int exit_code = 0;
  // Terminating signal when killed, else 0.
  int signal = 0;
  // The last lines of its stderr log (at most kStderrTailLines lines).
  std::string stderr_tail;
  // Whether Stop() was called before it ended.
  bool stop_requested = false;
};

// A running trainer: fork()ed and exec()ed into its own process group (pgid == pid) with an empty
// signal mask, stdin from /dev/null, stdout read line by line on a reader thread of this
// object (and teed to TrainerLaunch::stdout_log), stderr into TrainerLaunch::stderr_log.
// When the trainer itself has been reaped, whatever is left of its group is SIGKILLed, so
// that no child of it outlives it. The destructor kills the group and reaps.
//
// Thread-safety: Stop() and pid() are safe from any thread; Poll() must be called from one
// thread at a time (the supervisor). The line callback runs on the reader thread, one line at a
// time, and must not call into this object.
class TrainerProcess {
 public:
  static constexpr int kStderrTailLines = 40;
  // Longer stdout lines are cut to this many bytes.
  static constexpr size_t kMaxLineBytes = 1 << 16;

  using LineCallback = std::function<void(const std::string& line)>;

  // Spawns the trainer. InvalidArgument naming the path when a log cannot be opened or the
  // account is uid or gid 0, FailedPrecondition naming the executable (and the account) when it
  // cannot be started, e.g. the account may not execute it.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<TrainerProcess>> Start(
      const TrainerLaunch& launch, LineCallback on_stdout_line);

  ~TrainerProcess();
  TrainerProcess(const TrainerProcess&) = delete;
  TrainerProcess& operator=(const TrainerProcess&) = delete;

  // Process id, which is also the process group id.
  pid_t pid() const { return pid_; }

  // SIGTERM to the whole group now; Poll() sends SIGKILL to the group once `grace` has passed
  // (zero or negative: SIGKILL at once). A later call can only shorten the deadline. No-op
  // once the trainer was reaped.
  void Stop(std::chrono::milliseconds grace);
  bool stop_requested() const { return stop_requested_.load(); }

  // Non-blocking: reaps the trainer if it ended, kills the rest of its group, waits for the
  // reader thread to drain the pipe (bounded), and returns how it ended, every call after
  // that too. nullopt while it runs (after sending the pending SIGKILL if its grace is over).
  std::optional<TrainerExitStatus> Poll();

  // Peak resident set size of the trainer (VmHWM) in bytes; 0 when unknown or reaped.
  int64_t PeakResidentBytes() const;

 private:
  TrainerProcess(pid_t pid, int stdout_fd, int stdout_log_fd, std::string stderr_log,
                 LineCallback on_line);
  void ReadLoop();
  void JoinReader();

  const pid_t pid_;
  const int stdout_fd_;      // Read end of the stdout pipe; owned, closed by the destructor.
  const int stdout_log_fd_;  // Owned.
  const std::string stderr_log_;
  LineCallback on_line_;
  std::thread reader_;
  std::atomic<bool> leader_reaped_{false};  // The reader stops at the first idle poll after.
  std::atomic<bool> stop_requested_{false};

  mutable std::mutex mu_;  // Orders signals against the reap (no kill after the pid is freed).
  bool reaped_ = false;    // Guarded by mu_.
  std::optional<std::chrono::steady_clock::time_point> kill_deadline_;  // Guarded by mu_.
  std::optional<TrainerExitStatus> exit_;  // Set by Poll() (one thread).
};

// The last `max_lines` lines of the file at `path` (reads at most its last 16 KiB); "" when
// it cannot be read.
std::string TailOfFile(const std::string& path, int max_lines);

}  // namespace deepnet::worker
