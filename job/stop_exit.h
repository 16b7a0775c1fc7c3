#pragma once
// Exit codes of `deepnet train` stopped by SIGTERM or SIGINT (Slurm's time limit or scancel,
// Kubernetes eviction, deepnet-worker shutting down or cancelling). Scripts and the worker tell
// the endings apart by them; docs/OPERATIONS.md "Stopping a worker / a trainer".

namespace deepnet::job {

// Stopped; the state it stopped in is in a checkpoint: written at the stop, or already there
// (nothing trained since the checkpoint it resumed from or last wrote). 128 + SIGTERM.
inline constexpr int kStoppedCheckpointedExitCode = 143;
// Stopped during start-up or before its first step with no checkpoint loaded: nothing was
// trained, so no checkpoint was written (none was needed) and nothing is lost.
inline constexpr int kStoppedNothingTrainedExitCode = 79;
// Stopped after training steps that no checkpoint holds, because checkpoint.dir is not set:
// those steps are lost.
inline constexpr int kStoppedUnsavedExitCode = 80;

}  // namespace deepnet::job
