#pragma once
// The sweep spec of `deepnet experiment run`: a base job (a job file or an inline `job:` map),
// fixed overrides, axes whose cartesian product gives the runs, a compute budget, the plateau
// rule and the output folder (docs/CLI.md, "deepnet experiment").

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace deepnet::experiment {

/// One axis: a dotted job-config key (model.norm, optim.lr, train.seed, ...) or `depth`, which
/// sets model.encoder_layers and model.decoder_layers together, and its values as YAML scalars.
struct SweepAxis {
  std::string key;
  std::vector<std::string> values;
};

/// How a finished run whose loss stayed high is told from one that trained (run_outcome.h).
struct PlateauRule {
  // Plateau when the final validation loss is above `fraction` x a reference: the first
  // validation loss after step 0 (the step-0 baseline's level depends on the variant's init, so
  // it is no fair yardstick), or the first one when the curve has fewer than 3 points ...
  double fraction = 0.75;
  // ... and the last `window` share of the validation curve improved by less than
  // `min_improvement` (relative). With fewer than 3 validation points only `fraction` counts.
  double window = 0.5;
  double min_improvement = 0.05;
};

struct SweepBudget {
  // Wall-clock minutes for the whole sweep (earlier, resumed invocations included); 0: none.
  double minutes = 0.0;
  // Runs of the plan to complete at most; 0: all.
  int64_t max_runs = 0;
};

struct SweepSpec {
  std::string name = "sweep";
  std::string description;
  // The base job as YAML text (the file's contents or the inline `job:` map) and its name for
  // error messages.
  std::string job_yaml;
  std::string job_source;
  // Overrides applied to every run before the axes ("train.max_steps=100").
  std::vector<std::string> set;
  std::vector<SweepAxis> axes;
  SweepBudget budget;
  PlateauRule plateau;
  // Output folder: results.jsonl, runs/<id>/, plots/. Relative paths are relative to the
  // current folder of `deepnet experiment`.
  std::string out;
};

/// Parses a spec. `base_dir` resolves a relative `base:` job path; `source_name` prefixes
/// errors, which name the field ("axes.depth: ...").
absl::StatusOr<SweepSpec> ParseSweepSpec(const std::string& yaml_text,
                                         const std::string& source_name,
                                         const std::string& base_dir);

/// Reads and parses a spec file (errors name the file).
absl::StatusOr<SweepSpec> LoadSweepSpec(const std::string& path);

/// Applies `deepnet experiment run --set` items: `axes.KEY=[v1, v2]` replaces (or adds) an
/// axis, `budget.minutes=M`, `budget.max_runs=N`, `plateau.fraction=F` (and the other plateau
/// fields), `out=DIR`, `name=NAME`; anything else is a job override for every run.
absl::Status ApplySpecOverrides(const std::vector<std::string>& items, SweepSpec* spec);

/// The spec as YAML (inline job), written beside the results for reference.
std::string DumpSweepSpec(const SweepSpec& spec);

}  // namespace deepnet::experiment
