#pragma once

// Domain types of the gang scheduler: plain structs, no proto, no LibTorch. The coordinator's
// service boundary converts JobSpec / worker registrations into these.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace deepnet::coordinator {

enum class WorkerState {
  kReady,     // Takes new placements.
  kDraining,  // Keeps its running ranks, takes no new placements.
  kLost,      // Gone (missed heartbeats); its slots count for nothing until it is ready again.
};
absl::string_view WorkerStateName(WorkerState state);

// A worker daemon as the scheduler sees it.
struct WorkerInfo {
  // Registered worker id; unique, never empty.
  std::string id;
  // Device slots: GPUs, or CPU slots on a worker without GPUs. Always > 0.
  int slots = 0;
  // Slots no placed job holds; 0 while the worker is lost.
  int free_slots = 0;
  WorkerState state = WorkerState::kReady;
  // Memory each slot offers one rank, in bytes; 0: unknown.
  int64_t slot_memory = 0;
};

// One job waiting for a gang of pipeline_stages x data_parallel slots.
struct GangRequest {
  // Job id; unique among queued and placed jobs.
  std::string job_id;
  // Higher runs first; 0 is the ordinary class, negative values are allowed.
  int priority = 0;
  // Submission order, FIFO within one priority (smaller first). Comes from the job store so the
  // order survives a coordinator restart; ties are broken by job_id.
  uint64_t submit_seq = 0;
  // parallel.pipeline_stages: P, > 0.
  int64_t pipeline_stages = 1;
  // parallel.data_parallel: D, > 0. Ranks of one stage (a data-parallel group) are consecutive.
  int64_t data_parallel = 1;
  // Accounts the job's ranks are charged to for RankCaps: its owner, and its scheduling.team
  // (empty: none).
  std::string user;
  std::string team;
  // Estimated memory one rank needs (job/memory_estimate.h), in bytes; 0: not known. Ranks are
  // placed only on slots that advertise at least this much (or an unknown amount).
  int64_t memory_per_rank_bytes = 0;
  // The estimate's largest part ("activations", ...), for the pending reason.
  std::string memory_biggest_part;
};

// Where one rank runs.
struct RankSlot {
  // Worker id; empty when the rank's worker was lost or removed after placement.
  std::string worker_id;
  // Slot index on that worker, in [0, slots); -1 when the rank was lost.
  int slot = -1;
};

// A placed gang: one slot per rank, all placed in the same scheduling decision.
struct Placement {
  std::string job_id;
  int64_t pipeline_stages = 1;
  int64_t data_parallel = 1;
  // [global rank], rank = stage * data_parallel + replica; size pipeline_stages * data_parallel.
  std::vector<RankSlot> ranks;
};

// A placed job that lost ranks because a worker was lost or removed. The job keeps its other
// slots until the coordinator has stopped those ranks and calls GangScheduler::Release.
struct LostRanks {
  std::string job_id;
  // Global ranks that ran on the lost worker, ascending.
  std::vector<int> ranks;
};

// Why a queued job is not placed: a bounded code (API enum, metric label) next to the text.
enum class PendingCode {
  kSchedulable,        // Fits now; the next Schedule() places it.
  kInsufficientSlots,  // Fewer free slots on ready workers than the gang needs.
  kBehindJob,          // Would fit, but holds back for an earlier job (head-of-line policy).
  kExceedsRegistered,  // Needs more slots than all ready workers have, busy or not: it waits
                       // for workers to join (or come back).
  kExceedsSlotMemory,  // Needs more memory per rank than any ready worker's slots advertise.
  kUserRankLimit,      // Its owner's running ranks would exceed their max_running_ranks: waits
                       // for their other jobs to end, without holding back other users' jobs.
  kTeamRankLimit,      // The same for the team of its scheduling.team.
};
// "schedulable", "insufficient_slots", "behind_job", "exceeds_registered",
// "exceeds_slot_memory", "user_rank_limit", "team_rank_limit" (the metric label).
absl::string_view PendingCodeName(PendingCode code);
inline constexpr PendingCode kAllPendingCodes[] = {
    PendingCode::kSchedulable,       PendingCode::kInsufficientSlots, PendingCode::kBehindJob,
    PendingCode::kExceedsRegistered, PendingCode::kExceedsSlotMemory, PendingCode::kUserRankLimit,
    PendingCode::kTeamRankLimit};

// Why a queued job is not running, for GetJob/ListJobs and the pending-jobs metric.
struct PendingJob {
  std::string job_id;
  // 0-based position in scheduling order (priority, then submit_seq).
  int queue_position = 0;
  PendingCode code = PendingCode::kSchedulable;
  // Human-readable, saying what the job waits for first, e.g. "waiting for free slots: needs
  // 128 slots (16 pipeline stages x 8 data-parallel); 16 workers ready with 128 slots, 96 free
  // (largest free worker has 8)".
  std::string reason;
  // For kBehindJob: the job it waits for; empty otherwise.
  std::string blocking_job_id;
};

// Fair-sharing caps on the ranks the placed jobs of one account (a user or a team) may hold at
// once (GangScheduler::SetRankCaps). A queued job whose placement would take an account over its
// cap is skipped: it neither is placed nor holds back the jobs behind it.
struct RankCap {
  int64_t max_ranks = 0;
  int64_t held = 0;    // ranks its jobs hold now (placed, or reattaching after a restart)
  std::string origin;  // where max_ranks comes from, e.g. "users.alice.max_running_ranks"
};
struct RankCaps {
  std::map<std::string, RankCap> users;  // by user; absent: no cap
  std::map<std::string, RankCap> teams;  // by team; absent: no cap
};

struct SchedulerOptions {
  // Head-of-line policy: how many times a queued job that does not fit may be overtaken by jobs
  // behind it that do (backfilling) before it blocks the rest of the queue. 0 is strict
  // priority/FIFO order: the first job that does not fit blocks every job behind it.
  int max_overtakes = 0;
};
[[nodiscard]] absl::Status Validate(const SchedulerOptions& options);

// Submit-time check against a configured cluster size (the coordinator's --cluster-slots): OK
// when a gang of pipeline_stages x data_parallel ranks could ever run on a cluster of
// cluster_slots slots; INVALID_ARGUMENT naming parallel.pipeline_stages and
// parallel.data_parallel when a size is not positive or the gang is larger than the cluster.
// Never use the slots registered at the moment: workers come and go, and a job larger than
// them waits in the queue (PendingCode::kExceedsRegistered).
// Submit-time check of a job's estimated memory per rank against the largest slot the cluster
// can ever have (the coordinator's --cluster-slot-memory; 0: no bound, always OK).
// FAILED_PRECONDITION naming the estimate, the largest slot and the biggest part of the estimate
// otherwise: the spec is valid, but no slot of this cluster could hold one rank of it.
[[nodiscard]] absl::Status CheckMemoryFits(int64_t memory_per_rank_bytes,
                                           absl::string_view biggest_part,
                                           absl::string_view summary, int64_t largest_slot_memory);

[[nodiscard]] absl::Status CheckGangFitsCluster(int64_t pipeline_stages, int64_t data_parallel,
                                                int64_t cluster_slots);

}  // namespace deepnet::coordinator
