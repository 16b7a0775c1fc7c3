#include "coordinator/scheduler/gang_types.h"

#include "absl/strings/str_cat.h"
#include "job/memory_estimate.h"

namespace deepnet::coordinator {

absl::string_view WorkerStateName(WorkerState state) {
  switch (state) {
    case WorkerState::kReady:
      return "ready";
    case WorkerState::kDraining:
      return "draining";
    case WorkerState::kLost:
      return "lost";
  }
  return "unknown";
}

absl::string_view PendingCodeName(PendingCode code) {
  switch (code) {
    case PendingCode::kSchedulable:
      return "schedulable";
    case PendingCode::kInsufficientSlots:
      return "insufficient_slots";
    case PendingCode::kBehindJob:
      return "behind_job";
    case PendingCode::kExceedsRegistered:
      return "exceeds_registered";
    case PendingCode::kExceedsSlotMemory:
      return "exceeds_slot_memory";
    case PendingCode::kUserRankLimit:
      return "user_rank_limit";
    case PendingCode::kTeamRankLimit:
      return "team_rank_limit";
  }
  return "unknown";
}

absl::Status Validate(const SchedulerOptions& options) {
  if (options.max_overtakes < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "scheduler.max_overtakes must be >= 0 (0 = strict order), got ", options.max_overtakes));
  }
  return absl::OkStatus();
}

absl::Status CheckMemoryFits(int64_t memory_per_rank_bytes, absl::string_view biggest_part,
                             absl::string_view summary, int64_t largest_slot_memory) {
  if (largest_slot_memory <= 0 || memory_per_rank_bytes <= largest_slot_memory) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "job spec: needs an estimated ", job::FormatBytes(memory_per_rank_bytes),
      " per rank, but the largest slot of this cluster has ", job::FormatBytes(largest_slot_memory),
      " (--cluster-slot-memory); the biggest part is ", biggest_part, ". Estimate: ", summary,
      ". Use more pipeline stages, fewer tokens per batch (data.max_tokens) or a smaller model"));
}

absl::Status CheckGangFitsCluster(int64_t pipeline_stages, int64_t data_parallel,
                                  int64_t cluster_slots) {
  if (pipeline_stages <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("parallel.pipeline_stages must be positive, got ", pipeline_stages));
  }
  if (data_parallel <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("parallel.data_parallel must be positive, got ", data_parallel));
  }
  // Compare without forming the product first, so huge sizes cannot overflow.
  if (cluster_slots <= 0 || pipeline_stages > cluster_slots / data_parallel) {
    const std::string ranks = pipeline_stages <= INT64_MAX / data_parallel
                                  ? absl::StrCat(pipeline_stages * data_parallel)
                                  : std::string("more than 2^63");
    return absl::InvalidArgumentError(
        absl::StrCat("parallel.pipeline_stages x parallel.data_parallel = ", pipeline_stages, " x ",
                     data_parallel, " = ", ranks, " ranks, but the cluster has only ",
                     cluster_slots, " slots in total (--cluster-slots): the job could never run"));
  }
  return absl::OkStatus();
}

}  // namespace deepnet::coordinator
