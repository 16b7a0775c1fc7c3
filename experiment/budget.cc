#include "experiment/budget.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace deepnet::experiment {

double RemainingSeconds(const SweepBudget& budget, double spent_s) {
  if (budget.minutes <= 0) return std::numeric_limits<double>::infinity();
  return std::max(0.0, budget.minutes * 60.0 - spent_s);
}

std::optional<std::string> BudgetStop(const SweepBudget& budget, double spent_s,
                                      int64_t runs_finished) {
  if (budget.max_runs > 0 && runs_finished >= budget.max_runs) {
    return absl::StrCat("budget.max_runs (", budget.max_runs, ") reached");
  }
  if (RemainingSeconds(budget, spent_s) < kMinRunSeconds) {
    return absl::StrCat("budget.minutes (", budget.minutes, ") spent");
  }
  return std::nullopt;
}

double RunMaxMinutes(double remaining_s, double job_max_minutes) {
  if (!std::isfinite(remaining_s)) return job_max_minutes;
  const double left = remaining_s / 60.0;
  return job_max_minutes > 0 ? std::min(left, job_max_minutes) : left;
}

}  // namespace deepnet::experiment
