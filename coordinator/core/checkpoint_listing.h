#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
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
//
// The folder is the user's: `latest` is read with storage::ReadGuardedFile (a link, FIFO or
// device there marks nothing latest and never blocks), and the walk stops with
// RESOURCE_EXHAUSTED past `limits.max_entries` entries (size walks included) and with
// DEADLINE_EXCEEDED past `limits.deadline`, both naming the folder.
struct ListingLimits {
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  size_t max_entries = 1'000'000;
};
[[nodiscard]] absl::StatusOr<std::vector<CheckpointView>> ListCheckpointFolders(
    const std::string& dir, bool with_sizes = true, const ListingLimits& limits = {});

// The step folder name a checkpoint folder's `latest` holds, read with storage::ReadGuardedFile;
// empty when it is missing, unreadable or does not name a step folder. One open and one read of
// at most 4 KiB: cheap enough under a lock.
std::string ReadLatestPointer(const std::string& dir);

// The step of the folder `latest` names when that folder holds a complete checkpoint (its
// MANIFEST.json); nullopt otherwise. One read and one stat: what a resume starts from in the
// common case, without listing the folder.
std::optional<int64_t> LatestCompleteStep(const std::string& dir);

}  // namespace deepnet::coordinator
