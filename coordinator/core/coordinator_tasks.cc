// Coordinator: matching what a worker lists (its tasks at registration and in heartbeats)
// against the jobs; each job's JobRun re-adopts, updates or refuses its ranks, and ranks a
// re-registering worker no longer has are lost.
#include <map>
#include <set>

#include "coordinator/core/coordinator.h"

namespace deepnet::coordinator {

void Coordinator::ReconcileTasks(const std::string& worker_id, const std::vector<TaskReport>& tasks,
                                 bool registering) {
  std::map<std::string, std::set<int>> listed;  // job -> live ranks of its current attempt
  for (const TaskReport& task : tasks) {
    JobRun* job = FindJob(task.job_id);
    std::optional<CancellationCommand> cancel;
    if (job != nullptr) {
      if (job->OnTaskListed(worker_id, task, &cancel)) listed[task.job_id].insert(task.rank);
    } else if (task.phase != TaskPhase::kStopping && task.phase != TaskPhase::kExited) {
      cancel = CancellationCommand{task.job_id, task.attempt,
                                   "not part of a live attempt of its job",
                                   options_.stop_grace.count()};
    }
    if (cancel.has_value()) workers_.SendCancel(worker_id, *cancel);
  }
  if (!registering) return;
  // A worker that registers without listing a rank we placed on it has lost that rank (the
  // daemon restarted, or the trainer died while the worker was away).
  const std::set<int> none;
  for (auto& [id, job] : jobs_) {
    auto it = listed.find(id);
    job.LoseUnlistedRanks(worker_id, it == listed.end() ? none : it->second);
  }
}

}  // namespace deepnet::coordinator
