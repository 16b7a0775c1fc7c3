// Coordinator: worker registrations, sessions, heartbeats and leases, and what workers report
// (task states, trainer exits, metrics). A registration or session message carrying an epoch
// other than the worker's current one is refused (ABORTED), so nothing stale acts on a job.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "coordinator/coordinator.h"
#include "coordinator/probe_metrics.h"
#include "job/job_config.h"
#include "storage/checkpoint_fence.h"
#include "storage/storage_policy.h"

namespace deepnet::coordinator {
namespace {

constexpr auto kProgressWriteInterval = std::chrono::seconds(2);

bool ValidWorkerName(const std::string& name) {
  if (name.empty() || name.size() > 128) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_isalnum(c) || c == '.' || c == '-' || c == '_';
  });
}

std::string DescribeExit(const TrainerExitReport& exit) {
  return exit.signal != 0 ? absl::StrCat("was killed by signal ", exit.signal)
                          : absl::StrCat("exited with code ", exit.exit_code);
}

// For a stopped rank: what it left behind, e.g. "stopped with its state in the checkpoint of
// step 40"; empty when the worker did not say (not a stop, or an older worker).
std::string DescribeStopCheckpoint(const TrainerExitReport& exit) {
  const std::string last = exit.checkpoint_step > 0 ? absl::StrCat("the newest checkpoint is step ",
                                                                   exit.checkpoint_step)
                                                    : std::string("it has no checkpoint");
  switch (exit.checkpoint) {
    case StopCheckpoint::kUnspecified:
      return "";
    case StopCheckpoint::kSaved:
      return exit.checkpoint_step > 0
                 ? absl::StrCat("stopped with its state in the checkpoint of step ",
                                exit.checkpoint_step)
                 : std::string("stopped with its state in a checkpoint");
    case StopCheckpoint::kNotNeeded:
      return "stopped before training anything: no checkpoint written (none needed)";
    case StopCheckpoint::kNotSaved:
      return absl::StrCat(exit.signal != 0 ? "killed before it wrote a checkpoint"
                                           : "stopped without writing a checkpoint",
                          " (", DescribeExit(exit), "): steps since are lost; ", last);
  }
  return "";
}

}  // namespace

