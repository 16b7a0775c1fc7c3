#include "storage/atomic_file.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "storage/retry_on_eintr.h"

namespace deepnet::storage {

absl::StatusOr<DurableFileWriter> DurableFileWriter::Create(const std::string& path) {
  const int fd = RetryOnEintr(
      [&] { return ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644); });
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat(path, ": cannot create"));
  return Adopt(fd, path);
}

absl::StatusOr<DurableFileWriter> DurableFileWriter::Adopt(int fd, std::string path) {
  std::FILE* file = ::fdopen(fd, "wb");
  if (file == nullptr) {
    const int error = errno;
    ::close(fd);
    return absl::ErrnoToStatus(error, absl::StrCat(path, ": fdopen failed"));
  }
  return DurableFileWriter(std::move(path), file);
}

DurableFileWriter::DurableFileWriter(DurableFileWriter&& other) noexcept
    : path_(std::move(other.path_)),
      file_(std::exchange(other.file_, nullptr)),
      size_(other.size_) {}

DurableFileWriter::~DurableFileWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

absl::Status DurableFileWriter::Error(int error, const std::string& what) const {
  return absl::ErrnoToStatus(error, absl::StrCat(path_, ": ", what));
}

absl::Status DurableFileWriter::Append(std::string_view bytes) {
  if (file_ == nullptr) return absl::FailedPreconditionError(absl::StrCat(path_, ": not open"));
  if (bytes.empty()) return absl::OkStatus();
  if (std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size()) {
    return Error(errno != 0 ? errno : EIO, "write failed");
  }
  size_ += bytes.size();
  return absl::OkStatus();
}

absl::Status DurableFileWriter::PadTo(size_t alignment) {
  static constexpr char kZeros[256] = {};
  for (size_t pad = (alignment - size_ % alignment) % alignment; pad > 0;) {
    const size_t n = pad < sizeof(kZeros) ? pad : sizeof(kZeros);
    if (absl::Status status = Append(std::string_view(kZeros, n)); !status.ok()) return status;
    pad -= n;
  }
  return absl::OkStatus();
}

absl::Status DurableFileWriter::Close() {
  if (file_ == nullptr) return absl::FailedPreconditionError(absl::StrCat(path_, ": not open"));
  std::FILE* file = std::exchange(file_, nullptr);
  const bool flushed = std::fflush(file) == 0;
  int error = flushed ? 0 : errno;
  if (flushed && RetryOnEintr([&] { return ::fsync(::fileno(file)); }) != 0) error = errno;
  // Not retried: on Linux the descriptor is released even when close() reports EINTR.
  if (std::fclose(file) != 0 && error == 0 && errno != EINTR) error = errno;
  return error == 0 ? absl::OkStatus() : Error(error, "cannot write and fsync");
}

absl::StatusOr<AtomicFileWriter> AtomicFileWriter::Create(const std::string& path,
                                                          const std::string& tmp_suffix) {
  if (!tmp_suffix.empty()) {
    const std::string tmp_path = path + tmp_suffix;
    ::unlink(tmp_path.c_str());  // Left over by an earlier failure of the same owner.
    absl::StatusOr<DurableFileWriter> file = DurableFileWriter::Create(tmp_path);
    if (!file.ok()) return file.status();
    return AtomicFileWriter(path, std::move(*file));
  }
  std::string tmp_path = absl::StrCat(path, ".tmp.XXXXXX");
  const int fd = ::mkstemp(tmp_path.data());
  if (fd < 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat(path, ": cannot create temporary file"));
  }
  // mkstemp creates 0600; a data file is meant to be read by others, like any other output.
  ::fchmod(fd, 0644);
  absl::StatusOr<DurableFileWriter> file = DurableFileWriter::Adopt(fd, tmp_path);
  if (!file.ok()) {
    ::unlink(tmp_path.c_str());
    return file.status();
  }
  return AtomicFileWriter(path, std::move(*file));
}

AtomicFileWriter::AtomicFileWriter(AtomicFileWriter&& other) noexcept
    : path_(std::move(other.path_)), file_(std::exchange(other.file_, std::nullopt)) {}

AtomicFileWriter::~AtomicFileWriter() {
  if (!file_) return;
  const std::string tmp_path = file_->path();
  file_.reset();
  ::unlink(tmp_path.c_str());
}

absl::Status AtomicFileWriter::Commit() {
  if (!file_) return absl::FailedPreconditionError(absl::StrCat(path_, ": not open"));
  const std::string tmp_path = file_->path();
  absl::Status status = file_->Close();
  file_.reset();
  if (status.ok() && std::rename(tmp_path.c_str(), path_.c_str()) != 0) {
    status = absl::ErrnoToStatus(errno,
                                 absl::StrCat(path_, ": cannot rename ", tmp_path, " into place"));
  }
  if (!status.ok()) {
    ::unlink(tmp_path.c_str());
    return status;
  }
  // The rename is durable only once the folder's entry is on disk.
  return FsyncParentFolder(path_);
}

absl::Status WriteFileAtomically(const std::string& path, std::string_view bytes,
                                 const std::string& tmp_suffix) {
  absl::StatusOr<AtomicFileWriter> writer = AtomicFileWriter::Create(path, tmp_suffix);
  if (!writer.ok()) return writer.status();
  if (absl::Status status = writer->Append(bytes); !status.ok()) return status;
  return writer->Commit();
}

absl::Status FsyncFolder(const std::string& path) {
  const int fd =
      RetryOnEintr([&] { return ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); });
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat(path, ": cannot open folder"));
  const int rc = RetryOnEintr([&] { return ::fsync(fd); });
  const int error = errno;
  ::close(fd);
  return rc == 0 ? absl::OkStatus()
                 : absl::ErrnoToStatus(error, absl::StrCat(path, ": cannot fsync folder"));
}

absl::Status FsyncParentFolder(const std::string& path) {
  const std::string folder = std::filesystem::path(path).parent_path().string();
  return FsyncFolder(folder.empty() ? "." : folder);
}

}  // namespace deepnet::storage
