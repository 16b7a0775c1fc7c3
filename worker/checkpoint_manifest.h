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

namespace deepnet::worker {

inline constexpr int64_t kCheckpointFormatVersion = 1;
// Byte offset of every tensor in its file is a multiple of this.
inline constexpr int64_t kTensorAlignment = 64;
inline constexpr char kManifestFileName[] = "MANIFEST.json";
inline constexpr char kMetadataFileName[] = "metadata.json";

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
  };
  int64_t step = 0;
  std::vector<File> files;
  std::vector<Tensor> tensors;
};

/// "float32", "int64", "bfloat16", ...; nullptr for dtypes the format does not store.
const char* DtypeName(torch::ScalarType type);
std::optional<torch::ScalarType> DtypeFromName(const std::string& name);

/// "step_000000100" for 100.
std::string StepDirName(int64_t step);
/// Step of a canonical StepDirName(); nullopt for anything else (tmp folders, garbage).
std::optional<int64_t> ParseStepDirName(absl::string_view name);

/// A plain file name: non-empty, not "." or "..", no '/' or NUL.
bool IsSafeFileName(const std::string& name);

nlohmann::json ManifestToJson(const CheckpointManifest& manifest);
/// Parses MANIFEST.json text and checks it: format version, unique safe file names with
/// metadata.json among them, unique tensor names in listed files, known dtypes, nbytes equal to
/// numel * element size, aligned offsets and tensors within the listed file size. DataLoss
/// naming `path` otherwise.
absl::StatusOr<CheckpointManifest> ParseManifest(const std::string& text, const std::string& path);

}  // namespace deepnet::worker