absl::StatusOr<RegistrationResult> Coordinator::Register(const Registration& registration) {
  if (!ValidWorkerName(registration.worker_name)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker_name \"", registration.worker_name, "\" must be 1-128 of [A-Za-z0-9._-]"));
  }
  const int n = static_cast<int>(registration.slots.size());
  if (n < 1) return absl::InvalidArgumentError("slots: a worker must offer at least one slot");
  std::set<int> indices;
  for (const SlotFacts& s : registration.slots) {
    if (s.index < 0 || s.index >= n || !indices.insert(s.index).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "slots: indices must be 0..", n - 1, " each once (got ", s.index, ")"));
    }
  }
  absl::MutexLock lock(&mu_);
  if (shutting_down_) return absl::UnavailableError("coordinator is shutting down");
  absl::StatusOr<int64_t> epoch = epochs_->Next(registration.worker_name);
  if (!epoch.ok()) return epoch.status();
  const std::string& id = registration.worker_name;
  auto [it, is_new] = workers_.try_emplace(id);
  WorkerRuntime& worker = it->second;
  worker.id = id;
  if (worker.sink) {
    worker.sink->Close(absl::AbortedError(
        absl::StrCat("worker ", id, " registered again (epoch ", *epoch, ")")));
    worker.sink = nullptr;
  }
  // The scheduler places by the smallest slot of a worker; unknown (0) on any slot: unknown.
  int64_t slot_memory = INT64_MAX;
  for (const SlotFacts& s : registration.slots) {
    slot_memory = std::min(slot_memory, std::max<int64_t>(s.memory_bytes, 0));
  }
  const std::optional<WorkerInfo> known = scheduler_->FindWorker(id);
  if (known.has_value() && (known->slots != n || known->slot_memory != slot_memory)) {
    absl::StatusOr<std::vector<LostRanks>> lost = scheduler_->RemoveWorker(id);
    if (lost.ok()) {
      HandleLostRanks(*lost, id, "worker re-registered with a different slot count or memory");
    }
  }
  if (!scheduler_->FindWorker(id).has_value()) {
    if (absl::Status s = scheduler_->AddWorker(id, n, slot_memory); !s.ok()) return s;
  }
  // No placements until its session is open (a gang must not land on a worker it cannot reach).
  (void)scheduler_->UpdateWorkerState(id, WorkerState::kDraining);
  schedule_dirty_ = true;  // pending reasons count it (and its slots, if it was lost)
  worker.epoch = *epoch;
  worker.host = registration.host;
  worker.slots = registration.slots;
  worker.last_heard = Clock::now();
  worker.lost = false;
  worker.draining = registration.draining;
  worker.missed_reported = 0;
  worker.pending_cancels.clear();
  // Tasks of dead attempts become cancellations, answered with the registration (and queued as
  // the session's first commands): a worker back from a partition stops its stale trainers
  // before it is given anything. It stays draining until its session opens.
  ReconcileTasks(worker, registration.running_tasks, /*registering=*/true);
  spdlog::info("worker {} registered: epoch {}, {} slot(s), {} running task(s), {} to stop", id,
               *epoch, n, registration.running_tasks.size(), worker.pending_cancels.size());
  RegistrationResult result;
  result.stale_tasks = worker.pending_cancels;
  result.worker_id = id;
  result.epoch = *epoch;
  result.heartbeat_interval_ms = options_.heartbeat_interval.count();
  result.lease_ms = options_.heartbeat_interval.count() * options_.lease_heartbeats;
  return result;
}

absl::StatusOr<Coordinator::WorkerRuntime*> Coordinator::CheckEpoch(const std::string& worker_id,
                                                                    int64_t epoch) {
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) {
    return absl::NotFoundError(absl::StrCat("worker ", worker_id, " is not registered"));
  }
  if (it->second.epoch != epoch || it->second.lost) {
    return absl::AbortedError(absl::StrCat("worker ", worker_id, ": epoch ", epoch,
                                           " is stale (current ", it->second.epoch,
                                           it->second.lost ? ", worker was lost" : "",
                                           "); register again"));
  }
  return &it->second;
}

absl::Status Coordinator::AttachSession(const std::string& worker_id, int64_t epoch,
                                        std::shared_ptr<WorkerCommandSink> sink) {
  absl::MutexLock lock(&mu_);
  if (shutting_down_) return absl::UnavailableError("coordinator is shutting down");
  absl::StatusOr<WorkerRuntime*> worker = CheckEpoch(worker_id, epoch);
  if (!worker.ok()) return worker.status();
  WorkerRuntime& w = **worker;
  if (w.sink) w.sink->Close(absl::AbortedError("a newer session replaced this one"));
  w.sink = std::move(sink);
  w.last_heard = Clock::now();
  for (const CancellationCommand& c : w.pending_cancels) w.sink->SendCancellation(w.epoch, c);
  w.pending_cancels.clear();
  // A worker that is shutting down stays draining (it only reports its trainers' endings).
  if (!w.draining) (void)scheduler_->UpdateWorkerState(worker_id, WorkerState::kReady);
  schedule_dirty_ = true;
  return absl::OkStatus();
}

void Coordinator::DetachSession(const std::string& worker_id, int64_t epoch,
                                const WorkerCommandSink* sink) {
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(worker_id);
  if (it == workers_.end() || it->second.epoch != epoch || it->second.sink.get() != sink) return;
  it->second.sink = nullptr;
  // Its ranks keep running; it takes no new ones until it is back (or its lease runs out).
  if (!it->second.lost) (void)scheduler_->UpdateWorkerState(worker_id, WorkerState::kDraining);
  schedule_dirty_ = true;
}

