#pragma once

// The checkpoint store's file helpers: SHA-256 of what is written and read, tensor files
// written through storage::DurableFileWriter (the project's one fsync'd writer), memory-mapped
// reads, and the renames of its folder protocol.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "storage/atomic_file.h"

struct evp_md_ctx_st;  // OpenSSL's EVP_MD_CTX; kept out of this header.

namespace deepnet::checkpoint {

/// Incremental SHA-256 (OpenSSL EVP). Thread-compatible.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void Update(const void* data, size_t size);
  // Lower-case hex digest of everything passed to Update(); call once.
  std::string HexDigest();

 private:
  evp_md_ctx_st* ctx_;
};

/// A new file (storage::DurableFileWriter), tracking the size and SHA-256 of what was written.
/// Close() fsyncs; destroying an unclosed writer closes the file without fsync.
/// Thread-compatible.
class DurableWriter {
 public:
  // Creates `path`, which must not exist yet (O_EXCL).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<DurableWriter>> Create(
      const std::string& path);
  ~DurableWriter();
  DurableWriter(const DurableWriter&) = delete;
  DurableWriter& operator=(const DurableWriter&) = delete;

  [[nodiscard]] absl::Status Append(const void* data, size_t size);
  // Appends zero bytes until size() is a multiple of `alignment`.
  [[nodiscard]] absl::Status PadTo(uint64_t alignment);
  // fsync + close; the writer accepts nothing afterwards.
  [[nodiscard]] absl::Status Close();

  uint64_t size() const { return file_.bytes_written(); }
  // SHA-256 of the bytes written; call once, after Close().
  std::string HexDigest() { return sha_.HexDigest(); }

 private:
  explicit DurableWriter(storage::DurableFileWriter file) : file_(std::move(file)) {}
  storage::DurableFileWriter file_;
  Sha256 sha_;
};

/// Read-only memory map of a whole file (empty files map to size() == 0). Move-only.
class MappedFile {
 public:
  [[nodiscard]] static absl::StatusOr<MappedFile> Open(const std::string& path);
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) = delete;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  MappedFile(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  const uint8_t* data_;
  size_t size_;
};

/// Writes `contents` to the new file `path` and fsyncs it; *sha256_hex gets its digest if
/// non-null.
[[nodiscard]] absl::Status WriteFileDurably(const std::string& path, absl::string_view contents,
                                            std::string* sha256_hex = nullptr);
/// rename(2) wrapper with an error naming both paths.
[[nodiscard]] absl::Status RenamePath(const std::string& from, const std::string& to);
/// Atomically swaps two existing paths (renameat2 RENAME_EXCHANGE). Unimplemented where the
/// kernel or file system lacks it; the caller then falls back to two renames.
[[nodiscard]] absl::Status ExchangePaths(const std::string& a, const std::string& b);
/// Whole file as a string; NotFound when it does not exist.
[[nodiscard]] absl::StatusOr<std::string> ReadFileToString(const std::string& path);

}  // namespace deepnet::checkpoint
