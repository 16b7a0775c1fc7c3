#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "coordinator/scheduler/gang_types.h"

namespace deepnet::coordinator {

// A slot inside WorkerPool: dense worker index and slot index on that worker.
struct SlotRef {
  int worker = -1;
  int slot = -1;
};

// The workers, their slots and which job rank holds each slot. Ready workers with free slots are
// kept in a set ordered by free slots, so a gang of n ranks is placed in O(k log W) for k workers
// used out of W, plus O(slots) per worker used to pick slot indices; no scan over all workers.
// Not thread-safe: owned by GangScheduler, and so by the coordinator's scheduler thread.
class WorkerPool {
 public:
  // Names a placed job inside the pool; 0 never names a job.
  using JobHandle = uint64_t;
  struct SlotOwner {
    JobHandle job = 0;
    int rank = -1;
  };

  // Registers a ready worker with all slots free. ALREADY_EXISTS for a known id,
  // INVALID_ARGUMENT for an empty id or slots outside [1, 65536].
  // `slot_memory` is the memory each of its slots offers one rank, in bytes; 0: unknown (holds
  // any job).
  [[nodiscard]] absl::Status Add(absl::string_view id, int slots, int64_t slot_memory = 0);
  // Changes a worker's state. On a change to lost, every slot is emptied and the ranks that held
  // them are returned; a lost worker that becomes ready or draining again has all slots free.
  [[nodiscard]] absl::StatusOr<std::vector<SlotOwner>> SetState(absl::string_view id,
                                                                WorkerState state);
  // Forgets a worker; returns the ranks that held its slots. NOT_FOUND for an unknown id.
  [[nodiscard]] absl::StatusOr<std::vector<SlotOwner>> Remove(absl::string_view id);

  // Places pipeline_stages x data_parallel ranks of `job`; returns [global rank] -> slot.
  // Precondition: pipeline_stages * data_parallel <= free_slots() (placement then cannot fail).
  // Packs ranks in rank order onto as few workers as it can: first whole data-parallel groups
  // (consecutive stages together, largest-free worker first, best fit for the tail, fewest
  // leftover slots among equals), then the remaining ranks split across workers the same way.
  // With min_memory > 0 only workers whose slots offer at least that much (or an unknown amount)
  // are used; the precondition then counts those (EligibleSlots).
  std::vector<SlotRef> Allocate(JobHandle job, int pipeline_stages, int data_parallel,
                                int64_t min_memory = 0);
  // Gives `job` exactly the listed slots ([global rank] -> worker id and slot), all or none: for a
  // restarted coordinator re-adopting running ranks. INVALID_ARGUMENT naming the rank when a
  // worker is unknown or lost, a slot is out of range, or a slot is held or listed twice.
  [[nodiscard]] absl::StatusOr<std::vector<SlotRef>> AllocateExact(
      JobHandle job, const std::vector<RankSlot>& ranks);
  // Returns a held slot to its worker.
  void Free(SlotRef slot);

  // Free slots on ready workers.
  int64_t free_slots() const { return free_ready_; }
  // All slots on ready workers, free or not.
  int64_t ready_slots() const { return ready_slots_; }
  // All slots on ready or draining workers: what the cluster could hold once jobs finish.
  int64_t live_slots() const { return live_slots_; }
  // Registered workers in `state`.
  int64_t workers_in(WorkerState state) const {
    return workers_in_state_[static_cast<int>(state)];
  }
  // Memory of the largest slot on a ready worker: INT64_MAX when a ready worker's is unknown, 0
  // when no worker is ready. O(workers).
  int64_t largest_ready_slot_memory() const;
  // Memory of the smallest slot of known memory on a ready worker; 0 when none is known.
  // O(workers).
  int64_t smallest_known_slot_memory() const;
  // Whether some ready worker's slots are known to offer less than `min_memory` (so placement
  // must pick workers); false for min_memory <= 0. O(workers).
  bool FiltersMemory(int64_t min_memory) const {
    const int64_t smallest = smallest_known_slot_memory();
    return min_memory > 0 && smallest > 0 && smallest < min_memory;
  }
  // Free and all slots on ready workers whose slots offer at least `min_memory` (or an unknown
  // amount). O(workers).
  std::pair<int64_t, int64_t> EligibleSlots(int64_t min_memory) const;
  // Most free slots on one ready worker; 0 when none has any.
  int largest_free() const { return by_free_.empty() ? 0 : by_free_.rbegin()->first; }

  const std::string& worker_id(int worker) const { return workers_[worker].id; }
  std::optional<WorkerInfo> Find(absl::string_view id) const;
  // Every registered worker, ordered by id.
  std::vector<WorkerInfo> List() const;

 private:
  struct Worker {
    std::string id;  // Empty for an unused entry (removed worker, index free for reuse).
    WorkerState state = WorkerState::kReady;
    int free = 0;                  // Free slots; all slots while lost.
    int64_t slot_memory = 0;       // Bytes per slot; 0: unknown.
    std::vector<SlotOwner> owner;  // [slot]; job 0 means free.
  };

  WorkerInfo Info(const Worker& w) const;
  // Allocate() over the workers now in by_free_.
  std::vector<SlotRef> AllocateFromIndex(JobHandle job, int pipeline_stages, int data_parallel);
  // Adds (sign +1) or removes (sign -1) a worker's share of the counters and the free index.
  void Account(int worker, int sign);
  // Gives `count` free slots of `worker` to ranks first_rank.. of `job`, lowest slots first.
  void Take(int worker, JobHandle job, int first_rank, int count, std::vector<SlotRef>& ranks);
  std::vector<SlotOwner> EmptySlots(Worker& w);
  // A ready worker's slots hold `min_memory` (unknown memory counts as enough).
  static bool Holds(const Worker& w, int64_t min_memory) {
    return min_memory <= 0 || w.slot_memory <= 0 || w.slot_memory >= min_memory;
  }

  std::vector<Worker> workers_;                  // [worker index]
  std::vector<int> unused_;                      // Reusable worker indices.
  absl::flat_hash_map<std::string, int> by_id_;  // Worker id -> worker index.
  std::set<std::pair<int, int>> by_free_;        // (free slots, worker) of ready workers, free > 0.
  int64_t free_ready_ = 0;
  int64_t ready_slots_ = 0;
  int64_t live_slots_ = 0;
  int64_t workers_in_state_[3] = {0, 0, 0};  // [WorkerState]
};

}  // namespace deepnet::coordinator
