#pragma once
// Reads part of a trainer's output log for the coordinator (LogRequest), bounded in size and
// confined to the logs the supervisor writes: WORK_DIR/JOB/attempt-N/rank-R.{stdout,stderr}.log
// (trainer_supervisor.h). Torch-free; pure functions of the file system, thread-safe.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace deepnet::worker {

// The largest part of a log one read returns (64 KiB).
inline constexpr int64_t kMaxLogReadBytes = 64 * 1024;

enum class TrainerLogStream { kStderr, kStdout };

struct TrainerLogRead {
  std::string job_id;
  // >= 1.
  int attempt = 0;
  // >= 0.
  int rank = 0;
  TrainerLogStream stream = TrainerLogStream::kStderr;
  // Where to start; ignored when tail_bytes > 0. >= 0 and at most the log's size.
  int64_t offset = 0;
  // > 0: start this many bytes before the end (at 0 for a shorter log).
  int64_t tail_bytes = 0;
  // At most this many bytes; 0 or more than kMaxLogReadBytes: kMaxLogReadBytes.
  int64_t max_bytes = 0;
};

struct TrainerLogPart {
  std::string data;
  // Offset of data's first byte.
  int64_t offset = 0;
  // Size of the log when it was read.
  int64_t size = 0;
};

// WORK_DIR/JOB/attempt-N/rank-R.<stream>.log, without checking the parts.
std::string TrainerLogPath(const std::string& work_dir, const std::string& job_id, int attempt,
                           int rank, TrainerLogStream stream);

// Reads [offset, offset + max_bytes) of the log, clipped to its end. INVALID_ARGUMENT naming
// the field for a job id that cannot name a folder (IsSafeJobId), attempt < 1, rank < 0 or a
// negative offset, tail_bytes or max_bytes; NOT_FOUND naming the log when it does not exist;
// FAILED_PRECONDITION when it is not a regular file (a symbolic link is not followed);
// OUT_OF_RANGE when offset is past its end.
[[nodiscard]] absl::StatusOr<TrainerLogPart> ReadTrainerLog(const std::string& work_dir,
                                                            const TrainerLogRead& read);

}  // namespace deepnet::worker
