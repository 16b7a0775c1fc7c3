#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace deepnet::pipeline {

/// Pipeline schedules over P stages and m micro-batches, represented as data: one ordered list
/// of actions per stage. The engine executes a stage's list front to back; sends are
/// non-blocking (they complete in the background), receives block until the matching send.
enum class ScheduleKind { kGPipe, k1F1B };

std::string ToString(ScheduleKind kind);
absl::StatusOr<ScheduleKind> ParseSchedule(const std::string& name);  // "gpipe", "1f1b"

enum class ActionType {
  kForward,         // Forward of `micro_batch` on this stage's layers.
  kBackward,        // Backward of `micro_batch` on this stage's layers.
  kSendActivation,  // Forward output of `micro_batch` to stage `peer` (= stage + 1).
  kRecvActivation,  // Forward input of `micro_batch` from stage `peer` (= stage - 1).
  kSendGradient,    // Gradient of this stage's input for `micro_batch` to `peer` (= stage - 1).
  kRecvGradient,    // Gradient of this stage's output for `micro_batch` from `peer` (= stage + 1).
};

std::string ToString(ActionType type);

struct PipelineAction {
  ActionType type = ActionType::kForward;
  int micro_batch = 0;
  int peer = -1;  // Stage on the other end of a send/receive; -1 for compute.
  bool operator==(const PipelineAction& other) const {
    return type == other.type && micro_batch == other.micro_batch && peer == other.peer;
  }
};

/// Actions per stage: [stage][position].
using PipelineSchedule = std::vector<std::vector<PipelineAction>>;

/// Builds the schedule. GPipe: every forward, then every backward in reverse order.
/// 1F1B: stage s runs min(P - s - 1, m) warm-up forwards, then alternates one forward and one
/// backward, then drains the remaining backwards. InvalidArgument for stages < 1 or
/// micro_batches < 1.
absl::StatusOr<PipelineSchedule> BuildSchedule(ScheduleKind kind, int stages, int micro_batches);

/// Proves that `schedule` runs to completion: simulates every stage with non-blocking sends and
/// blocking in-order receives per (sender, receiver, direction), and checks that every send has
/// exactly one matching receive (same micro-batch, same direction), that each stage runs each
/// micro-batch's forward once before its backward, that a forward is preceded by its receive and
/// followed by its send (and likewise for backward), and that no stage waits forever. The error
/// names the stage, the action position and the micro-batch.
absl::Status CheckSchedule(const PipelineSchedule& schedule, int micro_batches);

/// Idle fraction of a stage under a schedule with balanced stages, as the literature predicts:
/// (P - 1) / (m + P - 1) for both GPipe and 1F1B.
double PredictedBubbleFraction(int stages, int micro_batches);

/// Per-stage compute times of one micro-batch, in any unit.
struct StageCost {
  double forward = 1.0;
  double backward = 2.0;
};

/// Result of replaying a schedule on an ideal machine (zero-latency transfers).
struct TimelineResult {
  double makespan = 0.0;           // Time until the last stage finishes.
  std::vector<double> busy;        // [stage] compute time.
  std::vector<double> idle_fraction;  // [stage] 1 - busy / makespan.
  // [stage] most micro-batches whose activations are held at once (forward done, backward not).
  std::vector<int> peak_live_micro_batches;
};

/// Replays `schedule` with the given per-stage costs (one entry per stage) and returns when
/// every action would run. The schedule must pass CheckSchedule.
absl::StatusOr<TimelineResult> SimulateSchedule(const PipelineSchedule& schedule,
                                                const std::vector<StageCost>& costs);

}  // namespace deepnet::pipeline
