#include "coordinator/scheduler/gang_scheduler.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "job/memory_estimate.h"
#include "job/world_size.h"

namespace deepnet::coordinator {
namespace {

// "1 slot", "8 slots".
std::string Count(int64_t n, absl::string_view noun) {
  return absl::StrCat(n, " ", noun, n == 1 ? "" : "s");
}

std::string GangText(const GangRequest& r, int64_t ranks) {
  return absl::StrCat("needs ", Count(ranks, "slot"), " (",
                      Count(r.pipeline_stages, "pipeline stage"), " x ", r.data_parallel,
                      " data-parallel)");
}

}  // namespace

absl::StatusOr<std::unique_ptr<GangScheduler>> GangScheduler::Create(
    const SchedulerOptions& options) {
  if (absl::Status status = Validate(options); !status.ok()) return status;
  return std::unique_ptr<GangScheduler>(new GangScheduler(options));
}

absl::Status GangScheduler::AddWorker(absl::string_view worker_id, int slots, int64_t slot_memory) {
  return pool_.Add(worker_id, slots, slot_memory);
}

absl::StatusOr<std::vector<LostRanks>> GangScheduler::UpdateWorkerState(absl::string_view worker_id,
                                                                        WorkerState state) {
  absl::StatusOr<std::vector<WorkerPool::SlotOwner>> owners = pool_.SetState(worker_id, state);
  if (!owners.ok()) return owners.status();
  return MarkLost(*owners);
}

absl::StatusOr<std::vector<LostRanks>> GangScheduler::RemoveWorker(absl::string_view worker_id) {
  absl::StatusOr<std::vector<WorkerPool::SlotOwner>> owners = pool_.Remove(worker_id);
  if (!owners.ok()) return owners.status();
  return MarkLost(*owners);
}

std::vector<LostRanks> GangScheduler::MarkLost(const std::vector<WorkerPool::SlotOwner>& owners) {
  absl::flat_hash_map<WorkerPool::JobHandle, std::vector<int>> by_job;
  for (const WorkerPool::SlotOwner& owner : owners) by_job[owner.job].push_back(owner.rank);
  std::vector<LostRanks> lost;
  lost.reserve(by_job.size());
  for (auto& [handle, ranks] : by_job) {
    Placed& placed = placed_.at(handle);  // The pool only holds slots of placed jobs.
    for (int rank : ranks) {
      placed.slots[rank] = SlotRef{};
      placed.placement.ranks[rank] = RankSlot{};
    }
    std::sort(ranks.begin(), ranks.end());
    lost.push_back(LostRanks{placed.placement.job_id, std::move(ranks)});
  }
  std::sort(lost.begin(), lost.end(),
            [](const LostRanks& a, const LostRanks& b) { return a.job_id < b.job_id; });
  return lost;
}

absl::Status GangScheduler::CheckRequest(const GangRequest& request) const {
  if (request.job_id.empty()) return absl::InvalidArgumentError("job_id must not be empty");
  if (absl::Status size = job::CheckWorldSize(request.pipeline_stages, request.data_parallel);
      !size.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("job ", request.job_id, ": ", size.message()));
  }
  if (queued_by_id_.contains(request.job_id) || placed_by_id_.contains(request.job_id)) {
    return absl::AlreadyExistsError(
        absl::StrCat("job ", request.job_id, " is already queued or placed"));
  }
  return absl::OkStatus();
}

absl::Status GangScheduler::Enqueue(const GangRequest& request) {
  if (absl::Status status = CheckRequest(request); !status.ok()) return status;
  QueueKey key{-request.priority, request.submit_seq, request.job_id};
  Queued queued{request, request.pipeline_stages * request.data_parallel, 0};
  const auto [it, inserted] = queue_.emplace(std::move(key), std::move(queued));
  queued_by_id_.emplace(request.job_id, it);
  return absl::OkStatus();
}

absl::Status GangScheduler::Cancel(absl::string_view job_id) {
  const auto it = queued_by_id_.find(job_id);
  if (it == queued_by_id_.end()) {
    if (placed_by_id_.contains(job_id)) {
      return absl::FailedPreconditionError(
          absl::StrCat("job ", job_id, " is placed, not queued: stop its ranks and release it"));
    }
    return absl::NotFoundError(absl::StrCat("job ", job_id, " is not queued"));
  }
  queue_.erase(it->second);
  queued_by_id_.erase(it);
  return absl::OkStatus();
}

