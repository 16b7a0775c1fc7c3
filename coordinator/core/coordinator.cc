// Coordinator: construction, loading jobs after a restart, the control loop, and the calls the
// JobService makes to read jobs. Each job's lifecycle is in JobRun (job_run.cc); cancelling and
// scheduling in coordinator_jobs.cc, workers in coordinator_workers.cc.
#include "coordinator/core/coordinator.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "coordinator/core/checkpoint_listing.h"

namespace deepnet::coordinator {

absl::StatusOr<std::unique_ptr<Coordinator>> Coordinator::Create(const CoordinatorOptions& options,
                                                                 JobStore* store,
                                                                 WorkerEpochStore* epochs,
                                                                 RendezvousStore* rendezvous,
                                                                 CoordinatorMetrics* metrics) {
  if (options.heartbeat_interval.count() <= 0 || options.lease_heartbeats < 1 ||
      options.tick.count() <= 0) {
    return absl::InvalidArgumentError(
        "coordinator options: heartbeat interval, lease heartbeats and tick must be positive");
  }
  absl::StatusOr<std::unique_ptr<GangScheduler>> scheduler = GangScheduler::Create(options.scheduler);
  if (!scheduler.ok()) return scheduler.status();
  std::unique_ptr<Coordinator> c(new Coordinator(options, store, epochs, rendezvous, metrics,
                                                 std::move(*scheduler)));
  absl::MutexLock lock(&c->mu_);
  if (absl::Status s = c->LoadJobs(); !s.ok()) return s;
  c->UpdateGauges();
  return c;
}

Coordinator::Coordinator(const CoordinatorOptions& options, JobStore* store,
                         WorkerEpochStore* epochs, RendezvousStore* rendezvous,
                         CoordinatorMetrics* metrics, std::unique_ptr<GangScheduler> scheduler)
    : options_(options),
      store_(store),
      rendezvous_(rendezvous),
      metrics_(metrics),
      scheduler_(std::move(scheduler)),
      workers_(epochs, scheduler_.get(), metrics, options.heartbeat_interval,
               options.lease_heartbeats),
      log_reads_(&mu_, &workers_, options.log_request_timeout),
      limits_(options.limits, options.is_admin),
      job_context_{store,        scheduler_.get(),   rendezvous,
                   metrics,      &workers_,          this,
                   options.stop_grace, options.stop_timeout, options.points_per_job,
                   options.trainer_credentials},
      rendezvous_address_(options.rendezvous_address) {}

void Coordinator::SetRendezvousAddress(const std::string& address) {
  absl::MutexLock lock(&mu_);
  rendezvous_address_ = address;
}

Coordinator::~Coordinator() { Shutdown(); }

absl::Status Coordinator::LoadJobs() {
  const Clock::time_point reattach_until = Clock::now() + options_.reattach_window;
  JobSpecCheckOptions no_paths = options_.spec_check;
  no_paths.check_paths = false;
  std::string token;
  do {
    absl::StatusOr<JobPage> page = store_->List(JobFilter{}, 1000, token);
    if (!page.ok()) return page.status();
    for (const JobRecord& record : page->records) {
      absl::StatusOr<JobSpecInfo> spec = ParseJobSpec(record.spec_yaml, no_paths);
      // A job that has not started and whose spec breaks today's rules (stored by an older
      // version) is cancelled rather than placed: no spec reaches a worker unchecked. Its
      // settings are then the defaults; the record keeps what it says.
      std::string refused;
      JobSpecInfo settings;
      if (spec.ok()) {
        settings = *std::move(spec);
      } else {
        const absl::string_view message = spec.status().message();
        refused =
            absl::StrCat("cancelled at coordinator start: the spec breaks the current rules: ",
                         message.substr(0, std::min<size_t>(message.find('\n'), 512)));
      }
      JobRun& job = AddJob(record, settings);
      ++state_counts_[record.state];
      if (absl::Status s = job.Load(refused, reattach_until); !s.ok()) return s;
    }
    token = page->next_page_token;
  } while (!token.empty());
  return absl::OkStatus();
}

absl::Status Coordinator::Start() {
  absl::MutexLock lock(&mu_);
  if (rendezvous_address_.empty()) {
    return absl::FailedPreconditionError(
        "coordinator: no rendezvous address for trainers (--advertise-address)");
  }
  if (loop_.joinable() || shutting_down_) return absl::OkStatus();
  loop_ = std::thread([this] { ControlLoop(); });
  return absl::OkStatus();
}

void Coordinator::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) return;
    shutting_down_ = true;
    OnJobFeed("");
    workers_.CloseAll(absl::UnavailableError("coordinator shutting down"));
  }
  if (loop_.joinable()) loop_.join();
}

