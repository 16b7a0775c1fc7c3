#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/deepnet_config.h"
#include "model/model_slice.h"

namespace deepnet::pipeline {

/// Relative training cost (forward + backward) of one sequence pair through each part of a
/// DeepNet, in units of one encoder layer at the source length. All fields are >= 0.
struct LayerCostModel {
  double encoder_layer = 1.0;  // One encoder layer.
  double decoder_layer = 1.0;  // One decoder layer (self- and, with an encoder, cross-attention).
  double source_embedding = 0.0;  // Source token embedding + positions; on encoder layer 0's stage.
  double target_embedding = 0.0;  // Target token embedding + positions; on decoder layer 0's stage.
  double output_layer = 0.0;      // Projection to the vocabulary + softmax/loss; on the last stage.
};

/// Estimates LayerCostModel from matmul FLOPs (same convention as model::ComputeModelStats:
/// 2 FLOPs per multiply-add, attention scores and weighted sums included, backward = 2x
/// forward) at the given sequence lengths in tokens; lengths below 1 count as 1. Pure.
LayerCostModel EstimateLayerCosts(const model::DeepNetConfig& config, int64_t source_length,
                                  int64_t target_length);

/// A split of the global layer order [encoder 0..N-1, decoder 0..M-1] into pipeline stages.
struct StagePlan {
  std::vector<model::ModelSlice> slices;  // [stage], contiguous, each non-empty.
  std::vector<double> predicted_cost;     // [stage], in LayerCostModel units.
  double max_over_mean = 1.0;             // Slowest stage over the mean stage; 1 is perfect.
};

/// Splits the model into `stages` contiguous slices minimising the largest stage cost (exact
/// for the cost model, up to floating-point rounding of the sums). Among optimal splits it
/// picks the one whose later stages are as full as possible, leaving slack on the early
/// stages, which hold the most live activations under 1F1B. InvalidArgument naming
/// parallel.pipeline_stages when stages < 1 or stages exceeds the number of layers, or naming
/// the cost field when a cost is negative or not finite. O(P log L) per bisection step.
[[nodiscard]] absl::StatusOr<StagePlan> PartitionStages(const model::DeepNetConfig& config,
                                                        int stages, const LayerCostModel& costs);

/// One line per stage, e.g.
/// "stage 1: encoder 10-17, decoder 0-3, predicted cost 12.3 (1.02 of mean)".
std::string DescribePlan(const StagePlan& plan);

}  // namespace deepnet::pipeline