absl::Status GangScheduler::Release(absl::string_view job_id) {
  const auto it = placed_by_id_.find(job_id);
  if (it == placed_by_id_.end()) {
    return absl::NotFoundError(absl::StrCat("job ", job_id, " is not placed"));
  }
  const auto placed = placed_.find(it->second);
  for (const SlotRef& slot : placed->second.slots) {
    if (slot.worker >= 0) pool_.Free(slot);
  }
  placed_.erase(placed);
  placed_by_id_.erase(it);
  return absl::OkStatus();
}

absl::Status GangScheduler::RestorePlacement(const Placement& placement) {
  GangRequest sizes;
  sizes.job_id = placement.job_id;
  sizes.pipeline_stages = placement.pipeline_stages;
  sizes.data_parallel = placement.data_parallel;
  if (absl::Status status = CheckRequest(sizes); !status.ok()) return status;
  const int64_t expected = placement.pipeline_stages * placement.data_parallel;
  if (static_cast<int64_t>(placement.ranks.size()) != expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        "job ", placement.job_id, ": ", placement.ranks.size(), " ranks placed, but ",
        placement.pipeline_stages, " x ", placement.data_parallel, " = ", expected, " expected"));
  }
  const WorkerPool::JobHandle handle = next_handle_;
  absl::StatusOr<std::vector<SlotRef>> slots = pool_.AllocateExact(handle, placement.ranks);
  if (!slots.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("job ", placement.job_id, ": ", slots.status().message()));
  }
  ++next_handle_;
  placed_by_id_.emplace(placement.job_id, handle);
  placed_.emplace(handle, Placed{placement, *std::move(slots)});
  return absl::OkStatus();
}

template <typename OnJob>
GangScheduler::PassResult GangScheduler::Pass(bool stop_early, OnJob&& on_job) const {
  PassResult result;
  int64_t free = pool_.free_slots();
  const int64_t ready = pool_.ready_slots();
  // The job that blocks everything behind it, once there is one.
  const Queued* barrier = nullptr;
  // A blocked job with overtake allowance a, found blocked when `placed` was p, becomes the
  // barrier when `placed` reaches p + a. Track the earliest such point: O(1) per placement.
  int64_t trigger_at = std::numeric_limits<int64_t>::max();
  const Queued* trigger_job = nullptr;
  std::vector<std::pair<const Queued*, int>> blocked;  // Job, placements when found blocked.
  // Ranks of capped accounts placed by this pass so far.
  std::map<std::string, int64_t> user_added;
  std::map<std::string, int64_t> team_added;
  // The account's ranks with this pass's placements when `job` would exceed its cap.
  auto over_cap = [](const std::map<std::string, RankCap>& caps,
                     const std::map<std::string, int64_t>& added, const std::string& account,
                     int64_t ranks) -> std::optional<int64_t> {
    if (account.empty()) return std::nullopt;
    const auto cap = caps.find(account);
    if (cap == caps.end()) return std::nullopt;
    const auto more = added.find(account);
    const int64_t held = cap->second.held + (more == added.end() ? 0 : more->second);
    if (held + ranks <= cap->second.max_ranks) return std::nullopt;
    return held;
  };
  int64_t placed_ranks = 0;  // Ranks placed so far in this pass.
  // Slot memory of the ready workers, once per pass (O(workers)); the pass changes no worker.
  const int64_t largest_memory = pool_.largest_ready_slot_memory();
  const int64_t smallest_memory = pool_.smallest_known_slot_memory();
  for (const auto& [key, job] : queue_) {
    if (stop_early && (barrier != nullptr || free == 0)) break;
    const GangRequest& r = job.request;
    if (std::optional<int64_t> held = over_cap(caps_.users, user_added, r.user, job.ranks)) {
      on_job(job, Verdict::kUserCap, nullptr, free, *held);
      continue;
    }
    if (std::optional<int64_t> held = over_cap(caps_.teams, team_added, r.team, job.ranks)) {
      on_job(job, Verdict::kTeamCap, nullptr, free, *held);
      continue;
    }
    const int64_t memory = r.memory_per_rank_bytes;
    if (memory > 0 && ready > 0 && largest_memory < memory) {
      on_job(job, Verdict::kExceedsMemory, nullptr, free, 0);
      continue;
    }
    // Slots too small for the job's ranks do not count for it (an O(workers) count, only for
    // such jobs). Jobs placed earlier in this pass may have taken eligible slots: count them
    // all as taken (never more than fits).
    int64_t job_ready = ready, job_free = free;
    if (memory > 0 && smallest_memory > 0 && smallest_memory < memory) {
      const auto [eligible_free, eligible_all] = pool_.EligibleSlots(memory);
      job_ready = eligible_all;
      job_free = std::min(free, std::max<int64_t>(eligible_free - placed_ranks, 0));
    }
    if (job.ranks > job_ready) {
      on_job(job, Verdict::kExceeds, nullptr, free, 0);
      continue;
    }
    if (barrier != nullptr) {
      on_job(job, job.ranks > job_free ? Verdict::kInsufficient : Verdict::kBehind, barrier, free,
             0);
      continue;
    }
    if (job.ranks <= job_free) {
      on_job(job, Verdict::kPlace, nullptr, free, 0);
      free -= job.ranks;
      placed_ranks += job.ranks;
      result.placed.push_back(&job);
      if (!r.user.empty()) user_added[r.user] += job.ranks;
      if (!r.team.empty()) team_added[r.team] += job.ranks;
      if (static_cast<int64_t>(result.placed.size()) >= trigger_at) barrier = trigger_job;
      continue;
    }
    on_job(job, Verdict::kInsufficient, nullptr, free, 0);
    const int placed_so_far = static_cast<int>(result.placed.size());
    blocked.emplace_back(&job, placed_so_far);
    const int allowance = options_.max_overtakes - job.overtakes;
    if (allowance <= 0) {
      barrier = &job;
    } else if (placed_so_far + allowance < trigger_at) {
      trigger_at = placed_so_far + allowance;
      trigger_job = &job;
    }
  }
  const int placed_total = static_cast<int>(result.placed.size());
  for (const auto& [job, mark] : blocked) {
    if (placed_total > mark) result.overtaken.emplace_back(job, placed_total - mark);
  }
  return result;
}

