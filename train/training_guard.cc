#include "train/training_guard.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <map>
#include <memory>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace deepnet::train {

std::string GuardTrigger::Describe() const {
  if (kind == "nonfinite_loss") return absl::StrCat("step ", step, ": loss is ", value);
  if (kind == "other_rank") return absl::StrCat("step ", step, ": another rank tripped the guard");
  if (kind == "loss_spike") {
    return absl::StrFormat("step %d: loss %.6g is over %.6g (loss_spike_factor x median)", step,
                           value, threshold);
  }
  return absl::StrFormat("step %d: relative update norm %.6g is over update_bound %.6g", step,
                         value, threshold);
}

nlohmann::json GuardDecision::ToJson() const {
  return {{"kind", kind == Kind::kRollback ? "rollback" : "fail"},
          {"target_step", target_step},
          {"reason", reason}};
}

absl::StatusOr<GuardDecision> GuardDecision::FromJson(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  GuardDecision d;
  try {
    d.kind = j.at("kind").get<std::string>() == "rollback" ? Kind::kRollback : Kind::kFail;
    d.target_step = j.at("target_step").get<int64_t>();
    d.reason = j.at("reason").get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    return absl::InternalError(absl::StrCat("guard decision '", text, "': ", e.what()));
  }
  return d;
}

TrainingGuard::TrainingGuard(const job::GuardConfig& config) : config_(config) {}

std::optional<GuardTrigger> TrainingGuard::Check(int64_t step, double loss,
                                                 std::optional<double> update_norm_relative) const {
  if (!std::isfinite(loss)) {
    return GuardTrigger{step, "nonfinite_loss", loss, std::numeric_limits<double>::quiet_NaN()};
  }
  if (config_.loss_spike_factor > 0 &&
      static_cast<int64_t>(history_.size()) >= config_.loss_window) {
    const double limit = config_.loss_spike_factor * *Median();
    if (loss > limit) return GuardTrigger{step, "loss_spike", loss, limit};
  }
  if (config_.update_bound > 0 && update_norm_relative &&
      !(*update_norm_relative <= config_.update_bound)) {  // NaN included.
    return GuardTrigger{step, "update_norm", *update_norm_relative, config_.update_bound};
  }
  return std::nullopt;
}

void TrainingGuard::Accept(int64_t step, double loss) {
  history_.emplace_back(step, loss);
  // Twice the window: after a rollback of up to loss_window steps the median is still full.
  while (static_cast<int64_t>(history_.size()) > 2 * config_.loss_window) history_.pop_front();
}

std::optional<double> TrainingGuard::Median() const {
  if (history_.empty()) return std::nullopt;
  const size_t count = std::min(history_.size(), static_cast<size_t>(config_.loss_window));
  std::vector<double> values;
  values.reserve(count);
  for (auto it = history_.end() - static_cast<std::ptrdiff_t>(count); it != history_.end(); ++it) {
    values.push_back(it->second);
  }
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  const double upper = values[mid];
  if (values.size() % 2 == 1) return upper;
  const double lower = *std::max_element(values.begin(), values.begin() + mid);
  return (lower + upper) / 2.0;
}

GuardDecision TrainingGuard::Decide(const GuardTrigger& trigger,
                                    const std::vector<int64_t>& checkpoint_steps) const {
  GuardDecision d;
  const std::string what = trigger.Describe();
  if (config_.action == job::GuardAction::kFail) {
    d.reason = absl::StrCat("guard: ", what, " (guard.action is fail)");
    return d;
  }
  if (retries_ >= config_.max_retries) {
    d.reason = absl::StrCat("guard: ", what, "; retries exhausted (", retries_, " of ",
                            config_.max_retries, " rollbacks used)");
    return d;
  }
  int64_t limit = trigger.step;
  if (suspect_from_) limit = std::min(limit, *suspect_from_);
  int64_t best = -1;
  for (int64_t s : checkpoint_steps) {
    if (s < limit) best = std::max(best, s);
  }
  if (best < 0) {
    d.reason =
        absl::StrCat("guard: ", what, "; no checkpoint before step ", limit, " to roll back to",
                     limit < trigger.step
                         ? absl::StrCat(" (the rollback to step ", limit,
                                        " did not get past the trouble before a newer checkpoint)")
                         : " (checkpoint.dir empty, or none saved yet)");
    return d;
  }
  d.kind = GuardDecision::Kind::kRollback;
  d.target_step = best;
  return d;
}

void TrainingGuard::RolledBack(int64_t target) {
  ++retries_;
  lr_scale_ *= config_.lr_factor;
  suspect_from_ = target;
  while (!history_.empty() && history_.back().first > target) history_.pop_back();
  if (warmup_from_ > target) warmup_from_ = 0;
}

