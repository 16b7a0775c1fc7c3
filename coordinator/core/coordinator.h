#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "coordinator/core/coordinator_metrics.h"
#include "coordinator/core/coordinator_types.h"
#include "coordinator/scheduler/fair_share.h"
#include "coordinator/scheduler/gang_scheduler.h"
#include "coordinator/core/job_run.h"
#include "coordinator/core/job_spec.h"
#include "coordinator/store/job_store.h"
#include "coordinator/core/limit_checks.h"
#include "coordinator/core/log_reads.h"
#include "coordinator/rendezvous/rendezvous_store.h"
#include "coordinator/store/worker_epoch_store.h"
#include "coordinator/core/worker_registry.h"

namespace deepnet::coordinator {

class Authenticator;

struct CoordinatorOptions {
  // Workers heartbeat this often; a worker not heard from for lease_heartbeats intervals is
  // lost (the "missing three").
  std::chrono::milliseconds heartbeat_interval{1000};
  int lease_heartbeats = 3;
  // Period of the control loop (leases, start/hang timeouts, stops, scheduling).
  std::chrono::milliseconds tick{100};
  // SIGTERM -> SIGKILL grace given to workers when ranks are stopped.
  std::chrono::milliseconds stop_grace{10000};
  // Ranks that have not reported their exit this long after being told to stop are counted
  // as gone (their worker kills them at stop_grace); keeps cancel under 30 s.
  std::chrono::milliseconds stop_timeout{25000};
  // After a restart, how long running jobs wait for their workers to re-register and report
  // every rank before they are restarted.
  std::chrono::milliseconds reattach_window{10000};
  // host:port of this coordinator's Rendezvous service, as trainers reach it; may be left
  // empty and set with SetRendezvousAddress() (once the server's port is known) before Start().
  std::string rendezvous_address;
  // When > 0: the most slots the cluster can ever have; SubmitJob refuses a gang larger than
  // this. 0: no bound; a job larger than the registered workers is queued (pending code
  // kExceedsRegistered) and starts once enough workers join.
  int64_t cluster_slots = 0;
  // When > 0: the memory of the largest slot the cluster can ever have, in bytes (the
  // coordinator's --cluster-slot-memory); SubmitJob refuses (FAILED_PRECONDITION) a job whose
  // estimated memory per rank exceeds it. 0: no bound; such a job is queued and waits (pending
  // code kExceedsSlotMemory) while no registered slot advertises enough memory.
  int64_t cluster_slot_memory = 0;
  JobSpecCheckOptions spec_check;
  // The tokens file's accounts: StartAttempt sends the owner's teams, uid and gid with every
  // assignment (the worker checks paths and picks the trainer's account with them). May be null
  // (the owner is sent alone). Must outlive the coordinator.
  const Authenticator* accounts = nullptr;
  // Mints the credential each rank's trainer presents to the Rendezvous service (sent with its
  // assignment; the worker's own token never reaches a trainer). Null: none is sent (a
  // coordinator without authentication). Must outlive the coordinator.
  const TrainerCredentials* trainer_credentials = nullptr;
  SchedulerOptions scheduler;
  // Metric points kept per job for StreamMetrics replays (the oldest are dropped).
  size_t points_per_job = 20000;
  // How long a log read waits for the worker's answer before UNAVAILABLE.
  std::chrono::milliseconds log_request_timeout{10000};
  // Fair-sharing limits (--limits-file); unset: no limits (SetLimits replaces them).
  std::optional<LimitsConfig> limits;
  // Retention (--retain-finished): a job finished (SUCCEEDED, FAILED, CANCELLED) longer ago than
  // this is deleted with its events, from the store and from memory; 0: kept for ever. The
  // newest job is always kept (JobStore::DeleteFinished). Looked at every retention_sweep.
  std::chrono::milliseconds retain_finished{0};
  std::chrono::milliseconds retention_sweep{60000};
  // Whether a job owner is an admin (admins have only their own users: limits); null: nobody.
  // Called under the coordinator's lock: must not call back into it.
  std::function<bool(const std::string& user)> is_admin;
};

struct SubmitResultData {
  JobView job;
  bool created = false;
};

struct ListRequestData {
  std::string owner;  // empty: every owner
  std::vector<JobState> states;
  std::map<std::string, std::string> labels;
  std::string name_prefix;
  int page_size = 0;
  std::string page_token;
  // Keep each job's spec_yaml; false: summaries, spec_yaml empty.
  bool include_spec = false;
  // Stop before a job would take the page past this many (estimated) bytes, always returning at
  // least one job; 0: no bound.
  int64_t max_bytes = 0;
};

struct EventBatch {
  std::vector<JobEventView> events;
  bool terminal = false;
  bool more = false;  // max_events cut the batch short
};

struct PointBatch {
  std::vector<MetricPoint> points;
  // Position after the last point returned (pass back as `cursor`).
  int64_t next_cursor = 0;
  bool terminal = false;
};

// The coordinator's core: jobs (durable in a JobStore), workers and their sessions, the gang
// scheduler and the control loop that drives every job through its states (docs/ARCHITECTURE.md
// "Coordinator"). gRPC services translate protos to the plain calls below. Coordinator is the
// facade: it wires a few objects with narrow contexts and runs the control loop.
//   JobRun         (job_run.h)          one job: its record and spec once, its attempt, its
//                                       transitions (Move, BeginStop, FinishStop, ...); reaches
//                                       the store, scheduler, rendezvous, metrics and workers
//                                       through a JobRunContext only.
//   WorkerRegistry (worker_registry.h)  workers, epochs, sessions, leases, pending cancels; sends
//                                       commands to workers (WorkerCommands).
//   LogReads       (log_reads.h)        trainer log reads waiting for their worker's answer.
//   LimitChecks    (limit_checks.h)     the fair-sharing limits at submission and rank caps.
//
// Threading: one mutex (mu_) guards everything above: the coordinator's fields and every
// JobRun, the WorkerRegistry, LogReads, LimitChecks and the GangScheduler it owns. Those
// classes are not thread-safe and are only ever called by the Coordinator with mu_ held (their
// collaborators too: JobRunContext, WorkerCommands, JobRunObserver); none of them takes a lock
// or calls back into the Coordinator's public API. Store writes happen under mu_ (a job's
// transitions are serialised with everything else). Blocking calls (WaitEvents, WaitPoints,
// ReadLog) wait on mu_'s condition without holding it. Commands to workers go through
// WorkerCommandSinks that only queue, and the feed listener only queues. The control loop runs
// on its own thread between Start() and Shutdown(); every public method may be called from any
// thread.
class Coordinator : private JobRunObserver {
 public:
  // Loads every job from `store` and prepares to reattach to the running ones. The pointers
  // must outlive the coordinator; `metrics` may be null.
  static absl::StatusOr<std::unique_ptr<Coordinator>> Create(const CoordinatorOptions& options,
                                                             JobStore* store,
                                                             WorkerEpochStore* epochs,
                                                             RendezvousStore* rendezvous,
                                                             CoordinatorMetrics* metrics);
  ~Coordinator();
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;

