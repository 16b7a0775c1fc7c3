// JobRun: what workers report about the job's ranks (task lists, trainer exits, refused
// assignments, lost ranks) and its training progress (metric points, checkpoints, guard events).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "coordinator/core/job_run.h"
#include "coordinator/core/trainer_exit_text.h"
#include "coordinator/core/probe_metrics.h"
#include "job/job_config.h"
#include "storage/checkpoint_fence.h"
#include "storage/storage_policy.h"

namespace deepnet::coordinator {
namespace {

constexpr auto kProgressWriteInterval = std::chrono::seconds(2);

// The Prometheus training series of the last point of a report (and the report's probes).
TrainingSample TrainingSampleOf(const MetricPoint& last, const std::vector<MetricPoint>& points) {
  TrainingSample sample;
  sample.step = last.step;
  sample.loss = last.loss;
  sample.tokens_per_s = last.tokens_per_s;
  sample.lr = last.lr;
  sample.grad_norm = last.grad_norm;
  if (last.update_norm > 0) sample.update_norm = last.update_norm;
  sample.memory_bytes = last.memory_bytes;
  if (last.gpu_reserved_bytes > 0) {
    sample.gpu_memory = TrainingSample::GpuMemory{
        last.gpu_allocated_bytes, last.gpu_reserved_bytes, last.gpu_peak_allocated_bytes};
  }
  SetProbeAndDiagnostics(points, &sample);
  return sample;
}

}  // namespace

void JobRun::MarkRankExited(int rank) {
  if (rank < 0 || rank >= static_cast<int64_t>(attempt_.ranks.size())) return;
  attempt_.ranks[rank].exited = true;
  attempt_.ranks[rank].phase = TaskPhase::kExited;
}

std::optional<std::string> JobRun::UnreachableWorkerOf(const std::string& reporter) const {
  for (const RankRun& r : attempt_.ranks) {
    if (r.exited || r.view.worker_id == reporter) continue;
    if (!context_.workers->HasSession(r.view.worker_id)) return r.view.worker_id;
  }
  return std::nullopt;
}

bool JobRun::OnTaskListed(const std::string& worker_id, const TaskReport& task,
                          std::optional<CancellationCommand>* cancel) {
  const bool current = task.attempt == record().attempt && !IsTerminal(record().state);
  const int64_t rank = task.rank;
  if (current && reattach_.active()) {
    const int64_t d = record().data_parallel;
    if (rank < 0 || rank >= record().world_size()) return false;
    if (!reattach_.Holds(static_cast<int>(rank), worker_id)) {
      spdlog::warn("job {}: worker {} listed rank {} of attempt {}, which another worker held; "
                   "ignored",
                   record().id, worker_id, rank, record().attempt);
      return false;
    }
    reattach_.OnRunning(RankView{task.rank, static_cast<int>(rank / d),
                                 static_cast<int>(rank % d), worker_id, task.slot_index},
                        task.phase);
    MaybeCompleteReattach();
    return true;
  }
  const bool in_attempt = rank >= 0 && rank < static_cast<int64_t>(attempt_.ranks.size());
  const bool ours = current && !stop_.stopping && in_attempt &&
                    attempt_.ranks[rank].view.worker_id == worker_id &&
                    !attempt_.ranks[rank].exited;
  if (ours) {
    if (task.resumed_step && !attempt_.resumed_step) {
      attempt_.resumed_step = task.resumed_step;
      const int64_t announced = attempt_.announced_resume_step.value_or(0);
      const bool restarted = record().attempt > 1;  // drained restarts are not counted
      if (restarted && *task.resumed_step == announced) {
        spdlog::info("job {} attempt {} resumed from step {}, the step its restart announced",
                     record().id, record().attempt, announced);
      } else if (restarted) {
        spdlog::warn(
            "job {} attempt {} resumed from step {}, not the announced step {} (a "
            "newer checkpoint failed verification or the folder changed)",
            record().id, record().attempt, *task.resumed_step, announced);
      }
    }
    if (task.phase == TaskPhase::kRunning) attempt_.ranks[rank].phase = TaskPhase::kRunning;
    CheckAllRunning();
    return true;
  }
  // Stopping: its exit report will come.
  const bool listed = current && in_attempt && !attempt_.ranks[rank].exited;
  if (task.phase == TaskPhase::kStopping || task.phase == TaskPhase::kExited) return listed;
  if (current && stop_.stopping) {
    *cancel = CancellationCommand{task.job_id, task.attempt, stop_.message,
                                  context_.stop_grace.count()};
  } else {
    *cancel = CancellationCommand{task.job_id, task.attempt,
                                  "not part of a live attempt of its job",
                                  context_.stop_grace.count()};
  }
  return listed;
}

void JobRun::LoseUnlistedRanks(const std::string& worker_id, const std::set<int>& listed) {
  std::vector<int> lost;
  for (const RankRun& r : attempt_.ranks) {
    if (r.view.worker_id != worker_id || r.exited || listed.count(r.view.rank)) continue;
    lost.push_back(r.view.rank);
  }
  if (lost.empty()) return;
  OnRanksLost(worker_id, lost,
              absl::StrCat("worker ", worker_id, " re-registered without some of the job's ranks"));
}

void JobRun::OnRanksLost(const std::string& worker_id, const std::vector<int>& ranks,
                         const std::string& why) {
  for (int rank : ranks) MarkRankExited(rank);
  JobEventView event;
  event.type = EventType::kWorkerLost;
  event.worker_id = worker_id;
  event.message = why;
  stored_.AddEvent(event);
  if (stop_.stopping) {
    MaybeFinishStop();
  } else {
    FailRanks(RecoveryCause::kWorkerLost, why);
  }
}

void JobRun::OnTrainerExit(const std::string& worker_id, const TrainerExitReport& exit) {
  const int64_t rank = exit.rank;
  if (reattach_.active() && exit.attempt == record().attempt && rank >= 0 &&
      rank < record().world_size()) {
    if (!reattach_.Holds(static_cast<int>(rank), worker_id)) return;  // not its rank
    reattach_.OnExit(exit.rank, worker_id, exit.exit_code == 0 && exit.signal == 0);
    MaybeCompleteReattach();
    return;
  }
  if (exit.attempt != record().attempt || rank < 0 ||
      rank >= static_cast<int64_t>(attempt_.ranks.size()) ||
      attempt_.ranks[rank].view.worker_id != worker_id || attempt_.ranks[rank].exited) {
    return;  // an earlier attempt's rank, or already accounted for
  }
  MarkRankExited(exit.rank);
  const bool clean = exit.exit_code == 0 && exit.signal == 0;
  attempt_.ranks[rank].clean_exit = clean;
  JobEventView event;
  event.type = EventType::kRankExited;
  event.rank = exit.rank;
  event.exit_code = exit.exit_code;
  event.signal = exit.signal;
  event.worker_id = worker_id;
  event.message = exit.message;
  if (const std::string stop = DescribeStopCheckpoint(exit); !stop.empty()) {
    event.message = absl::StrCat(stop, exit.message.empty() ? "" : "\n", exit.message);
  }
  stored_.AddEvent(event);
  if (stop_.stopping) {
    MaybeFinishStop();
    return;
  }
  if (!clean) {
    std::string why = absl::StrCat("rank ", exit.rank, " on worker ", worker_id, " ",
                                   DescribeExit(exit));
    if (!exit.message.empty()) {
      std::string tail =
          exit.message.substr(exit.message.find_last_of('\n', exit.message.size() - 2) + 1);
      absl::StripAsciiWhitespace(&tail);
      if (!tail.empty()) absl::StrAppend(&why, ": ", tail);
    }
    // Fenced out while this is the newest attempt: the checkpoint folder belongs to another job
    // (storage/checkpoint_fence.h), so every restart would be refused the same way.
    if (exit.exit_code == storage::kFencedOutExitCode && exit.signal == 0) {
      BeginStop(AfterStop::kFail,
                absl::StrCat(why,
                             " (its checkpoint.dir is fenced by another job: give this job "
                             "its own folder; not restarted)"));
      return;
    }
    // The divergence guard ran out of retries (job::GuardConfig): a restart from the same
    // checkpoints would replay the divergence, so scheduling.max_restarts does not apply.
    if (exit.exit_code == job::kGuardExhaustedExitCode && exit.signal == 0) {
      BeginStop(AfterStop::kFail, absl::StrCat(why, " (divergence guard: not restarted)"));
      return;
    }
    if (context_.workers->DrainGrace(worker_id).has_value()) {
      FailRanks(RecoveryCause::kWorkerDrained,
                absl::StrCat(why, " (worker ", worker_id, " is shutting down)"));
      return;
    }
    // A worker daemon killed outright takes its trainers with it (cli/parent_watch.h) and
    // reports nothing; the gang's ranks elsewhere then fail on their dead peers and report
    // first, before its lease runs out. The cause is the lost worker, not those exits.
    if (const std::optional<std::string> gone = UnreachableWorkerOf(worker_id)) {
      FailRanks(RecoveryCause::kWorkerLost,
                absl::StrCat("worker ", *gone, " holding ranks of the job is unreachable (its ",
                             "session ended); then ", why));
      return;
    }
    FailRanks(RecoveryCause::kWorkerExit, why);
    return;
  }
  for (const RankRun& r : attempt_.ranks) {
    if (!r.exited || !r.clean_exit) return;  // the others are still finishing
  }
  if (record().state == JobState::kStarting) (void)Move(JobState::kRunning, "all ranks ran");
  ReleaseAttempt();
  (void)Move(JobState::kSucceeded, absl::StrCat("all ranks finished at step ", record().last_step));
}

void JobRun::OnAssignmentRefused(const std::string& worker_id, const std::string& error,
                                 bool retry) {
  for (const RankRun& r : attempt_.ranks) {
    if (r.view.worker_id == worker_id) MarkRankExited(r.view.rank);
  }
  const std::string why = absl::StrCat("worker ", worker_id, " refused the assignment: ", error);
  if (stop_.stopping) {
    MaybeFinishStop();
  } else if (context_.workers->DrainGrace(worker_id).has_value()) {
    FailRanks(RecoveryCause::kWorkerDrained, why);
  } else if (absl::StrContains(error, storage::kStoragePolicyRefusal)) {
    // The job's paths break the worker's storage policy: every attempt would be refused too.
    BeginStop(AfterStop::kFail, why);
  } else if (retry) {
    // Passes by itself (a slot still stopping its previous trainer): place it again after a
    // backoff, not counted; FinishStop waits RetryWait(refusals in a row) before queueing.
    FailRanks(RecoveryCause::kPlacementRefused, why);
  } else {
    FailRanks(RecoveryCause::kWorkerExit, why);
  }
}

void JobRun::OnMetrics(const std::string& worker_id, const MetricReport& report) {
  if (!RankHeldBy(report.rank, worker_id)) {
    spdlog::debug("job {}: worker {} reported rank {} of attempt {}, which it does not hold; "
                  "ignored",
                  record().id, worker_id, report.rank, report.attempt);
    return;
  }
  // A report holds what a rank printed since the worker's last poll: a few points. More is a
  // runaway or forged stream; only the newest kMaxPointsPerReport count.
  const size_t first_point = report.points.size() > kMaxPointsPerReport
                                 ? report.points.size() - kMaxPointsPerReport
                                 : 0;
  // Divergence-guard events ride in the metric stream (MetricPoint.guard_*): they become job
  // events and metrics, not points of the series.
  std::vector<MetricPoint> steps;
  size_t guard_events = 0;
  for (size_t i = first_point; i < report.points.size(); ++i) {
    const MetricPoint& point = report.points[i];
    if (point.guard_event.empty()) {
      steps.push_back(point);
    } else if (++guard_events <= kMaxCheckpointsPerReport) {  // Each one is a stored event too.
      OnGuardEvent(point);
    }
  }
  int64_t max_step = record().last_step;
  for (MetricPoint point : steps) {
    point.attempt = report.attempt;
    if (point.time_ms == 0) point.time_ms = SystemNowMs();
    points_.Push(point, context_.points_per_job);
    if (point.step > attempt_.max_step) {
      attempt_.max_step = point.step;
      timers_.last_progress = JobClock::now();
    }
    max_step = point.step;
  }
  if (!steps.empty()) context_.observer->OnJobFeed(record().id);
  if (!steps.empty() && record().state == JobState::kStarting && !stop_.stopping) {
    // A step needs every stage and replica: the gang met and trains.
    (void)Move(JobState::kRunning,
               absl::StrCat("training: step ", steps.back().step, " reported", ResumeNote()));
  }
  if (!steps.empty()) {
    if (context_.metrics != nullptr) {
      context_.metrics->SetJobTraining(record().id, TrainingSampleOf(steps.back(), report.points));
    }
    // The step is kept in memory at once; the store (what a restarted coordinator shows until
    // the ranks report again) is written at most every kProgressWriteInterval, so frequent
    // reports do not queue synced writes under the lock.
    stored_.SetLastStep(max_step);
    const JobClock::time_point now = JobClock::now();
    if (now - timers_.progress_written >= kProgressWriteInterval) {
      stored_.PersistStep(max_step);
      timers_.progress_written = now;
    }
  }
  size_t checkpoints = 0;
  for (int64_t step : report.checkpoint_steps) {
    // One event per checkpoint: a step this attempt already reported adds none, and a report
    // adds at most kMaxCheckpointsPerReport (each is a synced store write under the lock).
    auto known = milestones_.checkpoint_attempts.find(step);
    if (step < 0 || (known != milestones_.checkpoint_attempts.end() &&
                     known->second == report.attempt)) {
      continue;
    }
    if (++checkpoints > kMaxCheckpointsPerReport) break;
    // A checkpoint is a good moment to persist the step (also one no point reported, e.g.
    // saved when the time budget ran out).
    stored_.PersistStep(std::max(step, record().last_step));
    milestones_.latest_checkpoint_step = std::max(milestones_.latest_checkpoint_step, step);
    milestones_.checkpoint_attempts[step] = report.attempt;
    JobEventView saved;
    saved.type = EventType::kCheckpointSaved;
    saved.checkpoint_step = step;
    saved.message = absl::StrCat("checkpoint at step ", step);
    stored_.AddEvent(saved);
  }
}

void JobRun::OnGuardEvent(const MetricPoint& point) {
  CoordinatorMetrics* metrics = context_.metrics;
  JobEventView event;
  event.message = point.guard_message;
  if (point.guard_event == "plateau") {
    event.type = EventType::kPlateau;
    if (metrics != nullptr) metrics->OnJobPlateau(record().id);
  } else {
    event.type =
        point.guard_event == "rollback" ? EventType::kGuardRollback : EventType::kGuardFailed;
    event.guard_trigger = point.guard_trigger;
    event.guard_to_step = point.guard_to_step;
    event.guard_retries = point.guard_retries;
    if (metrics != nullptr && event.type == EventType::kGuardRollback) {
      metrics->OnJobGuardRollback(record().id);
    }
  }
  stored_.AddEvent(event);
}

}  // namespace deepnet::coordinator
