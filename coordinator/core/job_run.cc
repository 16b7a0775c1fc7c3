// JobRun: loading, the scheduler's placements, state changes, stops and restarts, timers and
// cancellation. What workers report is in job_run_reports.cc.
#include "coordinator/core/job_run.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "coordinator/core/checkpoint_listing.h"

namespace deepnet::coordinator {
namespace {

double Seconds(JobClock::duration d) { return std::chrono::duration<double>(d).count(); }

// The wait after the n-th failure in a row (n >= 1) of something that passes by itself (a store
// write that ends a stop, a placement a worker refused for now): 1 s, doubling, at most 30 s.
// The state reason of a cancelled job from its CANCEL_REQUESTED event's message ("by alice:
// reason", "by alice", a reason alone, or empty): one wording for a cancel and for the one a
// restarted coordinator finishes.
std::string CancelledReason(const std::string& requested) {
  if (requested.empty()) return "cancelled by the user";
  if (absl::StartsWith(requested, "by ")) return "cancelled " + requested;
  return "cancelled: " + requested;
}

std::chrono::milliseconds RetryWait(int failures_in_a_row) {
  const int doublings = std::clamp(failures_in_a_row - 1, 0, 5);
  return std::min(std::chrono::milliseconds(1000 << doublings), std::chrono::milliseconds(30000));
}

}  // namespace

JobRun::JobRun(const JobRunContext* context, JobRecord record, const JobSpecInfo& spec)
    : context_(*context),
      stored_(context->store, context->observer, std::move(record)),
      settings_(SettingsOf(spec)) {
  timers_.state_since = timers_.last_progress = JobClock::now();
}

JobView JobRun::View() const {
  JobView view;
  view.record = record();
  if (record().state == JobState::kQueued && !pending_.reason.empty()) {
    view.record.state_reason = pending_.reason;
    view.pending_code = pending_.code;
  }
  view.spec = spec();
  if (!attempt_.ranks.empty()) {
    for (const RankRun& r : attempt_.ranks) view.placement.push_back(r.view);
  } else {
    for (const auto& [rank, r] : reattach_.running()) view.placement.push_back(r);
  }
  view.latest_checkpoint_step = milestones_.latest_checkpoint_step;
  view.start_time_ms = milestones_.start_time_ms;
  view.end_time_ms = milestones_.end_time_ms;
  view.last_event_seq = stored_.events().last_sequence();
  return view;
}

bool JobRun::HoldsLiveRankOn(const std::string& worker_id) const {
  return std::any_of(attempt_.ranks.begin(), attempt_.ranks.end(),
                     [&](const RankRun& r) { return !r.exited && r.view.worker_id == worker_id; });
}

bool JobRun::RankHeldBy(int64_t rank, const std::string& worker_id) const {
  if (reattach_.active()) {
    return rank >= 0 && rank < record().world_size() &&
           reattach_.Holds(static_cast<int>(rank), worker_id);
  }
  return rank >= 0 && rank < static_cast<int64_t>(attempt_.ranks.size()) &&
         attempt_.ranks[rank].view.worker_id == worker_id;
}

absl::Status JobRun::Load(const std::string& refused, JobClock::time_point reattach_until) {
  if (absl::Status s = stored_.LoadEvents(); !s.ok()) return s;
  std::vector<std::string> placed;  // The current attempt's PLACED event, by rank.
  // A stop asked for after the last transition, which the previous process did not finish.
  std::optional<std::pair<AfterStop, std::string>> unfinished_stop;
  for (const JobEventView& e : stored_.events().all()) {
    if (e.type == EventType::kPlaced && e.attempt == record().attempt) placed = e.rank_workers;
    if (e.type == EventType::kStateChanged) unfinished_stop.reset();
    if (e.type == EventType::kFailRequested) unfinished_stop = {AfterStop::kFail, e.message};
    if (e.type == EventType::kCancelRequested) {
      unfinished_stop = {AfterStop::kCancel, CancelledReason(e.message)};
    }
    if (e.type == EventType::kStateChanged && e.to_state == JobState::kRunning &&
        milestones_.start_time_ms == 0) {
      milestones_.start_time_ms = e.time_ms;
    }
    if (e.type == EventType::kStateChanged && IsTerminal(e.to_state)) {
      milestones_.end_time_ms = e.time_ms;
    }
    if (e.type == EventType::kCheckpointSaved) {
      milestones_.latest_checkpoint_step =
          std::max(milestones_.latest_checkpoint_step, e.checkpoint_step);
      milestones_.checkpoint_attempts[e.checkpoint_step] = e.attempt;
    }
  }
  milestones_.ever_started = record().attempt > 0;
  milestones_.ever_running = milestones_.start_time_ms > 0;
  if (!refused.empty() &&
      (record().state == JobState::kQueued || record().state == JobState::kPlacing)) {
    spdlog::warn("job {}: {}", record().id, refused);
    return Move(JobState::kCancelled, refused);
  }
  switch (record().state) {
    case JobState::kQueued:
      Enqueue();
      break;
    case JobState::kPlacing:
      // The placement lived in the previous process's memory only.
      if (Move(JobState::kQueued, "coordinator restarted while placing").ok()) Enqueue();
      break;
    case JobState::kStarting:
    case JobState::kRunning:
      if (unfinished_stop.has_value()) {
        // Finish the stop the previous process began: ranks the workers list are told to stop
        // (OnTaskListed), and at the deadline the job ends as asked.
        stop_.stopping = true;
        stop_.after = unfinished_stop->first;
        stop_.message = unfinished_stop->second;
        stop_.deadline = reattach_until;
        spdlog::info("job {}: finishing the stop begun before the coordinator restarted: {}",
                     record().id, stop_.message);
        break;
      }
      reattach_.Begin(reattach_until);
      // Only the workers that held the ranks may report them back (not any worker's token).
      if (static_cast<int64_t>(placed.size()) == record().world_size()) {
        reattach_.ExpectPlacement(std::move(placed));
      }
      break;
    case JobState::kRecovering:
      // Its ranks were being stopped: cancel whatever still reports, then restart.
      stop_.stopping = true;
      stop_.after = AfterStop::kRestart;
      stop_.message = "recovery resumed after a coordinator restart";
      stop_.deadline = reattach_until;
      if (unfinished_stop.has_value()) {  // Cancelled (or failed) while it recovered.
        stop_.after = unfinished_stop->first;
        stop_.message = unfinished_stop->second;
      }
      break;
    default:
      break;
  }
  return absl::OkStatus();
}

void JobRun::Submitted() {
  stored_.SyncEvents();  // the creation event
  Enqueue();
}

absl::Status JobRun::Move(JobState to, const std::string& reason,
                          std::optional<RecoveryCause> cause) {
  const JobState from = record().state;
  if (absl::Status s = stored_.Transition(to, reason, cause); !s.ok()) return s;
  timers_.state_since = JobClock::now();
  CoordinatorMetrics* metrics = context_.metrics;
  const double since_submit = static_cast<double>(SystemNowMs() - record().created_ms) / 1000.0;
  if (to == JobState::kStarting && !milestones_.ever_started) {
    milestones_.ever_started = true;
    if (metrics != nullptr) metrics->ObserveQueueWait(since_submit);
  }
  if (to == JobState::kRunning) {
    timers_.last_progress = JobClock::now();
    timers_.placement_refusals = 0;  // Refusals in a row end here.
    if (!milestones_.ever_running) {
      milestones_.ever_running = true;
      milestones_.start_time_ms = SystemNowMs();
      if (metrics != nullptr) metrics->ObserveTimeToRunning(since_submit);
    }
  }
  if (IsTerminal(to)) {
    milestones_.end_time_ms = SystemNowMs();
    // Per-job series describe live training; an ended job's stay in GetJob/StreamMetrics.
    if (metrics != nullptr) metrics->RemoveJob(record().id);
  }
  context_.observer->OnJobStateChanged(from, to);
  spdlog::info("job {}: {} -> {}{}{}", record().id, std::string(ToString(from)),
               std::string(ToString(to)), reason.empty() ? "" : ": ", reason);
  return absl::OkStatus();
}

void JobRun::Enqueue() {
  pending_ = PendingState{};  // from an earlier stay in the queue; the next pass sets it
  GangRequest request;
  request.job_id = record().id;
  request.priority = record().priority;
  // Creation order survives restarts (job ids carry it), so a restarted job keeps its place.
  absl::string_view digits = record().id;
  uint64_t number = 0;
  if (!absl::ConsumePrefix(&digits, "j-") || !absl::SimpleAtoi(digits, &number)) {
    number = static_cast<uint64_t>(record().created_ms);
  }
  request.submit_seq = number;
  request.pipeline_stages = record().pipeline_stages;
  request.memory_per_rank_bytes = settings_.memory_per_rank_bytes;
  request.memory_biggest_part = settings_.memory_biggest_part;
  request.data_parallel = record().data_parallel;
  request.user = record().owner;
  request.team = settings_.team;
  if (absl::Status s = context_.scheduler->Enqueue(request); !s.ok()) {
    spdlog::error("job {}: cannot queue: {}", record().id, s.ToString());
    return;
  }
  attempt_.queued = true;
  context_.observer->OnScheduleChanged();
}

void JobRun::OnPlaced(const Placement& placement, const AssignmentCommand& base) {
  attempt_.queued = false;
  attempt_.placed = true;
  if (record().state == JobState::kQueued && !Move(JobState::kPlacing, "all ranks fit").ok()) {
    return;
  }
  StartAttempt(placement, base);
}

void JobRun::OnPending(const PendingJob& pending) {
  if (record().state == JobState::kPlacing) {
    // A restarted job that does not fit now waits in the queue like any other.
    (void)Move(JobState::kQueued, pending.reason);
  }
  pending_.reason = pending.reason;
  pending_.code = pending.code;
}

void JobRun::StartAttempt(const Placement& placement, const AssignmentCommand& base) {
  std::map<std::string, int> per_worker;
  for (const RankSlot& slot : placement.ranks) ++per_worker[slot.worker_id];
  std::vector<std::string> where;
  for (const auto& [worker, n] : per_worker) where.push_back(absl::StrCat(worker, " x", n));
  if (!Move(JobState::kStarting, absl::StrCat("ranks on ", absl::StrJoin(where, ", "))).ok()) {
    return;
  }
  const int64_t d = record().data_parallel;
  attempt_.ranks.clear();
  for (size_t r = 0; r < placement.ranks.size(); ++r) {
    const int64_t rank = static_cast<int64_t>(r);
    RankRun run;
    run.view.rank = static_cast<int>(rank);
    run.view.stage = static_cast<int>(rank / d);
    run.view.replica = static_cast<int>(rank % d);
    run.view.worker_id = placement.ranks[r].worker_id;
    run.view.slot = placement.ranks[r].slot;
    attempt_.ranks.push_back(run);
  }
  timers_.last_progress = JobClock::now();
  attempt_.max_step = 0;
  attempt_.resumed_step.reset();
  JobEventView placed;
  placed.type = EventType::kPlaced;
  placed.message = absl::StrJoin(where, ", ");
  for (const RankRun& r : attempt_.ranks) placed.rank_workers.push_back(r.view.worker_id);
  stored_.AddEvent(placed);
  const RendezvousScope scope{record().id, record().attempt};
  if (absl::Status s = context_.rendezvous->OpenAttempt(scope); !s.ok()) {
    spdlog::warn("job {}: opening the rendezvous: {}", record().id, s.ToString());
  }
  // Every worker must hold a session before anything is sent: a gang starts whole or not at all.
  for (const auto& [worker_id, n] : per_worker) {
    if (!context_.workers->HasSession(worker_id)) {
      for (RankRun& r : attempt_.ranks) r.exited = true;
      FailRanks(RecoveryCause::kWorkerLost,
                absl::StrCat("worker ", worker_id, " has no session to start ranks on"));
      return;
    }
  }
  for (const auto& [worker_id, n] : per_worker) {
    AssignmentCommand command = base;
    command.job_id = record().id;
    command.job_uid = JobUid(record());
    command.attempt = record().attempt;
    command.world_size = static_cast<int>(attempt_.ranks.size());
    command.config_yaml = record().spec_yaml;
    for (const RankRun& r : attempt_.ranks) {
      if (r.view.worker_id != worker_id) continue;
      command.ranks.push_back(
          {r.view.rank, r.view.slot,
           context_.credentials == nullptr
               ? std::string()
               : context_.credentials->Mint(record().id, record().attempt, r.view.rank)});
    }
    (void)context_.workers->SendAssignment(worker_id, command);
  }
}

void JobRun::FailRanks(RecoveryCause cause, const std::string& message) {
  if (stop_.stopping) return;  // already stopping: the first cause stands
  if (record().state != JobState::kStarting && record().state != JobState::kRunning) return;
  stop_.cause = cause;
  if (absl::Status s = Move(JobState::kRecovering, message, cause); !s.ok()) {
    // The ranks are stopped all the same; FinishStop stores RECOVERING again.
    spdlog::error("job {}: cannot store RECOVERING ({}); stopping its ranks anyway", record().id,
                  s.ToString());
  }
  BeginStop(AfterStop::kRestart, message);
}

bool JobRun::Stored(const absl::Status& write) {
  if (write.ok()) {
    stop_.store_failures = 0;
    return true;
  }
  ++stop_.store_failures;
  const std::chrono::milliseconds backoff = RetryWait(stop_.store_failures);
  stop_.stopping = true;  // CheckTimers runs FinishStop again at the deadline.
  stop_.deadline = JobClock::now() + backoff;
  spdlog::error(
      "job {}: the job store refused the end of its stop ({}); it stays {} and the "
      "coordinator tries again in {} s (failure {} in a row)",
      record().id, write.ToString(), std::string(ToString(record().state)),
      backoff.count() / 1000.0, stop_.store_failures);
  return false;
}

void JobRun::OnWorkerDraining(const std::string& why) {
  FailRanks(RecoveryCause::kWorkerDrained, why);
  AllowForDrainingWorkers();  // also when it was already stopping for another cause
}

void JobRun::BeginStop(AfterStop after, const std::string& message) {
  // The intent is stored before any rank is signalled, so that a coordinator restarted in
  // between finishes this stop (Load) instead of re-adopting and restarting the job: RECOVERING
  // (a restart) is a stored state, a cancel has its CANCEL_REQUESTED event (Cancel), a failure
  // gets FAIL_REQUESTED here.
  if (after == AfterStop::kFail) {
    JobEventView failing;
    failing.type = EventType::kFailRequested;
    failing.message = message;
    stored_.AddEvent(failing);
  }
  stop_.stopping = true;
  stop_.after = after;
  stop_.message = message;
  stop_.deadline = JobClock::now() + context_.stop_timeout;
  std::map<std::string, bool> to_stop;
  for (const RankRun& r : attempt_.ranks) {
    if (!r.exited) to_stop[r.view.worker_id] = true;
  }
  for (const auto& [rank, view] : reattach_.End()) to_stop[view.worker_id] = true;
  AllowForDrainingWorkers();
  for (const auto& [worker_id, unused] : to_stop) {
    context_.workers->SendCancel(
        worker_id,
        CancellationCommand{record().id, record().attempt, message, context_.stop_grace.count()});
  }
  MaybeFinishStop();
}

void JobRun::AllowForDrainingWorkers() {
  for (const RankRun& r : attempt_.ranks) {
    if (r.exited) continue;
    const std::optional<std::chrono::milliseconds> grace =
        context_.workers->DrainGrace(r.view.worker_id);
    if (!grace.has_value()) continue;
    stop_.deadline = std::max(stop_.deadline, JobClock::now() + *grace + std::chrono::seconds(5));
  }
}

void JobRun::MaybeFinishStop() {
  if (!stop_.stopping) return;
  for (const RankRun& r : attempt_.ranks) {
    if (!r.exited) return;
  }
  FinishStop();
}

void JobRun::ReleaseAttempt() {
  if (attempt_.placed) {
    if (absl::Status s = context_.scheduler->Release(record().id); !s.ok()) {
      spdlog::warn("job {}: release: {}", record().id, s.ToString());
    }
    attempt_.placed = false;
    context_.observer->OnScheduleChanged();
  }
  if (record().attempt > 0) context_.rendezvous->DropAttempt({record().id, record().attempt});
  attempt_.ranks.clear();
}

void JobRun::FinishStop() {
  stop_.stopping = false;
  ReleaseAttempt();
  switch (stop_.after) {
    case AfterStop::kCancel:
      (void)Stored(Move(JobState::kCancelled, stop_.message));
      return;
    case AfterStop::kFail:
      (void)Stored(Move(JobState::kFailed, stop_.message));
      return;
    case AfterStop::kRestart:
      break;
  }
  if (record().state == JobState::kStarting || record().state == JobState::kRunning) {
    // FailRanks could not store RECOVERING: now, before the restart.
    const RecoveryCause cause = stop_.cause.value_or(RecoveryCause::kWorkerExit);
    if (!Stored(Move(JobState::kRecovering, stop_.message, cause))) return;
  }
  if (record().state != JobState::kRecovering) return;
  const RecoveryCause cause = record().last_recovery_cause.value_or(RecoveryCause::kWorkerExit);
  const bool counted = CountsAgainstMaxRestarts(cause);
  if (counted && record().restarts >= record().max_restarts) {
    (void)Stored(
        Move(JobState::kFailed,
             absl::StrCat("gave up after ", record().restarts, " restart(s) (max_restarts ",
                          record().max_restarts, "): ", stop_.message)));
    return;
  }
  attempt_.announced_resume_step = ResumeStepOf();
  const std::optional<int64_t>& resume = attempt_.announced_resume_step;
  const bool refused = cause == RecoveryCause::kPlacementRefused;
  // Counted once the move to PLACING is stored (a store retry must not double the wait).
  const std::chrono::milliseconds placement_wait = RetryWait(timers_.placement_refusals + 1);
  const std::string why = absl::StrCat(
      counted ? absl::StrCat("restart ", record().restarts + 1, " of ", record().max_restarts)
      : refused
          ? absl::StrCat("placing again in ", placement_wait.count() / 1000.0,
                         " s after a refusal that passes (not counted against max_restarts)")
          : std::string("restart after a worker shut down (not counted against max_restarts)"),
      " from the latest checkpoint",
      resume ? absl::StrCat(" (step ", *resume, ")") : std::string(" (none yet: from step 0)"));
  if (!Stored(Move(JobState::kPlacing, why))) return;
  if (context_.metrics != nullptr) context_.metrics->IncRestarts(cause);
  if (refused) {
    ++timers_.placement_refusals;
    timers_.requeue_at = JobClock::now() + placement_wait;  // CheckTimers queues it.
    return;
  }
  Enqueue();
}

void JobRun::CheckAllRunning() {
  if (record().state != JobState::kStarting || stop_.stopping || attempt_.ranks.empty()) return;
  for (const RankRun& r : attempt_.ranks) {
    if (r.phase != TaskPhase::kRunning && !r.exited) return;
  }
  (void)Move(JobState::kRunning,
             absl::StrCat("all ", attempt_.ranks.size(), " ranks running", ResumeNote()));
}

std::optional<int64_t> JobRun::ResumeStepOf() const {
  if (!record().checkpoint_dir.empty()) {
    // Under the core mutex. Usually `latest` names a complete checkpoint: one read, one stat.
    if (std::optional<int64_t> latest = LatestCompleteStep(record().checkpoint_dir)) {
      return latest;
    }
    // Else the newest complete one, as the trainer falls back to: the user's folder gets a
    // quarter of a second and 100,000 entries, then the reported checkpoint is announced.
    ListingLimits limits;
    limits.deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(250);
    limits.max_entries = 100'000;
    absl::StatusOr<std::vector<CheckpointView>> found =
        ListCheckpointFolders(record().checkpoint_dir, /*with_sizes=*/false, limits);
    if (found.ok()) {
      if (!found->empty()) return found->back().step;  // oldest first
      return std::nullopt;
    }
    spdlog::warn("job {}: {}; announcing the newest reported checkpoint", record().id,
                 found.status().ToString());
  }
  if (milestones_.latest_checkpoint_step > 0) return milestones_.latest_checkpoint_step;
  return std::nullopt;
}

std::string JobRun::ResumeNote() const {
  if (!attempt_.resumed_step) return "";
  if (*attempt_.resumed_step == 0) return "; started from step 0 (no checkpoint loaded)";
  return absl::StrCat("; resumed from checkpoint step ", *attempt_.resumed_step);
}

void JobRun::CheckTimers(JobClock::time_point now) {
  if (IsTerminal(record().state)) return;
  if (stop_.stopping && now >= stop_.deadline) {
    for (RankRun& r : attempt_.ranks) r.exited = true;
    FinishStop();
    return;
  }
  if (reattach_.active() && now >= reattach_.deadline()) {
    ReattachTimedOut();
    return;
  }
  if (stop_.stopping || reattach_.active()) return;
  if (timers_.requeue_at.has_value()) {
    if (record().state != JobState::kPlacing) {
      timers_.requeue_at.reset();  // Cancelled (or moved on) while it waited.
    } else if (now >= *timers_.requeue_at) {
      timers_.requeue_at.reset();
      Enqueue();
      context_.observer->OnScheduleChanged();
    }
    return;
  }
  if (record().state == JobState::kStarting &&
      Seconds(now - timers_.state_since) > settings_.start_timeout_s) {
    FailRanks(RecoveryCause::kStartTimeout,
              absl::StrCat("ranks did not all start within scheduling.start_timeout_s = ",
                           settings_.start_timeout_s, " s"));
  } else if (record().state == JobState::kRunning && settings_.hang_timeout_s > 0 &&
             Seconds(now - timers_.last_progress) > settings_.hang_timeout_s) {
    const std::string why =
        absl::StrCat("no new step for ", settings_.hang_timeout_s,
                     " s (scheduling.hang_timeout_s); last step ", record().last_step);
    JobEventView hang;
    hang.type = EventType::kHangDetected;
    hang.message = why;
    stored_.AddEvent(hang);
    FailRanks(RecoveryCause::kHang, why);
  }
}

absl::Status JobRun::Cancel(const std::string& reason, const std::string& by) {
  // A second cancel of a job already being cancelled changes nothing and stores nothing (one
  // event per distinct stop: repeated cancels must not grow the store).
  if (stop_.stopping && stop_.after == AfterStop::kCancel) return absl::OkStatus();
  JobEventView requested;
  requested.type = EventType::kCancelRequested;
  requested.message =
      by.empty() ? reason : absl::StrCat("by ", by, reason.empty() ? "" : ": ", reason);
  stored_.AddEvent(requested);
  const std::string why = CancelledReason(requested.message);
  if (stop_.stopping) {
    stop_.after = AfterStop::kCancel;
    stop_.message = why;
  } else if (attempt_.queued) {
    if (absl::Status s = context_.scheduler->Cancel(record().id); !s.ok()) return s;
    attempt_.queued = false;
    context_.observer->OnScheduleChanged();
    return Move(JobState::kCancelled, why);
  } else if (attempt_.placed || reattach_.active()) {
    BeginStop(AfterStop::kCancel, why);
  } else {
    return Move(JobState::kCancelled, why);
  }
  return absl::OkStatus();
}

}  // namespace deepnet::coordinator
