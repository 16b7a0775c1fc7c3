// Coordinator: the registered workers as ListWorkers shows them, with what holds each slot.
#include <algorithm>
#include <chrono>

#include "coordinator/core/coordinator.h"

namespace deepnet::coordinator {

std::vector<WorkerView> Coordinator::ListWorkers() const {
  absl::MutexLock lock(&mu_);
  const Clock::time_point now = Clock::now();
  std::map<std::string, std::vector<SlotView>> slots;  // worker id -> [slot index]
  std::vector<WorkerView> out;
  out.reserve(workers_.size());
  for (const auto& [id, w] : workers_) {
    WorkerView view;
    view.id = id;
    view.state = StateOf(w);
    view.host = w.host;
    view.heartbeat_age_ms =
        std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(
                                 now - w.last_heard).count());
    std::vector<SlotView>& by_index = slots[id];
    by_index.resize(w.slots.size());
    for (const SlotFacts& facts : w.slots) {
      // Register() checked that the indices are 0..n-1, each once.
      by_index[static_cast<size_t>(facts.index)].facts = facts;
    }
    out.push_back(std::move(view));
  }
  auto hold = [&slots](const std::string& worker_id, int slot, const JobRuntime& job, int rank) {
    auto it = slots.find(worker_id);
    if (it == slots.end() || slot < 0 || slot >= static_cast<int>(it->second.size())) return;
    SlotView& s = it->second[static_cast<size_t>(slot)];
    s.used = true;
    s.task = SlotTaskView{job.record.id, job.record.owner, job.record.attempt, rank};
  };
  for (const auto& [job_id, job] : jobs_) {
    if (job.placed) {
      // The scheduler's placement is what holds slots (a lost rank's slot is no longer held).
      const std::optional<Placement> placement = scheduler_->FindPlacement(job_id);
      if (!placement.has_value()) continue;
      for (size_t r = 0; r < placement->ranks.size(); ++r) {
        const RankSlot& slot = placement->ranks[r];
        if (!slot.worker_id.empty()) hold(slot.worker_id, slot.slot, job, static_cast<int>(r));
      }
    } else if (job.reattaching) {
      // After a coordinator restart: ranks re-found on their workers, not yet re-adopted.
      for (const auto& [rank, r] : job.reattached) hold(r.worker_id, r.slot, job, rank);
    }
  }
  for (WorkerView& view : out) {
    view.slots = std::move(slots[view.id]);
    view.slots_used = static_cast<int>(
        std::count_if(view.slots.begin(), view.slots.end(), [](const SlotView& s) { return s.used; }));
    view.slots_free = view.state == WorkerState::kLost
                          ? 0
                          : static_cast<int>(view.slots.size()) - view.slots_used;
  }
  return out;
}

}  // namespace deepnet::coordinator
