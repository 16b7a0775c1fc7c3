#pragma once
// The divergence and plateau guard's decisions (job::GuardConfig, docs/CONFIG.md "guard"):
// the loss history and its running median, the triggers (non-finite loss, loss spike, relative
// update norm), which checkpoint to roll back to, retry counting, the learning-rate scale and
// the plateau of the validation loss. Pure bookkeeping: no tensors, no I/O; the trainer acts
// on what it decides (train/trainer.cc). Not thread-safe.

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "job/job_config.h"
#include "train/progress_reporter.h"

namespace deepnet::train {

/// Why a step was refused.
struct GuardTrigger {
  int64_t step = 0;
  // "nonfinite_loss", "loss_spike", "update_norm", or "other_rank" (another rank's values).
  std::string kind;
  double value = 0.0;            // The loss or relative update norm.
  double threshold = 0.0;        // Spike: factor x median; update: the bound; NaN for non-finite.
  std::string Describe() const;  // "step 7: loss is nan (non-finite)" ...
};

/// What to do about a trigger.
struct GuardDecision {
  enum class Kind { kRollback, kFail };
  Kind kind = Kind::kFail;
  int64_t target_step = -1;  // kRollback: the checkpoint to restore.
  std::string reason;        // kFail: the job's failure reason (starts with "guard: ").

  nlohmann::json ToJson() const;
  static absl::StatusOr<GuardDecision> FromJson(const std::string& text);
};

class TrainingGuard {
 public:
  explicit TrainingGuard(const job::GuardConfig& config);

  // A trigger for a step's loss and (when measured) relative update norm, or nullopt.
  std::optional<GuardTrigger> Check(int64_t step, double loss,
                                    std::optional<double> update_norm_relative) const;
  // Records the loss of a step that passed Check.
  void Accept(int64_t step, double loss);
  // Median of the last loss_window accepted losses; nullopt while none.
  std::optional<double> Median() const;

  // Rolls back to the newest checkpoint older than the trigger (and older than the last
  // rollback's target when the trigger came again before a newer checkpoint was saved), or
  // fails: guard.action fail, retries used up, or no such checkpoint. `checkpoint_steps`: the
  // completed checkpoints a resume may use, any order.
  GuardDecision Decide(const GuardTrigger& trigger,
                       const std::vector<int64_t>& checkpoint_steps) const;
  // After the rollback to `target`: one retry used, the learning rate scaled by lr_factor,
  // history after `target` dropped.
  void RolledBack(int64_t target);
  // A checkpoint of `step` was committed: a later trigger may roll back to it.
  void CheckpointSaved(int64_t step);

  // A validation loss. True when this one completes a plateau: plateau_window validations in a
  // row without beating the best by more than plateau_min_delta (then counting starts again).
  bool Validation(int64_t step, double loss);
  bool plateaued() const { return plateaued_; }
  // The best validation loss so far and the validations since it improved.
  std::optional<double> best_valid() const { return best_valid_; }
  int64_t validations_since_best() const { return since_best_; }

  // guard.plateau_action rewarm: restart the warm-up at `step`.
  void Rewarm(int64_t step) { warmup_from_ = step; }
  // The step the learning-rate schedule counts from (0, or the last rewarm's step).
  int64_t warmup_from() const { return warmup_from_; }
  double lr_scale() const { return lr_scale_; }
  int64_t retries() const { return retries_; }
  int64_t max_retries() const { return config_.max_retries; }

  // What a checkpoint keeps ({"retries","lr_scale","warmup_from"}), so that a resumed or
  // restarted run keeps its retries and learning-rate scale.
  nlohmann::json State() const;
  void RestoreState(const nlohmann::json& state);

 private:
  job::GuardConfig config_;
  // (step, loss) of the last 2 x loss_window accepted steps, oldest first.
  std::deque<std::pair<int64_t, double>> history_;
  int64_t retries_ = 0;
  double lr_scale_ = 1.0;
  int64_t warmup_from_ = 0;
  // Set by a rollback until a newer checkpoint is saved: a trigger before then goes further back.
  std::optional<int64_t> suspect_from_;
  std::optional<double> best_valid_;
  int64_t since_best_ = 0;
  bool plateaued_ = false;
};

/// A test facility: DEEPNET_GUARD_FAULT's value, e.g. "nan@7,spike@12,update@15,nan@20..":
/// replace the loss of step 7 with NaN, multiply the loss of step 12 by 1000 and set the relative
/// update norm of step 15 to 1e6, once each (a step run again after a rollback is left alone),
/// and make every step from 20 on NaN ("N.." repeats). A ":rankR" suffix ("nan@7:rank3") keeps
/// an item to world rank R, so one rank alone sees the fault (`rank` is this process's). The hook
/// alters the metrics the guard sees, not the weights. InvalidArgument naming the item.
using StepFault = std::function<void(StepMetrics*)>;
absl::StatusOr<StepFault> ParseGuardFault(const std::string& spec, int rank = 0);

/// The error of a run whose guard gave up (FailedPrecondition with the reason and a payload);
/// `deepnet train` exits with job::kGuardExhaustedExitCode for it.
absl::Status GuardFailure(const std::string& reason);
bool IsGuardFailure(const absl::Status& status);

}  // namespace deepnet::train
