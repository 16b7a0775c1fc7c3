#pragma once
// Fair sharing in the coordinator: admission checks against the limits file (team membership,
// priority, gang size, queued jobs) and the rank caps the gang scheduler applies to queued
// jobs. Every count comes from the jobs, loaded from the job store at start, so limits hold
// across restarts.
//
// Not thread-safe: the Coordinator calls it with its mutex held.

#include <functional>
#include <map>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "coordinator/core/coordinator_types.h"
#include "coordinator/scheduler/fair_share.h"
#include "coordinator/scheduler/gang_scheduler.h"
#include "coordinator/core/job_run.h"

namespace deepnet::coordinator {

class LimitChecks {
 public:
  // `is_admin` (may be null: nobody) says whether a job owner is an admin (admins have only
  // their own users: limits); it must not call back into the coordinator.
  LimitChecks(std::optional<LimitsConfig> limits,
              std::function<bool(const std::string& user)> is_admin);

  void Set(std::optional<LimitsConfig> limits) { limits_ = std::move(limits); }
  // The limits a submission must meet whatever the queue holds (Coordinator::CheckLimits).
  absl::Status Check(const SubmitRequestData& request) const;
  // Submit's checks: Check() and max_queued_jobs over `jobs`, both skipped for a replay of an
  // idempotency key.
  absl::Status CheckSubmit(const SubmitRequestData& request,
                           const std::map<std::string, JobRun>& jobs) const;
  // The rank caps of the owners and teams of queued jobs, with the ranks their placed and
  // reattaching jobs hold.
  RankCaps CapsFor(const std::map<std::string, JobRun>& jobs) const;

 private:
  ShareLimits UserLimits(const std::string& user, bool admin) const;

  std::optional<LimitsConfig> limits_;
  std::function<bool(const std::string& user)> is_admin_;
};

}  // namespace deepnet::coordinator
