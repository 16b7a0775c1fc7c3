#pragma once
// Keeping the worker daemon's credential from its trainers. Torch-free.

#include "absl/status/status.h"

namespace deepnet::worker {

// Makes this process non-dumpable (prctl PR_SET_DUMPABLE 0) and removes DEEPNET_TOKEN and
// DEEPNET_TOKEN_FILE from its environment, once the token has been read. A non-dumpable
// process's /proc/PID files belong to root and it cannot be ptrace'd by its own uid, so trainers
// that run as the daemon's own account (a non-root daemon, such as the Kubernetes example's)
// cannot read its environment, memory or descriptors: the worker token stays with the daemon.
// Trainers are dumpable again (execve resets the flag). It also means no core dump of the
// daemon. INTERNAL when prctl fails.
[[nodiscard]] absl::Status KeepSecretsFromTrainers();

}  // namespace deepnet::worker