void Coordinator::ControlLoop() {
  absl::MutexLock lock(&mu_);
  while (!shutting_down_) {
    TickLocked();
    mu_.AwaitWithTimeout(absl::Condition(&shutting_down_), absl::FromChrono(options_.tick));
  }
}

void Coordinator::Tick() {
  absl::MutexLock lock(&mu_);
  TickLocked();
}

void Coordinator::TickLocked() {
  const Clock::time_point now = Clock::now();
  workers_.ExpireLeases(now, [this](const std::string& worker_id,
                                    const std::vector<LostRanks>& lost, const std::string& why) {
    OnWorkerLost(worker_id, lost, why);
  });
  for (auto& [id, job] : jobs_) {
    if (job.HasTimers()) job.CheckTimers(now);
  }
  RunScheduler();
  if (options_.retain_finished.count() > 0 &&
      now - last_retention_sweep_ >= options_.retention_sweep) {
    last_retention_sweep_ = now;
    ApplyRetention();
  }
  UpdateGauges();
}

void Coordinator::ApplyRetention() {
  const int64_t cutoff_ms = SystemNowMs() - options_.retain_finished.count();
  // The newest job is kept (JobStore::DeleteFinished): skipped here, not asked for every sweep.
  int64_t newest = 0;
  for (const auto& [id, job] : jobs_) {
    newest = std::max(newest, JobNumberFromId(id).value_or(0));
  }
  int deleted = 0;
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    const JobRecord& record = it->second.record();
    if (!IsTerminal(record.state) || record.updated_ms > cutoff_ms ||
        JobNumberFromId(record.id).value_or(0) == newest) {
      ++it;
      continue;
    }
    absl::Status s = store_->DeleteFinished(record.id);
    if (absl::IsFailedPrecondition(s)) {  // The store's own rule; not expected here.
      ++it;
      continue;
    }
    if (!s.ok()) {
      spdlog::error("retention: cannot delete job {}: {}; trying again at the next sweep",
                    record.id, s.ToString());
      break;
    }
    --state_counts_[record.state];
    job_index_.erase(it->first);
    it = jobs_.erase(it);
    ++deleted;
  }
  if (deleted > 0) {
    spdlog::info("retention: deleted {} job(s) finished more than {} s ago, with their events",
                 deleted, options_.retain_finished.count() / 1000);
  }
}

absl::StatusOr<JobSpecInfo> Coordinator::ParseSpec(const std::string& config_yaml,
                                                   const std::string& user,
                                                   const std::vector<std::string>& teams) const {
  JobSpecCheckOptions check = options_.spec_check;
  check.user = user;
  check.teams = teams;
  absl::StatusOr<JobSpecInfo> spec = ParseJobSpec(config_yaml, check);
  if (!spec.ok()) return spec.status();
  // Only a configured bound refuses: registered workers come and go (a pod or node that is
  // starting, drained or lost), so a job larger than them waits in the queue instead.
  if (options_.cluster_slots > 0) {
    absl::Status fits = CheckGangFitsCluster(spec->pipeline_stages, spec->data_parallel,
                                             options_.cluster_slots);
    if (!fits.ok()) return absl::InvalidArgumentError(absl::StrCat("job spec: ", fits.message()));
  }
  // Likewise only the configured largest slot refuses for memory; registered slots make the job
  // wait (PendingCode::kExceedsSlotMemory).
  if (absl::Status fits = CheckMemoryFits(spec->memory_per_rank_bytes, spec->memory_biggest_part,
                                          spec->memory_summary, options_.cluster_slot_memory);
      !fits.ok()) {
    return fits;
  }
  return spec;
}

absl::StatusOr<SubmitResultData> Coordinator::Submit(const SubmitRequestData& request) {
  JobRecord record;
  record.owner = request.owner;
  record.idempotency_key = request.idempotency_key;
  record.spec_yaml = request.config_yaml;
  record.name = request.spec.name;
  record.priority = request.spec.priority;
  record.pipeline_stages = request.spec.pipeline_stages;
  record.data_parallel = request.spec.data_parallel;
  record.max_restarts = request.spec.max_restarts;
  record.checkpoint_dir = request.spec.checkpoint_dir;
  absl::MutexLock lock(&mu_);
  if (shutting_down_) return absl::UnavailableError("coordinator is shutting down");
  if (absl::Status s = limits_.CheckSubmit(request, jobs_); !s.ok()) return s;
  absl::StatusOr<CreateResult> created = store_->Create(record);
  if (!created.ok()) return created.status();
  if (created->replayed) {
    if (created->record.spec_yaml != request.config_yaml) {
      return absl::AlreadyExistsError(absl::StrCat(
          "idempotency_key \"", request.idempotency_key, "\" was used for job ",
          created->record.id, " with a different spec"));
    }
    const JobRun* job = FindJob(created->record.id);
    if (job == nullptr) return absl::InternalError("replayed job is not loaded");
    JobView view = job->View();
    view.record.spec_yaml = created->record.spec_yaml;  // The store's (released once finished).
    return SubmitResultData{std::move(view), false};
  }
  JobRun& job = AddJob(created->record, request.spec);
  ++state_counts_[JobState::kQueued];
  job.Submitted();
  if (metrics_ != nullptr) metrics_->IncJobsSubmitted();
  return SubmitResultData{job.View(), true};
}

