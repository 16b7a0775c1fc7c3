#include "storage/folder_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <optional>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "storage/retry_on_eintr.h"
#include "storage/storage_log.h"

namespace deepnet::storage {
namespace {

using std::chrono::milliseconds;

int64_t NowMs() {
  return std::chrono::duration_cast<milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string HostName() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "?";
  return name;
}

// Whether the open file `fd` is still the file at `path` (not moved aside by a waiter).
bool IsFileAt(int fd, const std::string& path) {
  struct stat open_file {};
  struct stat at_path {};
  return ::fstat(fd, &open_file) == 0 && ::lstat(path.c_str(), &at_path) == 0 &&
         open_file.st_dev == at_path.st_dev && open_file.st_ino == at_path.st_ino;
}

// The lease a holder wrote into the lock file: "lease-until <ms> pid <pid> host <host>".
struct Lease {
  int64_t until_ms = 0;
  std::string holder;  // "pid P host H", for messages
};

// The lease in `fd`; nullopt when there is none (the holder is just taking the lock, or is a
// trainer of a version without leases): such a holder's lock is never broken.
std::optional<Lease> ReadLease(int fd) {
  char text[512];
  const ssize_t n = ::pread(fd, text, sizeof(text) - 1, 0);
  if (n <= 0) return std::nullopt;
  absl::string_view line(text, static_cast<size_t>(n));
  line = line.substr(0, line.find('\n'));
  std::vector<absl::string_view> fields = absl::StrSplit(line, ' ');
  Lease lease;
  if (fields.size() < 2 || fields[0] != "lease-until" ||
      !absl::SimpleAtoi(fields[1], &lease.until_ms)) {
    return std::nullopt;
  }
  const size_t holder = line.find(" pid ");
  lease.holder = holder == absl::string_view::npos ? "unknown" : std::string(line.substr(holder + 1));
  return lease;
}

// Moves the lock file at `path` aside if it is still `stuck`'s file (whose lease ran out), so
// the next open creates a fresh one. A file that is no longer `stuck`'s (another waiter broke it
// first and a new holder took the fresh one) is put back.
void BreakLease(int stuck, const std::string& path) {
  const std::string aside = absl::StrCat(path, ".broken-", ::getpid(), "-", NowMs());
  if (::rename(path.c_str(), aside.c_str()) != 0) return;  // Gone already: someone broke it.
  if (!IsFileAt(stuck, aside)) {
    // Not the stuck file: put it back. If a fresh one appeared meanwhile, the holder of the one
    // moved aside finds out through StillHeld and gives up.
    (void)::link(aside.c_str(), path.c_str());
  }
  (void)::unlink(aside.c_str());
}

}  // namespace

absl::StatusOr<FolderLock> FolderLock::Acquire(const std::string& dir, milliseconds wait,
                                               milliseconds lease) {
  const std::string path = (std::filesystem::path(dir) / kFenceLockFileName).string();
  const auto deadline = std::chrono::steady_clock::now() + wait;
  milliseconds pause(1);
  std::string holder = "unknown";
  while (true) {
    const int fd = RetryOnEintr(
        [&] { return ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644); });
    if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot open lock file ", path));
    if (RetryOnEintr([&] { return ::flock(fd, LOCK_EX | LOCK_NB); }) == 0) {
      if (!IsFileAt(fd, path)) {  // Moved aside between our open and our flock: take the new one.
        ::close(fd);
        continue;
      }
      const int64_t until = NowMs() + lease.count();
      const std::string text =
          absl::StrCat("lease-until ", until, " pid ", ::getpid(), " host ", HostName(), "\n");
      if (::ftruncate(fd, 0) != 0 ||
          ::pwrite(fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
        const int error = errno;
        ::close(fd);
        return absl::ErrnoToStatus(error, absl::StrCat("cannot write the lease into ", path));
      }
      return FolderLock(fd, path, until);
    }
    const int error = errno;
    if (error != EWOULDBLOCK) {
      ::close(fd);
      return absl::ErrnoToStatus(error, absl::StrCat("cannot lock ", path));
    }
    std::optional<Lease> held = ReadLease(fd);
    if (held.has_value()) holder = held->holder;
    if (held.has_value() && held->until_ms < NowMs()) {
      // Read again a moment later: a lease left by a holder that crashed may be about to be
      // replaced by the process that just took the lock in its place.
      std::this_thread::sleep_for(milliseconds(20));
      const std::optional<Lease> again = ReadLease(fd);
      if (again.has_value() && again->until_ms == held->until_ms &&
          RetryOnEintr([&] { return ::flock(fd, LOCK_EX | LOCK_NB); }) != 0) {
        LogWarning(absl::StrCat(path, " is held by ", held->holder, " whose lease ran out ",
                                NowMs() - held->until_ms,
                                " ms ago (stopped or hung while it held it): breaking it"));
        BreakLease(fd, path);
      }
      ::close(fd);
      continue;
    }
    ::close(fd);
    if (std::chrono::steady_clock::now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          path, " has been locked by another process (", holder, ") for more than ",
          wait.count() / 1000.0,
          " s within its lease; giving up rather than waiting for ever: the job restarts"));
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, milliseconds(100));
  }
}

absl::Status FolderLock::StillHeld() const {
  if (fd_.get() < 0) return absl::FailedPreconditionError("the folder lock was moved from");
  if (!IsFileAt(fd_.get(), path_)) {
    return absl::AbortedError(absl::StrCat(
        "lost the lock ", path_,
        ": another process broke it after this one's lease ran out (this process was stopped "
        "or hung while it held it); the folder must not be changed from here"));
  }
  const int64_t now = NowMs();
  if (now >= until_ms_) {
    return absl::AbortedError(absl::StrCat("the lease on ", path_, " ran out ", now - until_ms_,
                                           " ms ago; the folder must not be changed from here"));
  }
  return absl::OkStatus();
}

FolderLock::~FolderLock() {
  // Clear the lease so no waiter judges the next holder by it (that holder writes its own);
  // fd_ then closes, which releases the flock.
  if (fd_.get() >= 0) (void)::ftruncate(fd_.get(), 0);
}

}  // namespace deepnet::storage
