#include "coordinator/core/coordinator_metrics.h"

#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <array>
#include <exception>
#include <list>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/core/probe_metrics.h"

namespace deepnet::coordinator {

namespace {

using prometheus::Counter;
using prometheus::Family;
using prometheus::Gauge;
using prometheus::Histogram;

constexpr WorkerState kAllWorkerStates[] = {WorkerState::kReady, WorkerState::kDraining,
                                            WorkerState::kLost};
constexpr RecoveryCause kAllRecoveryCauses[] = {
    RecoveryCause::kWorkerExit, RecoveryCause::kWorkerLost, RecoveryCause::kHang,
    RecoveryCause::kStartTimeout, RecoveryCause::kWorkerDrained, RecoveryCause::kPlacementRefused};

std::string Lower(absl::string_view name) { return absl::AsciiStrToLower(name); }

// Queue wait and time to running: seconds for an idle cluster, up to a day for a busy one.
Histogram::BucketBoundaries WaitBuckets() {
  return {1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 28800, 86400};
}

// One scheduling pass: 10 µs (a small queue) to 1 s (thousands of queued jobs).
Histogram::BucketBoundaries DecisionBuckets() {
  return {1e-5, 2.5e-5, 5e-5,   1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3,
          5e-3, 1e-2,   2.5e-2, 5e-2, 0.1,    0.25, 0.5,  1.0};
}

// OK for "host:port" with a numeric port 0..65535 (host may be "[v6]").
absl::Status ValidateListenAddress(const std::string& address) {
  const size_t colon = address.rfind(':');
  int port = -1;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(absl::string_view(address).substr(colon + 1), &port) || port < 0 ||
      port > 65535 || address.find_first_of(" \t,") != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics-listen: '", address, "' is not HOST:PORT (e.g. 0.0.0.0:9464)"));
  }
  return absl::OkStatus();
}

}  // namespace

struct CoordinatorMetrics::Impl {
  // The series of one job; pointers owned by their families.
  struct JobSeries {
    Gauge* step = nullptr;
    Gauge* loss = nullptr;
    Gauge* tokens_per_s = nullptr;
    Gauge* lr = nullptr;
    Gauge* grad_norm = nullptr;
    Gauge* update_norm = nullptr;  // Null while the job reports none.
    Gauge* memory_bytes = nullptr;
    // deepnet_job_gpu_memory_bytes{kind=allocated|reserved|peak}; null while none reported.
    std::array<Gauge*, 3> gpu_memory = {nullptr, nullptr, nullptr};
    // The divergence guard's; null until the job's first guard or plateau event.
    Counter* guard_rollbacks = nullptr;
    Gauge* plateau = nullptr;
    std::list<std::string>::iterator lru;  // Position in `recent`.
  };

