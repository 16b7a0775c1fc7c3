#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "coordinator/scheduler/gang_types.h"
#include "coordinator/scheduler/worker_pool.h"

namespace deepnet::coordinator {

// Gang scheduler of the coordinator: a priority queue of jobs, each needing
// pipeline_stages x data_parallel slots at once, and the workers' slots. Schedule() places every
// gang that the head-of-line policy allows, all ranks or none; Pending() says why each queued job
// waits. Pure bookkeeping: it never blocks, does no I/O, and knows no proto or RPC.
//
// Placement: a gang is placed whenever the free slots on ready workers are at least its size
// (quality never delays a job); ranks are packed in rank order onto as few workers as possible,
// keeping a stage's data-parallel group and neighbouring stages on one worker where they fit
// (see WorkerPool::Allocate).
//
// Head-of-line policy (SchedulerOptions::max_overtakes): jobs are considered by priority, then
// submit order. With 0 (the default) order is strict: the first job that does not fit blocks all
// jobs behind it. Training jobs carry no run-time estimate, so no backfill can be shown not to
// delay the blocked job (any slot a later job takes may be one it needs when a running job ends),
// and without the block a stream of small jobs would starve a large gang forever. With k > 0 a
// later job that fits may overtake a blocked one, at most k times per blocked job; after that the
// blocked job blocks the queue until it runs: utilisation for a bounded delay. A job larger than
// all ready slots (busy or not) blocks nothing: it cannot run until workers join.
//
// Not thread-safe: owned by the coordinator's scheduler thread, which applies RPC events to it
// and calls Schedule() after each batch of them.
class GangScheduler {
 public:
  // INVALID_ARGUMENT when Validate(options) fails.
  static absl::StatusOr<std::unique_ptr<GangScheduler>> Create(const SchedulerOptions& options);

  GangScheduler(const GangScheduler&) = delete;
  GangScheduler& operator=(const GangScheduler&) = delete;

  // Registers a ready worker with all slots free (see WorkerPool::Add for errors).
  // `slot_memory` (bytes per slot; 0: unknown) bounds the jobs its slots take.
  [[nodiscard]] absl::Status AddWorker(absl::string_view worker_id, int slots,
                                       int64_t slot_memory = 0);
  // Changes a worker's state. Draining keeps its ranks and takes no new ones. Lost empties all its
  // slots and returns the placed jobs that lost ranks (by job id); those jobs keep their other
  // slots until Release(). NOT_FOUND for an unknown worker.
  [[nodiscard]] absl::StatusOr<std::vector<LostRanks>> UpdateWorkerState(
      absl::string_view worker_id, WorkerState state);
  // Forgets a worker (its slots vanish); returns the placed jobs that lost ranks, as above.
  [[nodiscard]] absl::StatusOr<std::vector<LostRanks>> RemoveWorker(absl::string_view worker_id);

  // Queues a job. INVALID_ARGUMENT naming the field for an empty job_id or a non-positive or
  // oversized parallel.pipeline_stages / parallel.data_parallel; ALREADY_EXISTS when the job is
  // queued or placed. A job larger than all ready workers is queued (workers may join; its
  // pending code is kExceedsRegistered); only a configured cluster bound may reject it at submit
  // time (CheckGangFitsCluster).
  [[nodiscard]] absl::Status Enqueue(const GangRequest& request);
  // Removes a queued job. NOT_FOUND if it is not queued (FAILED_PRECONDITION if it is placed:
  // stop its ranks, then Release it).
  [[nodiscard]] absl::Status Cancel(absl::string_view job_id);
  // Frees every slot of a placed job (finished, failed, cancelled or lost ranks). NOT_FOUND if
  // the job is not placed.
  [[nodiscard]] absl::Status Release(absl::string_view job_id);

  // Re-adopts a running job after a coordinator restart, so its ranks keep running: holds exactly
  // the slots in `placement` (all or none). INVALID_ARGUMENT naming the rank for a rank count
  // other than pipeline_stages x data_parallel, an unknown or lost worker, or a slot out of range,
  // held, or listed twice; ALREADY_EXISTS when the job is queued or placed.
  [[nodiscard]] absl::Status RestorePlacement(const Placement& placement);

  // Replaces the fair-sharing caps (see RankCap); the coordinator sets them, with the ranks each
  // account holds, before every Schedule() and Pending(). Default: no caps.
  void SetRankCaps(RankCaps caps) { caps_ = std::move(caps); }

