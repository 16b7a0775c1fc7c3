#include "coordinator/scheduler/worker_pool.h"

#include <algorithm>
#include <iterator>

#include "absl/strings/str_cat.h"

namespace deepnet::coordinator {
namespace {

// A slot is a device or a CPU share; the pool keeps one owner entry per slot.
constexpr int kMaxSlotsPerWorker = 1 << 16;

}  // namespace

absl::Status WorkerPool::Add(absl::string_view id, int slots, int64_t slot_memory) {
  if (id.empty()) return absl::InvalidArgumentError("worker id must not be empty");
  if (slots <= 0 || slots > kMaxSlotsPerWorker) {
    return absl::InvalidArgumentError(absl::StrCat("worker ", id, ": slots must be in [1, ",
                                                   kMaxSlotsPerWorker, "], got ", slots));
  }
  if (by_id_.contains(id)) {
    return absl::AlreadyExistsError(absl::StrCat("worker ", id, " is already registered"));
  }
  int index;
  if (unused_.empty()) {
    index = static_cast<int>(workers_.size());
    workers_.emplace_back();
  } else {
    index = unused_.back();
    unused_.pop_back();
  }
  Worker& w = workers_[index];
  w.id = std::string(id);
  w.state = WorkerState::kReady;
  w.free = slots;
  w.slot_memory = std::max<int64_t>(slot_memory, 0);
  w.owner.assign(slots, SlotOwner{});
  by_id_.emplace(w.id, index);
  Account(index, +1);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<WorkerPool::SlotOwner>> WorkerPool::SetState(absl::string_view id,
                                                                        WorkerState state) {
  const auto it = by_id_.find(id);
  if (it == by_id_.end()) return absl::NotFoundError(absl::StrCat("unknown worker ", id));
  const int index = it->second;
  Worker& w = workers_[index];
  if (w.state == state) return std::vector<SlotOwner>{};
  Account(index, -1);
  w.state = state;
  std::vector<SlotOwner> lost;
  if (state == WorkerState::kLost) lost = EmptySlots(w);
  Account(index, +1);
  return lost;
}

absl::StatusOr<std::vector<WorkerPool::SlotOwner>> WorkerPool::Remove(absl::string_view id) {
  const auto it = by_id_.find(id);
  if (it == by_id_.end()) return absl::NotFoundError(absl::StrCat("unknown worker ", id));
  const int index = it->second;
  Account(index, -1);
  Worker& w = workers_[index];
  std::vector<SlotOwner> lost = EmptySlots(w);
  by_id_.erase(it);
  w = Worker{};
  unused_.push_back(index);
  return lost;
}

std::vector<WorkerPool::SlotOwner> WorkerPool::EmptySlots(Worker& w) {
  std::vector<SlotOwner> held;
  for (SlotOwner& owner : w.owner) {
    if (owner.job != 0) held.push_back(owner);
    owner = SlotOwner{};
  }
  w.free = static_cast<int>(w.owner.size());
  return held;
}

void WorkerPool::Account(int worker, int sign) {
  const Worker& w = workers_[worker];
  const int64_t slots = static_cast<int64_t>(w.owner.size());
  workers_in_state_[static_cast<int>(w.state)] += sign;
  switch (w.state) {
    case WorkerState::kReady:
      ready_slots_ += sign * slots;
      live_slots_ += sign * slots;
      free_ready_ += sign * w.free;
      if (w.free > 0) {
        if (sign > 0) {
          by_free_.emplace(w.free, worker);
        } else {
          by_free_.erase({w.free, worker});
        }
      }
      break;
    case WorkerState::kDraining:
      live_slots_ += sign * slots;
      break;
    case WorkerState::kLost:
      break;
  }
}

void WorkerPool::Take(int worker, JobHandle job, int first_rank, int count,
                      std::vector<SlotRef>& ranks) {
  Account(worker, -1);
  Worker& w = workers_[worker];
  int rank = first_rank;
  for (int slot = 0; slot < static_cast<int>(w.owner.size()) && rank < first_rank + count; ++slot) {
    if (w.owner[slot].job != 0) continue;
    w.owner[slot] = SlotOwner{job, rank};
    ranks[rank] = SlotRef{worker, slot};
    ++rank;
  }
  w.free -= count;
  Account(worker, +1);
}

int64_t WorkerPool::largest_ready_slot_memory() const {
  int64_t largest = 0;
  for (const Worker& w : workers_) {
    if (w.id.empty() || w.state != WorkerState::kReady) continue;
    if (w.slot_memory <= 0) return INT64_MAX;
    largest = std::max(largest, w.slot_memory);
  }
  return largest;
}

int64_t WorkerPool::smallest_known_slot_memory() const {
  int64_t smallest = 0;
  for (const Worker& w : workers_) {
    if (w.id.empty() || w.state != WorkerState::kReady || w.slot_memory <= 0) continue;
    if (smallest == 0 || w.slot_memory < smallest) smallest = w.slot_memory;
  }
  return smallest;
}

std::pair<int64_t, int64_t> WorkerPool::EligibleSlots(int64_t min_memory) const {
  int64_t free = 0, all = 0;
  for (const Worker& w : workers_) {
    if (w.id.empty() || w.state != WorkerState::kReady || !Holds(w, min_memory)) continue;
    free += w.free;
    all += static_cast<int64_t>(w.owner.size());
  }
  return {free, all};
}

std::vector<SlotRef> WorkerPool::Allocate(JobHandle job, int pipeline_stages, int data_parallel,
                                          int64_t min_memory) {
  // Workers whose slots are too small leave the free index while this job is placed.
  std::vector<std::pair<int, int>> set_aside;
  if (FiltersMemory(min_memory)) {
    for (auto it = by_free_.begin(); it != by_free_.end();) {
      if (Holds(workers_[it->second], min_memory)) {
        ++it;
      } else {
        set_aside.push_back(*it);
        it = by_free_.erase(it);
      }
    }
  }
  std::vector<SlotRef> ranks = AllocateFromIndex(job, pipeline_stages, data_parallel);
  by_free_.insert(set_aside.begin(), set_aside.end());
  return ranks;
}

std::vector<SlotRef> WorkerPool::AllocateFromIndex(JobHandle job, int pipeline_stages,
                                                   int data_parallel) {
  const int d = data_parallel;
  const int n = pipeline_stages * d;
  std::vector<SlotRef> ranks(n);
  // Phase 1: whole data-parallel groups, so a stage's all-reduce stays on one worker and the
  // stages given to one worker are neighbours (their activations cross no network).
  int stage = 0;
  while (stage < pipeline_stages && !by_free_.empty()) {
    const int remaining = pipeline_stages - stage;
    // Best fit: the smallest worker that holds every remaining stage.
    auto it = by_free_.lower_bound({remaining * d, -1});
    int stages = remaining;
    if (it == by_free_.end()) {
      // None does: take as many stages as any worker holds, on the worker that holds that many
      // with the fewest slots left over (lower_bound: smallest free >= stages * d).
      stages = by_free_.rbegin()->first / d;
      if (stages == 0) break;
      it = by_free_.lower_bound({stages * d, -1});
    }
    Take(it->second, job, stage * d, stages * d, ranks);
    stage += stages;
  }
  // Phase 2: no free worker holds a whole group any more; split the remaining ranks across
  // workers in rank order, largest first, best fit for the tail.
  int rank = stage * d;
  while (rank < n) {
    const int remaining = n - rank;
    auto it = by_free_.lower_bound({remaining, -1});
    if (it == by_free_.end()) it = std::prev(by_free_.end());  // Non-empty: precondition.
    const int count = std::min(remaining, it->first);
    Take(it->second, job, rank, count, ranks);
    rank += count;
  }
  return ranks;
}

absl::StatusOr<std::vector<SlotRef>> WorkerPool::AllocateExact(JobHandle job,
                                                               const std::vector<RankSlot>& ranks) {
  std::vector<SlotRef> refs(ranks.size());
  absl::flat_hash_map<std::pair<int, int>, int> seen;  // Slot -> rank, to catch duplicates.
  for (size_t rank = 0; rank < ranks.size(); ++rank) {
    const RankSlot& r = ranks[rank];
    const auto it = by_id_.find(r.worker_id);
    if (it == by_id_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", rank, ": unknown worker '", r.worker_id, "'"));
    }
    const Worker& w = workers_[it->second];
    if (w.state == WorkerState::kLost) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", rank, ": worker ", r.worker_id, " is lost"));
    }
    if (r.slot < 0 || r.slot >= static_cast<int>(w.owner.size())) {
      return absl::InvalidArgumentError(absl::StrCat("rank ", rank, ": slot ", r.slot,
                                                     " out of range on worker ", r.worker_id,
                                                     " with ", w.owner.size(), " slots"));
    }
    if (w.owner[r.slot].job != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rank ", rank, ": slot ", r.slot, " of worker ", r.worker_id, " is held by another job"));
    }
    const auto [dup, fresh] = seen.emplace(std::make_pair(it->second, r.slot), rank);
    if (!fresh) {
      return absl::InvalidArgumentError(absl::StrCat("rank ", rank, ": slot ", r.slot,
                                                     " of worker ", r.worker_id,
                                                     " is also given to rank ", dup->second));
    }
    refs[rank] = SlotRef{it->second, r.slot};
  }
  for (size_t rank = 0; rank < refs.size(); ++rank) {
    const SlotRef ref = refs[rank];
    Account(ref.worker, -1);
    workers_[ref.worker].owner[ref.slot] = SlotOwner{job, static_cast<int>(rank)};
    --workers_[ref.worker].free;
    Account(ref.worker, +1);
  }
  return refs;
}

void WorkerPool::Free(SlotRef ref) {
  Account(ref.worker, -1);
  Worker& w = workers_[ref.worker];
  w.owner[ref.slot] = SlotOwner{};
  ++w.free;
  Account(ref.worker, +1);
}

WorkerInfo WorkerPool::Info(const Worker& w) const {
  WorkerInfo info;
  info.id = w.id;
  info.slots = static_cast<int>(w.owner.size());
  info.free_slots = w.state == WorkerState::kLost ? 0 : w.free;
  info.state = w.state;
  info.slot_memory = w.slot_memory;
  return info;
}

std::optional<WorkerInfo> WorkerPool::Find(absl::string_view id) const {
  const auto it = by_id_.find(id);
  if (it == by_id_.end()) return std::nullopt;
  return Info(workers_[it->second]);
}

std::vector<WorkerInfo> WorkerPool::List() const {
  std::vector<WorkerInfo> out;
  out.reserve(by_id_.size());
  for (const auto& [id, index] : by_id_) out.push_back(Info(workers_[index]));
  std::sort(out.begin(), out.end(),
            [](const WorkerInfo& a, const WorkerInfo& b) { return a.id < b.id; });
  return out;
}

}  // namespace deepnet::coordinator
