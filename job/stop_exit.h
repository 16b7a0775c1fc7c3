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

// deepnet-worker stopped by SIGTERM or SIGINT after a trainer it stopped ended without its state
// in a checkpoint (killed after the grace period, failed, or exit 80); 0 when every one left its
// state in a checkpoint or none ran. deploy/slurm/deepnet-service.sbatch reads it.
inline constexpr int kWorkerLostTrainerStateExitCode = 80;

// What a trainer that was asked to stop left behind (deepnet.v1.StopCheckpoint): the worker
// tells it from the exit code (StopCheckpointOf) and the coordinator words the rank's exit event
// with it. One type for both daemons; each converts it to or from the proto once at its edge
// (worker_daemon.cc sends it, coordinator/proto_convert.cc reads it).
enum class StopCheckpoint { kUnspecified, kSaved, kNotNeeded, kNotSaved };

// From a stopped trainer's ending: exit 143 saved, 79 not needed, anything else (a signal: the
// SIGKILL after the grace period) not saved.
constexpr StopCheckpoint StopCheckpointOf(int exit_code, int signal) {
  if (signal != 0) return StopCheckpoint::kNotSaved;
  if (exit_code == kStoppedCheckpointedExitCode) return StopCheckpoint::kSaved;
  if (exit_code == kStoppedNothingTrainedExitCode) return StopCheckpoint::kNotNeeded;
  return StopCheckpoint::kNotSaved;
}

}  // namespace deepnet::job
