#pragma once

#include <torch/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "checkpoint/checkpoint_manifest.h"

namespace deepnet::checkpoint {

/// Reads selected tensors of one completed checkpoint folder without loading the rest, so that
/// a stage of a pipeline (or a different parallel layout than the one that saved) takes only
/// the global parameter names it owns. Every tensor read is verified against the SHA-256 the
/// manifest records for it (format version 1 folders: the SHA-256 of the whole file holding
/// it, checked once per file). Safe for concurrent use.
class CheckpointReader {
 public:
  // Parses and checks MANIFEST.json and metadata.json (size, SHA-256, JSON object whose "step"
  // matches the manifest and a step_N folder name) of `path`; does not touch tensor bytes.
  // NotFound naming MANIFEST.json or metadata.json when missing, DataLoss naming the file when
  // malformed or inconsistent.
  static absl::StatusOr<std::unique_ptr<CheckpointReader>> Open(const std::string& path);

  int64_t step() const { return manifest_.step; }
  // The metadata saved with the checkpoint, without "step" (see step()).
  const nlohmann::json& metadata() const { return metadata_; }
  const std::string& path() const { return path_; }
  const CheckpointManifest& manifest() const { return manifest_; }

  bool Has(const std::string& name) const { return index_.count(name) != 0; }
  // Every tensor name in manifest order.
  std::vector<std::string> TensorNames() const;

  // Reads one tensor (pread at its offset), verifies its SHA-256 and returns a CPU tensor of the
  // stored dtype and shape that owns its memory. NotFound when the checkpoint has no such
  // tensor; DataLoss naming the file, the tensor and "checksum mismatch" or "truncated".
  [[nodiscard]] absl::StatusOr<torch::Tensor> Read(const std::string& name) const;
  // Read() of each name, in the order given; fails on the first error.
  [[nodiscard]] absl::StatusOr<std::vector<std::pair<std::string, torch::Tensor>>> ReadMany(
      const std::vector<std::string>& names) const;

 private:
  CheckpointReader() = default;
  // Format version 1: checks size and SHA-256 of the whole `file` once.
  absl::Status VerifyWholeFile(const CheckpointManifest::File& file) const;

  std::string path_;
  CheckpointManifest manifest_;
  nlohmann::json metadata_;
  std::map<std::string, size_t> index_;  // tensor name -> manifest_.tensors index
  std::map<std::string, size_t> files_;  // file name -> manifest_.files index
  mutable std::mutex mu_;
  mutable std::set<std::string> verified_files_;  // Guarded by mu_; format version 1 only.
};

}  // namespace deepnet::checkpoint