  // Places queued gangs in queue order as the head-of-line policy allows; returns the new
  // placements in the order they were made. Cost: O(jobs visited) plus O(k log W) per placement,
  // plus O(W) once per pass for slot memory and O(W) per job that some ready slots are too small
  // for.
  [[nodiscard]] std::vector<Placement> Schedule();
  // Every queued job, in scheduling order, with the reason it is not placed. Computed from the
  // current state as if Schedule() ran now (kSchedulable: the next Schedule() places it). O(jobs).
  std::vector<PendingJob> Pending() const;

  std::optional<Placement> FindPlacement(absl::string_view job_id) const;
  std::optional<WorkerInfo> FindWorker(absl::string_view worker_id) const {
    return pool_.Find(worker_id);
  }
  std::vector<WorkerInfo> Workers() const { return pool_.List(); }
  size_t queued_jobs() const { return queue_.size(); }
  size_t placed_jobs() const { return placed_.size(); }
  // Free slots on ready workers; all slots on ready workers.
  int64_t free_slots() const { return pool_.free_slots(); }
  int64_t ready_slots() const { return pool_.ready_slots(); }

 private:
  // Scheduling order: priority descending, then submit_seq, then job id.
  struct QueueKey {
    int neg_priority = 0;
    uint64_t submit_seq = 0;
    std::string job_id;
    bool operator<(const QueueKey& o) const {
      return std::tie(neg_priority, submit_seq, job_id) <
             std::tie(o.neg_priority, o.submit_seq, o.job_id);
    }
  };
  struct Queued {
    GangRequest request;
    int64_t ranks = 0;  // pipeline_stages * data_parallel.
    int overtakes = 0;  // Times a later job was placed while this one did not fit.
  };
  using Queue = std::map<QueueKey, Queued>;
  struct Placed {
    Placement placement;
    std::vector<SlotRef> slots;  // [global rank]; worker -1 once the rank was lost.
  };
  enum class Verdict { kPlace, kInsufficient, kBehind, kExceeds, kExceedsMemory, kUserCap, kTeamCap };
  // Result of one decision pass, for Schedule() to commit.
  struct PassResult {
    std::vector<const Queued*> placed;
    std::vector<std::pair<const Queued*, int>> overtaken;  // Blocked job, overtakes to add.
  };

  explicit GangScheduler(const SchedulerOptions& options) : options_(options) {}

  // The one decision procedure behind Schedule() and Pending(): walks the queue in order with a
  // simulated free-slot count (a gang fits iff its size <= free slots, so the simulation is
  // exact) and reports each job's verdict through on_job(job, verdict, blocker, free, held),
  // `held` being the capped account's ranks for kUserCap / kTeamCap (with the jobs this pass
  // placed before). With stop_early it stops once nothing behind can be placed.
  template <typename OnJob>
  PassResult Pass(bool stop_early, OnJob&& on_job) const;
  // The texts that the reasons of one Pending() pass share, each made once per distinct input
  // instead of once per queued job: the cluster's line for a free-slot count (most of a queue
  // sees the same count) and the gang's line for a job shape (queues hold runs of one shape).
  struct ReasonTexts {
    int64_t free = -1;
    std::string cluster;
    int64_t stages = -1;
    int64_t replicas = -1;
    std::string gang;
  };
  std::string Reason(const Queued& job, Verdict verdict, const Queued* blocker, int64_t free,
                     int64_t held, ReasonTexts* texts) const;
  // "2 workers ready with 4 slots, 3 free (1 draining, 0 lost)", with `free` as given.
  std::string ClusterText(int64_t free) const;
  // ClusterText(free), made once per pass for each run of jobs that see the same `free`.
  const std::string& ClusterTextOf(int64_t free, ReasonTexts* texts) const;
  // Id and sizes valid and the id unused (the checks Enqueue and RestorePlacement share).
  [[nodiscard]] absl::Status CheckRequest(const GangRequest& request) const;
  std::vector<LostRanks> MarkLost(const std::vector<WorkerPool::SlotOwner>& owners);

  const SchedulerOptions options_;
  RankCaps caps_;
  WorkerPool pool_;
  Queue queue_;
  absl::flat_hash_map<std::string, Queue::iterator> queued_by_id_;
  absl::flat_hash_map<WorkerPool::JobHandle, Placed> placed_;
  absl::flat_hash_map<std::string, WorkerPool::JobHandle> placed_by_id_;
  WorkerPool::JobHandle next_handle_ = 1;
};

}  // namespace deepnet::coordinator
