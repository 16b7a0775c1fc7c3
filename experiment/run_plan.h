#pragma once
// The runs of a sweep: the cartesian product of its axes (the first axis varies slowest), each
// with a stable id made of its axis values, its job overrides, and the effective job config.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "experiment/sweep_spec.h"

namespace deepnet::experiment {

struct PlannedRun {
  // Stable across invocations of the same spec: "norm-post_ln_depth-6" (the last part of each
  // axis key, or the whole key where two axes share it; characters outside [A-Za-z0-9._-]
  // become '_'). Names the run's folder under <out>/runs/.
  std::string id;
  // (axis key, value) in axis order.
  std::vector<std::pair<std::string, std::string>> axis_values;
  // Job overrides: the spec's `set`, then the axes' (depth gives two).
  std::vector<std::string> overrides;
  // The effective job config (DumpJobConfig of base + overrides) and its seed.
  std::string config_yaml;
  uint64_t seed = 0;
  int64_t max_steps = 0;
  double max_minutes = 0.0;  // The job's own train.max_minutes (0: none).
};

/// Expands the plan and parses every run's job config; the first bad run's error names it and
/// the field ("run norm-foo: model.norm: ...").
absl::StatusOr<std::vector<PlannedRun>> ExpandPlan(const SweepSpec& spec);

}  // namespace deepnet::experiment