  explicit Impl(size_t max_jobs)
      : max_job_series(max_jobs),
        registry(std::make_shared<prometheus::Registry>()),
        jobs(prometheus::BuildGauge()
                 .Name("deepnet_jobs")
                 .Help("Jobs in each state (queued, placing, starting, running, recovering, "
                       "succeeded, failed, cancelled).")
                 .Register(*registry)),
        queue_wait(prometheus::BuildHistogram()
                       .Name("deepnet_job_queue_wait_seconds")
                       .Help("Time from a job's submission to its first placement (PLACING to "
                             "STARTING).")
                       .Register(*registry)
                       .Add({}, WaitBuckets())),
        time_to_running(prometheus::BuildHistogram()
                            .Name("deepnet_job_time_to_running_seconds")
                            .Help("Time from a job's submission until all its ranks first run.")
                            .Register(*registry)
                            .Add({}, WaitBuckets())),
        decision(prometheus::BuildHistogram()
                     .Name("deepnet_scheduler_decision_seconds")
                     .Help("Time the gang scheduler took for one scheduling decision.")
                     .Register(*registry)
                     .Add({}, DecisionBuckets())),
        pending(prometheus::BuildGauge()
                    .Name("deepnet_jobs_pending")
                    .Help("Queued jobs by why they wait (schedulable, insufficient_slots, "
                          "behind_job, exceeds_registered).")
                    .Register(*registry)),
        workers(prometheus::BuildGauge()
                    .Name("deepnet_workers")
                    .Help("Registered worker daemons in each state (ready, draining, lost).")
                    .Register(*registry)),
        heartbeats_missed(prometheus::BuildCounter()
                              .Name("deepnet_worker_heartbeats_missed_total")
                              .Help("Heartbeats that worker daemons failed to send in time.")
                              .Register(*registry)
                              .Add({})),
        restarts(prometheus::BuildCounter()
                     .Name("deepnet_job_restarts_total")
                     .Help("Job restarts from a checkpoint, by cause (worker_exit, worker_lost, "
                           "hang, start_timeout, worker_drained, placement_refused).")
                     .Register(*registry)),
        submitted(prometheus::BuildCounter()
                      .Name("deepnet_jobs_submitted_total")
                      .Help("Jobs accepted by SubmitJob (idempotent retries count once).")
                      .Register(*registry)
                      .Add({})),
        audit_write_failures(prometheus::BuildCounter()
                                 .Name("deepnet_audit_write_failures_total")
                                 .Help("Audit-log records (--audit-log) that could not be "
                                       "written; the calls they describe were not refused.")
                                 .Register(*registry)
                                 .Add({})),
        step(prometheus::BuildGauge()
                 .Name("deepnet_job_step")
                 .Help("Optimizer steps a job has completed.")
                 .Register(*registry)),
        loss(prometheus::BuildGauge()
                 .Name("deepnet_job_loss")
                 .Help("A job's latest training loss (nats per target token).")
                 .Register(*registry)),
        tokens_per_s(prometheus::BuildGauge()
                         .Name("deepnet_job_tokens_per_second")
                         .Help("Target tokens a job trains per second, all ranks together.")
                         .Register(*registry)),
        lr(prometheus::BuildGauge()
               .Name("deepnet_job_learning_rate")
               .Help("A job's learning rate at its latest step.")
               .Register(*registry)),
        grad_norm(prometheus::BuildGauge()
                      .Name("deepnet_job_gradient_norm")
                      .Help("Global gradient norm of a job's latest step, before clipping.")
                      .Register(*registry)),
        update_norm(prometheus::BuildGauge()
                        .Name("deepnet_job_update_norm")
                        .Help("Norm of a job's latest model update (the DeepNet paper's ||dF||).")
                        .Register(*registry)),
        memory_bytes(prometheus::BuildGauge()
                         .Name("deepnet_job_memory_bytes")
                         .Help("Peak memory of a job's ranks, in bytes.")
                         .Register(*registry)),
        gpu_memory(prometheus::BuildGauge()
                       .Name("deepnet_job_gpu_memory_bytes")
                       .Help("CUDA memory of a job's latest reporting rank, in bytes: held by "
                             "tensors (kind=allocated), by the caching allocator "
                             "(kind=reserved), most held by tensors so far (kind=peak).")
                       .Register(*registry)),
        guard_rollbacks(prometheus::BuildCounter()
                            .Name("deepnet_job_guard_rollbacks_total")
                            .Help("Rollbacks of a job to an earlier checkpoint by the divergence "
                                  "guard (a non-finite loss, a loss spike or a too large update).")
                            .Register(*registry)),
        plateau(prometheus::BuildGauge()
                    .Name("deepnet_job_plateau")
                    .Help("1 once the divergence guard flagged a plateau of a job's validation "
                          "loss (no improvement by guard.plateau_min_delta in "
                          "guard.plateau_window validations).")
                    .Register(*registry)),
        probe_gauges(*registry) {
    for (JobState state : AllJobStates()) {
      jobs_by_state[state] = &jobs.Add({{"state", Lower(ToString(state))}});
    }
    for (PendingCode code : kAllPendingCodes) {
      pending_by_code[code] = &pending.Add({{"reason", std::string(PendingCodeName(code))}});
    }
    for (WorkerState state : kAllWorkerStates) {
      workers_by_state[state] = &workers.Add({{"state", Lower(WorkerStateName(state))}});
    }
    for (RecoveryCause cause : kAllRecoveryCauses) {
      restarts_by_cause[cause] = &restarts.Add({{"cause", Lower(ToString(cause))}});
    }
  }

  void RemoveSeries(const JobSeries& series) {
    step.Remove(series.step);
    loss.Remove(series.loss);
    tokens_per_s.Remove(series.tokens_per_s);
    lr.Remove(series.lr);
    grad_norm.Remove(series.grad_norm);
    if (series.update_norm != nullptr) update_norm.Remove(series.update_norm);
    memory_bytes.Remove(series.memory_bytes);
    for (Gauge* gauge : series.gpu_memory) {
      if (gauge != nullptr) gpu_memory.Remove(gauge);
    }
    if (series.guard_rollbacks != nullptr) guard_rollbacks.Remove(series.guard_rollbacks);
    if (series.plateau != nullptr) plateau.Remove(series.plateau);
  }