  // Starts the control loop (nothing is placed before). FAILED_PRECONDITION without a
  // rendezvous address.
  [[nodiscard]] absl::Status Start();
  // Stops the control loop and closes every worker session (workers keep their trainers and
  // reconnect to the next coordinator). Idempotent.
  void Shutdown();
  // One control-loop pass now (tests drive time with this and short options).
  void Tick();

  // --- JobService. ---
  // Parses and checks a job YAML (INVALID_ARGUMENT naming the field), including that the gang
  // fits options().cluster_slots when that bound is set. The workers registered right now are no
  // bound: a larger job waits in the queue for workers to join. With a storage policy
  // (options().spec_check), the job's paths are checked for `user` and `teams`.
  [[nodiscard]] absl::StatusOr<JobSpecInfo> ParseSpec(
      const std::string& config_yaml, const std::string& user = "",
      const std::vector<std::string>& teams = {}) const;
  // Refuses, before storing anything, a job over its owner's or team's limits (coordinator_
  // limits.cc: CheckLimits, and RESOURCE_EXHAUSTED naming max_queued_jobs when the account has
  // that many jobs queued). A replay of an idempotency key is never refused for limits.
  [[nodiscard]] absl::StatusOr<SubmitResultData> Submit(const SubmitRequestData& request);
  // The limits a submission must meet whatever the queue holds (validate-only submits check
  // these): scheduling.team one of the submitter's teams (PERMISSION_DENIED), scheduling.priority
  // within max_priority and the gang within max_running_ranks of user and team
  // (PERMISSION_DENIED naming the limit, its value and where the limits file sets it).
  [[nodiscard]] absl::Status CheckLimits(const SubmitRequestData& request) const;
  // Replaces the fair-sharing limits (SIGHUP); queued jobs are rescheduled under the new ones.
  void SetLimits(std::optional<LimitsConfig> limits);
  [[nodiscard]] absl::StatusOr<JobView> GetJob(const std::string& job_id) const;
  [[nodiscard]] absl::StatusOr<std::pair<std::vector<JobView>, std::string>> ListJobs(
      const ListRequestData& request) const;
  // `by`: who asked (the job's history and state reason say "cancelled by <by>"; empty: not
  // said).
  [[nodiscard]] absl::StatusOr<JobView> Cancel(const std::string& job_id, const std::string& reason,
                                               const std::string& by = "");
  // Events with sequence > after_seq (at most max_events); waits up to `timeout` for one when
  // there are none.
  [[nodiscard]] absl::StatusOr<EventBatch> WaitEvents(const std::string& job_id, int64_t after_seq,
                                                      absl::Duration timeout,
                                                      size_t max_events = SIZE_MAX) const;
  // Where a metrics stream starts: the first retained point with step >= from_step, or the
  // current end for live_only.
  [[nodiscard]] absl::StatusOr<int64_t> PointCursor(const std::string& job_id, int64_t from_step,
                                                    bool live_only) const;
  [[nodiscard]] absl::StatusOr<PointBatch> WaitPoints(const std::string& job_id, int64_t cursor,
                                                      absl::Duration timeout,
                                                      size_t max_points = SIZE_MAX) const;
  // Called (under the coordinator's lock: it must only queue, never call back) with a job's id
  // whenever its events, metric points or state change, and with "" when the coordinator
  // shuts down. Streams served without a thread each (JobService) wake on it. One listener;
  // nullptr removes it.
  void SetFeedListener(std::function<void(const std::string& job_id)> listener);
  [[nodiscard]] absl::StatusOr<std::vector<CheckpointView>> ListCheckpoints(
      const std::string& job_id) const;
  // Every registered worker (ready, draining or lost), by id, with what holds each slot (every
  // job's; callers decide who may see which).
  std::vector<WorkerView> ListWorkers() const;

