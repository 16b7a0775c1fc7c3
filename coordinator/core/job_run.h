#pragma once
// One job's life in the coordinator: its stored record, the rest of its spec, its current
// attempt and the transitions that drive it through its states (docs/ARCHITECTURE.md
// "Coordinator"). Every state change goes through Move() (the store checks it against the
// transition table); stopping a job's ranks is BeginStop -> (exits or timeout) -> FinishStop,
// which then restarts, cancels or fails the job.
//
// Not thread-safe: the Coordinator calls every method with its mutex held, and a JobRun calls
// its collaborators (JobRunContext) only from within those calls.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "coordinator/core/coordinator_types.h"
#include "coordinator/scheduler/gang_types.h"
#include "coordinator/core/job_reattach.h"
#include "coordinator/core/job_run_context.h"
#include "coordinator/core/job_run_state.h"
#include "coordinator/core/job_settings.h"
#include "coordinator/core/job_spec.h"
#include "coordinator/store/job_store.h"
#include "coordinator/core/metric_point_buffer.h"
#include "coordinator/core/stored_job.h"

namespace deepnet::coordinator {

class JobRun {
 public:
  // `context` must outlive the job. The record is the stored one; `spec` the parsed spec (its
  // name, P, D, priority, max_restarts and checkpoint dir are the record's).
  JobRun(const JobRunContext* context, JobRecord record, const JobSpecInfo& spec);
  JobRun(const JobRun&) = delete;
  JobRun& operator=(const JobRun&) = delete;

  // --- What the job is. ---
  const JobRecord& record() const { return stored_.record(); }
  const std::string& id() const { return record().id; }
  JobState state() const { return record().state; }
  const JobSettings& settings() const { return settings_; }
  // The spec as the API shows it: the record's fields and the settings.
  JobSpecInfo spec() const { return SpecOf(record(), settings_); }
  bool queued() const { return attempt_.queued; }
  bool placed() const { return attempt_.placed; }
  bool stopping() const { return stop_.stopping; }
  bool reattaching() const { return reattach_.active(); }
  const std::vector<RankRun>& ranks() const { return attempt_.ranks; }
  // After a coordinator restart, the running ranks found so far (not yet re-adopted).
  const std::map<int, RankView>& reattached() const { return reattach_.running(); }
  const JobEventLog& events() const { return stored_.events(); }
  const MetricPointBuffer& points() const { return points_; }
  const std::map<int64_t, int>& checkpoint_attempts() const {
    return milestones_.checkpoint_attempts;
  }
  // What GetJob shows; a finished job's spec_yaml is empty (StoredJob keeps it in the store).
  JobView View() const;
  // Whether View()'s spec_yaml is left to the store (a finished job).
  bool spec_released() const { return stored_.spec_released(); }
  // Whether a rank of the current attempt still runs on the worker.
  bool HoldsLiveRankOn(const std::string& worker_id) const;
  // Whether `worker_id` holds (or held) `rank` of the current attempt: the only worker whose
  // reports of that rank count.
  bool RankHeldBy(int64_t rank, const std::string& worker_id) const;

  // --- Loading and the scheduler. ---
  // Loaded from the store at coordinator start: reads its events, then queues it, or waits
  // for its ranks until `reattach_until`, or resumes its recovery. `refused`: why its spec
  // breaks today's rules (a job not started yet is then cancelled), empty when it does not.
  absl::Status Load(const std::string& refused, JobClock::time_point reattach_until);
  // Just created by a submission: reads its creation event and queues it.
  void Submitted();
  void Enqueue();
  // The scheduler placed it: starts an attempt there. `base` carries what every assignment of
  // the job says beyond its ranks (owner, account, rendezvous address).
  void OnPlaced(const Placement& placement, const AssignmentCommand& base);
  // A scheduling pass found it waiting.
  void OnPending(const PendingJob& pending);
  // Start and hang timeouts, stop and reattach deadlines.
  void CheckTimers(JobClock::time_point now);
  // Whether CheckTimers can do anything: not for a queued job (it holds nothing and waits for
  // the scheduler, which has no deadline) nor a finished one. Inline, so that the control loop
  // passes over the queue of a busy cluster without a call per job.
  bool HasTimers() const {
    const JobState s = state();
    return s != JobState::kQueued && !IsTerminal(s);
  }
  [[nodiscard]] absl::Status Cancel(const std::string& reason, const std::string& by);

