#pragma once

#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace deepnet::coordinator {

// The life of a job. Allowed moves between states are listed once, in kJobTransitions
// (job_state.cc); everything else is rejected by CheckTransition.
enum class JobState {
  kQueued,      // Waiting for the scheduler; JobRecord::state_reason says why.
  kPlacing,     // The scheduler is reserving slots for every rank (gang placement).
  kStarting,    // Workers are spawning trainers; ranks meet at the rendezvous store.
  kRunning,     // Every rank is training.
  kRecovering,  // A rank failed (RecoveryCause); the rest are being stopped.
  kSucceeded,   // Terminal.
  kFailed,      // Terminal.
  kCancelled,   // Terminal.
};

// Why a job entered kRecovering.
enum class RecoveryCause {
  kWorkerExit,    // A trainer process exited non-zero or was killed.
  kWorkerLost,    // A worker daemon missed its heartbeats.
  kHang,          // No training progress for the configured time.
  kStartTimeout,  // The ranks did not all start and meet at the rendezvous in time.
  // A worker holding ranks is shutting down (it said so: WorkerDraining); its ranks were
  // stopped to checkpoint. The restart does not count against max_restarts.
  kWorkerDrained,
  // A worker refused the placement for a reason that passes (a slot still stopping the previous
  // trainer, a failed fork): the job is placed again after a backoff; not counted either.
  kPlacementRefused,
};

// Whether a restart after `cause` uses one of the job's max_restarts (a job whose cause is
// unknown counts it). A worker that shut down is no failure of the job.
inline bool CountsAgainstMaxRestarts(std::optional<RecoveryCause> cause) {
  return cause != RecoveryCause::kWorkerDrained && cause != RecoveryCause::kPlacementRefused;
}

// Every state, in declaration order.
const std::vector<JobState>& AllJobStates();

// The transition table: every allowed (from, to) pair.
const std::vector<std::pair<JobState, JobState>>& AllowedJobTransitions();

// OK if (from, to) is in the table; otherwise FAILED_PRECONDITION naming both states.
[[nodiscard]] absl::Status CheckTransition(JobState from, JobState to);

// True for kSucceeded, kFailed and kCancelled: no transition leaves them. Inline: the control
// loop asks it of every job at every tick.
constexpr bool IsTerminal(JobState state) {
  return state == JobState::kSucceeded || state == JobState::kFailed ||
         state == JobState::kCancelled;
}

// "QUEUED", "PLACING", ... (the names used in the API, the store and the logs).
absl::string_view ToString(JobState state);
// "WORKER_EXIT", "WORKER_LOST", "HANG", "START_TIMEOUT", "WORKER_DRAINED", "PLACEMENT_REFUSED".
absl::string_view ToString(RecoveryCause cause);

// Inverse of ToString; exact, upper-case names. INVALID_ARGUMENT naming the text otherwise.
[[nodiscard]] absl::StatusOr<JobState> ParseJobState(absl::string_view text);
[[nodiscard]] absl::StatusOr<RecoveryCause> ParseRecoveryCause(absl::string_view text);

}  // namespace deepnet::coordinator
