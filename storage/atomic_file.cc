#include "data/atomic_file.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace deepnet::data {
namespace {

// fsync and close can return EINTR when a signal (SIGTERM) arrives; retry those.
template <typename F>
int RetryOnEintr(F f) {
  int rc;
  do {
    rc = f();
  } while (rc != 0 && errno == EINTR);
  return rc;
}

}  // namespace

absl::StatusOr<AtomicFileWriter> AtomicFileWriter::Create(const std::string& path) {
  std::string tmp_path = absl::StrCat(path, ".tmp.XXXXXX");
  const int fd = ::mkstemp(tmp_path.data());
  if (fd < 0) {
    const int error = errno;
    return absl::ErrnoToStatus(error, absl::StrCat(path, ": cannot create temporary file"));
  }
  // mkstemp creates 0600; a data file is meant to be read by others, like any other output.
  ::fchmod(fd, 0644);
  std::FILE* file = ::fdopen(fd, "wb");
  if (file == nullptr) {
    const int error = errno;
    ::close(fd);
    ::unlink(tmp_path.c_str());
    return absl::ErrnoToStatus(error, absl::StrCat(path, ": fdopen failed"));
  }
  return AtomicFileWriter(path, std::move(tmp_path), file);
}

AtomicFileWriter::AtomicFileWriter(AtomicFileWriter&& other) noexcept
    : path_(std::move(other.path_)),
      tmp_path_(std::move(other.tmp_path_)),
      file_(std::exchange(other.file_, nullptr)),
      size_(other.size_) {}

AtomicFileWriter::~AtomicFileWriter() {
  if (file_ == nullptr) return;
  std::fclose(file_);
  ::unlink(tmp_path_.c_str());
}

absl::Status AtomicFileWriter::Error(int error, const std::string& what) const {
  return absl::ErrnoToStatus(error, absl::StrCat(path_, ": ", what));
}

absl::Status AtomicFileWriter::Append(std::string_view bytes) {
  if (file_ == nullptr) return absl::FailedPreconditionError(absl::StrCat(path_, ": not open"));
  if (bytes.empty()) return absl::OkStatus();
  if (std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size()) {
    return Error(errno != 0 ? errno : EIO, "write failed");
  }
  size_ += bytes.size();
  return absl::OkStatus();
}

absl::Status AtomicFileWriter::PadTo(size_t alignment) {
  static constexpr char kZeros[64] = {};
  for (size_t pad = (alignment - size_ % alignment) % alignment; pad > 0;) {
    const size_t n = pad < sizeof(kZeros) ? pad : sizeof(kZeros);
    if (absl::Status status = Append(std::string_view(kZeros, n)); !status.ok()) return status;
    pad -= n;
  }
  return absl::OkStatus();
}

absl::Status AtomicFileWriter::Commit() {
  if (file_ == nullptr) return absl::FailedPreconditionError(absl::StrCat(path_, ": not open"));
  std::FILE* file = std::exchange(file_, nullptr);
  const bool flushed = std::fflush(file) == 0;
  int error = flushed ? 0 : errno;
  if (flushed && RetryOnEintr([&] { return ::fsync(::fileno(file)); }) != 0) error = errno;
  if (std::fclose(file) != 0 && error == 0) error = errno;
  if (error == 0 && std::rename(tmp_path_.c_str(), path_.c_str()) != 0) error = errno;
  if (error != 0) {
    ::unlink(tmp_path_.c_str());
    return Error(error, "cannot write and rename into place");
  }
  // The rename is durable only once the folder's entry is on disk.
  std::string folder = std::filesystem::path(path_).parent_path().string();
  if (folder.empty()) folder = ".";
  const int dir_fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) return Error(errno, "cannot open folder to fsync");
  const int rc = RetryOnEintr([&] { return ::fsync(dir_fd); });
  error = errno;
  ::close(dir_fd);
  return rc == 0 ? absl::OkStatus() : Error(error, "cannot fsync folder");
}

absl::Status WriteFileAtomically(const std::string& path, std::string_view bytes) {
  absl::StatusOr<AtomicFileWriter> writer = AtomicFileWriter::Create(path);
  if (!writer.ok()) return writer.status();
  if (absl::Status status = writer->Append(bytes); !status.ok()) return status;
  return writer->Commit();
}

}  // namespace deepnet::data
