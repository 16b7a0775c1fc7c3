#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "model/deepnet_config.h"
#include "model/deepnorm.h"

namespace deepnet::model {

/// Sizes and costs of a DeepNet shape, computed from the config alone (nothing allocated),
/// so they answer instantly for 1,000-layer models.
struct ModelStats {
  ModelScaling scaling;
  int64_t parameters = 0;            // Distinct trainable parameters (tied weights once).
  int64_t embedding_parameters = 0;  // Embeddings, output projection, learned positions.
  int64_t encoder_layer_parameters = 0;  // One encoder layer.
  int64_t decoder_layer_parameters = 0;  // One decoder layer.
  // Forward FLOPs (2 per multiply-add) per token at the given sequence lengths; the output
  // projection and softmax-free attention matmuls included, element-wise ops excluded.
  double forward_flops_per_source_token = 0.0;
  double forward_flops_per_target_token = 0.0;
  // Training FLOPs (forward + backward = 3x forward) per token, averaged over source and
  // target tokens of a batch with the given lengths.
  double train_flops_per_token = 0.0;
  // Bytes of fp32 parameters, gradients and Adam moments (two per parameter).
  int64_t parameter_bytes = 0;
  int64_t gradient_bytes = 0;
  int64_t optimizer_bytes = 0;
};

/// Source/target lengths used for the attention part of the FLOP estimate.
struct StatsOptions {
  int64_t source_length = 32;
  int64_t target_length = 32;
  int64_t bytes_per_element = 4;
};

ModelStats ComputeModelStats(const DeepNetConfig& config, const StatsOptions& options = {});

/// Parameters of one layer (exactly what the modules register).
int64_t EncoderLayerParameters(const DeepNetConfig& config);
int64_t DecoderLayerParameters(const DeepNetConfig& config);

}  // namespace deepnet::model

namespace deepnet::model {
/// One-line description, e.g. "6L-6L d=512 h=8 ffn=2048 V=8000 deepnorm (44.1M parameters)".
std::string DescribeShape(const DeepNetConfig& config);
}  // namespace deepnet::model
