#include "coordinator/store/job_id_mark.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "storage/guarded_read.h"

namespace deepnet::coordinator {

absl::StatusOr<JobIdMark> JobIdMark::Open(const std::string& path) {
  absl::StatusOr<std::string> text = storage::ReadGuardedFile(path, 64);
  if (absl::IsNotFound(text.status())) return JobIdMark(path, 0);
  if (!text.ok()) return text.status();
  int64_t last = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &last) || last < 0) {
    return absl::DataLossError(absl::StrCat(
        path, " does not hold a job number (it records the newest job id ever handed out; "
              "remove it only after checking the database's newest job)"));
  }
  return JobIdMark(path, last);
}

absl::Status JobIdMark::Record(int64_t number) {
  if (number <= last_) return absl::OkStatus();
  const std::string tmp = absl::StrCat(path_, ".tmp-", ::getpid());
  const std::string text = absl::StrCat(number, "\n");
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  bool ok = fd >= 0 && ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const int error = errno;
  if (fd >= 0) ok = ::close(fd) == 0 && ok;
  if (ok && ::rename(tmp.c_str(), path_.c_str()) == 0) {
    last_ = number;
    return absl::OkStatus();
  }
  const int failure = ok ? errno : error;
  (void)::unlink(tmp.c_str());
  return absl::InternalError(absl::StrCat("cannot record job number ", number, " in ", path_,
                                          ": ", std::strerror(failure)));
}

}  // namespace deepnet::coordinator
