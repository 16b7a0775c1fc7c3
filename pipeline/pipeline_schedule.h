#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace deepnet::pipeline {

/// Pipeline schedules over P stages and m micro-batches, represented as data: one ordered list
/// of actions per stage. The engine executes a stage's list front to back. Transfers are
/// grouped: the sends and receives of one tick (the run of transfers between two computes)
/// share a group id and are posted together as one grouped operation
/// (Communicator::StartGroup), which completes when all of them have. Transports may have
/// rendezvous semantics (a send completes only once its receive is posted: NCCL, MPI_Ssend), so
/// a stage that sends the activation of micro-batch j + 1 and receives the gradient of j posts
/// both at once; posted one after the other, each of two neighbours could wait for the other's
/// receive forever (see CheckSchedule).
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
bool IsSend(ActionType type);
bool IsRecv(ActionType type);
bool IsTransfer(ActionType type);  // A send or a receive.
bool CarriesActivation(ActionType type);  // A forward transfer (else a gradient, or compute).

struct PipelineAction {
  ActionType type = ActionType::kForward;
  int micro_batch = 0;
  int peer = -1;  // Stage on the other end of a send/receive; -1 for compute.
  // Transfers of one stage with the same group id >= 0 (adjacent in its list) are posted
  // together; -1: a group of its own (always so for compute).
  int group = -1;
  bool operator==(const PipelineAction& other) const {
    return type == other.type && micro_batch == other.micro_batch && peer == other.peer &&
           group == other.group;
  }
};

/// One past the last action of the transfer group that starts at `position` of `actions`
/// (a lone transfer or compute: position + 1).
size_t GroupEnd(const std::vector<PipelineAction>& actions, size_t position);

/// Actions per stage: [stage][position].
using PipelineSchedule = std::vector<std::vector<PipelineAction>>;

/// Builds the schedule. GPipe: every forward, then every backward in reverse order.
/// 1F1B: stage s runs min(P - s - 1, m) warm-up forwards, then alternates one forward and one
/// backward, then drains the remaining backwards. With `group_transfers` (the default) every
/// run of transfers between two computes is one group (at most a send of what the last compute
/// produced and a receive for the next compute); without it every transfer stands alone, the
/// order that deadlocks 1F1B under rendezvous semantics (kept for tests). InvalidArgument for
/// stages < 1 or micro_batches < 1.
absl::StatusOr<PipelineSchedule> BuildSchedule(ScheduleKind kind, int stages, int micro_batches,
                                               bool group_transfers = true);

/// Proves that `schedule` runs to completion on any transport. Checks that every send has
/// exactly one matching receive (same micro-batch, same direction, in order per (sender,
/// receiver, direction)), that each stage runs each micro-batch's forward once before its
/// backward, that a forward is preceded by its receive and followed by its send (and likewise
/// for backward), that groups hold only adjacent transfers, and that no stage waits forever
/// under rendezvous semantics: a stage reaching a group posts all of its transfers and stays
/// there until every one of them is matched by a posted counterpart (a send completes only when
/// its receive is posted, a receive when its send is). Rendezvous is the strictest transport, so
/// a schedule that passes also completes with buffered (non-blocking) sends. The error names the
/// stage, the action position and the micro-batch.
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
