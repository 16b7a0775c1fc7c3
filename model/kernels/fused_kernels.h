#pragma once

#include <torch/types.h>

namespace deepnet::model::kernels {

/// Whether the model's layers take the fused CPU kernels (AttentionCore, ResidualLayerNorm)
/// for float32 CPU tensors. On by default; DEEPNET_FUSED_KERNELS=0 in the environment turns it
/// off at start-up, SetFusedKernelsEnabled at any time (benchmarks and tests compare both).
/// Other devices and dtypes, and incremental decoding, always take the ATen ops.
bool FusedKernelsEnabled();
void SetFusedKernelsEnabled(bool enabled);

/// FusedKernelsEnabled() and `t` is a float32 CPU tensor.
bool UseFusedKernels(const torch::Tensor& t);

}  // namespace deepnet::model::kernels
