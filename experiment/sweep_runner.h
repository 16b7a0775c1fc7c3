#pragma once
// Runs a sweep's plan one run at a time through an executor (a local `deepnet train` process,
// or a job on the coordinator), appending a results row per run. Resume: runs whose latest row
// finished with the same effective config are skipped; a run cut short by an interruption has
// no row and runs again. Budget: see budget.h.

#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "experiment/run_outcome.h"
#include "experiment/run_plan.h"
#include "experiment/sweep_spec.h"

namespace deepnet::experiment {

struct RunRequest {
  const PlannedRun* run = nullptr;
  // The run's overrides plus the runner's (train.max_minutes from the budget).
  std::vector<std::string> overrides;
  std::string run_dir;               // <out>/runs/<id>/, empty and ready.
  std::string job_file;              // <out>/job.yaml: the base job.
  std::optional<double> deadline_s;  // Stop the run after this many seconds (budget).
  const std::atomic<bool>* stop = nullptr;
};

struct RunExecution {
  TrainLog log;
  RunEnd end;
  double wall_s = 0.0;
  bool interrupted = false;  // The sweep was stopped while the run ran: no row.
  std::string log_file;      // The trainer's JSON lines, relative to the out folder.
  nlohmann::json extra = nlohmann::json::object();  // Mode-specific fields (job id, ...).
};

class RunExecutor {
 public:
  virtual ~RunExecutor() = default;
  virtual std::string mode() const = 0;
  virtual absl::StatusOr<RunExecution> Execute(const RunRequest& request) = 0;
};

/// `deepnet train --config <job.yaml> --set ... --log-format json` as a child process.
class LocalExecutor : public RunExecutor {
 public:
  explicit LocalExecutor(std::string deepnet_binary) : binary_(std::move(deepnet_binary)) {}
  std::string mode() const override { return "local"; }
  absl::StatusOr<RunExecution> Execute(const RunRequest& request) override;

 private:
  std::string binary_;
};

struct RunnerOptions {
  std::string out_dir;
  std::string commit;
  const std::atomic<bool>* stop = nullptr;
  std::ostream* progress = nullptr;  // One line per run; may be null.
};

struct SweepSummary {
  int64_t planned = 0;
  int64_t ran = 0;
  int64_t skipped = 0;      // Finished in an earlier invocation.
  int64_t not_started = 0;  // Budget rows written.
  bool interrupted = false;
  std::map<std::string, int64_t> by_status;  // Of the latest rows of the plan's runs.
};

absl::StatusOr<SweepSummary> RunSweep(const SweepSpec& spec, const std::vector<PlannedRun>& plan,
                                      RunExecutor* executor, const RunnerOptions& options);

/// The commit the program was built from ("<sha>[-dirty]", or "unknown").
std::string BuildCommit();

}  // namespace deepnet::experiment
