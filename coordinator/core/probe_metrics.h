#pragma once
// The probe and per-layer diagnostics gauges of /metrics (deepnet_job_update_norm_relative,
// deepnet_job_layer_ln_input_norm{stat}, ...): one series per job and statistic, never one per
// layer. Used by CoordinatorMetrics, which bounds the jobs that keep series.

#include <memory>
#include <string>
#include <vector>

#include "coordinator/core/coordinator_metrics.h"
#include "coordinator/core/coordinator_types.h"

namespace prometheus {
class Registry;
}  // namespace prometheus

namespace deepnet::coordinator {

/// The latest probe (probe_step > 0) and diagnostics (diagnostics_step > 0) among a report's
/// points into `sample` (left unset when the report has none).
void SetProbeAndDiagnostics(const std::vector<MetricPoint>& points, TrainingSample* sample);

/// Gauges of one registry. Not thread-safe: CoordinatorMetrics calls it under its lock.
class ProbeGauges {
 public:
  explicit ProbeGauges(prometheus::Registry& registry);
  ~ProbeGauges();
  // Sets the job's probe/diagnostics gauges present in `sample`; others keep their values.
  void Set(const std::string& job_id, const TrainingSample& sample);
  // Drops every series of the job.
  void Remove(const std::string& job_id);

 private:
  struct Impl;  // The prometheus families (kept out of this header).
  std::unique_ptr<Impl> impl_;
};

}  // namespace deepnet::coordinator
