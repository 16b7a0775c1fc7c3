#pragma once
// `deepnet experiment run | plot | list-presets` (docs/CLI.md, "deepnet experiment").

#include <atomic>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace deepnet::experiment {

struct ExperimentRunCommand {
  std::string preset;                    // A built-in sweep, or:
  std::string spec_path;                 // a spec file.
  std::string out_dir;                   // Overrides the spec's `out`.
  std::optional<double> budget_minutes;  // Overrides budget.minutes.
  std::vector<std::string> sets;         // ApplySpecOverrides items.
  // The trainer program; empty: this program (/proc/self/exe).
  std::string trainer;
  bool no_plots = false;
  // Non-empty: submit each run as a job to this coordinator (HOST:PORT) through deepnetctl.
  std::string coordinator;
  std::string deepnetctl;  // Empty: the deepnetctl beside this program, else on PATH.
  std::string token_file;  // Passed to deepnetctl (else its DEEPNET_TOKEN* variables count).
};

/// Exit codes: 0 the sweep ran (whatever its runs' statuses), 1 a runtime failure, 2 bad input,
/// 143 interrupted (resume by running the same command again).
int RunExperiment(const ExperimentRunCommand& command, const std::atomic<bool>* stop,
                  std::ostream& out, std::ostream& err);
int PlotExperiment(const std::string& out_dir, std::ostream& out, std::ostream& err);
int ListPresets(std::ostream& out);

}  // namespace deepnet::experiment
