#include "checkpoint/durable_file.h"

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
#include "storage/retry_on_eintr.h"

namespace deepnet::checkpoint {
namespace {

absl::Status ErrnoError(int err, absl::string_view what, const std::string& path) {
  return absl::ErrnoToStatus(err, absl::StrCat(what, " ", path));
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
  absl::StatusOr<storage::DurableFileWriter> file = storage::DurableFileWriter::Create(path);
  if (!file.ok()) return file.status();
  return std::unique_ptr<DurableWriter>(new DurableWriter(std::move(*file)));
}

DurableWriter::~DurableWriter() = default;

absl::Status DurableWriter::Append(const void* data, size_t size) {
  const absl::Status s = file_.Append(std::string_view(static_cast<const char*>(data), size));
  if (s.ok()) sha_.Update(data, size);
  return s;
}

absl::Status DurableWriter::PadTo(uint64_t alignment) {
  static constexpr char kZeros[256] = {};
  for (uint64_t pad = (alignment - size() % alignment) % alignment; pad > 0;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(pad, sizeof(kZeros)));
    if (absl::Status s = Append(kZeros, n); !s.ok()) return s;
    pad -= n;
  }
  return absl::OkStatus();
}

absl::Status DurableWriter::Close() { return file_.Close(); }

absl::StatusOr<MappedFile> MappedFile::Open(const std::string& path) {
  const int fd = storage::RetryOnEintr([&] { return ::open(path.c_str(), O_RDONLY | O_CLOEXEC); });
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

absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  absl::StatusOr<MappedFile> file = MappedFile::Open(path);
  if (!file.ok()) return file.status();
  return std::string(reinterpret_cast<const char*>(file->data()), file->size());
}

}  // namespace deepnet::checkpoint
