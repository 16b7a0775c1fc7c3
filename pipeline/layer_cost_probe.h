#pragma once

#include <torch/types.h>

#include <cstdint>

#include "model/deepnet_config.h"
#include "pipeline/stage_partition.h"

namespace deepnet::pipeline {

/// Shape of the micro-batch the probe times.
struct LayerCostProbeOptions {
  int64_t batch = 16;   // Sentences.
  int64_t source = 32;  // Source tokens per sentence.
  int64_t target = 32;  // Target tokens per sentence.
  int repeats = 3;      // Timed repetitions after one warm-up; the median counts.
  torch::Device device = torch::kCPU;
};

/// Measures the relative training cost (forward + backward wall time) of one encoder layer,
/// one decoder layer, the output layer (logits and label-smoothed loss) and the embeddings
/// (whose backward fills a dense [vocab, d] gradient) of `config`'s shape on this machine, in
/// units of one encoder layer (or one decoder layer for a decoder-only model). FLOP counts miss what dominates
/// small layers on CPUs (per-op overhead, softmax and masks over L^2 scores), so a measured
/// model balances pipeline stages better. Allocates a one-layer model; takes well under a
/// second at d = 512 on a CPU core. Not deterministic: timings vary between runs.
LayerCostModel MeasureLayerCosts(const model::DeepNetConfig& config,
                                 const LayerCostProbeOptions& options);

}  // namespace deepnet::pipeline