void Coordinator::SendCancel(const std::string& worker_id, const CancellationCommand& command) {
  auto it = workers_.find(worker_id);
  if (it == workers_.end() || it->second.lost) return;
  WorkerRuntime& worker = it->second;
  // A worker shutting down stops every trainer itself, with its own grace period; a
  // cancellation with the coordinator's (shorter) grace would cut their checkpoint short.
  if (worker.draining) return;
  if (worker.sink) {
    worker.sink->SendCancellation(worker.epoch, command);
    return;
  }
  for (const CancellationCommand& c : worker.pending_cancels) {
    if (c.job_id == command.job_id && c.attempt == command.attempt) return;
  }
  worker.pending_cancels.push_back(command);
}

std::optional<std::string> Coordinator::UnreachableWorkerOf(const JobRuntime& job,
                                                            const std::string& reporter) const {
  for (const RankRuntime& r : job.ranks) {
    if (r.exited || r.view.worker_id == reporter) continue;
    auto it = workers_.find(r.view.worker_id);
    if (it == workers_.end() || it->second.lost || it->second.sink == nullptr) {
      return r.view.worker_id;
    }
  }
  return std::nullopt;
}

void Coordinator::MarkRankExited(JobRuntime& job, int rank) {
  if (rank < 0 || rank >= static_cast<int>(job.ranks.size())) return;
  job.ranks[rank].exited = true;
  job.ranks[rank].phase = TaskPhase::kExited;
}

absl::Status Coordinator::OnHeartbeat(const std::string& worker_id, int64_t epoch,
                                      const std::vector<TaskReport>& tasks) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<WorkerRuntime*> worker = CheckEpoch(worker_id, epoch);
  if (!worker.ok()) return worker.status();
  WorkerRuntime& w = **worker;
  w.last_heard = Clock::now();
  w.missed_reported = 0;
  ReconcileTasks(w, tasks, /*registering=*/false);
  if (w.sink) {
    const int64_t lease_ms = options_.heartbeat_interval.count() * options_.lease_heartbeats;
    w.sink->SendLease(w.epoch, lease_ms, SystemNowMs() + lease_ms);
  }
  return absl::OkStatus();
}

