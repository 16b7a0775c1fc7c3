#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/core/coordinator_types.h"

namespace deepnet::coordinator {

// The complete checkpoints in a job's checkpoint folder on shared storage, oldest first: the
// step_NNN sub-folders holding a MANIFEST.json (a folder is renamed to step_NNN only after its
// manifest is written, so half-written ones are step_NNN.tmp-* and skipped). `latest` marks the
// one the folder's `latest` pointer names. A folder that does not exist yet has none; one that
// cannot be read is FAILED_PRECONDITION naming it. Reads file metadata only (no LibTorch);
// `with_sizes` false leaves size_bytes 0 and reads no step folder's contents.
[[nodiscard]] absl::StatusOr<std::vector<CheckpointView>> ListCheckpointFolders(
    const std::string& dir, bool with_sizes = true);

}  // namespace deepnet::coordinator
