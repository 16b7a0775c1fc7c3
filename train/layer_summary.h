#pragma once
// Summaries over layers of per-layer diagnostics (what /metrics gets instead of one series per
// layer). Torch-free.

#include <vector>

namespace deepnet::train {

/// Minimum, maximum, mean and quantiles of values over layers. Quantiles interpolate linearly
/// between the sorted values (q at position q * (n - 1), as numpy's default): p50 of {1, 2, 3, 4}
/// is 2.5. All 0 for no values.
struct LayerSummary {
  double min = 0.0;
  double max = 0.0;
  double mean = 0.0;
  double p50 = 0.0;
  double p90 = 0.0;
};

LayerSummary SummarizeLayers(std::vector<double> values);

}  // namespace deepnet::train
