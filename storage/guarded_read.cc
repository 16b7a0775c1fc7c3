#include "storage/guarded_read.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "storage/retry_on_eintr.h"
#include "storage/scoped_fd.h"

namespace deepnet::storage {

namespace {

const char* KindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

absl::StatusOr<std::string> ReadGuardedFile(const std::string& path, size_t max_bytes) {
  const int raw = RetryOnEintr([&] {
    return ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  });
  if (raw < 0) {
    const int error = errno;
    if (error == ELOOP) {
      return absl::FailedPreconditionError(
          absl::StrCat(path, " is a symbolic link; it is not followed here"));
    }
    return absl::ErrnoToStatus(error, absl::StrCat("cannot open ", path));
  }
  const ScopedFd fd(raw);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot stat ", path));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " is ", KindOf(st.st_mode), ", not a regular file"));
  }
  const auto too_large = [&] {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " is larger than ", max_bytes, " bytes, more than it can hold"));
  };
  if (static_cast<unsigned long long>(st.st_size) > max_bytes) return too_large();
  // One byte more than allowed tells a file that grew past the cap from one that ends at it.
  std::string out(max_bytes + 1, '\0');
  size_t filled = 0;
  while (filled < out.size()) {
    const ssize_t n = ::read(fd.get(), out.data() + filled, out.size() - filled);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot read ", path));
    if (n == 0) break;
    filled += static_cast<size_t>(n);
  }
  if (filled > max_bytes) return too_large();
  out.resize(filled);
  return out;
}

}  // namespace deepnet::storage
