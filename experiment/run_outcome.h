#pragma once
// What one run's trainer said (its `--log-format json` lines) and what became of it: the
// status of its results row (ok, diverged, plateau, failed, budget) and why.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "experiment/sweep_spec.h"

namespace deepnet::experiment {

/// The run's JSON lines, gathered one at a time. Lines that are not JSON objects are ignored;
/// events it does not know too. "probe", "diagnostics", "guard" and "plateau" lines count when
/// the trainer writes them.
class TrainLog {
 public:
  void AddLine(const std::string& line);

  int64_t last_step = 0;
  std::optional<double> last_loss;
  bool non_finite_loss = false;
  // (step, validation loss) in order.
  std::vector<std::pair<int64_t, double>> valid;
  // One object per probed step: {"step", "update_norm", and what the probe line adds}.
  std::vector<nlohmann::json> probe;
  // (step, training loss) of the step lines.
  std::vector<std::pair<int64_t, double>> losses;
  std::string stop_reason;  // From the "stop" event: max_steps, max_minutes, signal.
  int64_t guard_rollbacks = 0;
  bool guard_failed = false;
  std::string guard_reason;
  bool plateau_event = false;
  int64_t diagnostics_lines = 0;
  // {"step", "summary"} of each diagnostics line (the per-layer values stay in the run's log).
  std::vector<nlohmann::json> diagnostics;
  // Each guard and plateau line, without its "event" key.
  std::vector<nlohmann::json> guard_events;
  // Set once a "probe" line arrived: step lines' update_norm are then not used.
  bool has_probe_lines = false;
};

struct RunEnd {
  int exit_code = 0;
  bool killed_for_budget = false;  // The runner stopped it when the budget ran out.
  std::string stderr_tail;         // Last lines the trainer wrote to stderr.
};

struct Verdict {
  std::string status;  // ok | diverged | plateau | failed | budget
  std::string reason;
};

/// Plateau by the validation curve (`rule`, sweep_spec.h); false with fewer than 2 points.
bool IsPlateau(const std::vector<std::pair<int64_t, double>>& valid, const PlateauRule& rule);

/// The row status of a run that ended.
Verdict Classify(const TrainLog& log, const RunEnd& end, const PlateauRule& rule);

}  // namespace deepnet::experiment
