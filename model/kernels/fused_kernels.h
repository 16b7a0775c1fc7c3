#pragma once

#include <torch/types.h>

namespace deepnet::model::kernels {

/// Whether the model's layers take the fused CPU kernels (AttentionCore, ResidualLayerNorm)
/// for float32 CPU tensors. On by default; DEEPNET_FUSED_KERNELS=0 in the environment turns it
/// off at start-up, SetFusedKernelsEnabled at any time (benchmarks and tests compare both).
/// Other devices and dtypes, and incremental decoding, always take the ATen ops.
bool FusedKernelsEnabled();
void SetFusedKernelsEnabled(bool enabled);

/// FusedKernelsEnabled() and `t` is a float32 CPU tensor, outside CPU autocast.
bool UseFusedKernels(const torch::Tensor& t);

/// x W^T + b for x [..., in]: one addmm over the flattened rows when x is contiguous. LibTorch
/// 1.13's linear on 3-D inputs runs matmul and then a separate bias add (two ops forward, a
/// broadcast-reduction node backward); any device.
torch::Tensor Linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias);

}  // namespace deepnet::model::kernels