absl::StatusOr<JobView> Coordinator::GetJob(const std::string& job_id) const {
  JobView view;
  {
    absl::MutexLock lock(&mu_);
    const JobRun* job = FindJob(job_id);
    if (job == nullptr) return absl::NotFoundError(absl::StrCat("job ", job_id, " does not exist"));
    view = job->View();
    if (!job->spec_released()) return view;
  }
  return WithStoredSpec(std::move(view));
}

absl::StatusOr<JobView> Coordinator::WithStoredSpec(JobView view) const {
  absl::StatusOr<JobRecord> stored = store_->Get(view.record.id);
  if (!stored.ok()) return stored.status();
  view.record.spec_yaml = std::move(stored->spec_yaml);
  return view;
}

namespace {

// About the bytes of `view` as a v1::Job on the wire: its texts plus a fixed allowance for the
// numbers, times and each placement entry.
int64_t EstimatedBytes(const JobView& view) {
  const JobRecord& r = view.record;
  int64_t bytes = 256 + r.id.size() + r.owner.size() + r.idempotency_key.size() +
                  r.spec_yaml.size() + r.state_reason.size() + r.checkpoint_dir.size() +
                  view.spec.name.size() + 64 * view.placement.size();
  for (const auto& [key, value] : view.spec.labels) bytes += 8 + key.size() + value.size();
  return bytes;
}

}  // namespace

absl::StatusOr<std::pair<std::vector<JobView>, std::string>> Coordinator::ListJobs(
    const ListRequestData& request) const {
  absl::StatusOr<int> page_size = EffectivePageSize(request.page_size);
  if (!page_size.ok()) return page_size.status();
  JobFilter filter;
  filter.owner = request.owner;
  filter.states = request.states;
  // The views come from memory; the store gives the order, and the specs when asked for (a
  // finished job's spec is not kept in memory).
  filter.with_spec = request.include_spec;
  absl::MutexLock lock(&mu_);
  std::vector<JobView> out;
  int64_t bytes = 0;
  std::string token = request.page_token;
  do {
    absl::StatusOr<JobPage> page =
        store_->List(filter, *page_size - static_cast<int>(out.size()), token);
    if (!page.ok()) return page.status();
    for (const JobRecord& record : page->records) {
      const JobRun* job = FindJob(record.id);
      if (job == nullptr) continue;
      if (!absl::StartsWith(job->record().name, request.name_prefix)) continue;
      const std::map<std::string, std::string>& labels = job->settings().labels;
      bool labels_match = true;
      for (const auto& [key, value] : request.labels) {
        auto it = labels.find(key);
        if (it == labels.end() || it->second != value) labels_match = false;
      }
      if (!labels_match) continue;
      JobView view = job->View();
      view.record.spec_yaml = request.include_spec ? record.spec_yaml : std::string();
      const int64_t size = EstimatedBytes(view);
      if (request.max_bytes > 0 && !out.empty() && bytes + size > request.max_bytes) {
        // Full in bytes: the next page starts after the last job returned.
        absl::StatusOr<int64_t> last = JobNumberFromId(out.back().record.id);
        if (!last.ok()) return last.status();
        return std::make_pair(std::move(out), EncodePageToken(*last));
      }
      bytes += size;
      out.push_back(std::move(view));
    }
    token = page->next_page_token;
  } while (!token.empty() && static_cast<int>(out.size()) < *page_size);
  return std::make_pair(std::move(out), token);
}

void Coordinator::SetFeedListener(std::function<void(const std::string&)> listener) {
  absl::MutexLock lock(&mu_);
  feed_listener_ = std::move(listener);
}

