#pragma once

// The lock every checkpoint-folder mutation holds (storage/checkpoint_fence.h): an exclusive
// flock(2) on DIR/.fence.lock, and a lease on it.
//
// The flock gives mutual exclusion and is released by the kernel however its holder ends (a
// crashed trainer never blocks the folder). The lease covers the holder that does not end: a
// trainer stopped (SIGSTOP, a debugger, a frozen VM) or hung while it holds the lock. Each holder
// writes "lease-until <unix ms> pid <pid> host <host>" into the lock file when it takes the lock
// and clears it when it lets go; a waiter that finds the lock held past that time breaks it by
// moving the lock file aside (the stuck holder keeps a flock on a file no one else opens) and
// locks a fresh one. A broken holder cannot do harm when it resumes: StillHeld() tells it, and
// every fenced mutation asks it first (RunFenced). Holders must finish a critical section within
// their lease (commits and prunes take a moment; the lease is a minute). Clocks of the machines
// that share a folder must agree to well within the lease (NTP).

#include <chrono>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "storage/scoped_fd.h"

namespace deepnet::storage {

inline constexpr char kFenceLockFileName[] = ".fence.lock";

class FolderLock {
 public:
  static constexpr std::chrono::milliseconds kDefaultWait{120000};
  static constexpr std::chrono::milliseconds kDefaultLease{60000};

  /// Takes the lock of DIR (DIR/.fence.lock, created if missing) with a lease of `lease`,
  /// breaking a holder's lease that has run out. DEADLINE_EXCEEDED naming the lock file and its
  /// holder after `wait` (a holder within its lease, or one that wrote no lease: an older
  /// trainer), so the caller fails (its job restarts) instead of hanging.
  [[nodiscard]] static absl::StatusOr<FolderLock> Acquire(
      const std::string& dir, std::chrono::milliseconds wait = kDefaultWait,
      std::chrono::milliseconds lease = kDefaultLease);

  /// OK while this holder still holds the lock: its lease has not run out and no waiter broke
  /// it. ABORTED saying which otherwise: the caller must not change the folder.
  [[nodiscard]] absl::Status StillHeld() const;

  FolderLock(FolderLock&&) = default;
  FolderLock& operator=(FolderLock&&) = delete;
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;
  /// Clears the lease (when the lock file is still this holder's) and lets go of the flock.
  ~FolderLock();

 private:
  FolderLock(int fd, std::string path, int64_t until_ms)
      : fd_(fd), path_(std::move(path)), until_ms_(until_ms) {}

  ScopedFd fd_;
  std::string path_;
  int64_t until_ms_ = 0;
};

}  // namespace deepnet::storage