absl::Status Coordinator::OnTrainerExit(const std::string& worker_id, int64_t epoch,
                                        const TrainerExitReport& exit) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<WorkerRuntime*> worker = CheckEpoch(worker_id, epoch);
  if (!worker.ok()) return worker.status();
  (*worker)->last_heard = Clock::now();
  JobRuntime* job = FindJob(exit.job_id);
  if (job != nullptr && job->reattaching && exit.attempt == job->record.attempt &&
      exit.rank >= 0 && exit.rank < job->record.pipeline_stages * job->record.data_parallel) {
    job->reattached.erase(exit.rank);
    job->reattach_exits[exit.rank] = {worker_id, exit.exit_code == 0 && exit.signal == 0};
    MaybeCompleteReattach(*job);
    return absl::OkStatus();
  }
  if (job == nullptr || exit.attempt != job->record.attempt || exit.rank < 0 ||
      exit.rank >= static_cast<int>(job->ranks.size()) ||
      job->ranks[exit.rank].view.worker_id != worker_id || job->ranks[exit.rank].exited) {
    return absl::OkStatus();  // an earlier attempt's rank, or already accounted for
  }
  MarkRankExited(*job, exit.rank);
  const bool clean = exit.exit_code == 0 && exit.signal == 0;
  job->ranks[exit.rank].clean_exit = clean;
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
  AddEvent(*job, event);
  if (job->stopping) {
    MaybeFinishStop(*job);
    return absl::OkStatus();
  }
  if (!clean) {
    std::string why = absl::StrCat("rank ", exit.rank, " on worker ", worker_id, " ",
                                   DescribeExit(exit));
    if (!exit.message.empty()) {
      std::string tail = exit.message.substr(exit.message.find_last_of('\n', exit.message.size() - 2) + 1);
      absl::StripAsciiWhitespace(&tail);
      if (!tail.empty()) absl::StrAppend(&why, ": ", tail);
    }
    // A worker daemon killed outright takes its trainers with it (cli/parent_watch.h) and
    // reports nothing; the gang's ranks elsewhere then fail on their dead peers and report
    // first, before its lease runs out. The cause is the lost worker, not those exits.
    // Fenced out while this is the newest attempt: the checkpoint folder belongs to another job
    // (storage/checkpoint_fence.h), so every restart would be refused the same way.
    if (exit.exit_code == storage::kFencedOutExitCode && exit.signal == 0) {
      BeginStop(*job, AfterStop::kFail,
                absl::StrCat(why,
                             " (its checkpoint.dir is fenced by another job: give this job "
                             "its own folder; not restarted)"));
      return absl::OkStatus();
    }
    // The divergence guard ran out of retries (job::GuardConfig): a restart from the same
    // checkpoints would replay the divergence, so scheduling.max_restarts does not apply.
    if (exit.exit_code == job::kGuardExhaustedExitCode && exit.signal == 0) {
      BeginStop(*job, AfterStop::kFail, absl::StrCat(why, " (divergence guard: not restarted)"));
      return absl::OkStatus();
    }
    if ((*worker)->draining) {
      FailRanks(*job, RecoveryCause::kWorkerDrained,
                absl::StrCat(why, " (worker ", worker_id, " is shutting down)"));
      return absl::OkStatus();
    }
    if (const std::optional<std::string> gone = UnreachableWorkerOf(*job, worker_id)) {
      FailRanks(*job, RecoveryCause::kWorkerLost,
                absl::StrCat("worker ", *gone, " holding ranks of the job is unreachable (its ",
                             "session ended); then ", why));
      return absl::OkStatus();
    }
    FailRanks(*job, RecoveryCause::kWorkerExit, why);
    return absl::OkStatus();
  }
  for (const RankRuntime& r : job->ranks) {
    if (!r.exited || !r.clean_exit) return absl::OkStatus();  // the others are still finishing
  }
  if (job->record.state == JobState::kStarting) {
    (void)Move(*job, JobState::kRunning, "all ranks ran");
  }
  ReleaseAttempt(*job);
  (void)Move(*job, JobState::kSucceeded,
             absl::StrCat("all ranks finished at step ", job->record.last_step));
  return absl::OkStatus();
}

absl::Status Coordinator::OnDraining(const std::string& worker_id, int64_t epoch,
                                     const std::string& reason, std::chrono::milliseconds grace) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<WorkerRuntime*> worker = CheckEpoch(worker_id, epoch);
  if (!worker.ok()) return worker.status();
  WorkerRuntime& w = **worker;
  w.last_heard = Clock::now();
  if (w.draining) return absl::OkStatus();
  w.draining = true;
  w.drain_grace = std::max(grace, std::chrono::milliseconds(0));
  (void)scheduler_->UpdateWorkerState(worker_id, WorkerState::kDraining);
  schedule_dirty_ = true;
  spdlog::info("worker {} is shutting down ({}): draining, its trainers get {} ms to checkpoint",
               worker_id, reason, w.drain_grace.count());
  const std::string why =
      absl::StrCat("worker ", worker_id, " is shutting down (", reason,
                   "): its ranks stop and checkpoint; the job restarts elsewhere (not counted "
                   "against max_restarts)");
  for (auto& [id, job] : jobs_) {
    if (IsTerminal(job.record.state)) continue;
    const bool holds = std::any_of(job.ranks.begin(), job.ranks.end(), [&](const RankRuntime& r) {
      return !r.exited && r.view.worker_id == worker_id;
    });
    if (!holds) continue;
    FailRanks(job, RecoveryCause::kWorkerDrained, why);
    AllowForDrainingWorkers(job);  // also when it was already stopping for another cause
  }
  return absl::OkStatus();
}

