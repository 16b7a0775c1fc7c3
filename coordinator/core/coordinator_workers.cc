// Coordinator: worker registrations, sessions, heartbeats and leases (kept by WorkerRegistry),
// and what workers report about jobs (task states, trainer exits, metrics), handed to the
// job's JobRun. A registration or session message carrying an epoch other than the worker's
// current one is refused (ABORTED), so nothing stale acts on a job.
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "coordinator/core/coordinator.h"

namespace deepnet::coordinator {

absl::StatusOr<RegistrationResult> Coordinator::Register(const Registration& registration) {
  if (absl::Status s = WorkerRegistry::CheckRegistration(registration); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  if (shutting_down_) return absl::UnavailableError("coordinator is shutting down");
  const std::string& id = registration.worker_name;
  std::vector<LostRanks> lost;
  absl::StatusOr<int64_t> epoch = workers_.BeginRegistration(registration, &lost);
  if (!epoch.ok()) return epoch.status();
  HandleLostRanks(lost, id, "worker re-registered with a different slot count or memory");
  absl::StatusOr<WorkerRegistry::Worker*> worker =
      workers_.CompleteRegistration(registration, *epoch);
  if (!worker.ok()) return worker.status();
  schedule_dirty_ = true;  // pending reasons count it (and its slots, if it was lost)
  // Tasks of dead attempts become cancellations, answered with the registration (and queued as
  // the session's first commands): a worker back from a partition stops its stale trainers
  // before it is given anything. It stays draining until its session opens.
  ReconcileTasks(id, registration.running_tasks, /*registering=*/true);
  spdlog::info("worker {} registered: epoch {}, {} slot(s), {} running task(s), {} to stop", id,
               *epoch, registration.slots.size(), registration.running_tasks.size(),
               (*worker)->pending_cancels.size());
  RegistrationResult result;
  result.stale_tasks = (*worker)->pending_cancels;
  result.worker_id = id;
  result.epoch = *epoch;
  result.session_secret = (*worker)->session_secret;
  result.heartbeat_interval_ms = options_.heartbeat_interval.count();
  result.lease_ms = workers_.lease_ms();
  return result;
}

absl::Status Coordinator::AttachSession(const std::string& worker_id, int64_t epoch,
                                        const std::string& session_secret,
                                        std::shared_ptr<WorkerCommandSink> sink) {
  absl::MutexLock lock(&mu_);
  if (shutting_down_) return absl::UnavailableError("coordinator is shutting down");
  if (absl::Status s = workers_.AttachSession(worker_id, epoch, session_secret, std::move(sink));
      !s.ok()) {
    return s;
  }
  schedule_dirty_ = true;
  return absl::OkStatus();
}

void Coordinator::DetachSession(const std::string& worker_id, int64_t epoch,
                                const WorkerCommandSink* sink) {
  absl::MutexLock lock(&mu_);
  if (workers_.DetachSession(worker_id, epoch, sink)) schedule_dirty_ = true;
}

absl::Status Coordinator::OnHeartbeat(const std::string& worker_id, int64_t epoch,
                                      const std::vector<TaskReport>& tasks) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<WorkerRegistry::Worker*> worker = workers_.Heard(worker_id, epoch);
  if (!worker.ok()) return worker.status();
  (*worker)->missed_reported = 0;
  ReconcileTasks(worker_id, tasks, /*registering=*/false);
  workers_.SendLease(**worker);
  return absl::OkStatus();
}

absl::Status Coordinator::OnTrainerExit(const std::string& worker_id, int64_t epoch,
                                        const TrainerExitReport& exit) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<WorkerRegistry::Worker*> worker = workers_.Heard(worker_id, epoch);
  if (!worker.ok()) return worker.status();
  JobRun* job = FindJob(exit.job_id);
  if (job != nullptr) job->OnTrainerExit(worker_id, exit);
  return absl::OkStatus();
}

absl::Status Coordinator::OnDraining(const std::string& worker_id, int64_t epoch,
                                     const std::string& reason, std::chrono::milliseconds grace) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<WorkerRegistry::Worker*> worker = workers_.Heard(worker_id, epoch);
  if (!worker.ok()) return worker.status();
  if (!workers_.BeginDraining(**worker, grace, reason)) return absl::OkStatus();
  schedule_dirty_ = true;
  const std::string why =
      absl::StrCat("worker ", worker_id, " is shutting down (", reason,
                   "): its ranks stop and checkpoint; the job restarts elsewhere (not counted "
                   "against max_restarts)");
  for (auto& [id, job] : jobs_) {
    if (IsTerminal(job.state()) || !job.HoldsLiveRankOn(worker_id)) continue;
    job.OnWorkerDraining(why);
  }
  return absl::OkStatus();
}

absl::Status Coordinator::OnMetrics(const std::string& worker_id, int64_t epoch,
                                    const MetricReport& report) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<WorkerRegistry::Worker*> worker = workers_.Heard(worker_id, epoch);
  if (!worker.ok()) return worker.status();
  JobRun* job = FindJob(report.job_id);
  if (job == nullptr || report.attempt != job->record().attempt) return absl::OkStatus();
  job->OnMetrics(worker_id, report);
  return absl::OkStatus();
}

absl::Status Coordinator::OnAssignmentRefused(const std::string& worker_id, int64_t epoch,
                                              const std::string& job_id, int attempt,
                                              const std::string& error, bool retry) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<WorkerRegistry::Worker*> worker = workers_.Current(worker_id, epoch);
  if (!worker.ok()) return worker.status();
  JobRun* job = FindJob(job_id);
  if (job == nullptr || attempt != job->record().attempt) return absl::OkStatus();
  job->OnAssignmentRefused(worker_id, error, retry);
  return absl::OkStatus();
}

void Coordinator::OnWorkerLost(const std::string& worker_id, const std::vector<LostRanks>& lost,
                               const std::string& why) {
  HandleLostRanks(lost, worker_id, why);
  schedule_dirty_ = true;  // queued jobs' reasons change even when it held no rank
  // Jobs waiting to re-adopt ranks there will not get them back.
  for (auto& [id, job] : jobs_) job.ForgetReattachedOn(worker_id);
}

void Coordinator::HandleLostRanks(const std::vector<LostRanks>& lost, const std::string& worker_id,
                                  const std::string& why) {
  for (const LostRanks& l : lost) {
    JobRun* job = FindJob(l.job_id);
    if (job != nullptr) job->OnRanksLost(worker_id, l.ranks, why);
  }
}

}  // namespace deepnet::coordinator
