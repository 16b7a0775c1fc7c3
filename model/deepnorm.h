#pragma once

#include <cstdint>
#include <optional>

#include "model/deepnet_config.h"

namespace deepnet::model {

/// Residual weight alpha and initialisation gain beta of one stack (encoder or decoder).
/// beta multiplies the Xavier-normal gain of the FFN weights and of the value and output
/// projections of every attention; query and key projections keep gain 1.
struct StackScaling {
  double alpha = 1.0;
  double beta = 1.0;
};

struct ModelScaling {
  std::optional<StackScaling> encoder;  // nullopt when the model has no encoder.
  std::optional<StackScaling> decoder;  // nullopt when the model has no decoder.
};

/// alpha/beta per arXiv:2203.00555 §III-C (DeepNorm) and §IV-C (Pre-LN DeepNet), from the
/// number of encoder layers N and decoder layers M:
///   encoder-decoder: encoder alpha = 0.81 (N^4 M)^(1/16), beta = 0.87 (N^4 M)^(-1/16);
///                    decoder alpha = (3M)^(1/4),          beta = (12M)^(-1/4)
///   encoder-only:    alpha = (2N)^(1/4), beta = (8N)^(-1/4)
///   decoder-only:    alpha = (2M)^(1/4), beta = (8M)^(-1/4)
///   deepnorm_preln:  alpha = 1, beta = sqrt(log 2N) (encoder) / sqrt(log 2M) (decoder)
///   post_ln, pre_ln, post_ln_init: alpha = beta = 1 (post_ln_init's depth scaling is
///   applied per layer by the initialiser, see PostLnInitDivisor).
ModelScaling ComputeScaling(NormVariant norm, int64_t encoder_layers, int64_t decoder_layers);

/// k_l = L - l + 1 for the 1-based layer l of a stack of L layers (§II); takes 0-based index.
double PostLnInitDivisor(int64_t layer_index, int64_t stack_layers);

}  // namespace deepnet::model
