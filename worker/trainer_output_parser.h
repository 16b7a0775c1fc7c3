#pragma once
// Turns the trainer's `--log-format json` output (train/progress_reporter.cc) into plain
// progress records for the worker daemon. Torch-free.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace deepnet::worker {

// One {"event":"probe",...} line: the model update on the probe batch at `step`.
struct TrainerProbe {
  int64_t step = 0;
  double update_norm = 0.0;  // ||F(x, theta_step) - F(x, theta_0)||
  double f0_norm = 0.0;      // ||F(x, theta_0)||
  // Unset when the line has null (||F0|| = 0, or no logits reference).
  std::optional<double> update_norm_relative;
  std::optional<double> logits_update_norm;
  std::optional<double> logits_f0_norm;
  std::optional<double> logits_update_norm_relative;
};

// Minimum, maximum, mean and quantiles of a per-layer value over the layers.
struct TrainerLayerSummary {
  double min = 0.0;
  double max = 0.0;
  double mean = 0.0;
  double p50 = 0.0;
  double p90 = 0.0;
};

// The "summary" of one {"event":"diagnostics",...} line (the per-layer values stay in the log).
struct TrainerDiagnostics {
  int64_t step = 0;
  int64_t layers = 0;
  TrainerLayerSummary ln_input_norm;
  TrainerLayerSummary grad_norm;
  double other_grad_norm = 0.0;
};

// One {"event":"step",...} line.
struct TrainerStep {
  // Optimiser step the values belong to; >= 1.
  int64_t step = 0;
  // Label-smoothed cross entropy and plain NLL, nats per target token.
  double loss = 0.0;
  double nll = 0.0;
  double lr = 0.0;
  // Global gradient L2 norm before clipping.
  double grad_norm = 0.0;
  // Tokens per second over the trainer's reporting interval.
  double tokens_per_s = 0.0;
  // ||F(x, theta_step) - F(x, theta_0)|| on the probe batch; nullopt when not measured.
  std::optional<double> update_norm;
  // The rank's CUDA memory in bytes (allocated, reserved, peak allocated); 0 when the line has
  // none (a CPU trainer).
  int64_t gpu_allocated_bytes = 0;
  int64_t gpu_reserved_bytes = 0;
  int64_t gpu_peak_allocated_bytes = 0;
  // Not parsed from the step line: the latest probe and diagnostics lines read before it
  // (MergePending), so that they travel with the next metric point.
  std::optional<TrainerProbe> probe;
  std::optional<TrainerDiagnostics> diagnostics;
};

// One {"event":"checkpoint","message":"saved DIR/step_000001500",...} line.
struct TrainerCheckpoint {
  int64_t step = 0;
  // The checkpoint's folder.
  std::string path;
};

// One {"event":"guard",...} or {"event":"plateau",...} line of the divergence guard
// (train/trainer_guard.cc).
struct TrainerGuardEvent {
  int64_t step = 0;
  // "rollback", "fail" (the guard's "action") or "plateau".
  std::string kind;
  // What tripped it: "nonfinite_loss", "loss_spike", "update_norm", "other_rank"; empty for a
  // plateau.
  std::string trigger;
  // rollback: the checkpoint step restored.
  int64_t to_step = 0;
  // Rollbacks used so far.
  int32_t retries = 0;
  // The trainer's text (the failure reason for "fail").
  std::string message;
};

// What one output line said; at most one member is set (none for other events, text lines
// and malformed JSON).
struct TrainerLine {
  std::optional<TrainerStep> step;
  std::optional<TrainerCheckpoint> checkpoint;
  // Step the trainer resumed from ({"event":"resume","message":"resumed from step N (...)"}).
  std::optional<int64_t> resumed_step;
  // Step the run starts from ({"event":"start","message":"...from step N to M"}): the resumed
  // checkpoint's, 0 from scratch.
  std::optional<int64_t> start_step;
  std::optional<TrainerProbe> probe;
  std::optional<TrainerDiagnostics> diagnostics;
  std::optional<TrainerGuardEvent> guard;
};

// Probe and diagnostics lines come on their own steps (often not log steps); this keeps the
// latest of each and hands them to the next step line. Not thread-safe.
class PendingTrainerValues {
 public:
  // Remembers line.probe / line.diagnostics; attaches what is pending to line.step.
  void Merge(TrainerLine& line);

 private:
  std::optional<TrainerProbe> probe_;
  std::optional<TrainerDiagnostics> diagnostics_;
};

// Parses one line (without its newline). Never fails: lines that are not one of the events
// above (text logs, "valid", "start", a rejected checkpoint, broken JSON) give an empty result.
// A checkpoint's step comes from its "step" field, else from the step folder name
// (storage::StepOfCheckpointPath).
// Pure function, safe for concurrent use.
TrainerLine ParseTrainerLine(std::string_view line);

}  // namespace deepnet::worker
