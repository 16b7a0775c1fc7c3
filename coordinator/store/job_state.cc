#include "coordinator/store/job_state.h"

#include "absl/strings/str_cat.h"

namespace deepnet::coordinator {
namespace {

using S = JobState;

// The one transition table. Reasons for the less obvious rows:
// - PLACING -> QUEUED: the placement was undone (a reserved worker vanished before start).
// - STARTING -> RECOVERING: a trainer died or a worker was lost while the gang was starting.
// - STARTING -> FAILED: the trainers rejected the job in a way a restart cannot fix.
// - RECOVERING -> PLACING: restart from the latest good checkpoint (counts against
//   max_restarts, except after WORKER_DRAINED; the store refuses it once they are used up).
// - RECOVERING -> FAILED: max_restarts exhausted.
// - Every non-terminal state -> CANCELLED.
constexpr std::pair<JobState, JobState> kJobTransitions[] = {
    {S::kQueued, S::kPlacing},         {S::kQueued, S::kCancelled},
    {S::kPlacing, S::kStarting},       {S::kPlacing, S::kQueued},
    {S::kPlacing, S::kCancelled},      {S::kStarting, S::kRunning},
    {S::kStarting, S::kRecovering},    {S::kStarting, S::kFailed},
    {S::kStarting, S::kCancelled},     {S::kRunning, S::kSucceeded},
    {S::kRunning, S::kFailed},         {S::kRunning, S::kCancelled},
    {S::kRunning, S::kRecovering},     {S::kRecovering, S::kPlacing},
    {S::kRecovering, S::kFailed},      {S::kRecovering, S::kCancelled},
};

}  // namespace

const std::vector<JobState>& AllJobStates() {
  static const auto* const kStates = new std::vector<JobState>{
      S::kQueued,     S::kPlacing,   S::kStarting, S::kRunning,
      S::kRecovering, S::kSucceeded, S::kFailed,   S::kCancelled};
  return *kStates;
}

const std::vector<std::pair<JobState, JobState>>& AllowedJobTransitions() {
  static const auto* const kTable = new std::vector<std::pair<JobState, JobState>>(
      std::begin(kJobTransitions), std::end(kJobTransitions));
  return *kTable;
}

absl::Status CheckTransition(JobState from, JobState to) {
  for (const auto& [allowed_from, allowed_to] : kJobTransitions) {
    if (allowed_from == from && allowed_to == to) return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat("job state transition ", ToString(from),
                                                    " -> ", ToString(to), " is not allowed"));
}

absl::string_view ToString(JobState state) {
  switch (state) {
    case S::kQueued: return "QUEUED";
    case S::kPlacing: return "PLACING";
    case S::kStarting: return "STARTING";
    case S::kRunning: return "RUNNING";
    case S::kRecovering: return "RECOVERING";
    case S::kSucceeded: return "SUCCEEDED";
    case S::kFailed: return "FAILED";
    case S::kCancelled: return "CANCELLED";
  }
  return "UNKNOWN_STATE";
}

absl::string_view ToString(RecoveryCause cause) {
  switch (cause) {
    case RecoveryCause::kWorkerExit: return "WORKER_EXIT";
    case RecoveryCause::kWorkerLost: return "WORKER_LOST";
    case RecoveryCause::kHang: return "HANG";
    case RecoveryCause::kStartTimeout: return "START_TIMEOUT";
    case RecoveryCause::kWorkerDrained:
      return "WORKER_DRAINED";
    case RecoveryCause::kPlacementRefused:
      return "PLACEMENT_REFUSED";
  }
  return "UNKNOWN_CAUSE";
}

absl::StatusOr<JobState> ParseJobState(absl::string_view text) {
  for (JobState state : AllJobStates()) {
    if (ToString(state) == text) return state;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown job state '", text, "'"));
}

absl::StatusOr<RecoveryCause> ParseRecoveryCause(absl::string_view text) {
  for (RecoveryCause cause :
       {RecoveryCause::kWorkerExit, RecoveryCause::kWorkerLost, RecoveryCause::kHang,
        RecoveryCause::kStartTimeout, RecoveryCause::kWorkerDrained,
        RecoveryCause::kPlacementRefused}) {
    if (ToString(cause) == text) return cause;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown recovery cause '", text, "'"));
}

}  // namespace deepnet::coordinator
