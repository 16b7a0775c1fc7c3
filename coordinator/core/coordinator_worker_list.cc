// Coordinator: the registered workers as ListWorkers shows them, with what holds each slot.
#include <algorithm>
#include <map>

#include "coordinator/core/coordinator.h"

namespace deepnet::coordinator {

std::vector<WorkerView> Coordinator::ListWorkers() const {
  absl::MutexLock lock(&mu_);
  std::vector<WorkerView> out = workers_.Views(Clock::now());
  std::map<std::string, std::vector<SlotView>*> slots;  // worker id -> its slots by index
  for (WorkerView& view : out) slots[view.id] = &view.slots;
  auto hold = [&slots](const std::string& worker_id, int slot, const JobRun& job, int rank) {
    auto it = slots.find(worker_id);
    if (it == slots.end() || slot < 0 || slot >= static_cast<int>(it->second->size())) return;
    SlotView& s = (*it->second)[static_cast<size_t>(slot)];
    s.used = true;
    s.task = SlotTaskView{job.id(), job.record().owner, job.record().attempt, rank};
  };
  for (const auto& [job_id, job] : jobs_) {
    if (job.placed()) {
      // The scheduler's placement is what holds slots (a lost rank's slot is no longer held).
      const std::optional<Placement> placement = scheduler_->FindPlacement(job_id);
      if (!placement.has_value()) continue;
      for (size_t r = 0; r < placement->ranks.size(); ++r) {
        const RankSlot& slot = placement->ranks[r];
        if (!slot.worker_id.empty()) hold(slot.worker_id, slot.slot, job, static_cast<int>(r));
      }
    } else if (job.reattaching()) {
      // After a coordinator restart: ranks re-found on their workers, not yet re-adopted.
      for (const auto& [rank, r] : job.reattached()) hold(r.worker_id, r.slot, job, rank);
    }
  }
  for (WorkerView& view : out) {
    view.slots_used = static_cast<int>(
        std::count_if(view.slots.begin(), view.slots.end(), [](const SlotView& s) { return s.used; }));
    view.slots_free = view.state == WorkerState::kLost
                          ? 0
                          : static_cast<int>(view.slots.size()) - view.slots_used;
  }
  return out;
}

}  // namespace deepnet::coordinator
