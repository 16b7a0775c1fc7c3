#include "worker/trainer_log_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "worker/trainer_supervisor.h"

namespace deepnet::worker {
namespace {

// Closes the descriptor when it goes out of scope.
class FileCloser {
 public:
  explicit FileCloser(int fd) : fd_(fd) {}
  ~FileCloser() { close(fd_); }
  FileCloser(const FileCloser&) = delete;
  FileCloser& operator=(const FileCloser&) = delete;

 private:
  const int fd_;
};

absl::Status CheckRequest(const TrainerLogRead& read) {
  if (!IsSafeJobId(read.job_id)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "log request: job_id '", read.job_id, "' is not 1-128 characters of [A-Za-z0-9._-]"));
  }
  if (read.attempt < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("log request: attempt ", read.attempt, " must be >= 1"));
  }
  if (read.rank < 0) {
    return absl::InvalidArgumentError(absl::StrCat("log request: rank ", read.rank, " must be >= 0"));
  }
  if (read.offset < 0 || read.tail_bytes < 0 || read.max_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "log request: offset (", read.offset, "), tail_bytes (", read.tail_bytes,
        ") and max_bytes (", read.max_bytes, ") must be >= 0"));
  }
  return absl::OkStatus();
}

}  // namespace

std::string TrainerLogPath(const std::string& work_dir, const std::string& job_id, int attempt,
                           int rank, TrainerLogStream stream) {
  return absl::StrCat(work_dir, "/", job_id, "/attempt-", attempt, "/rank-", rank,
                      stream == TrainerLogStream::kStdout ? ".stdout.log" : ".stderr.log");
}

absl::StatusOr<TrainerLogPart> ReadTrainerLog(const std::string& work_dir,
                                              const TrainerLogRead& read) {
  if (absl::Status s = CheckRequest(read); !s.ok()) return s;
  const std::string path =
      TrainerLogPath(work_dir, read.job_id, read.attempt, read.rank, read.stream);
  const std::string name = absl::StrCat("job ", read.job_id, " attempt ", read.attempt, " rank ",
                                        read.rank, " ",
                                        read.stream == TrainerLogStream::kStdout ? "stdout" : "stderr");
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) {
      return absl::NotFoundError(absl::StrCat(
          "this worker has no log of ", name, " (it did not run that rank, or its work dir ",
          "was cleaned)"));
    }
    if (err == ELOOP) {
      return absl::FailedPreconditionError(absl::StrCat(name, ": the log is a symbolic link"));
    }
    return absl::InternalError(absl::StrCat(name, ": cannot open the log: ", std::strerror(err)));
  }
  FileCloser closer(fd);
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(name, ": the log is not a regular file"));
  }
  TrainerLogPart part;
  part.size = static_cast<int64_t>(st.st_size);
  if (read.tail_bytes > 0) {
    part.offset = read.tail_bytes >= part.size ? 0 : part.size - read.tail_bytes;
  } else if (read.offset > part.size) {
    return absl::OutOfRangeError(absl::StrCat("log request: offset ", read.offset,
                                              " is past the end of the log of ", name, " (",
                                              part.size, " bytes)"));
  } else {
    part.offset = read.offset;
  }
  const int64_t limit =
      read.max_bytes <= 0 || read.max_bytes > kMaxLogReadBytes ? kMaxLogReadBytes : read.max_bytes;
  const int64_t want = std::min(limit, part.size - part.offset);
  part.data.resize(static_cast<size_t>(want));
  int64_t got = 0;
  while (got < want) {
    const ssize_t n = pread(fd, part.data.data() + got, static_cast<size_t>(want - got),
                            static_cast<off_t>(part.offset + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return absl::InternalError(absl::StrCat(name, ": reading the log: ", std::strerror(errno)));
    }
    if (n == 0) break;  // Truncated meanwhile.
    got += n;
  }
  part.data.resize(static_cast<size_t>(got));
  return part;
}

}  // namespace deepnet::worker