absl::StatusOr<EventBatch> Coordinator::WaitEvents(const std::string& job_id, int64_t after_seq,
                                                   absl::Duration timeout,
                                                   size_t max_events) const {
  absl::MutexLock lock(&mu_);
  const JobRun* job = FindJob(job_id);
  if (job == nullptr) return absl::NotFoundError(absl::StrCat("job ", job_id, " does not exist"));
  auto ready = [job, after_seq, this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return job->events().last_sequence() > after_seq || shutting_down_;
  };
  mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
  if (shutting_down_) return absl::UnavailableError("coordinator is shutting down");
  EventBatch batch;
  batch.events = job->events().After(after_seq, max_events, &batch.more);
  batch.terminal = IsTerminal(job->state());
  return batch;
}

absl::StatusOr<int64_t> Coordinator::PointCursor(const std::string& job_id, int64_t from_step,
                                                 bool live_only) const {
  absl::MutexLock lock(&mu_);
  const JobRun* job = FindJob(job_id);
  if (job == nullptr) return absl::NotFoundError(absl::StrCat("job ", job_id, " does not exist"));
  if (live_only) return job->points().end();
  return job->points().FirstAtStep(from_step);
}

absl::StatusOr<PointBatch> Coordinator::WaitPoints(const std::string& job_id, int64_t cursor,
                                                   absl::Duration timeout,
                                                   size_t max_points) const {
  absl::MutexLock lock(&mu_);
  const JobRun* job = FindJob(job_id);
  if (job == nullptr) return absl::NotFoundError(absl::StrCat("job ", job_id, " does not exist"));
  auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return job->points().end() > cursor || IsTerminal(job->state()) || shutting_down_;
  };
  mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
  if (shutting_down_) return absl::UnavailableError("coordinator is shutting down");
  PointBatch batch;
  batch.points = job->points().From(cursor, max_points, &batch.next_cursor);
  batch.terminal = IsTerminal(job->state());
  return batch;
}

absl::StatusOr<std::vector<CheckpointView>> Coordinator::ListCheckpoints(
    const std::string& job_id) const {
  std::string dir;
  std::map<int64_t, int> attempts;
  {
    absl::MutexLock lock(&mu_);
    const JobRun* job = FindJob(job_id);
    if (job == nullptr) return absl::NotFoundError(absl::StrCat("job ", job_id, " does not exist"));
    dir = job->record().checkpoint_dir;
    attempts = job->checkpoint_attempts();
  }
  if (dir.empty()) return std::vector<CheckpointView>();
  // Off the mutex, on a gRPC thread: bounded so that a huge or slow folder of one user's
  // cannot hold that thread (docs/OPERATIONS.md, "Threat model").
  ListingLimits limits;
  limits.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  absl::StatusOr<std::vector<CheckpointView>> found =
      ListCheckpointFolders(dir, /*with_sizes=*/true, limits);
  if (!found.ok()) return found.status();
  for (CheckpointView& c : *found) {
    auto it = attempts.find(c.step);
    if (it != attempts.end()) c.attempt = it->second;
  }
  return found;
}

JobRun& Coordinator::AddJob(const JobRecord& record, const JobSpecInfo& spec) {
  auto [it, added] = jobs_.try_emplace(record.id, &job_context_, record, spec);
  // Keyed by a view of the map's own key: a node's key and value stay put until it is erased.
  if (added) job_index_.emplace(it->first, &it->second);
  return it->second;
}

JobRun* Coordinator::FindJob(const std::string& job_id) {
  auto it = job_index_.find(job_id);
  return it == job_index_.end() ? nullptr : it->second;
}

const JobRun* Coordinator::FindJob(const std::string& job_id) const {
  auto it = job_index_.find(job_id);
  return it == job_index_.end() ? nullptr : it->second;
}

void Coordinator::OnJobStateChanged(JobState from, JobState to) {
  --state_counts_[from];
  ++state_counts_[to];
  UpdateGauges();
}

void Coordinator::OnJobFeed(const std::string& job_id) {
  if (feed_listener_) feed_listener_(job_id);
}

void Coordinator::OnScheduleChanged() { schedule_dirty_ = true; }

void Coordinator::UpdateGauges() {
  if (metrics_ == nullptr) return;
  std::map<JobState, int64_t> jobs;
  for (JobState s : AllJobStates()) jobs[s] = 0;
  for (const auto& [state, n] : state_counts_) jobs[state] = n;
  metrics_->SetJobsByState(jobs);
  // The scheduler's worker states follow the sessions (lost; session open and not shutting
  // down: ready; else draining), so they are counted here without copying its worker list every
  // tick.
  metrics_->SetWorkersByState(workers_.CountByState());
  metrics_->SetJobsPending(pending_counts_);
}

}  // namespace deepnet::coordinator
