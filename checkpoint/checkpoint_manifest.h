#pragma once

// The on-disk format of one checkpoint folder (see CheckpointStore): folder names, dtype names
// and MANIFEST.json, with a parser that checks the manifest for internal consistency.

#include <torch/types.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace deepnet::checkpoint {

// Version 2 added a per-tensor "sha256" to MANIFEST.json (and the shard index files of a
// sharded save). Version 1 manifests are still read; their tensors are verified by the SHA-256
// of the whole file that holds them.
inline constexpr int64_t kCheckpointFormatVersion = 2;
inline constexpr int64_t kOldestReadableFormatVersion = 1;
// Byte offset of every tensor in its file is a multiple of this.
inline constexpr int64_t kTensorAlignment = 64;
inline constexpr char kMetadataFileName[] = "metadata.json";
// A sharded save writes "<shard>.index.json" next to every shard; the commit folds them into
// MANIFEST.json and deletes them.
inline constexpr char kShardIndexSuffix[] = ".index.json";

/// Contents of MANIFEST.json: every file of the folder and every tensor in them, in order.
struct CheckpointManifest {
  struct File {
    std::string name;    // Relative to the checkpoint folder; no '/'.
    int64_t size = 0;    // Bytes.
    std::string sha256;  // Lower-case hex.
  };
  struct Tensor {
    std::string name;
    std::string file;
    torch::ScalarType dtype = torch::kFloat32;
    std::vector<int64_t> shape;
    int64_t offset = 0;  // Bytes from the start of `file`.
    int64_t nbytes = 0;  // numel * element size.
    std::string sha256;  // Lower-case hex of the tensor's bytes; empty in format version 1.
  };
  int64_t format_version = kCheckpointFormatVersion;
  int64_t step = 0;
  std::vector<File> files;
  std::vector<Tensor> tensors;
};

/// "float32", "int64", "bfloat16", ...; nullptr for dtypes the format does not store.
const char* DtypeName(torch::ScalarType type);
std::optional<torch::ScalarType> DtypeFromName(const std::string& name);

/// A plain file name: non-empty, not "." or "..", no '/' or NUL.
bool IsSafeFileName(const std::string& name);
/// A safe file name that a checkpoint may use for tensors: not MANIFEST.json, metadata.json or
/// a name ending in kShardIndexSuffix.
bool IsTensorFileName(const std::string& name);

/// Contents of "<shard>.index.json": one shard file written by one rank of a sharded save.
struct ShardIndex {
  CheckpointManifest::File file;                  // The shard itself (name, size, sha256).
  std::vector<CheckpointManifest::Tensor> tensors;  // All with tensor.file == file.name.
};

nlohmann::json ManifestToJson(const CheckpointManifest& manifest);
/// Parses MANIFEST.json text and checks it: format version, unique safe file names with
/// metadata.json among them, unique tensor names in listed files, known dtypes, nbytes equal to
/// numel * element size, aligned offsets and tensors within the listed file size. DataLoss
/// naming `path` otherwise.
/// Version 1 manifests (no per-tensor sha256) are accepted; later versions are rejected as
/// written by a newer DeepNet.
absl::StatusOr<CheckpointManifest> ParseManifest(const std::string& text, const std::string& path);

nlohmann::json ShardIndexToJson(const ShardIndex& index);
/// Parses a shard index with the same checks as ParseManifest (current format version only).
/// DataLoss naming `path` otherwise.
absl::StatusOr<ShardIndex> ParseShardIndex(const std::string& text, const std::string& path);

}  // namespace deepnet::checkpoint