std::vector<Placement> GangScheduler::Schedule() {
  const PassResult pass =
      Pass(/*stop_early=*/true, [](const Queued&, Verdict, const Queued*, int64_t, int64_t) {});
  for (const auto& [job, added] : pass.overtaken) {
    queued_by_id_.at(job->request.job_id)->second.overtakes += added;
  }
  std::vector<Placement> placements;
  placements.reserve(pass.placed.size());
  for (const Queued* job : pass.placed) {
    const WorkerPool::JobHandle handle = next_handle_++;
    const GangRequest& r = job->request;
    Placed placed;
    placed.slots = pool_.Allocate(handle, static_cast<int>(r.pipeline_stages),
                                  static_cast<int>(r.data_parallel), r.memory_per_rank_bytes);
    placed.placement.job_id = r.job_id;
    placed.placement.pipeline_stages = r.pipeline_stages;
    placed.placement.data_parallel = r.data_parallel;
    placed.placement.ranks.reserve(placed.slots.size());
    for (const SlotRef& slot : placed.slots) {
      placed.placement.ranks.push_back(RankSlot{pool_.worker_id(slot.worker), slot.slot});
    }
    placements.push_back(placed.placement);
    placed_by_id_.emplace(r.job_id, handle);
    placed_.emplace(handle, std::move(placed));
    // Erasing invalidates `job`; nothing below uses it.
    const auto it = queued_by_id_.find(r.job_id);
    queue_.erase(it->second);
    queued_by_id_.erase(it);
  }
  return placements;
}

std::vector<PendingJob> GangScheduler::Pending() const {
  std::vector<PendingJob> pending;
  pending.reserve(queue_.size());
  ReasonTexts texts;
  Pass(/*stop_early=*/false,
       [&](const Queued& job, Verdict verdict, const Queued* blocker, int64_t free, int64_t held) {
         PendingJob p;
         p.job_id = job.request.job_id;
         p.queue_position = static_cast<int>(pending.size());
         switch (verdict) {
           case Verdict::kPlace:
             p.code = PendingCode::kSchedulable;
             break;
           case Verdict::kInsufficient:
             p.code = PendingCode::kInsufficientSlots;
             break;
           case Verdict::kBehind:
             p.code = PendingCode::kBehindJob;
             p.blocking_job_id = blocker->request.job_id;
             break;
           case Verdict::kExceeds:
             p.code = PendingCode::kExceedsRegistered;
             break;
           case Verdict::kExceedsMemory:
             p.code = PendingCode::kExceedsSlotMemory;
             break;
           case Verdict::kUserCap:
             p.code = PendingCode::kUserRankLimit;
             break;
           case Verdict::kTeamCap:
             p.code = PendingCode::kTeamRankLimit;
             break;
         }
         p.reason = Reason(job, verdict, blocker, free, held, &texts);
         pending.push_back(std::move(p));
       });
  return pending;
}