  // --- Trainer logs, read from the worker that ran the rank (coordinator_logs.cc). ---
  // The trainer of `rank` (nullopt: the rank whose failure ended the attempt, else 0) of
  // `attempt` (0: the latest) and the worker that ran it. NOT_FOUND: unknown job;
  // INVALID_ARGUMENT naming attempt or rank; FAILED_PRECONDITION when the job has no attempt
  // yet or the worker of the rank was not recorded.
  [[nodiscard]] absl::StatusOr<LogSource> FindLogSource(const std::string& job_id, int attempt,
                                                        std::optional<int> rank) const;
  // Asks the source's worker for part of its log (request_id is chosen here) and waits for
  // the answer up to options().log_request_timeout. UNAVAILABLE naming the worker when it is
  // lost, has no session, loses it meanwhile or does not answer in time; the worker's
  // refusal (NOT_FOUND, OUT_OF_RANGE, ...) as its status, prefixed with the worker id;
  // RESOURCE_EXHAUSTED when too many reads are in flight.
  [[nodiscard]] absl::StatusOr<LogChunkReport> ReadLog(const LogSource& source,
                                                       LogRequestCommand request);
  // A worker's answer to ReadLog (an unknown, expired or other worker's request id is ignored).
  [[nodiscard]] absl::Status OnLogChunk(const std::string& worker_id, int64_t epoch,
                                        const LogChunkReport& chunk);

  // --- WorkerService. Stale epochs: ABORTED; unknown worker: NOT_FOUND. ---
  [[nodiscard]] absl::StatusOr<RegistrationResult> Register(const Registration& registration);
  // `session_secret`: the one Register returned with `epoch` (PERMISSION_DENIED otherwise).
  [[nodiscard]] absl::Status AttachSession(const std::string& worker_id, int64_t epoch,
                                           const std::string& session_secret,
                                           std::shared_ptr<WorkerCommandSink> sink);
  // The session that owns `sink` ended (a newer session of the worker is left alone).
  void DetachSession(const std::string& worker_id, int64_t epoch, const WorkerCommandSink* sink);
  [[nodiscard]] absl::Status OnHeartbeat(const std::string& worker_id, int64_t epoch,
                                         const std::vector<TaskReport>& tasks);
  [[nodiscard]] absl::Status OnTrainerExit(const std::string& worker_id, int64_t epoch,
                                           const TrainerExitReport& exit);
  // The worker is shutting down (WorkerDraining): DRAINING at once, so nothing is placed on it;
  // every job with ranks there goes RECOVERING (WORKER_DRAINED) and restarts elsewhere once
  // its ranks have stopped (within `grace` + 5 s), not counted against max_restarts. The
  // worker stops its own trainers: no cancellation is sent to it.
  [[nodiscard]] absl::Status OnDraining(const std::string& worker_id, int64_t epoch,
                                        const std::string& reason, std::chrono::milliseconds grace);
  [[nodiscard]] absl::Status OnMetrics(const std::string& worker_id, int64_t epoch,
                                       const MetricReport& report);
  // The worker refused an assignment (spawn failure, unknown slot, ...). `retry`: the reason
  // passes by itself (a slot still stopping, a failed fork): the job is placed again after a
  // backoff without counting a restart (RecoveryCause::kPlacementRefused).
  [[nodiscard]] absl::Status OnAssignmentRefused(const std::string& worker_id, int64_t epoch,
                                                 const std::string& job_id, int attempt,
                                                 const std::string& error, bool retry = false);