  // The job's series, created (evicting the least recently reported job's when at the bound)
  // and moved to the front of `recent`.
  JobSeries& Series(const std::string& job_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    auto it = job_series.find(job_id);
    if (it != job_series.end()) {
      recent.splice(recent.begin(), recent, it->second.lru);
      return it->second;
    }
    if (job_series.size() >= max_job_series) {
      // Evict the job that reported least recently (finished jobs are normally removed by
      // RemoveJob; this bounds the series when they are not).
      const std::string oldest = recent.back();
      recent.pop_back();
      auto victim = job_series.find(oldest);
      RemoveSeries(victim->second);
      probe_gauges.Remove(oldest);
      job_series.erase(victim);
    }
    const prometheus::Labels labels = {{"job", job_id}};
    JobSeries series;
    series.step = &step.Add(labels);
    series.loss = &loss.Add(labels);
    series.tokens_per_s = &tokens_per_s.Add(labels);
    series.lr = &lr.Add(labels);
    series.grad_norm = &grad_norm.Add(labels);
    series.memory_bytes = &memory_bytes.Add(labels);
    recent.push_front(job_id);
    series.lru = recent.begin();
    return job_series.emplace(job_id, series).first->second;
  }

  const size_t max_job_series;
  std::shared_ptr<prometheus::Registry> registry;
  // Families and metrics live in `registry`, which outlives every use.
  Family<Gauge>& jobs;
  Histogram& queue_wait;
  Histogram& time_to_running;
  Histogram& decision;
  Family<Gauge>& pending;
  Family<Gauge>& workers;
  Counter& heartbeats_missed;
  Family<Counter>& restarts;
  Counter& submitted;
  Counter& audit_write_failures;
  Family<Gauge>& step;
  Family<Gauge>& loss;
  Family<Gauge>& tokens_per_s;
  Family<Gauge>& lr;
  Family<Gauge>& grad_norm;
  Family<Gauge>& update_norm;
  Family<Gauge>& memory_bytes;
  Family<Gauge>& gpu_memory;
  Family<Counter>& guard_rollbacks;
  Family<Gauge>& plateau;
  ProbeGauges probe_gauges;  // Probe and per-layer diagnostics; used under `mu`.
  // Filled in the constructor, read-only afterwards.
  std::map<JobState, Gauge*> jobs_by_state;
  std::map<PendingCode, Gauge*> pending_by_code;
  std::map<WorkerState, Gauge*> workers_by_state;
  std::map<RecoveryCause, Counter*> restarts_by_cause;

  mutable absl::Mutex mu;
  absl::flat_hash_map<std::string, JobSeries> job_series ABSL_GUARDED_BY(mu);
  std::list<std::string> recent ABSL_GUARDED_BY(mu);  // Most recently reported job first.

  // Declared last: destroyed first, so no scrape runs while the registry goes away.
  std::unique_ptr<prometheus::Exposer> exposer;
  int port = 0;
};

absl::StatusOr<std::unique_ptr<CoordinatorMetrics>> CoordinatorMetrics::Create(
    const std::string& listen_address) {
  return Create(listen_address, kDefaultMaxJobSeries);
}

absl::StatusOr<std::unique_ptr<CoordinatorMetrics>> CoordinatorMetrics::Create(
    const std::string& listen_address, size_t max_job_series) {
  if (max_job_series == 0) {
    return absl::InvalidArgumentError("metrics: max_job_series must be > 0");
  }
  auto impl = std::make_unique<Impl>(max_job_series);
  if (!listen_address.empty()) {
    if (absl::Status valid = ValidateListenAddress(listen_address); !valid.ok()) return valid;
    try {
      // CivetServer throws when it cannot bind (address in use, no such interface).
      impl->exposer = std::make_unique<prometheus::Exposer>(listen_address);
    } catch (const std::exception& e) {
      return absl::UnavailableError(absl::StrCat("--metrics-listen: cannot serve /metrics on ",
                                                 listen_address, ": ", e.what()));
    }
    impl->exposer->RegisterCollectable(impl->registry);
    const std::vector<int> ports = impl->exposer->GetListeningPorts();
    if (ports.empty() || ports.front() <= 0) {
      return absl::UnavailableError(
          absl::StrCat("--metrics-listen: no port bound for ", listen_address));
    }
    impl->port = ports.front();
  }
  return std::unique_ptr<CoordinatorMetrics>(new CoordinatorMetrics(std::move(impl)));
}