void TrainingGuard::CheckpointSaved(int64_t step) {
  if (suspect_from_ && step > *suspect_from_) suspect_from_.reset();
}

bool TrainingGuard::Validation(int64_t /*step*/, double loss) {
  if (!std::isfinite(loss)) return false;
  if (!best_valid_ || loss < *best_valid_ - config_.plateau_min_delta) {
    best_valid_ = loss;
    since_best_ = 0;
    plateaued_ = false;
    return false;
  }
  ++since_best_;
  if (config_.plateau_window > 0 && since_best_ >= config_.plateau_window) {
    since_best_ = 0;
    plateaued_ = true;
    return true;
  }
  return false;
}

nlohmann::json TrainingGuard::State() const {
  return {{"retries", retries_}, {"lr_scale", lr_scale_}, {"warmup_from", warmup_from_}};
}

void TrainingGuard::RestoreState(const nlohmann::json& state) {
  if (!state.is_object()) return;
  if (auto it = state.find("retries"); it != state.end() && it->is_number_integer()) {
    retries_ = std::max<int64_t>(0, it->get<int64_t>());
  }
  if (auto it = state.find("lr_scale"); it != state.end() && it->is_number()) {
    const double v = it->get<double>();
    if (v > 0 && v <= 1) lr_scale_ = v;
  }
  if (auto it = state.find("warmup_from"); it != state.end() && it->is_number_integer()) {
    warmup_from_ = std::max<int64_t>(0, it->get<int64_t>());
  }
}

absl::StatusOr<StepFault> ParseGuardFault(const std::string& spec, int rank) {
  struct Fault {
    std::string kind;  // nan, spike, update
    bool repeat = false;
    bool fired = false;
  };
  auto faults = std::make_shared<std::map<int64_t, Fault>>();
  for (absl::string_view item : absl::StrSplit(spec, ',', absl::SkipWhitespace())) {
    item = absl::StripAsciiWhitespace(item);
    const size_t at = item.find('@');
    Fault f;
    absl::string_view kind = item.substr(0, at);
    if (at == absl::string_view::npos || (kind != "nan" && kind != "spike" && kind != "update")) {
      return absl::InvalidArgumentError(
          absl::StrCat("DEEPNET_GUARD_FAULT: '", item,
                       "' is not nan@STEP, spike@STEP, update@STEP or KIND@STEP.., each optionally "
                       "followed by :rankR"));
    }
    f.kind = std::string(kind);
    absl::string_view when = item.substr(at + 1);
    // ":rankR" limits the item to world rank R (the other ranks learn of it from the guard).
    int only = -1;
    if (const size_t colon = when.find(":rank"); colon != absl::string_view::npos) {
      if (!absl::SimpleAtoi(when.substr(colon + 5), &only) || only < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("DEEPNET_GUARD_FAULT: '", item, "': the rank must be an integer >= 0"));
      }
      when = when.substr(0, colon);
    }
    f.repeat = absl::ConsumeSuffix(&when, "..");
    int64_t step = 0;
    if (!absl::SimpleAtoi(when, &step) || step < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("DEEPNET_GUARD_FAULT: '", item, "': the step must be an integer >= 1"));
    }
    // Every rank checks every item (so all accept or all refuse the variable); only the named
    // rank, if one is named, injects it.
    if (only >= 0 && only != rank) continue;
    (*faults)[step] = f;
  }
  return StepFault([faults](StepMetrics* m) {
    // The first fault (lowest step) that applies to this step.
    for (auto it = faults->begin(); it != faults->end(); ++it) {
      Fault& f = it->second;
      const bool hit = f.repeat ? m->step >= it->first : (m->step == it->first && !f.fired);
      if (!hit) continue;
      f.fired = true;
      if (f.kind == "nan") {
        m->loss = std::numeric_limits<double>::quiet_NaN();
      } else if (f.kind == "spike") {
        m->loss *= 1000.0;
      } else {
        m->update_norm_relative = 1e6;
      }
      return;
    }
  });
}

namespace {
constexpr char kGuardPayload[] = "deepnet.train/guard";
}  // namespace

absl::Status GuardFailure(const std::string& reason) {
  absl::Status s = absl::FailedPreconditionError(reason);
  s.SetPayload(kGuardPayload, absl::Cord("exhausted"));
  return s;
}

bool IsGuardFailure(const absl::Status& status) {
  return status.GetPayload(kGuardPayload).has_value();
}

}  // namespace deepnet::train
