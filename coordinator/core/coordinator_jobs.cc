// Coordinator: the job lifecycle. Every state change goes through Move() (the store checks it
// against the transition table); stopping a job's ranks is BeginStop -> (exits or timeout) ->
// FinishStop, which then restarts, cancels or fails the job.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "coordinator/auth/auth.h"
#include "coordinator/core/checkpoint_listing.h"
#include "coordinator/core/coordinator.h"
#include "coordinator/core/job_events.h"

namespace deepnet::coordinator {
namespace {

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

absl::Status Coordinator::Move(JobRuntime& job, JobState to, const std::string& reason,
                               std::optional<RecoveryCause> cause) {
  // The step lives in memory between throttled writes: store it with the final state.
  const int64_t step = job.record.last_step;
  if (IsTerminal(to)) PersistStep(job, step);
  StateChange change;
  change.expected = job.record.state;
  change.to = to;
  change.reason = reason;
  change.cause = cause;
  absl::StatusOr<JobRecord> updated = store_->Transition(job.record.id, change);
  if (!updated.ok()) {
    spdlog::error("job {}: {} -> {} failed: {}", job.record.id,
                  std::string(ToString(job.record.state)), std::string(ToString(to)),
                  updated.status().ToString());
    return updated.status();
  }
  --state_counts_[job.record.state];
  ++state_counts_[to];
  job.record = *updated;
  job.record.last_step = step;
  job.state_since = Clock::now();
  SyncEvents(job);
  const double since_submit = static_cast<double>(SystemNowMs() - job.record.created_ms) / 1000.0;
  if (to == JobState::kStarting && !job.ever_started) {
    job.ever_started = true;
    if (metrics_ != nullptr) metrics_->ObserveQueueWait(since_submit);
  }
  if (to == JobState::kRunning) {
    job.last_progress = Clock::now();
    if (!job.ever_running) {
      job.ever_running = true;
      job.start_time_ms = SystemNowMs();
      if (metrics_ != nullptr) metrics_->ObserveTimeToRunning(since_submit);
    }
  }
  if (IsTerminal(to)) {
    job.end_time_ms = SystemNowMs();
    // Per-job series describe live training; an ended job's stay in GetJob/StreamMetrics.
    if (metrics_ != nullptr) metrics_->RemoveJob(job.record.id);
  }
  UpdateGauges();
  spdlog::info("job {}: {} -> {}{}{}", job.record.id, std::string(ToString(change.expected)),
               std::string(ToString(to)), reason.empty() ? "" : ": ", reason);
  return absl::OkStatus();
}

void Coordinator::AddEvent(JobRuntime& job, JobEventView event) {
  event.attempt = event.attempt != 0 ? event.attempt : job.record.attempt;
  const EncodedEvent encoded = EncodeJobEvent(event);
  absl::StatusOr<JobEvent> stored = store_->AppendEvent(job.record.id, encoded.kind, encoded.message);
  if (!stored.ok()) {
    spdlog::error("job {}: recording a {} event failed: {}", job.record.id, encoded.kind,
                  stored.status().ToString());
    return;
  }
  std::vector<JobEventView> decoded = DecodeJobEvents({*stored}, &job.decoded_attempt);
  job.events.insert(job.events.end(), decoded.begin(), decoded.end());
  NotifyFeed(job.record.id);
}

void Coordinator::SyncEvents(JobRuntime& job) {
  absl::StatusOr<std::vector<JobEvent>> stored =
      store_->ListEvents(job.record.id, LastEventSeq(job));
  if (!stored.ok()) {
    spdlog::error("job {}: reading its new events: {}", job.record.id, stored.status().ToString());
    return;
  }
  std::vector<JobEventView> decoded = DecodeJobEvents(*stored, &job.decoded_attempt);
  job.events.insert(job.events.end(), decoded.begin(), decoded.end());
  if (!decoded.empty()) NotifyFeed(job.record.id);
}

void Coordinator::Enqueue(JobRuntime& job) {
  job.pending_reason.clear();  // from an earlier stay in the queue; the next pass sets both
  job.pending_code.reset();
  GangRequest request;
  request.job_id = job.record.id;
  request.priority = job.record.priority;
  // Creation order survives restarts (job ids carry it), so a restarted job keeps its place.
  absl::string_view digits = job.record.id;
  uint64_t number = 0;
  if (!absl::ConsumePrefix(&digits, "j-") || !absl::SimpleAtoi(digits, &number)) {
    number = static_cast<uint64_t>(job.record.created_ms);
  }
  request.submit_seq = number;
  request.pipeline_stages = job.record.pipeline_stages;
  request.memory_per_rank_bytes = job.spec.memory_per_rank_bytes;
  request.memory_biggest_part = job.spec.memory_biggest_part;
  request.data_parallel = job.record.data_parallel;
  request.user = job.record.owner;
  request.team = job.spec.team;
  if (absl::Status s = scheduler_->Enqueue(request); !s.ok()) {
    spdlog::error("job {}: cannot queue: {}", job.record.id, s.ToString());
    return;
  }
  job.queued = true;
  schedule_dirty_ = true;
}

void Coordinator::RunScheduler() {
  if (!schedule_dirty_) return;
  schedule_dirty_ = false;
  const Clock::time_point t0 = Clock::now();
  UpdateRankCaps();
  std::vector<Placement> placements = scheduler_->Schedule();
  if (metrics_ != nullptr) metrics_->ObserveSchedulingDecision(Seconds(Clock::now() - t0));
  for (const Placement& placement : placements) {
    JobRuntime* job = FindJob(placement.job_id);
    if (job == nullptr) continue;
    job->queued = false;
    job->placed = true;
    if (job->record.state == JobState::kQueued &&
        !Move(*job, JobState::kPlacing, "all ranks fit").ok()) {
      continue;
    }
    StartAttempt(*job, placement);
  }
  RefreshPending();
}

void Coordinator::RefreshPending() {
  pending_counts_.clear();
  UpdateRankCaps();
  for (const PendingJob& pending : scheduler_->Pending()) {
    JobRuntime* job = FindJob(pending.job_id);
    if (job == nullptr) continue;
    ++pending_counts_[pending.code];
    if (job->record.state == JobState::kPlacing) {
      // A restarted job that does not fit now waits in the queue like any other.
      (void)Move(*job, JobState::kQueued, pending.reason);
    }
    job->pending_reason = pending.reason;
    job->pending_code = pending.code;
  }
}

void Coordinator::FillOwner(const std::string& owner, AssignmentCommand* command) const {
  command->owner = owner;
  if (options_.accounts == nullptr) return;
  // Looked up at each placement: a job placed after a restart, or after the tokens file changed,
  // runs with the account as it is now.
  absl::StatusOr<Principal> account = options_.accounts->FindUser(owner);
  if (!account.ok()) {
    spdlog::warn("owner {}: {}; assigning without teams or trainer account", owner,
                 std::string(account.status().message()));
    return;
  }
  command->owner_teams = account->teams;
  command->uid = account->uid;
  command->gid = account->gid;
}

void Coordinator::StartAttempt(JobRuntime& job, const Placement& placement) {
  std::map<std::string, int> per_worker;
  for (const RankSlot& slot : placement.ranks) ++per_worker[slot.worker_id];
  std::vector<std::string> where;
  for (const auto& [worker, n] : per_worker) where.push_back(absl::StrCat(worker, " x", n));
  if (!Move(job, JobState::kStarting, absl::StrCat("ranks on ", absl::StrJoin(where, ", "))).ok()) {
    return;
  }
  const int d = job.record.data_parallel;
  job.ranks.clear();
  for (size_t r = 0; r < placement.ranks.size(); ++r) {
    RankRuntime rank;
    rank.view.rank = static_cast<int>(r);
    rank.view.stage = static_cast<int>(r) / d;
    rank.view.replica = static_cast<int>(r) % d;
    rank.view.worker_id = placement.ranks[r].worker_id;
    rank.view.slot = placement.ranks[r].slot;
    job.ranks.push_back(rank);
  }
  job.last_progress = Clock::now();
  job.attempt_max_step = 0;
  job.resumed_step.reset();
  JobEventView placed;
  placed.type = EventType::kPlaced;
  placed.message = absl::StrJoin(where, ", ");
  for (const RankRuntime& r : job.ranks) placed.rank_workers.push_back(r.view.worker_id);
  AddEvent(job, placed);
  const RendezvousScope scope{job.record.id, job.record.attempt};
  if (absl::Status s = rendezvous_->OpenAttempt(scope); !s.ok()) {
    spdlog::warn("job {}: opening the rendezvous: {}", job.record.id, s.ToString());
  }
  // Every worker must hold a session before anything is sent: a gang starts whole or not at all.
  for (const auto& [worker_id, n] : per_worker) {
    auto it = workers_.find(worker_id);
    if (it == workers_.end() || it->second.sink == nullptr || it->second.lost) {
      for (RankRuntime& r : job.ranks) r.exited = true;
      FailRanks(job, RecoveryCause::kWorkerLost,
                absl::StrCat("worker ", worker_id, " has no session to start ranks on"));
      return;
    }
  }
  for (const auto& [worker_id, n] : per_worker) {
    AssignmentCommand command;
    command.job_id = job.record.id;
    command.attempt = job.record.attempt;
    command.world_size = static_cast<int>(job.ranks.size());
    command.config_yaml = job.record.spec_yaml;
    command.rendezvous_address = rendezvous_address_;
    FillOwner(job.record.owner, &command);
    for (const RankRuntime& r : job.ranks) {
      if (r.view.worker_id != worker_id) continue;
      command.ranks.push_back({r.view.rank, r.view.slot});
    }
    WorkerRuntime& worker = workers_.at(worker_id);
    worker.sink->SendAssignment(worker.epoch, command);
  }
}

void Coordinator::FailRanks(JobRuntime& job, RecoveryCause cause, const std::string& message) {
  if (job.stopping) return;  // already stopping: the first cause stands
  if (job.record.state != JobState::kStarting && job.record.state != JobState::kRunning) return;
  if (!Move(job, JobState::kRecovering, message, cause).ok()) return;
  BeginStop(job, AfterStop::kRestart, message);
}

void Coordinator::BeginStop(JobRuntime& job, AfterStop after, const std::string& message) {
  job.stopping = true;
  job.after_stop = after;
  job.stop_message = message;
  job.stop_deadline = Clock::now() + options_.stop_timeout;
  std::map<std::string, bool> to_stop;
  for (const RankRuntime& r : job.ranks) {
    if (!r.exited) to_stop[r.view.worker_id] = true;
  }
  for (const auto& [rank, view] : job.reattached) to_stop[view.worker_id] = true;
  job.reattached.clear();
  job.reattach_exits.clear();
  job.reattaching = false;
  AllowForDrainingWorkers(job);
  for (const auto& [worker_id, unused] : to_stop) {
    SendCancel(worker_id, CancellationCommand{job.record.id, job.record.attempt, message,
                                              options_.stop_grace.count()});
  }
  MaybeFinishStop(job);
}

void Coordinator::AllowForDrainingWorkers(JobRuntime& job) {
  for (const RankRuntime& r : job.ranks) {
    if (r.exited) continue;
    auto w = workers_.find(r.view.worker_id);
    if (w == workers_.end() || !w->second.draining) continue;
    job.stop_deadline =
        std::max(job.stop_deadline, Clock::now() + w->second.drain_grace + std::chrono::seconds(5));
  }
}

void Coordinator::MaybeFinishStop(JobRuntime& job) {
  if (!job.stopping) return;
  for (const RankRuntime& r : job.ranks) {
    if (!r.exited) return;
  }
  FinishStop(job);
}

void Coordinator::ReleaseAttempt(JobRuntime& job) {
  if (job.placed) {
    if (absl::Status s = scheduler_->Release(job.record.id); !s.ok()) {
      spdlog::warn("job {}: release: {}", job.record.id, s.ToString());
    }
    job.placed = false;
    schedule_dirty_ = true;
  }
  if (job.record.attempt > 0) rendezvous_->DropAttempt({job.record.id, job.record.attempt});
  job.ranks.clear();
}

void Coordinator::FinishStop(JobRuntime& job) {
  job.stopping = false;
  ReleaseAttempt(job);
  switch (job.after_stop) {
    case AfterStop::kCancel:
      (void)Move(job, JobState::kCancelled, job.stop_message);
      return;
    case AfterStop::kFail:
      (void)Move(job, JobState::kFailed, job.stop_message);
      return;
    case AfterStop::kRestart:
      break;
  }
  if (job.record.state != JobState::kRecovering) return;
  const RecoveryCause cause = job.record.last_recovery_cause.value_or(RecoveryCause::kWorkerExit);
  const bool counted = CountsAgainstMaxRestarts(cause);
  if (counted && job.record.restarts >= job.record.max_restarts) {
    (void)Move(job, JobState::kFailed,
               absl::StrCat("gave up after ", job.record.restarts, " restart(s) (max_restarts ",
                            job.record.max_restarts, "): ", job.stop_message));
    return;
  }
  job.announced_resume_step = ResumeStepOf(job);
  const std::string why = absl::StrCat(
      counted ? absl::StrCat("restart ", job.record.restarts + 1, " of ", job.record.max_restarts)
              : std::string("restart after a worker shut down (not counted against max_restarts)"),
      " from the latest checkpoint",
      job.announced_resume_step ? absl::StrCat(" (step ", *job.announced_resume_step, ")")
                                : std::string(" (none yet: from step 0)"));
  if (!Move(job, JobState::kPlacing, why).ok()) return;
  if (metrics_ != nullptr) metrics_->IncRestarts(cause);
  Enqueue(job);
}

void Coordinator::CheckAllRunning(JobRuntime& job) {
  if (job.record.state != JobState::kStarting || job.stopping || job.ranks.empty()) return;
  for (const RankRuntime& r : job.ranks) {
    if (r.phase != TaskPhase::kRunning && !r.exited) return;
  }
  (void)Move(job, JobState::kRunning,
             absl::StrCat("all ", job.ranks.size(), " ranks running", ResumeNote(job)));
}

std::optional<int64_t> Coordinator::ResumeStepOf(const JobRuntime& job) const {
  if (!job.spec.checkpoint_dir.empty()) {
    absl::StatusOr<std::vector<CheckpointView>> found =
        ListCheckpointFolders(job.spec.checkpoint_dir, /*with_sizes=*/false);
    if (found.ok()) {
      for (const CheckpointView& c : *found) {
        if (c.latest) return c.step;
      }
      if (!found->empty()) return found->back().step;  // oldest first
      return std::nullopt;
    }
    spdlog::warn("job {}: {}; announcing the newest reported checkpoint", job.record.id,
                 found.status().ToString());
  }
  if (job.latest_checkpoint_step > 0) return job.latest_checkpoint_step;
  return std::nullopt;
}

std::string Coordinator::ResumeNote(const JobRuntime& job) {
  if (!job.resumed_step) return "";
  if (*job.resumed_step == 0) return "; started from step 0 (no checkpoint loaded)";
  return absl::StrCat("; resumed from checkpoint step ", *job.resumed_step);
}

void Coordinator::CheckJobTimers(Clock::time_point now) {
  for (auto& [id, job] : jobs_) {
    if (IsTerminal(job.record.state)) continue;
    if (job.stopping && now >= job.stop_deadline) {
      for (RankRuntime& r : job.ranks) r.exited = true;
      FinishStop(job);
      continue;
    }
    if (job.reattaching && now >= job.reattach_deadline) {
      const std::string why =
          absl::StrCat("only ", job.reattached.size(), " of ",
                       job.record.pipeline_stages * job.record.data_parallel,
                       " ranks reported after the coordinator restarted");
      job.reattaching = false;
      for (const auto& [rank, view] : job.reattached) {
        SendCancel(view.worker_id, CancellationCommand{id, job.record.attempt, why,
                                                       options_.stop_grace.count()});
      }
      job.reattached.clear();
      job.reattach_exits.clear();
      if (Move(job, JobState::kRecovering, why, RecoveryCause::kWorkerLost).ok()) {
        job.after_stop = AfterStop::kRestart;
        job.stop_message = why;
        FinishStop(job);
      }
      continue;
    }
    if (job.stopping || job.reattaching) continue;
    if (job.record.state == JobState::kStarting &&
        Seconds(now - job.state_since) > job.spec.start_timeout_s) {
      FailRanks(job, RecoveryCause::kStartTimeout,
                absl::StrCat("ranks did not all start within scheduling.start_timeout_s = ",
                             job.spec.start_timeout_s, " s"));
    } else if (job.record.state == JobState::kRunning && job.spec.hang_timeout_s > 0 &&
               Seconds(now - job.last_progress) > job.spec.hang_timeout_s) {
      const std::string why = absl::StrCat("no new step for ", job.spec.hang_timeout_s,
                                           " s (scheduling.hang_timeout_s); last step ",
                                           job.record.last_step);
      JobEventView hang;
      hang.type = EventType::kHangDetected;
      hang.message = why;
      AddEvent(job, hang);
      FailRanks(job, RecoveryCause::kHang, why);
    }
  }
}

absl::StatusOr<JobView> Coordinator::Cancel(const std::string& job_id, const std::string& reason,
                                            const std::string& by) {
  absl::MutexLock lock(&mu_);
  JobRuntime* job = FindJob(job_id);
  if (job == nullptr) return absl::NotFoundError(absl::StrCat("job ", job_id, " does not exist"));
  if (job->record.state == JobState::kCancelled) return ViewOf(*job);
  if (IsTerminal(job->record.state)) {
    return absl::FailedPreconditionError(absl::StrCat("job ", job_id, " already ended ",
                                                      ToString(job->record.state),
                                                      "; only unfinished jobs can be cancelled"));
  }
  const std::string colon_reason = reason.empty() ? "" : ": " + reason;
  const std::string why = !by.empty()      ? absl::StrCat("cancelled by ", by, colon_reason)
                          : reason.empty() ? std::string("cancelled by the user")
                                           : "cancelled: " + reason;
  JobEventView requested;
  requested.type = EventType::kCancelRequested;
  requested.message = by.empty() ? reason : absl::StrCat("by ", by, colon_reason);
  AddEvent(*job, requested);
  if (job->stopping) {
    job->after_stop = AfterStop::kCancel;
    job->stop_message = why;
  } else if (job->queued) {
    if (absl::Status s = scheduler_->Cancel(job_id); !s.ok()) return s;
    job->queued = false;
    schedule_dirty_ = true;
    if (absl::Status s = Move(*job, JobState::kCancelled, why); !s.ok()) return s;
  } else if (job->placed || job->reattaching) {
    BeginStop(*job, AfterStop::kCancel, why);
  } else {
    if (absl::Status s = Move(*job, JobState::kCancelled, why); !s.ok()) return s;
  }
  return ViewOf(*job);
}

}  // namespace deepnet::coordinator
