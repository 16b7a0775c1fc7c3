#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "storage/scoped_fd.h"

namespace deepnet::coordinator {

/// The highest job number a job store ever handed out, kept in a file beside the database
/// (`<db>.last-job`, one decimal line), so that a database restored from a backup, or replaced,
/// does not hand out again the ids of jobs submitted after that backup: their logs, checkpoint
/// folders and audit lines name them. Written (replaced by rename) before each new job's row is
/// inserted, without an fsync of its own: a crash cannot move the database back, only a restore
/// can, and by then the file is long on disk. Losing the file and the database together (the
/// disk) loses the mark; the job uid (id and creation time, JobUid) still tells such jobs apart.
/// Not thread-safe (the store calls it under its own lock).
class JobIdMark {
 public:
  /// Reads the mark at `path` (missing: 0). DATA_LOSS naming the file when it holds anything but
  /// a number (remove it only after checking the database's newest job).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<JobIdMark>> Open(const std::string& path);

  int64_t last() const { return last_; }
  /// Records `number` as handed out (when above the mark). INTERNAL naming the file on failure.
  [[nodiscard]] absl::Status Record(int64_t number);

  // Use Open.
  JobIdMark(int fd, std::string path, int64_t last)
      : fd_(fd), path_(std::move(path)), last_(last) {}

 private:
  storage::ScopedFd fd_;
  std::string path_;
  int64_t last_ = 0;
};

}  // namespace deepnet::coordinator