  // --- What workers report (coordinator_workers.cc checked the worker's epoch). ---
  void OnTrainerExit(const std::string& worker_id, const TrainerExitReport& exit);
  // Points, checkpoints and guard events of a rank: accepted only from the worker that holds
  // that rank of the current attempt (while reattaching: the one its PLACED event names), at
  // most kMaxPointsPerReport points and kMaxCheckpointsPerReport new checkpoint steps (and as
  // many guard events) each.
  void OnMetrics(const std::string& worker_id, const MetricReport& report);
  static constexpr size_t kMaxPointsPerReport = 4096;
  static constexpr size_t kMaxCheckpointsPerReport = 16;
  void OnAssignmentRefused(const std::string& worker_id, const std::string& error, bool retry);
  // A worker listed `task` (of this job) as running; sets *cancel when it must stop. Returns
  // whether the task is a live rank of the current attempt.
  bool OnTaskListed(const std::string& worker_id, const TaskReport& task,
                    std::optional<CancellationCommand>* cancel);
  // Ranks of the attempt are gone with their worker (lost, or re-registered without them).
  void OnRanksLost(const std::string& worker_id, const std::vector<int>& ranks,
                   const std::string& why);
  // A re-registering worker listed only `listed` of the ranks placed on it: the others are lost.
  void LoseUnlistedRanks(const std::string& worker_id, const std::set<int>& listed);
  // The worker was lost: ranks found there after a restart will not be re-adopted.
  void ForgetReattachedOn(const std::string& worker_id) { reattach_.ForgetWorker(worker_id); }
  // A worker holding ranks is shutting down: the job recovers elsewhere.
  void OnWorkerDraining(const std::string& why);

 private:
  absl::Status Move(JobState to, const std::string& reason,
                    std::optional<RecoveryCause> cause = std::nullopt);
  // True when `write` (a transition that ends a stop) succeeded; otherwise keeps the job
  // stopping and has CheckTimers run FinishStop again after a backoff (1 s doubling to 30 s),
  // logging the store's error each time.
  bool Stored(const absl::Status& write);
  void StartAttempt(const Placement& placement, const AssignmentCommand& base);
  void FailRanks(RecoveryCause cause, const std::string& message);
  void BeginStop(AfterStop after, const std::string& message);
  // A stopping job's ranks on a draining worker are stopped by that worker with its own grace
  // period, which may be longer than the usual stop: pushes the stop deadline past it.
  void AllowForDrainingWorkers();
  void MaybeFinishStop();
  void FinishStop();
  void ReleaseAttempt();
  void CheckAllRunning();
  void MarkRankExited(int rank);
  // A worker other than `reporter` holding a live rank of the attempt whose session is gone (or
  // that is lost): a rank failing then most likely failed on that worker's loss.
  std::optional<std::string> UnreachableWorkerOf(const std::string& reporter) const;
  // The step a restart resumes from: the checkpoint its folder's `latest` names (else the newest
  // complete one; the trainer's rule), the newest reported one when the folder cannot be read,
  // nullopt without checkpoints. Reads the folder's listing.
  std::optional<int64_t> ResumeStepOf() const;
  // "; resumed from checkpoint step N" once the current attempt said, "" before.
  std::string ResumeNote() const;
  // Once every rank of a reattaching job is accounted for (running or exited), re-adopts the
  // running ones and acts on the exits.
  void MaybeCompleteReattach();
  void ReattachTimedOut();
  // A divergence-guard point of a metric report (MetricPoint::guard_event): event and metrics.
  void OnGuardEvent(const MetricPoint& point);

  const JobRunContext& context_;
  StoredJob stored_;  // the record and events, and every store write
  JobSettings settings_;
  AttemptState attempt_;
  PendingState pending_;
  JobTimers timers_;
  StopIntent stop_;
  JobReattach reattach_;
  JobMilestones milestones_;
  MetricPointBuffer points_;
};

}  // namespace deepnet::coordinator
