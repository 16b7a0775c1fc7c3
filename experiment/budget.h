#pragma once
// The sweep's compute budget (budget.minutes, budget.max_runs): time spent counts the wall time
// of every row already in the results file (earlier invocations) plus this invocation's.

#include <cstdint>
#include <optional>
#include <string>

#include "experiment/sweep_spec.h"

namespace deepnet::experiment {

/// A run is not started with less than this left of budget.minutes.
inline constexpr double kMinRunSeconds = 5.0;

/// Seconds left of budget.minutes after `spent_s`; +infinity without a time budget.
double RemainingSeconds(const SweepBudget& budget, double spent_s);

/// Why no further run may start (budget.minutes spent, budget.max_runs reached), or nullopt.
std::optional<std::string> BudgetStop(const SweepBudget& budget, double spent_s,
                                      int64_t runs_finished);

/// The train.max_minutes a run gets: what is left of the budget, or the job's own limit when
/// that is smaller; 0 (none) when neither limits it.
double RunMaxMinutes(double remaining_s, double job_max_minutes);

}  // namespace deepnet::experiment