std::string GangScheduler::ClusterText(int64_t free) const {
  const int64_t ready = pool_.workers_in(WorkerState::kReady);
  const int64_t draining = pool_.workers_in(WorkerState::kDraining);
  const int64_t lost = pool_.workers_in(WorkerState::kLost);
  if (ready + draining + lost == 0) return "no worker is registered";
  std::string text = ready == 0 ? std::string("no worker is ready")
                                : absl::StrCat(Count(ready, "worker"), " ready with ",
                                               Count(pool_.ready_slots(), "slot"), ", ", free,
                                               " free");
  if (draining + lost > 0) {
    absl::StrAppend(&text, " (", draining, " draining, ", lost, " lost)");
  }
  return text;
}

const std::string& GangScheduler::ClusterTextOf(int64_t free, ReasonTexts* texts) const {
  if (texts->free != free) {
    texts->cluster = ClusterText(free);
    texts->free = free;
  }
  return texts->cluster;
}

std::string GangScheduler::Reason(const Queued& job, Verdict verdict, const Queued* blocker,
                                  int64_t free, int64_t held, ReasonTexts* texts) const {
  if (texts->stages != job.request.pipeline_stages ||
      texts->replicas != job.request.data_parallel) {
    texts->gang = GangText(job.request, job.ranks);
    texts->stages = job.request.pipeline_stages;
    texts->replicas = job.request.data_parallel;
  }
  const std::string& gang = texts->gang;
  switch (verdict) {
    case Verdict::kPlace:
      return absl::StrCat("fits: ", gang, "; ", ClusterTextOf(free, texts),
                          "; the next scheduling pass places it");
    case Verdict::kInsufficient: {
      std::string reason =
          absl::StrCat("waiting for free slots: ", gang, "; ", ClusterTextOf(free, texts),
                       " (largest free worker has ", pool_.largest_free(), ")");
      if (options_.max_overtakes > 0) {
        absl::StrAppend(&reason, "; overtaken ", job.overtakes, " of at most ",
                        options_.max_overtakes, " times");
      }
      return reason;
    }
    case Verdict::kBehind: {
      const GangRequest& b = blocker->request;
      const std::string which =
          b.priority > job.request.priority
              ? absl::StrCat("higher-priority job ", b.job_id, " (priority ", b.priority, ")")
              : absl::StrCat("earlier job ", b.job_id, " (same priority ", b.priority, ")");
      const std::string policy =
          options_.max_overtakes == 0
              ? std::string("strict queue order")
              : absl::StrCat("it has been overtaken ", options_.max_overtakes, " times, the limit");
      return absl::StrCat("waiting behind ", which, ", which ", GangText(b, blocker->ranks), " (",
                          policy, "); this job fits: ", gang, ", ", free, " free");
    }
    case Verdict::kExceeds: {
      std::string reason =
          absl::StrCat("waiting for workers to join: ", gang, "; ", ClusterTextOf(free, texts));
      if (pool_.FiltersMemory(job.request.memory_per_rank_bytes)) {
        absl::StrAppend(&reason, "; ",
                        pool_.EligibleSlots(job.request.memory_per_rank_bytes).second,
                        " of the ready slots have the ",
                        job::FormatBytes(job.request.memory_per_rank_bytes), " each rank needs");
      }
      return reason;
    }
    case Verdict::kExceedsMemory:
      return absl::StrCat("waiting for a slot with enough memory: each rank needs an estimated ",
                          job::FormatBytes(job.request.memory_per_rank_bytes),
                          " (biggest part: ", job.request.memory_biggest_part,
                          "), but the largest slot of the ready workers has ",
                          job::FormatBytes(pool_.largest_ready_slot_memory()), "; ", gang, "; ",
                          ClusterTextOf(free, texts));
    case Verdict::kUserCap:
    case Verdict::kTeamCap: {
      const bool user = verdict == Verdict::kUserCap;
      const std::string& account = user ? job.request.user : job.request.team;
      const RankCap& cap = (user ? caps_.users : caps_.teams).at(account);
      return absl::StrCat("waiting for ", user ? "user " : "team ", account,
                          "'s running ranks to drop: ", gang, "; ", account, " holds ", held,
                          " of max_running_ranks ", cap.max_ranks, " (limits file, ", cap.origin,
                          ")");
    }
  }
  return "unknown";
}

std::optional<Placement> GangScheduler::FindPlacement(absl::string_view job_id) const {
  const auto it = placed_by_id_.find(job_id);
  if (it == placed_by_id_.end()) return std::nullopt;
  return placed_.at(it->second).placement;
}

}  // namespace deepnet::coordinator
