// The divergence and plateau guard's hooks in the training loop (train/training_guard.h decides;
// this acts): a collective check every step, the rollback to a checkpoint, the plateau event.
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "train/trainer.h"

namespace deepnet::train {

absl::StatusOr<bool> Trainer::GuardStep(const StepMetrics& m, TrainSummary* summary) {
  std::optional<GuardTrigger> trigger = guard_->Check(m.step, m.loss, m.update_norm_relative);
  // Ranks decide together: one rank's trigger rolls every rank back.
  auto any = engine_->AnyRank(trigger.has_value());
  if (!any.ok()) return any.status();
  if (!*any) {
    guard_->Accept(m.step, m.loss);
    return false;
  }
  if (!trigger) {
    trigger = GuardTrigger{m.step, "other_rank", m.loss, std::numeric_limits<double>::quiet_NaN()};
  }
  // Rank 0's view of the checkpoint folder decides, for everyone.
  std::string decided;
  if (world_->rank() == 0) {
    std::vector<int64_t> steps;
    if (store_) {
      for (const auto& info : store_->ResumeOrder()) steps.push_back(info.step);
    }
    decided = guard_->Decide(*trigger, steps).ToJson().dump();
  }
  auto shared = engine_->BroadcastString(decided);
  if (!shared.ok()) return shared.status();
  auto decision = GuardDecision::FromJson(*shared);
  if (!decision.ok()) return decision.status();
  if (decision->kind == GuardDecision::Kind::kFail) {
    const std::string reason =
        summary->last_checkpoint.empty()
            ? decision->reason
            : absl::StrCat(decision->reason, "; last checkpoint: ", summary->last_checkpoint);
    job::GuardLine line;
    line.step = m.step;
    line.action = job::GuardAction::kFail;
    line.trigger = trigger->kind;
    line.value = trigger->value;
    line.threshold = trigger->threshold;
    line.retries = guard_->retries();
    line.max_retries = guard_->max_retries();
    line.message = reason;
    reporter_->Event(line);
    return GuardFailure(reason);
  }
  if (auto s = RollBack(decision->target_step, *trigger, summary); !s.ok()) return s;
  return true;
}

absl::Status Trainer::RollBack(int64_t target, const GuardTrigger& trigger, TrainSummary* summary) {
  // 1. Rank 0 takes the newer checkpoints out of `latest` and keep_last's count (fenced).
  absl::StatusOr<std::string> rolled = std::string();
  if (world_->rank() == 0) rolled = store_->RollBackTo(target);
  auto all = engine_->AllOk(rolled.ok());
  if (!all.ok()) return all.status();
  if (!*all) {
    return world_->rank() == 0 ? rolled.status()
                               : absl::InternalError(absl::StrCat(
                                     "guard: rank 0 could not roll back to step ", target));
  }
  // 2. Every rank restores weights, Adam state and RNG from it.
  const data::StreamState past_offending = consumed_state_;
  prefetcher_.reset();  // Joins the loader thread: the stream is the trainer's again.
  std::vector<std::string> rejected;
  auto point = engine_->Resume(
      *store_, [this](const nlohmann::json& meta) { return CheckResumable(meta); }, &rejected);
  for (const auto& r : rejected) reporter_->Event(job::RejectedCheckpointLine{r});
  if (!point.ok()) return point.status();
  if (point->step != target) {
    return absl::DataLossError(absl::StrCat("guard: rollback to step ", target, " restored step ",
                                            point->step, " (step ", target, " failed to load)"));
  }
  // 3. The data stream: past the offending batches, or back to the checkpoint's position.
  const bool skip = config_.guard.skip_batches;
  if (skip) {
    if (auto s = stream_->Restore(past_offending); !s.ok()) return s;
    consumed_state_ = past_offending;
  } else if (auto s = RestoreStream(*point); !s.ok()) {
    return s;
  }
  const int64_t skipped_steps = step_ - target;
  step_ = target;
  guard_->RolledBack(target);
  StartPrefetcher();
  ++summary->guard_rollbacks;
  summary->last_checkpoint = point->path;
  if (target >= summary->start_step) {
    summary->losses.resize(static_cast<size_t>(target - summary->start_step));
  } else {
    summary->losses.clear();
  }
  const std::string text = absl::StrCat(
      trigger.Describe(), "; rolled back to step ", target, " (retry ", guard_->retries(), " of ",
      guard_->max_retries(), ", learning rate x", absl::StrFormat("%.4g", guard_->lr_scale()),
      skip ? absl::StrCat(", batches of ", skipped_steps, " step(s) skipped") : "", ")");
  job::GuardLine line;
  line.step = trigger.step;
  line.action = job::GuardAction::kRollback;
  line.trigger = trigger.kind;
  line.value = trigger.value;
  line.threshold = trigger.threshold;
  line.retries = guard_->retries();
  line.max_retries = guard_->max_retries();
  line.to_step = target;
  line.checkpoint = point->path;
  line.skipped_steps = skip ? skipped_steps : 0;
  line.lr_scale = guard_->lr_scale();
  line.message = text;
  reporter_->Event(line);
  return absl::OkStatus();
}

void Trainer::GuardValidation(const job::ValidLine& v, TrainSummary* summary) {
  if (!guard_ || !guard_->Validation(v.step, v.loss)) return;
  ++summary->plateaus;
  const bool rewarm = config_.guard.plateau_action == job::PlateauAction::kRewarm;
  if (rewarm) guard_->Rewarm(step_);
  const std::string text = absl::StrCat(
      "step ", v.step, ": validation loss ", absl::StrFormat("%.4f", v.loss),
      " has not improved on ", absl::StrFormat("%.4f", guard_->best_valid().value_or(v.loss)),
      " by more than ", config_.guard.plateau_min_delta, " in ", config_.guard.plateau_window,
      " validations", rewarm ? "; warm-up restarted" : "");
  reporter_->Event(job::PlateauLine{v.step, v.loss, guard_->best_valid().value_or(v.loss),
                                    config_.guard.plateau_window, config_.guard.plateau_min_delta,
                                    job::ToString(config_.guard.plateau_action), text});
}

}  // namespace deepnet::train
