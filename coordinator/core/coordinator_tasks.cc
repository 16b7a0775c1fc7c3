// Coordinator: matching what workers report (task lists at registration and in heartbeats,
// exits while the coordinator was away) against the jobs: re-adopting running gangs after a
// coordinator restart, updating rank phases, cancelling tasks of dead attempts, and noticing
// ranks a re-registering worker no longer has.
#include <spdlog/spdlog.h>

#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "coordinator/core/coordinator.h"

namespace deepnet::coordinator {

void Coordinator::ReconcileTasks(WorkerRuntime& worker, const std::vector<TaskReport>& tasks,
                                 bool registering) {
  std::set<std::pair<std::string, int>> listed;  // (job, rank) of the current attempts
  for (const TaskReport& task : tasks) {
    JobRuntime* job = FindJob(task.job_id);
    const bool current = job != nullptr && task.attempt == job->record.attempt &&
                         !IsTerminal(job->record.state);
    if (current && job->reattaching) {
      const int world = job->record.pipeline_stages * job->record.data_parallel;
      if (task.rank < 0 || task.rank >= world) continue;
      const int d = job->record.data_parallel;
      job->reattached[task.rank] =
          RankView{task.rank, task.rank / d, task.rank % d, worker.id, task.slot_index};
      job->reattached_phase[task.rank] = task.phase;
      listed.insert({task.job_id, task.rank});
      MaybeCompleteReattach(*job);
      continue;
    }
    const bool ours = current && !job->stopping && task.rank >= 0 &&
                      task.rank < static_cast<int>(job->ranks.size()) &&
                      job->ranks[task.rank].view.worker_id == worker.id &&
                      !job->ranks[task.rank].exited;
    if (ours) {
      listed.insert({task.job_id, task.rank});
      if (task.resumed_step && !job->resumed_step) {
        job->resumed_step = task.resumed_step;
        const int64_t announced = job->announced_resume_step.value_or(0);
        const bool restarted = job->record.attempt > 1;  // drained restarts are not counted
        if (restarted && *task.resumed_step == announced) {
          spdlog::info("job {} attempt {} resumed from step {}, the step its restart announced",
                       job->record.id, job->record.attempt, announced);
        } else if (restarted) {
          spdlog::warn(
              "job {} attempt {} resumed from step {}, not the announced step {} (a "
              "newer checkpoint failed verification or the folder changed)",
              job->record.id, job->record.attempt, *task.resumed_step, announced);
        }
      }
      if (task.phase == TaskPhase::kRunning) job->ranks[task.rank].phase = TaskPhase::kRunning;
      CheckAllRunning(*job);
      continue;
    }
    if (current && !job->ranks.empty() && task.rank >= 0 &&
        task.rank < static_cast<int>(job->ranks.size()) && !job->ranks[task.rank].exited) {
      listed.insert({task.job_id, task.rank});  // stopping: its exit report will come
    }
    if (task.phase == TaskPhase::kStopping || task.phase == TaskPhase::kExited) continue;
    if (current && job->stopping) {
      SendCancel(worker.id, CancellationCommand{task.job_id, task.attempt, job->stop_message,
                                                options_.stop_grace.count()});
    } else if (!ours) {
      SendCancel(worker.id, CancellationCommand{task.job_id, task.attempt,
                                                "not part of a live attempt of its job",
                                                options_.stop_grace.count()});
    }
  }
  if (!registering) return;
  // A worker that registers without listing a rank we placed on it has lost that rank (the
  // daemon restarted, or the trainer died while the worker was away).
  for (auto& [id, job] : jobs_) {
    bool lost_any = false;
    for (RankRuntime& r : job.ranks) {
      if (r.view.worker_id != worker.id || r.exited || listed.count({id, r.view.rank})) continue;
      MarkRankExited(job, r.view.rank);
      lost_any = true;
    }
    if (!lost_any) continue;
    const std::string why =
        absl::StrCat("worker ", worker.id, " re-registered without some of the job's ranks");
    JobEventView lost;
    lost.type = EventType::kWorkerLost;
    lost.worker_id = worker.id;
    lost.message = why;
    AddEvent(job, lost);
    if (job.stopping) {
      MaybeFinishStop(job);
    } else {
      FailRanks(job, RecoveryCause::kWorkerLost, why);
    }
  }
}

void Coordinator::MaybeCompleteReattach(JobRuntime& job) {
  const int world = job.record.pipeline_stages * job.record.data_parallel;
  const int d = job.record.data_parallel;
  if (static_cast<int>(job.reattached.size() + job.reattach_exits.size()) < world) return;
  bool all_exited = job.reattached.empty();
  bool all_clean = true;
  std::string failed;
  for (const auto& [rank, exit] : job.reattach_exits) {
    if (!exit.second && failed.empty()) {
      failed = absl::StrCat("rank ", rank, " on worker ", exit.first,
                            " failed while the coordinator was away");
    }
    all_clean &= exit.second;
  }
  if (all_exited) {
    // Nothing runs any more: the job ended while we were away.
    job.reattaching = false;
    job.reattach_exits.clear();
    if (all_clean) {
      if (job.record.state == JobState::kStarting) (void)Move(job, JobState::kRunning, "all ranks ran");
      (void)Move(job, JobState::kSucceeded, "all ranks finished while the coordinator was away");
    } else if (Move(job, JobState::kRecovering, failed, RecoveryCause::kWorkerExit).ok()) {
      job.after_stop = AfterStop::kRestart;
      job.stop_message = failed;
      FinishStop(job);
    }
    return;
  }
  // Exited ranks get a slot of their worker for the books (theirs is free now anyway).
  std::map<std::string, std::set<int>> used;
  for (const auto& [rank, view] : job.reattached) used[view.worker_id].insert(view.slot);
  std::map<int, RankView> all = job.reattached;
  for (const auto& [rank, exit] : job.reattach_exits) {
    int slot = 0;
    while (used[exit.first].count(slot)) ++slot;
    used[exit.first].insert(slot);
    all[rank] = RankView{rank, rank / d, rank % d, exit.first, slot};
  }
  Placement placement;
  placement.job_id = job.record.id;
  placement.pipeline_stages = job.record.pipeline_stages;
  placement.data_parallel = d;
  for (const auto& [rank, view] : all) placement.ranks.push_back(RankSlot{view.worker_id, view.slot});
  if (absl::Status s = scheduler_->RestorePlacement(placement); !s.ok()) {
    spdlog::warn("job {}: cannot re-adopt its ranks: {}", job.record.id, s.ToString());
    return;  // stays reattaching; the window's end restarts it
  }
  job.placed = true;
  job.reattaching = false;
  job.ranks.clear();
  for (const auto& [rank, view] : all) {
    RankRuntime r;
    r.view = view;
    auto exit = job.reattach_exits.find(rank);
    if (exit != job.reattach_exits.end()) {
      r.exited = true;
      r.clean_exit = exit->second.second;
      r.phase = TaskPhase::kExited;
    } else {
      r.phase = job.reattached_phase[rank];
    }
    job.ranks.push_back(r);
  }
  job.reattached.clear();
  job.reattached_phase.clear();
  job.reattach_exits.clear();
  job.last_progress = job.state_since = Clock::now();
  (void)rendezvous_->OpenAttempt({job.record.id, job.record.attempt});
  spdlog::info("job {}: re-adopted all {} ranks of attempt {}", job.record.id, world,
               job.record.attempt);
  if (!failed.empty()) {
    FailRanks(job, RecoveryCause::kWorkerExit, failed);
  } else {
    CheckAllRunning(job);
  }
}

}  // namespace deepnet::coordinator
