#include "coordinator/store/job_id_mark.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "storage/guarded_read.h"

namespace deepnet::coordinator {

absl::StatusOr<std::unique_ptr<JobIdMark>> JobIdMark::Open(const std::string& path) {
  int64_t last = 0;
  absl::StatusOr<std::string> text = storage::ReadGuardedFile(path, 64);
  if (text.ok()) {
    // Empty: created by an Open that has recorded nothing yet (another store's, at the moment).
    const absl::string_view number = absl::StripAsciiWhitespace(*text);
    if (!number.empty() && (!absl::SimpleAtoi(number, &last) || last < 0)) {
      return absl::DataLossError(absl::StrCat(
          path, " does not hold a job number (it records the newest job id ever handed out; "
                "remove it only after checking the database's newest job)"));
    }
  } else if (!absl::IsNotFound(text.status())) {
    return text.status();
  }
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  return std::make_unique<JobIdMark>(fd, path, last);
}

absl::Status JobIdMark::Record(int64_t number) {
  if (number <= last_) return absl::OkStatus();
  // Fixed width, in place: one small write per new job, never a file shorter than before.
  const std::string text = absl::StrFormat("%020d\n", number);
  if (::pwrite(fd_.get(), text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
    return absl::InternalError(absl::StrCat("cannot record job number ", number, " in ", path_,
                                            ": ", std::strerror(errno)));
  }
  last_ = number;
  return absl::OkStatus();
}

}  // namespace deepnet::coordinator
