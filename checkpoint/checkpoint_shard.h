#pragma once

// The files of one shard of a sharded checkpoint save and their collection into a manifest at
// commit time. CheckpointStore::WriteShard / CommitShardedSave are the public entry points.

#include <torch/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "checkpoint/checkpoint_manifest.h"

namespace deepnet::checkpoint {

/// Writes `dir/shard_name` (each tensor's raw bytes at an offset aligned to kTensorAlignment)
/// and `dir/<shard_name>.index.json` (ShardIndex: the tensor table with per-tensor SHA-256, the
/// file's size and SHA-256), fsyncs both and then `dir`. Tensors may live on any device; they
/// are copied to CPU one at a time. Names must be non-empty and unique within the shard.
/// Blocks on disk I/O; safe to call concurrently for different shard names.
[[nodiscard]] absl::Status WriteShardFiles(
    const std::string& dir, const std::string& shard_name,
    const std::vector<std::pair<std::string, torch::Tensor>>& tensors);

/// Checks that `dir` holds exactly `shard_names` and their index files (NotFound naming a
/// missing shard or index, FailedPrecondition naming an unexpected file), that every index
/// parses and names its shard with the size the shard has on disk (DataLoss), and that no tensor
/// name appears in two shards (InvalidArgument naming both). Returns the manifest of `step`
/// listing the shards in the given order and their tensors, without metadata.json. Does not
/// read the shard bytes.
[[nodiscard]] absl::StatusOr<CheckpointManifest> CollectShards(
    const std::string& dir, int64_t step, const std::vector<std::string>& shard_names);

}  // namespace deepnet::checkpoint
