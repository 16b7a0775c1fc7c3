#include "pipeline/stage_partition.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace deepnet::pipeline {
namespace {

// Training FLOPs are 3x forward FLOPs: the backward computes gradients of inputs and weights.
constexpr double kTrainFactor = 3.0;
// Element-wise work per logit for log-softmax and the label-smoothed loss (max, exp, sum, log,
// subtract); small next to the projection, but it scales with the vocabulary.
constexpr double kLossOpsPerLogit = 4.0;

absl::Status CheckCost(const char* field, double value) {
  if (std::isfinite(value) && value >= 0.0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("layer cost model: ", field, " must be finite and >= 0, got ", value));
}

// Prefix sums of per-layer costs with the embeddings and output folded into the layers that
// carry them, so every contiguous split charges them to the right stage.
std::vector<double> PrefixCosts(const model::DeepNetConfig& config, const LayerCostModel& c) {
  const int64_t n = config.encoder_layers(), m = config.decoder_layers(), total = n + m;
  std::vector<double> cost(total);
  for (int64_t k = 0; k < total; ++k) cost[k] = k < n ? c.encoder_layer : c.decoder_layer;
  if (n > 0) cost[0] += c.source_embedding;
  if (m > 0) cost[n] += c.target_embedding;
  cost[total - 1] += c.output_layer;
  std::vector<double> prefix(total + 1, 0.0);
  for (int64_t k = 0; k < total; ++k) prefix[k + 1] = prefix[k] + cost[k];
  return prefix;
}

// Smallest start b <= end with prefix[end] - prefix[b] <= limit (end itself if even the last
// layer alone exceeds it). prefix is non-decreasing, so the sum shrinks as b grows.
int64_t FurthestStart(const std::vector<double>& prefix, int64_t end, double limit) {
  int64_t lo = 0, hi = end;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (prefix[end] - prefix[mid] <= limit)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

// Whether the layers split into at most `stages` runs costing <= limit each, filling stages
// greedily from the back (the same sums the final split uses, so rounding agrees).
bool Feasible(const std::vector<double>& prefix, int stages, double limit) {
  int64_t end = static_cast<int64_t>(prefix.size()) - 1;
  for (int used = 0; end > 0; ++used) {
    if (used == stages) return false;
    const int64_t start = FurthestStart(prefix, end, limit);
    if (start == end) return false;
    end = start;
  }
  return true;
}

model::ModelSlice ToSlice(int64_t begin, int64_t end, int64_t n) {
  model::ModelSlice slice;
  if (begin < n) slice.encoder = {begin, std::min(end, n)};
  if (end > n) slice.decoder = {std::max(begin, n) - n, end - n};
  return slice;
}

}  // namespace

LayerCostModel EstimateLayerCosts(const model::DeepNetConfig& config, int64_t source_length,
                                  int64_t target_length) {
  const double d = static_cast<double>(config.d_model());
  const double f = static_cast<double>(config.ffn_dim());
  const double v = static_cast<double>(config.vocab_size());
  const double s = static_cast<double>(std::max<int64_t>(source_length, 1));
  const double t = static_cast<double>(std::max<int64_t>(target_length, 1));
  // Forward FLOPs per sequence, 2 per multiply-add: projections 2 * d * d per token each,
  // QK^T and AV 4 * d per (query, key) pair; causal self-attention sees (T + 1) / 2 keys.
  const double ffn_per_token = 2.0 * 2.0 * d * f;
  const double encoder = s * (2.0 * 4.0 * d * d + 4.0 * d * s + ffn_per_token);
  double decoder = t * (2.0 * 4.0 * d * d + 4.0 * d * (t + 1.0) / 2.0 + ffn_per_token);
  if (config.encoder_layers() > 0) {
    // Cross-attention: Q and output projections over target tokens, K and V over source
    // tokens, scores and weighted sums over every (target, source) pair.
    decoder += t * 2.0 * 2.0 * d * d + s * 2.0 * 2.0 * d * d + t * 4.0 * d * s;
  }
  // Embedding: scale and add positions per element (the lookup itself is a copy).
  const double source_embedding = 2.0 * s * d;
  const double target_embedding = 2.0 * t * d;
  // Logits come from the decoder's tokens, or the encoder's in an encoder-only model.
  const double output_tokens = config.decoder_layers() > 0 ? t : s;
  const double output = output_tokens * (2.0 * d * v + kLossOpsPerLogit * v);

  // The train factor cancels in the ratios but keeps the unit's meaning honest.
  const double unit = kTrainFactor * encoder;
  LayerCostModel costs;
  costs.encoder_layer = 1.0;
  costs.decoder_layer = kTrainFactor * decoder / unit;
  costs.source_embedding = kTrainFactor * source_embedding / unit;
  costs.target_embedding = kTrainFactor * target_embedding / unit;
  costs.output_layer = kTrainFactor * output / unit;
  return costs;
}

absl::StatusOr<StagePlan> PartitionStages(const model::DeepNetConfig& config, int stages,
                                          const LayerCostModel& costs) {
  const int64_t n = config.encoder_layers(), m = config.decoder_layers(), layers = n + m;
  if (n < 0 || m < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("model: encoder_layers ", n, " and decoder_layers ", m, " must be >= 0"));
  }
  if (stages < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("parallel.pipeline_stages: must be >= 1, got ", stages));
  }
  if (stages > layers) {
    return absl::InvalidArgumentError(absl::StrCat("parallel.pipeline_stages: ", stages,
                                                   " stages but the model has only ", layers,
                                                   " layers"));
  }
  for (const auto& [field, value] :
       {std::pair<const char*, double>{"encoder_layer", costs.encoder_layer},
        {"decoder_layer", costs.decoder_layer},
        {"source_embedding", costs.source_embedding},
        {"target_embedding", costs.target_embedding},
        {"output_layer", costs.output_layer}}) {
    if (absl::Status status = CheckCost(field, value); !status.ok()) return status;
  }

  const std::vector<double> prefix = PrefixCosts(config, costs);
  // Bisect the bottleneck over doubles: `high` stays feasible, `low` infeasible (costs are
  // >= 0 and there is at least one layer, so no split fits under -1). When no double lies
  // between them, `high` is the optimum of the computed sums.
  double low = -1.0, high = prefix.back();
  for (;;) {
    const double mid = low + (high - low) / 2.0;
    if (mid <= low || mid >= high) break;
    (Feasible(prefix, stages, mid) ? high : low) = mid;
  }

  // Fill stages from the back as far as `high` allows, but leave one layer for each earlier
  // stage; this keeps every stage non-empty and never exceeds `high` (it only shortens runs).
  std::vector<int64_t> begin(stages + 1);
  begin[stages] = layers;
  for (int k = stages - 1; k >= 0; --k) {
    begin[k] = std::max<int64_t>(FurthestStart(prefix, begin[k + 1], high), k);
  }
  if (begin[0] != 0) {
    return absl::InternalError(
        absl::StrCat("stage partition left ", begin[0], " layers unassigned at bottleneck ", high));
  }

  StagePlan plan;
  double largest = 0.0;
  for (int k = 0; k < stages; ++k) {
    plan.slices.push_back(ToSlice(begin[k], begin[k + 1], n));
    plan.predicted_cost.push_back(prefix[begin[k + 1]] - prefix[begin[k]]);
    largest = std::max(largest, plan.predicted_cost.back());
  }
  const double mean = prefix.back() / stages;
  plan.max_over_mean = mean > 0.0 ? largest / mean : 1.0;
  return plan;
}

std::string DescribePlan(const StagePlan& plan) {
  double total = 0.0;
  for (double cost : plan.predicted_cost) total += cost;
  const double mean = plan.predicted_cost.empty() ? 0.0 : total / plan.predicted_cost.size();
  std::string text;
  for (size_t k = 0; k < plan.slices.size(); ++k) {
    const model::ModelSlice& slice = plan.slices[k];
    absl::StrAppend(&text, "stage ", k, ":");
    const char* separator = " ";
    if (!slice.encoder.empty()) {
      absl::StrAppend(&text, separator, "encoder ", slice.encoder.begin, "-",
                      slice.encoder.end - 1);
      separator = ", ";
    }
    if (!slice.decoder.empty()) {
      absl::StrAppend(&text, separator, "decoder ", slice.decoder.begin, "-",
                      slice.decoder.end - 1);
    }
    const double cost = k < plan.predicted_cost.size() ? plan.predicted_cost[k] : 0.0;
    absl::StrAppend(&text, absl::StrFormat(", predicted cost %.1f (%.2f of mean)\n", cost,
                                           mean > 0.0 ? cost / mean : 1.0));
  }
  return text;
}

}  // namespace deepnet::pipeline
