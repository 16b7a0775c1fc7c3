#include "job/guard_config.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace deepnet::job {

namespace {

void IntRange(ConfigProblems* problems, const char* field, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo || v > hi) {
    problems->Add(absl::StrCat("guard.", field),
                  absl::StrCat("must be in [", lo, ", ", hi, "] (got ", v, ")"));
  }
}

}  // namespace

void ValidateGuard(const GuardConfig& g, ConfigProblems* problems) {
  IntRange(problems, "max_retries", g.max_retries, 0, SpecCaps::kRestarts);
  IntRange(problems, "loss_window", g.loss_window, 1, SpecCaps::kGuardWindow);
  IntRange(problems, "plateau_window", g.plateau_window, 0, SpecCaps::kGuardWindow);
  // !(x > 0) also catches NaN.
  if (!(g.lr_factor > 0 && g.lr_factor <= 1)) {
    problems->Add("guard.lr_factor",
                  absl::StrCat("must be in (0, 1] (got ", ShortestDouble(g.lr_factor), ")"));
  }
  if (!(g.loss_spike_factor == 0 ||
        (g.loss_spike_factor > 1 && g.loss_spike_factor <= SpecCaps::kRealMax))) {
    problems->Add("guard.loss_spike_factor",
                  absl::StrCat("must be 0 (off) or in (1, ", ShortestDouble(SpecCaps::kRealMax),
                               "] (got ", ShortestDouble(g.loss_spike_factor), ")"));
  }
  if (!(g.update_bound >= 0 && g.update_bound <= SpecCaps::kRealMax)) {
    problems->Add("guard.update_bound",
                  absl::StrCat("must be 0 (off) or in (0, ", ShortestDouble(SpecCaps::kRealMax),
                               "] (got ", ShortestDouble(g.update_bound), ")"));
  }
  if (!(g.plateau_min_delta >= 0 && g.plateau_min_delta <= SpecCaps::kRealMax)) {
    problems->Add("guard.plateau_min_delta",
                  absl::StrCat("must be in [0, ", ShortestDouble(SpecCaps::kRealMax), "] (got ",
                               ShortestDouble(g.plateau_min_delta), ")"));
  }
}

bool GuardEnabled(const JobConfig& config) {
  switch (config.guard.enabled) {
    case GuardSwitch::kAuto:
      return config.model.norm() == model::NormVariant::kDeepNorm;
    case GuardSwitch::kTrue:
      return true;
    case GuardSwitch::kFalse:
      return false;
  }
  return false;
}

}  // namespace deepnet::job
