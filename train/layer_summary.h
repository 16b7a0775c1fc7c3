#pragma once
// Summaries over layers of per-layer diagnostics (what /metrics gets instead of one series per
// layer). Torch-free.

#include <vector>

#include "job/progress_line.h"

namespace deepnet::train {

/// Minimum, maximum, mean and quantiles of values over layers (the summaries of a diagnostics
/// line). Quantiles interpolate linearly between the sorted values (q at position q * (n - 1),
/// as numpy's default): p50 of {1, 2, 3, 4} is 2.5. All 0 for no values.
job::LayerSummary SummarizeLayers(std::vector<double> values);

}  // namespace deepnet::train
