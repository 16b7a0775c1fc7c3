#pragma once

// Writing files on shared storage so that a crash at any point leaves either nothing, the old
// file, or the complete new one, and so that what a call reported written survives power
// loss. The one implementation of fsync'd writes in the project: data/ writes its corpora,
// shards and SentencePiece models with AtomicFileWriter, checkpoint/ its tensor files with
// DurableFileWriter inside a folder it renames into place, the coordinator fsyncs its
// database's folder with FsyncFolder.

#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace deepnet::storage {

/// A new file written once, front to back, and fsynced by Close(): for files inside a folder
/// that is itself renamed into place once complete (a checkpoint's step folder). Errors name
/// the path. Not thread-safe; blocks on I/O.
class DurableFileWriter {
 public:
  // Creates `path` (mode 0644), which must not exist yet (O_EXCL).
  [[nodiscard]] static absl::StatusOr<DurableFileWriter> Create(const std::string& path);

  DurableFileWriter(DurableFileWriter&& other) noexcept;
  DurableFileWriter& operator=(DurableFileWriter&&) = delete;
  DurableFileWriter(const DurableFileWriter&) = delete;
  DurableFileWriter& operator=(const DurableFileWriter&) = delete;
  // Closes an unclosed file without fsync; the file stays (the caller's protocol removes it).
  ~DurableFileWriter();

  // Buffered append; a failure (e.g. ENOSPC) is reported here or by Close().
  [[nodiscard]] absl::Status Append(std::string_view bytes);
  // Appends zero bytes until the file size is a multiple of `alignment`.
  [[nodiscard]] absl::Status PadTo(size_t alignment);
  // Flushes, fsyncs and closes; accepts nothing afterwards. Call at most once.
  [[nodiscard]] absl::Status Close();

  size_t bytes_written() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  friend class AtomicFileWriter;
  DurableFileWriter(std::string path, std::FILE* file) : path_(std::move(path)), file_(file) {}
  // Wraps an open descriptor; closes it on failure.
  static absl::StatusOr<DurableFileWriter> Adopt(int fd, std::string path);
  absl::Status Error(int error, const std::string& what) const;

  std::string path_;
  std::FILE* file_ = nullptr;  // Null once closed or moved from.
  size_t size_ = 0;
};

/// Replaces (or creates) a file so that readers see either the old file or the complete new
/// one: bytes go to a temporary file beside `path`, which Commit() fsyncs and renames over
/// `path`, then fsyncs the folder. Destroying an uncommitted writer removes the temporary file.
/// Not thread-safe; blocks on I/O.
class AtomicFileWriter {
 public:
  // The temporary file is `path` + `tmp_suffix` when a suffix is given (a stale one left by an
  // earlier crash of the same owner is replaced), else a unique `path`.tmp.XXXXXX.
  [[nodiscard]] static absl::StatusOr<AtomicFileWriter> Create(const std::string& path,
                                                               const std::string& tmp_suffix = "");

  // Leaves `other` committed-like: its destructor removes nothing.
  AtomicFileWriter(AtomicFileWriter&& other) noexcept;
  AtomicFileWriter& operator=(AtomicFileWriter&&) = delete;
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  ~AtomicFileWriter();

  [[nodiscard]] absl::Status Append(std::string_view bytes) { return file_->Append(bytes); }
  [[nodiscard]] absl::Status PadTo(size_t alignment) { return file_->PadTo(alignment); }
  size_t bytes_written() const { return file_->bytes_written(); }
  // Fsyncs, renames onto the final path and fsyncs the folder. Call at most once.
  [[nodiscard]] absl::Status Commit();

 private:
  AtomicFileWriter(std::string path, DurableFileWriter file)
      : path_(std::move(path)), file_(std::move(file)) {}

  std::string path_;
  std::optional<DurableFileWriter> file_;  // Empty once committed.
};

/// AtomicFileWriter in one call.
[[nodiscard]] absl::Status WriteFileAtomically(const std::string& path, std::string_view bytes,
                                               const std::string& tmp_suffix = "");

/// fsyncs a folder so that entries created, renamed or removed in it survive a crash.
[[nodiscard]] absl::Status FsyncFolder(const std::string& path);
/// FsyncFolder of the folder holding `path` ("." for a bare name).
[[nodiscard]] absl::Status FsyncParentFolder(const std::string& path);

}  // namespace deepnet::storage
