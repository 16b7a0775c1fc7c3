#pragma once

#include <torch/types.h>

namespace deepnet::model::kernels {

/// Scaled dot-product attention over heads as one autograd op: for every (batch, head),
/// softmax(scaling * q k^T, masked) [dropout] v, with forward and backward written as
/// per-matrix Gemm calls and single passes over the probabilities. Replaces bmm, scaling,
/// masking, softmax, dropout, bmm and the head-merging copy, and their backward nodes.
///
/// Inputs are the projections' outputs, float32 CPU, the H heads of D/H columns side by side:
/// - self-attention: pass the fused projection [B, L, 3D] (q | k | v) as both `q` and `kv`;
///   it is then one input and its gradient one buffer;
/// - cross-attention: q [B, T, D] and kv [B, S, 2D] (k | v). key_padding_mask [B, S] bool (true at padding)
/// or undefined; `causal` hides keys after each query position (no cache: query i sees keys
/// j <= i). A query that sees no key gets zero output, where softmax over an empty set would
/// give NaN. Attention dropout (inverted) applies when `training` and dropout > 0.
/// Returns [B, T, D], contiguous, heads concatenated.
torch::Tensor AttentionCore(const torch::Tensor& q, const torch::Tensor& kv, int64_t heads,
                            const torch::Tensor& key_padding_mask, bool causal, double scaling,
                            double dropout, bool training);

}  // namespace deepnet::model::kernels
