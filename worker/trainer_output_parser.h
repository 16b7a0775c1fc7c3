#pragma once
// What the worker daemon takes from the trainer's progress lines (`--log-format json`; the
// lines' schema is job/progress_line.h): steps with the probe and diagnostics values that came
// before them, completed checkpoints, the steps a run resumed and started from, and the
// divergence guard's events. Torch-free.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "job/progress_line.h"

namespace deepnet::worker {

// One step line, and the latest probe and diagnostics lines read before it (merged in by
// PendingTrainerValues), so that they travel with the step's metric point.
struct TrainerStep : job::StepLine {
  std::optional<job::ProbeLine> probe;
  // Without its per-layer values (those stay in the trainer's log).
  std::optional<job::DiagnosticsLine> diagnostics;
};

// A {"event":"guard"} or {"event":"plateau"} line of the divergence guard, as one event.
struct TrainerGuardEvent {
  int64_t step = 0;
  // "rollback", "fail" (the guard's "action") or "plateau".
  std::string kind;
  // What tripped it: "nonfinite_loss", "loss_spike", "update_norm", "other_rank"; empty for a
  // plateau.
  std::string trigger;
  // rollback: the checkpoint step restored (>= 0).
  int64_t to_step = 0;
  // Rollbacks used so far, in [0, 2^30].
  int32_t retries = 0;
  // The trainer's text (the failure reason for "fail").
  std::string message;
};

// What one output line said; at most one member is set (none for other events, text lines
// and malformed JSON).
struct TrainerLine {
  std::optional<TrainerStep> step;
  std::optional<job::CheckpointLine> checkpoint;
  // Step the trainer resumed from (job::ResumeLine).
  std::optional<int64_t> resumed_step;
  // Step the run starts from (job::StartLine): the resumed checkpoint's, 0 from scratch.
  std::optional<int64_t> start_step;
  std::optional<job::ProbeLine> probe;
  std::optional<job::DiagnosticsLine> diagnostics;  // Without per-layer values.
  std::optional<TrainerGuardEvent> guard;
};

// Probe and diagnostics lines come on their own steps (often not log steps); this keeps the
// latest of each and hands them to the next step line. Not thread-safe.
class PendingTrainerValues {
 public:
  // Remembers line.probe / line.diagnostics; attaches what is pending to line.step.
  void Merge(TrainerLine& line);

 private:
  std::optional<job::ProbeLine> probe_;
  std::optional<job::DiagnosticsLine> diagnostics_;
};

// Parses one line (without its newline) with job::ParseProgressLine. Never fails: lines that
// are not one of the events above (text logs, "valid", a rejected checkpoint, broken JSON) give
// an empty result. Pure function, safe for concurrent use.
TrainerLine ParseTrainerLine(std::string_view line);

}  // namespace deepnet::worker
