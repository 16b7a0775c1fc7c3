#pragma once

// Reading a file that a user controls (anything on the shared storage: a checkpoint folder's
// `latest`, its FENCE, a shard folder's shards.json) without letting it hurt the reader. A plain
// std::ifstream follows a symbolic link to /dev/zero and reads until memory runs out, and blocks
// forever on a FIFO; a daemon that does so under its lock stops serving everyone.
//
// ReadGuardedFile opens with O_NOFOLLOW | O_NONBLOCK (a link at the last component is refused, a
// FIFO or device never blocks the open), checks with fstat that it holds a regular file, and
// reads at most `max_bytes` (a file that is, or grows, larger is refused, not truncated).
// Folders above the last component are the storage policy's business (storage_policy.h).

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"

namespace deepnet::storage {

/// The whole content of the regular file `path`, at most `max_bytes` long. Errors name the path:
/// NotFound when it does not exist; FailedPrecondition when it is a symbolic link, not a regular
/// file (folder, FIFO, device, socket) or larger than `max_bytes`; the errno's status for the
/// rest (EACCES: PermissionDenied). Thread-safe; never blocks on the file's kind.
absl::StatusOr<std::string> ReadGuardedFile(const std::string& path, size_t max_bytes);

}  // namespace deepnet::storage
