#pragma once
// PNG plots of a sweep, drawn by gnuplot (pngcairo) from <out>/results.jsonl alone, so
// `deepnet experiment plot DIR` redraws them. Into <out>/plots/: the data files, plots.gp, and
//   update_norm.png           ||dF|| (log y) vs step, one line per run (runs with a probe series)
//   update_norm_relative.png  ||dF||/||F0|| vs step (when the probe lines carry it)
//   valid_curves.png          validation loss vs step, one line per run
//   final_valid_vs_depth.png  final validation loss vs depth, one line per other-axes setting
// and summary.tsv (run, axes, status, final validation loss, steps, wall time).

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace deepnet::experiment {

/// Writes the data and script; returns the PNG paths gnuplot drew. FailedPrecondition when
/// gnuplot cannot be run (the data and script are written anyway).
absl::StatusOr<std::vector<std::string>> DrawPlots(const std::string& out_dir);

}  // namespace deepnet::experiment
