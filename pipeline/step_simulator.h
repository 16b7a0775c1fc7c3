#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "pipeline/pipeline_schedule.h"

namespace deepnet::pipeline {

/// Time of one point-to-point transfer: latency_s + bytes / bytes_per_s (bytes_per_s 0: no
/// bandwidth term).
struct LinkModel {
  double latency_s = 0.0;
  double bytes_per_s = 0.0;
  double Seconds(double bytes) const;
};

/// One training step of one pipeline replica, as the engine runs it.
struct StepSimulationInput {
  PipelineSchedule schedule;      // As BuildSchedule makes it; must pass CheckSchedule.
  std::vector<StageCost> costs;   // [stage] forward and backward seconds of one micro-batch.
  // [stage] bytes stage s sends to stage s + 1 per micro-batch (its activations; the gradient
  // coming back has the same size). P - 1 entries (or P; the last is unused).
  std::vector<double> boundary_bytes;
  LinkModel link;
  // [stage] the data-parallel gradient reduction after the stage's last backward, seconds
  // (empty: none). Counted as exposed: the engine overlaps part of it with the last backward,
  // which this leaves out (an upper bound).
  std::vector<double> reduction_s;
};

struct StepSimulation {
  double step_s = 0.0;                 // Until the last stage has finished its reduction.
  std::vector<double> compute_s;       // [stage] forward + backward time.
  std::vector<double> finish_s;        // [stage] end of its last action (before the reduction).
  std::vector<double> bubble;          // [stage] 1 - compute / step (waits and transfers).
  std::vector<int> peak_live_micro_batches;  // [stage] activations held at once.
};

/// Replays the schedule as the engine executes it (pipeline/pipeline_engine.cc): each stage runs
/// its list in order; a group of transfers is posted at once and the stage waits until all of
/// them complete; a transfer completes `link` seconds after both its ends are posted
/// (rendezvous, as NCCL and MPI_Ssend: a send waits for its receive). Compute never overlaps a
/// transfer on the same stage. InvalidArgument for mismatched sizes, negative or non-finite
/// times, or a schedule that deadlocks.
absl::StatusOr<StepSimulation> SimulateStep(const StepSimulationInput& input);

}  // namespace deepnet::pipeline