absl::Status Coordinator::OnMetrics(const std::string& worker_id, int64_t epoch,
                                    const MetricReport& report) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<WorkerRuntime*> worker = CheckEpoch(worker_id, epoch);
  if (!worker.ok()) return worker.status();
  (*worker)->last_heard = Clock::now();
  JobRuntime* job = FindJob(report.job_id);
  if (job == nullptr || report.attempt != job->record.attempt) return absl::OkStatus();
  // Divergence-guard events ride in the metric stream (MetricPoint.guard_*): they become job
  // events and metrics, not points of the series.
  std::vector<MetricPoint> steps;
  for (const MetricPoint& point : report.points) {
    if (point.guard_event.empty()) {
      steps.push_back(point);
    } else {
      OnGuardEvent(*job, point);
    }
  }
  int64_t max_step = job->record.last_step;
  for (MetricPoint point : steps) {
    point.attempt = report.attempt;
    if (point.time_ms == 0) point.time_ms = SystemNowMs();
    job->points.push_back(point);
    while (job->points.size() > options_.points_per_job) {
      job->points.pop_front();
      ++job->points_base;
    }
    if (point.step > job->attempt_max_step) {
      job->attempt_max_step = point.step;
      job->last_progress = Clock::now();
    }
    max_step = point.step;
  }
  if (!steps.empty()) NotifyFeed(job->record.id);
  if (!steps.empty() && job->record.state == JobState::kStarting && !job->stopping) {
    // A step needs every stage and replica: the gang met and trains.
    (void)Move(*job, JobState::kRunning,
               absl::StrCat("training: step ", steps.back().step, " reported", ResumeNote(*job)));
  }
  if (!steps.empty()) {
    if (metrics_ != nullptr) {
      const MetricPoint& last = steps.back();
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
      SetProbeAndDiagnostics(report.points, &sample);
      metrics_->SetJobTraining(job->record.id, sample);
    }
    // The step is kept in memory at once; the store (what a restarted coordinator shows until
    // the ranks report again) is written at most every kProgressWriteInterval, so frequent
    // reports do not queue synced writes under the lock.
    job->record.last_step = max_step;
    const Clock::time_point now = Clock::now();
    if (now - job->progress_written >= kProgressWriteInterval) {
      PersistStep(*job, max_step);
      job->progress_written = now;
    }
  }
  for (int64_t step : report.checkpoint_steps) {
    // A checkpoint is a good moment to persist the step (also one no point reported, e.g.
    // saved when the time budget ran out).
    PersistStep(*job, std::max(step, job->record.last_step));
    job->latest_checkpoint_step = std::max(job->latest_checkpoint_step, step);
    job->checkpoint_attempts[step] = report.attempt;
    JobEventView saved;
    saved.type = EventType::kCheckpointSaved;
    saved.checkpoint_step = step;
    saved.message = absl::StrCat("checkpoint at step ", step);
    AddEvent(*job, saved);
  }
  return absl::OkStatus();
}

void Coordinator::OnGuardEvent(JobRuntime& job, const MetricPoint& point) {
  JobEventView event;
  event.message = point.guard_message;
  if (point.guard_event == "plateau") {
    event.type = EventType::kPlateau;
    if (metrics_ != nullptr) metrics_->OnJobPlateau(job.record.id);
  } else {
    event.type =
        point.guard_event == "rollback" ? EventType::kGuardRollback : EventType::kGuardFailed;
    event.guard_trigger = point.guard_trigger;
    event.guard_to_step = point.guard_to_step;
    event.guard_retries = point.guard_retries;
    if (metrics_ != nullptr && event.type == EventType::kGuardRollback) {
      metrics_->OnJobGuardRollback(job.record.id);
    }
  }
  AddEvent(job, event);
}

