// Coordinator: the scheduler's passes (placing queued jobs, their pending reasons, rank caps),
// cancellation, and the fair-sharing limits. Each job's transitions are JobRun's (job_run.cc).
#include <spdlog/spdlog.h>

#include <chrono>

#include "absl/strings/str_cat.h"
#include "coordinator/auth/auth.h"
#include "coordinator/core/coordinator.h"

namespace deepnet::coordinator {

void Coordinator::RunScheduler() {
  if (!schedule_dirty_) return;
  schedule_dirty_ = false;
  const Clock::time_point t0 = Clock::now();
  UpdateRankCaps();
  std::vector<Placement> placements = scheduler_->Schedule();
  if (metrics_ != nullptr) {
    metrics_->ObserveSchedulingDecision(
        std::chrono::duration<double>(Clock::now() - t0).count());
  }
  for (const Placement& placement : placements) {
    JobRun* job = FindJob(placement.job_id);
    if (job == nullptr) continue;
    job->OnPlaced(placement, AssignmentBase(job->record().owner));
  }
  RefreshPending();
}

void Coordinator::RefreshPending() {
  pending_counts_.clear();
  UpdateRankCaps();
  for (const PendingJob& pending : scheduler_->Pending()) {
    JobRun* job = FindJob(pending.job_id);
    if (job == nullptr) continue;
    ++pending_counts_[pending.code];
    job->OnPending(pending);
  }
}

void Coordinator::UpdateRankCaps() { scheduler_->SetRankCaps(limits_.CapsFor(jobs_)); }

AssignmentCommand Coordinator::AssignmentBase(const std::string& owner) const {
  AssignmentCommand command;
  command.rendezvous_address = rendezvous_address_;
  command.owner = owner;
  if (options_.accounts == nullptr) return command;
  // Looked up at each placement: a job placed after a restart, or after the tokens file changed,
  // runs with the account as it is now.
  absl::StatusOr<Principal> account = options_.accounts->FindUser(owner);
  if (!account.ok()) {
    spdlog::warn("owner {}: {}; assigning without teams or trainer account", owner,
                 std::string(account.status().message()));
    return command;
  }
  command.owner_teams = account->teams;
  command.uid = account->uid;
  command.gid = account->gid;
  return command;
}

absl::StatusOr<JobView> Coordinator::Cancel(const std::string& job_id, const std::string& reason,
                                            const std::string& by) {
  JobView view;
  {
    absl::MutexLock lock(&mu_);
    JobRun* job = FindJob(job_id);
    if (job == nullptr) return absl::NotFoundError(absl::StrCat("job ", job_id, " does not exist"));
    if (IsTerminal(job->state()) && job->state() != JobState::kCancelled) {
      return absl::FailedPreconditionError(absl::StrCat("job ", job_id, " already ended ",
                                                        ToString(job->state()),
                                                        "; only unfinished jobs can be cancelled"));
    }
    if (job->state() != JobState::kCancelled) {
      if (absl::Status s = job->Cancel(reason, by); !s.ok()) return s;
    }
    view = job->View();
    if (!job->spec_released()) return view;
  }
  return WithStoredSpec(std::move(view));
}

absl::Status Coordinator::CheckLimits(const SubmitRequestData& request) const {
  absl::MutexLock lock(&mu_);
  return limits_.Check(request);
}

void Coordinator::SetLimits(std::optional<LimitsConfig> limits) {
  absl::MutexLock lock(&mu_);
  limits_.Set(std::move(limits));
  schedule_dirty_ = true;
}

}  // namespace deepnet::coordinator