CoordinatorMetrics::CoordinatorMetrics(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

CoordinatorMetrics::~CoordinatorMetrics() = default;

int CoordinatorMetrics::port() const { return impl_->port; }

void CoordinatorMetrics::SetJobsByState(const std::map<JobState, int64_t>& counts) {
  for (const auto& [state, gauge] : impl_->jobs_by_state) {
    const auto it = counts.find(state);
    gauge->Set(it == counts.end() ? 0.0 : static_cast<double>(it->second));
  }
}

void CoordinatorMetrics::SetJobsPending(const std::map<PendingCode, int64_t>& counts) {
  for (const auto& [code, gauge] : impl_->pending_by_code) {
    const auto it = counts.find(code);
    gauge->Set(it == counts.end() ? 0.0 : static_cast<double>(it->second));
  }
}

void CoordinatorMetrics::SetWorkersByState(const std::map<WorkerState, int64_t>& counts) {
  for (const auto& [state, gauge] : impl_->workers_by_state) {
    const auto it = counts.find(state);
    gauge->Set(it == counts.end() ? 0.0 : static_cast<double>(it->second));
  }
}

void CoordinatorMetrics::ObserveQueueWait(double seconds) { impl_->queue_wait.Observe(seconds); }

void CoordinatorMetrics::ObserveTimeToRunning(double seconds) {
  impl_->time_to_running.Observe(seconds);
}

void CoordinatorMetrics::ObserveSchedulingDecision(double seconds) {
  impl_->decision.Observe(seconds);
}

void CoordinatorMetrics::IncHeartbeatsMissed(int64_t n) {
  if (n > 0) impl_->heartbeats_missed.Increment(static_cast<double>(n));
}

void CoordinatorMetrics::IncRestarts(RecoveryCause cause) {
  const auto it = impl_->restarts_by_cause.find(cause);
  if (it != impl_->restarts_by_cause.end()) it->second->Increment();
}

void CoordinatorMetrics::IncJobsSubmitted() { impl_->submitted.Increment(); }
void CoordinatorMetrics::IncAuditWriteFailures() { impl_->audit_write_failures.Increment(); }

void CoordinatorMetrics::SetJobTraining(const std::string& job_id, const TrainingSample& sample) {
  Impl& m = *impl_;
  absl::MutexLock lock(&m.mu);
  Impl::JobSeries& series = m.Series(job_id);
  series.step->Set(static_cast<double>(sample.step));
  series.loss->Set(sample.loss);
  series.tokens_per_s->Set(sample.tokens_per_s);
  series.lr->Set(sample.lr);
  series.grad_norm->Set(sample.grad_norm);
  series.memory_bytes->Set(static_cast<double>(sample.memory_bytes));
  if (sample.update_norm.has_value()) {
    if (series.update_norm == nullptr) series.update_norm = &m.update_norm.Add({{"job", job_id}});
    series.update_norm->Set(*sample.update_norm);
  } else if (series.update_norm != nullptr) {
    m.update_norm.Remove(series.update_norm);
    series.update_norm = nullptr;
  }
  m.probe_gauges.Set(job_id, sample);
  if (sample.gpu_memory.has_value()) {
    static constexpr const char* kKinds[] = {"allocated", "reserved", "peak"};
    const int64_t values[] = {sample.gpu_memory->allocated, sample.gpu_memory->reserved,
                              sample.gpu_memory->peak_allocated};
    for (size_t k = 0; k < series.gpu_memory.size(); ++k) {
      if (series.gpu_memory[k] == nullptr) {
        series.gpu_memory[k] = &m.gpu_memory.Add({{"job", job_id}, {"kind", kKinds[k]}});
      }
      series.gpu_memory[k]->Set(static_cast<double>(values[k]));
    }
  } else {
    for (Gauge*& gauge : series.gpu_memory) {
      if (gauge != nullptr) m.gpu_memory.Remove(gauge);
      gauge = nullptr;
    }
  }
}

void CoordinatorMetrics::OnJobGuardRollback(const std::string& job_id) {
  Impl& m = *impl_;
  absl::MutexLock lock(&m.mu);
  Impl::JobSeries& series = m.Series(job_id);
  if (series.guard_rollbacks == nullptr) {
    series.guard_rollbacks = &m.guard_rollbacks.Add({{"job", job_id}});
  }
  series.guard_rollbacks->Increment();
}

void CoordinatorMetrics::OnJobPlateau(const std::string& job_id) {
  Impl& m = *impl_;
  absl::MutexLock lock(&m.mu);
  Impl::JobSeries& series = m.Series(job_id);
  if (series.plateau == nullptr) series.plateau = &m.plateau.Add({{"job", job_id}});
  series.plateau->Set(1.0);
}

void CoordinatorMetrics::RemoveJob(const std::string& job_id) {
  Impl& m = *impl_;
  absl::MutexLock lock(&m.mu);
  auto it = m.job_series.find(job_id);
  if (it == m.job_series.end()) return;
  m.RemoveSeries(it->second);
  m.probe_gauges.Remove(job_id);
  m.recent.erase(it->second.lru);
  m.job_series.erase(it);
}

size_t CoordinatorMetrics::num_job_series() const {
  absl::MutexLock lock(&impl_->mu);
  return impl_->job_series.size();
}

std::string CoordinatorMetrics::Serialize() const {
  return prometheus::TextSerializer().Serialize(impl_->registry->Collect());
}

}  // namespace deepnet::coordinator