void Coordinator::PersistStep(JobRuntime& job, int64_t step) {
  JobProgress progress;
  progress.last_step = step;
  progress.expected_attempt = job.record.attempt;
  absl::StatusOr<JobRecord> updated = store_->UpdateProgress(job.record.id, progress);
  if (updated.ok()) {
    job.record = *updated;
  } else {
    spdlog::warn("job {}: recording step {}: {}", job.record.id, step, updated.status().ToString());
  }
}

absl::Status Coordinator::OnAssignmentRefused(const std::string& worker_id, int64_t epoch,
                                              const std::string& job_id, int attempt,
                                              const std::string& error) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<WorkerRuntime*> worker = CheckEpoch(worker_id, epoch);
  if (!worker.ok()) return worker.status();
  JobRuntime* job = FindJob(job_id);
  if (job == nullptr || attempt != job->record.attempt) return absl::OkStatus();
  for (RankRuntime& r : job->ranks) {
    if (r.view.worker_id == worker_id) MarkRankExited(*job, r.view.rank);
  }
  const std::string why = absl::StrCat("worker ", worker_id, " refused the assignment: ", error);
  if (job->stopping) {
    MaybeFinishStop(*job);
  } else if ((*worker)->draining) {
    FailRanks(*job, RecoveryCause::kWorkerDrained, why);
  } else if (absl::StrContains(error, storage::kStoragePolicyRefusal)) {
    // The job's paths break the worker's storage policy: every attempt would be refused too.
    BeginStop(*job, AfterStop::kFail, why);
  } else {
    FailRanks(*job, RecoveryCause::kWorkerExit, why);
  }
  return absl::OkStatus();
}

void Coordinator::CheckLeases(Clock::time_point now) {
  const auto interval = options_.heartbeat_interval;
  const auto lease = interval * options_.lease_heartbeats;
  for (auto& [id, worker] : workers_) {
    if (worker.lost) continue;
    const auto silent = now - worker.last_heard;
    // A heartbeat counts as missed once half an interval past when it was due.
    while (silent > interval * (worker.missed_reported + 1) + interval / 2 &&
           worker.missed_reported < options_.lease_heartbeats) {
      ++worker.missed_reported;
      if (metrics_ != nullptr) metrics_->IncHeartbeatsMissed(1);
    }
    if (silent > lease) {
      LoseWorker(worker, absl::StrCat("worker ", id, " missed ", options_.lease_heartbeats,
                                      " heartbeats (lease ", lease.count(), " ms)"));
    }
  }
}

void Coordinator::LoseWorker(WorkerRuntime& worker, const std::string& why) {
  spdlog::warn("{}", why);
  worker.lost = true;
  if (worker.sink) worker.sink->Close(absl::UnavailableError(why));
  worker.sink = nullptr;
  absl::StatusOr<std::vector<LostRanks>> lost =
      scheduler_->UpdateWorkerState(worker.id, WorkerState::kLost);
  if (lost.ok()) HandleLostRanks(*lost, worker.id, why);
  schedule_dirty_ = true;  // queued jobs' reasons change even when it held no rank
  // Jobs waiting to re-adopt ranks there will not get them back.
  for (auto& [id, job] : jobs_) {
    for (auto it = job.reattached.begin(); it != job.reattached.end();) {
      it = it->second.worker_id == worker.id ? job.reattached.erase(it) : std::next(it);
    }
  }
}

void Coordinator::HandleLostRanks(const std::vector<LostRanks>& lost, const std::string& worker_id,
                                  const std::string& why) {
  for (const LostRanks& l : lost) {
    JobRuntime* job = FindJob(l.job_id);
    if (job == nullptr) continue;
    for (int rank : l.ranks) MarkRankExited(*job, rank);
    JobEventView event;
    event.type = EventType::kWorkerLost;
    event.worker_id = worker_id;
    event.message = why;
    AddEvent(*job, event);
    if (job->stopping) {
      MaybeFinishStop(*job);
    } else {
      FailRanks(*job, RecoveryCause::kWorkerLost, why);
    }
  }
}

}  // namespace deepnet::coordinator
