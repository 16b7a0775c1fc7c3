#include "worker/file_util.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"

namespace deepnet::worker {
namespace {

absl::Status ErrnoError(int err, absl::string_view what, const std::string& path) {
  return absl::ErrnoToStatus(err, absl::StrCat(what, " ", path));
}

// Retries on EINTR, which fsync/close/write can return when a signal (SIGTERM) arrives.
template <typename F>
int RetryOnEintr(F f) {
  int rc;
  do {
    rc = f();
  } while (rc < 0 && errno == EINTR);
  return rc;
}

absl::Status WriteAll(int fd, const void* data, size_t size, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    // Linux writes at most ~2 GiB per call; loop on short writes.
    const ssize_t n = ::write(fd, p, std::min<size_t>(size, size_t{1} << 30));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(errno, "cannot write", path);
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  // Allocation failure here means the process is out of memory; nothing sensible remains.
  if (ctx_ == nullptr || EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr) != 1) std::abort();
}

Sha256::~Sha256() { EVP_MD_CTX_free(ctx_); }

void Sha256::Update(const void* data, size_t size) {
  if (size > 0) EVP_DigestUpdate(ctx_, data, size);
}

std::string Sha256::HexDigest() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx_, digest, &len);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * len);
  for (unsigned int i = 0; i < len; ++i) {
    hex.push_back(kHex[digest[i] >> 4]);
    hex.push_back(kHex[digest[i] & 0xf]);
  }
  return hex;
}

absl::StatusOr<std::unique_ptr<DurableWriter>> DurableWriter::Create(const std::string& path) {
  const int fd = RetryOnEintr(
      [&] { return ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644); });
  if (fd < 0) return ErrnoError(errno, "cannot create", path);
  return std::unique_ptr<DurableWriter>(new DurableWriter(fd, path));
}

DurableWriter::~DurableWriter() {
  if (fd_ >= 0) ::close(fd_);
}

absl::Status DurableWriter::Append(const void* data, size_t size) {
  if (fd_ < 0) return absl::FailedPreconditionError(absl::StrCat("already closed: ", path_));
  if (absl::Status s = WriteAll(fd_, data, size, path_); !s.ok()) return s;
  sha_.Update(data, size);
  size_ += size;
  return absl::OkStatus();
}

absl::Status DurableWriter::PadTo(uint64_t alignment) {
  static constexpr char kZeros[256] = {};
  const uint64_t pad = (alignment - size_ % alignment) % alignment;
  return pad == 0 ? absl::OkStatus() : Append(kZeros, static_cast<size_t>(pad));
}

absl::Status DurableWriter::Close() {
  if (fd_ < 0) return absl::FailedPreconditionError(absl::StrCat("already closed: ", path_));
  const int fd = fd_;
  fd_ = -1;
  if (RetryOnEintr([&] { return ::fsync(fd); }) != 0) {
    const int err = errno;
    ::close(fd);
    return ErrnoError(err, "cannot fsync", path_);
  }
  // Not retried: on Linux the descriptor is released even when close() reports EINTR.
  if (::close(fd) != 0 && errno != EINTR) return ErrnoError(errno, "cannot close", path_);
  return absl::OkStatus();
}

absl::StatusOr<MappedFile> MappedFile::Open(const std::string& path) {
  const int fd = RetryOnEintr([&] { return ::open(path.c_str(), O_RDONLY | O_CLOEXEC); });
  if (fd < 0) return ErrnoError(errno, "cannot open", path);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return ErrnoError(err, "cannot stat", path);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::FailedPreconditionError(absl::StrCat("not a regular file: ", path));
  }
  const size_t size = static_cast<size_t>(st.st_size);
  if (size == 0) {
    ::close(fd);
    return MappedFile(nullptr, 0);
  }
  void* data = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int err = errno;
  ::close(fd);  // The mapping stays valid after the descriptor is closed.
  if (data == MAP_FAILED) return ErrnoError(err, "cannot mmap", path);
  return MappedFile(static_cast<const uint8_t*>(data), size);
}

MappedFile::MappedFile(MappedFile&& other) noexcept : data_(other.data_), size_(other.size_) {
  other.data_ = nullptr;
  other.size_ = 0;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

absl::Status WriteFileDurably(const std::string& path, absl::string_view contents,
                              std::string* sha256_hex) {
  absl::StatusOr<std::unique_ptr<DurableWriter>> writer = DurableWriter::Create(path);
  if (!writer.ok()) return writer.status();
  if (absl::Status s = (*writer)->Append(contents.data(), contents.size()); !s.ok()) return s;
  if (absl::Status s = (*writer)->Close(); !s.ok()) return s;
  if (sha256_hex != nullptr) *sha256_hex = (*writer)->HexDigest();
  return absl::OkStatus();
}

absl::Status FsyncDir(const std::string& path) {
  const int fd =
      RetryOnEintr([&] { return ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); });
  if (fd < 0) return ErrnoError(errno, "cannot open folder", path);
  const int rc = RetryOnEintr([&] { return ::fsync(fd); });
  const int err = errno;
  ::close(fd);
  return rc == 0 ? absl::OkStatus() : ErrnoError(err, "cannot fsync folder", path);
}

absl::Status RenamePath(const std::string& from, const std::string& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0) {
    return ErrnoError(errno, absl::StrCat("cannot rename ", from, " to"), to);
  }
  return absl::OkStatus();
}

absl::Status ExchangePaths(const std::string& a, const std::string& b) {
#ifdef RENAME_EXCHANGE
  if (::renameat2(AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), RENAME_EXCHANGE) == 0) {
    return absl::OkStatus();
  }
  const int err = errno;
  if (err != EINVAL && err != ENOSYS && err != ENOTSUP) {
    return ErrnoError(err, absl::StrCat("cannot exchange ", a, " and"), b);
  }
#endif
  return absl::UnimplementedError(absl::StrCat("atomic exchange unsupported for ", a));
}

absl::Status ReplaceFileAtomically(const std::string& path, absl::string_view contents,
                                   const std::string& tmp_suffix) {
  const std::string tmp = path + tmp_suffix;
  std::error_code ec;
  std::filesystem::remove(tmp, ec);  // Left over by an earlier failure of this process.
  absl::Status s = WriteFileDurably(tmp, contents);
  if (s.ok()) s = RenamePath(tmp, path);
  if (!s.ok()) {
    std::filesystem::remove(tmp, ec);
    return s;
  }
  std::string parent = std::filesystem::path(path).parent_path().string();
  return FsyncDir(parent.empty() ? "." : parent);
}

absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  absl::StatusOr<MappedFile> file = MappedFile::Open(path);
  if (!file.ok()) return file.status();
  return std::string(reinterpret_cast<const char*>(file->data()), file->size());
}

}  // namespace deepnet::worker
