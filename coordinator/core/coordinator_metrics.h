#pragma once
// The coordinator's Prometheus metrics (prometheus-cpp): job and worker counts by state, queued
// jobs by pending reason, queue wait / time-to-running / scheduling-decision histograms,
// heartbeats missed, restarts by cause, submissions, and per-job training gauges labelled by job. Served over HTTP on
// /metrics (--metrics-listen) and available as text through Serialize().

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "coordinator/scheduler/gang_types.h"
#include "coordinator/store/job_state.h"

namespace deepnet::coordinator {

// One training report of a job, as exported in the per-job gauges.
struct TrainingSample {
  // Optimizer steps done.
  int64_t step = 0;
  // Training loss (nats per token).
  double loss = 0;
  // Target tokens trained per second, all ranks together.
  double tokens_per_s = 0;
  // Learning rate of the step.
  double lr = 0;
  // Global gradient norm before clipping.
  double grad_norm = 0;
  // Norm of the model update ||ΔF||; unset when the trainer does not measure it (the series is
  // then absent, not 0).
  std::optional<double> update_norm;
  // Peak device (or host) memory of the job's ranks, bytes; 0 when unknown.
  int64_t memory_bytes = 0;
  // CUDA memory of the reporting rank, bytes; unset for a CPU job (the series are then absent).
  struct GpuMemory {
    int64_t allocated = 0;
    int64_t reserved = 0;
    int64_t peak_allocated = 0;
  };
  std::optional<GpuMemory> gpu_memory;
  // The latest probe and per-layer diagnostics of the report; unset when it has none (their
  // gauges then keep the last values, with the step they belong to).
  struct Probe {
    int64_t step = 0;
    double f0_norm = 0;
    double update_norm_relative = 0;
    double logits_update_norm = 0;
    double logits_update_norm_relative = 0;
  };
  std::optional<Probe> probe;
  struct LayerStats {
    double min = 0, max = 0, mean = 0, p50 = 0, p90 = 0;
  };
  struct Diagnostics {
    int64_t step = 0;
    LayerStats ln_input_norm;
    LayerStats grad_norm;
  };
  std::optional<Diagnostics> diagnostics;
};

// The coordinator's metrics. Metric names are fixed (COMMON.md / docs); label values are
// lower-case (state="queued", cause="worker_exit"). Per-job series are bounded: at most
// max_job_series jobs keep series, the least recently reported job's series are dropped first,
// so cardinality cannot grow without limit. Safe for concurrent use.
class CoordinatorMetrics {
 public:
  // Jobs whose per-job series are kept by Create(listen_address).
  static constexpr size_t kDefaultMaxJobSeries = 1000;

  // listen_address "0.0.0.0:9464" serves GET /metrics over HTTP; empty serves nothing
  // (Serialize() still works). Port 0 picks a free port (see port()). INVALID_ARGUMENT naming
  // --metrics-listen for a malformed address, UNAVAILABLE naming it when it cannot listen.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<CoordinatorMetrics>> Create(
      const std::string& listen_address);
  // As above, keeping per-job series for at most `max_job_series` jobs (> 0).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<CoordinatorMetrics>> Create(
      const std::string& listen_address, size_t max_job_series);

  ~CoordinatorMetrics();
  CoordinatorMetrics(const CoordinatorMetrics&) = delete;
  CoordinatorMetrics& operator=(const CoordinatorMetrics&) = delete;

  // The bound HTTP port; 0 when not serving.
  int port() const;

  // deepnet_jobs{state}: every state is exported, those missing from `counts` as 0.
  void SetJobsByState(const std::map<JobState, int64_t>& counts);
  // deepnet_jobs_pending{reason}: queued jobs by pending code (PendingCodeName); every code is
  // exported, those missing from `counts` as 0.
  void SetJobsPending(const std::map<PendingCode, int64_t>& counts);
  // deepnet_workers{state}: every state is exported, those missing from `counts` as 0.
  void SetWorkersByState(const std::map<WorkerState, int64_t>& counts);
  // Submit -> first PLACING->STARTING.
  void ObserveQueueWait(double seconds);
  // Submit -> first RUNNING.
  void ObserveTimeToRunning(double seconds);
  // Time the scheduler took for one decision (one pass placing or rejecting jobs).
  void ObserveSchedulingDecision(double seconds);
  void IncHeartbeatsMissed(int64_t n = 1);
  void IncRestarts(RecoveryCause cause);
  void IncJobsSubmitted();
  // deepnet_audit_write_failures_total: audit-log records that could not be written.
  void IncAuditWriteFailures();
  // Sets the job's gauges (creating its series; may drop the least recently reported job's).
  void SetJobTraining(const std::string& job_id, const TrainingSample& sample);
  // The divergence guard: deepnet_job_guard_rollbacks_total{job} counts rollbacks;
  // deepnet_job_plateau{job} is 1 once a plateau of the validation loss was flagged (0 before).
  void OnJobGuardRollback(const std::string& job_id);
  void OnJobPlateau(const std::string& job_id);
  // Drops the job's per-job series; no-op for an unknown job.
  void RemoveJob(const std::string& job_id);
  // Jobs that currently have per-job series.
  size_t num_job_series() const;

  // Every metric in the Prometheus text exposition format 0.0.4.
  std::string Serialize() const;

 private:
  struct Impl;
  explicit CoordinatorMetrics(std::unique_ptr<Impl> impl);

  std::unique_ptr<Impl> impl_;
};

}  // namespace deepnet::coordinator