  // Where trainers reach the Rendezvous service (known once the server has bound its port).
  void SetRendezvousAddress(const std::string& address);

  const CoordinatorOptions& options() const { return options_; }


 private:
  using Clock = std::chrono::steady_clock;

  Coordinator(const CoordinatorOptions& options, JobStore* store, WorkerEpochStore* epochs,
              RendezvousStore* rendezvous, CoordinatorMetrics* metrics,
              std::unique_ptr<GangScheduler> scheduler);

  absl::Status LoadJobs() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ControlLoop();
  void TickLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // JobRunObserver (called by JobRuns, with mu_ held).
  void OnJobStateChanged(JobState from, JobState to) override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnJobFeed(const std::string& job_id) override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnScheduleChanged() override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Jobs and the scheduler (coordinator_jobs.cc).
  void RunScheduler() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sets every queued job's pending reason and code, and pending_counts_, from the scheduler.
  void RefreshPending() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What every assignment of a job of `owner` carries: the owner's name, teams and trainer
  // account (options().accounts) and the rendezvous address.
  AssignmentCommand AssignmentBase(const std::string& owner) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UpdateRankCaps() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UpdateGauges() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `view` of a finished job with its spec, read from the store (StoredJob keeps none in
  // memory). Called without mu_: a spec is up to 1 MiB, and the store has its own lock.
  absl::StatusOr<JobView> WithStoredSpec(JobView view) const ABSL_LOCKS_EXCLUDED(mu_);
  // Adds a job to jobs_ and job_index_ (an id already there keeps its job).
  JobRun& AddJob(const JobRecord& record, const JobSpecInfo& spec)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  JobRun* FindJob(const std::string& job_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  const JobRun* FindJob(const std::string& job_id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Workers (coordinator_workers.cc).
  void HandleLostRanks(const std::vector<LostRanks>& lost, const std::string& worker_id,
                       const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A worker was lost: its ranks, and ranks found there after a restart, are gone.
  void OnWorkerLost(const std::string& worker_id, const std::vector<LostRanks>& lost,
                    const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Matches a worker's task list against the jobs (coordinator_tasks.cc): re-adopts ranks after
  // a coordinator restart, updates rank phases, cancels tasks of dead attempts; when
  // `registering`, ranks placed on the worker but not listed are lost.
  void ReconcileTasks(const std::string& worker_id, const std::vector<TaskReport>& tasks,
                      bool registering) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const CoordinatorOptions options_;
  JobStore* const store_;
  RendezvousStore* const rendezvous_;
  CoordinatorMetrics* const metrics_;

  mutable absl::Mutex mu_;
  const std::unique_ptr<GangScheduler> scheduler_ ABSL_GUARDED_BY(mu_);
  WorkerRegistry workers_ ABSL_GUARDED_BY(mu_);
  LogReads log_reads_ ABSL_GUARDED_BY(mu_);
  LimitChecks limits_ ABSL_GUARDED_BY(mu_);
  // What every JobRun reaches (the store, scheduler, rendezvous, metrics, workers_ and this).
  const JobRunContext job_context_;
  std::map<std::string, JobRun> jobs_ ABSL_GUARDED_BY(mu_);
  // jobs_ by id in a hash table: FindJob is on every report and on each queued job of every
  // scheduling pass (RefreshPending), where the ordered map's string compares add up. Keys are
  // views of jobs_'s keys; AddJob and ApplyRetention keep the two in step.
  absl::flat_hash_map<absl::string_view, JobRun*> job_index_ ABSL_GUARDED_BY(mu_);
  std::map<JobState, int64_t> state_counts_ ABSL_GUARDED_BY(mu_);
  Clock::time_point last_retention_sweep_ ABSL_GUARDED_BY(mu_);
  // Deletes the finished jobs past options_.retain_finished (TickLocked, every retention_sweep).
  void ApplyRetention() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queued jobs by pending code as of the last scheduling pass (the deepnet_jobs_pending gauge).
  std::map<PendingCode, int64_t> pending_counts_ ABSL_GUARDED_BY(mu_);
  bool schedule_dirty_ ABSL_GUARDED_BY(mu_) = true;
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  std::function<void(const std::string&)> feed_listener_ ABSL_GUARDED_BY(mu_);
  std::string rendezvous_address_ ABSL_GUARDED_BY(mu_);
  std::thread loop_;
};

}  // namespace deepnet::coordinator
