#pragma once

#include <torch/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace deepnet::worker {

/// What a checkpoint holds: tensors grouped into files, plus JSON metadata (step, data
/// cursor, schedule, configuration...). Tensor names are global (`encoder.layers.3.fc1.weight`,
/// `optim.exp_avg.encoder.layers.3.fc1.weight`), so a checkpoint does not depend on how the
/// model was split. Tensors are stored as raw little-endian bytes; any dtype, any shape.
struct Checkpoint {
  int64_t step = 0;
  // file name (e.g. "model.bin", "optimizer.bin") -> ordered (name, tensor) pairs.
  std::map<std::string, std::vector<std::pair<std::string, torch::Tensor>>> files;
  nlohmann::json metadata = nlohmann::json::object();

  // Finds a tensor by name in any file; undefined tensor when absent.
  torch::Tensor Find(const std::string& name) const;
};

struct CheckpointStoreOptions {
  // Folder holding step_NNNNNNNNN/ sub-folders and the `latest` pointer; created if missing.
  std::string dir;
  // Completed checkpoints to keep; older ones are deleted after a successful save. 0 keeps all.
  int keep_last = 3;
};

/// Summary of one checkpoint folder found on disk.
struct CheckpointInfo {
  int64_t step = 0;
  std::string path;
};

/// Writes and reads checkpoints atomically under one folder:
///   dir/step_000000100.tmp-<pid>/ is written (every file fsynced, then MANIFEST.json with the
///   SHA-256, size and tensor table of every file, fsynced), renamed to dir/step_000000100/,
///   the folder fsynced, then dir/latest (text: the folder name) is replaced atomically via a
///   temporary file and rename. A reader verifies sizes and SHA-256 of every file against the
///   manifest; a torn or corrupted checkpoint is rejected with an error naming the file, and
///   LoadLatest falls back to the newest older checkpoint that verifies.
/// Thread-compatible: one writer at a time.
class CheckpointStore {
 public:
  static absl::StatusOr<std::unique_ptr<CheckpointStore>> Open(const CheckpointStoreOptions& options);

  // Saves `checkpoint` (tensors may live on any device; they are copied to CPU).
  // Returns the final folder path.
  [[nodiscard]] absl::StatusOr<std::string> Save(const Checkpoint& checkpoint);

  // Loads the checkpoint `latest` names; when it fails verification, the newest older one that
  // verifies. NotFound when there is none. Each rejected checkpoint adds a message (naming
  // the file and reason) to *rejected if non-null.
  [[nodiscard]] absl::StatusOr<Checkpoint> LoadLatest(std::vector<std::string>* rejected = nullptr) const;

  // Loads and verifies one checkpoint folder.
  [[nodiscard]] static absl::StatusOr<Checkpoint> Load(const std::string& path);

  // Completed checkpoint folders, oldest first (temporary folders are ignored).
  std::vector<CheckpointInfo> List() const;

  const std::string& dir() const { return options_.dir; }

 private:
  explicit CheckpointStore(const CheckpointStoreOptions& options) : options_(options) {}
  CheckpointStoreOptions options_;
};

/// Hex SHA-256 of a file's contents (streamed).
absl::StatusOr<std::string> Sha256File(const std::string& path);
/// Hex SHA-256 of a byte buffer.
std::string Sha256Hex(const void* data, size_t size);

}  // namespace deepnet::worker
