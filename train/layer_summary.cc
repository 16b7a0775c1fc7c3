#include "train/layer_summary.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace deepnet::train {
namespace {

double Quantile(const std::vector<double>& sorted, double q) {
  const double at = q * static_cast<double>(sorted.size() - 1);
  const size_t below = static_cast<size_t>(std::floor(at));
  const size_t above = std::min(below + 1, sorted.size() - 1);
  return sorted[below] + (at - static_cast<double>(below)) * (sorted[above] - sorted[below]);
}

}  // namespace

job::LayerSummary SummarizeLayers(std::vector<double> values) {
  job::LayerSummary s;
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  s.min = values.front();
  s.max = values.back();
  s.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  s.p50 = Quantile(values, 0.5);
  s.p90 = Quantile(values, 0.9);
  return s;
}

}  // namespace deepnet::train
