#pragma once

#include <cstdio>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"

namespace deepnet::data {

/// Writes a file so that readers see either the old file or the complete new one: bytes go to
/// a temporary file beside `path`, which Commit() fsyncs and renames over `path` (then fsyncs
/// the folder). Destroying an uncommitted writer removes the temporary file.
/// Not thread-safe; blocks on I/O.
class AtomicFileWriter {
 public:
  // Creates the temporary file in path's folder (mode 0644). Errors name the path.
  [[nodiscard]] static absl::StatusOr<AtomicFileWriter> Create(const std::string& path);

  AtomicFileWriter(AtomicFileWriter&& other) noexcept;
  AtomicFileWriter& operator=(AtomicFileWriter&&) = delete;
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  ~AtomicFileWriter();

  // Buffered append; a failure (e.g. ENOSPC) is reported here or by Commit().
  [[nodiscard]] absl::Status Append(std::string_view bytes);
  // Appends zero bytes until the file size is a multiple of `alignment`.
  [[nodiscard]] absl::Status PadTo(size_t alignment);
  size_t bytes_written() const { return size_; }
  // Flushes, fsyncs, renames onto the final path and fsyncs the folder. Call at most once.
  [[nodiscard]] absl::Status Commit();

 private:
  AtomicFileWriter(std::string path, std::string tmp_path, std::FILE* file)
      : path_(std::move(path)), tmp_path_(std::move(tmp_path)), file_(file) {}
  absl::Status Error(int error, const std::string& what) const;

  std::string path_;
  std::string tmp_path_;
  std::FILE* file_ = nullptr;  // Null once committed or moved from.
  size_t size_ = 0;
};

/// Convenience: AtomicFileWriter with one Append.
[[nodiscard]] absl::Status WriteFileAtomically(const std::string& path, std::string_view bytes);

}  // namespace deepnet::data
