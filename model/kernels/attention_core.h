#pragma once

#include <torch/types.h>

#include <utility>
#include <vector>

namespace deepnet::model::kernels {

/// Scaled dot-product attention over heads as one autograd op: for every (batch, head),
/// softmax(scaling * q k^T, masked) [dropout] v, with forward and backward written as
/// per-matrix Gemm calls and single passes over the probabilities. Replaces bmm, scaling,
/// masking, softmax, dropout, bmm and the head-merging copy, and their backward nodes.
///
/// Inputs are the projections' outputs, float32 CPU, the H heads of D/H columns side by side:
/// - self-attention: pass the fused projection [B, L, 3D] (q | k | v) as both `q` and `kv`;
///   it is then one input and its gradient one buffer;
/// - cross-attention: q [B, T, D] and kv [B, S, 2D] (k | v).
/// key_padding_mask: bool, true where a key is hidden: [B, S] (padding, the same for every
/// query), [B, T, S] (a row per query: packed batches, model/packing.h) or undefined; `causal` hides keys after each query position (no cache: query i sees keys
/// j <= i). A query that sees no key gets zero output, where softmax over an empty set would
/// give NaN. Attention dropout (inverted) applies when `training` and dropout > 0.
/// Returns [B, T, D], contiguous, heads concatenated.
torch::Tensor AttentionCore(const torch::Tensor& q, const torch::Tensor& kv, int64_t heads,
                            const torch::Tensor& key_padding_mask, bool causal, double scaling,
                            double dropout, bool training);

/// Throws c10::Error naming `who` unless `mask` is undefined, [batch, keys] or
/// [batch, queries, keys].
void CheckKeyMask(const torch::Tensor& mask, int64_t batch, int64_t queries, int64_t keys,
                  const char* who);

/// The passes behind AttentionCore, for fused ops that contain one (sublayer_blocks.h). No
/// autograd: q and kv contiguous, with the layouts above (`q.is_same(kv)` selects
/// self-attention); padding has no elements when there is no mask.
struct AttentionCoreState {
  torch::Tensor out;    // [B, T, D]
  torch::Tensor probs;  // [B, H, T, S] softmax before dropout
  torch::Tensor keep;   // [B, H, T, S] uint8 dropout mask, or no elements
  float keep_scale = 1.0f;

  /// What backward needs besides q and kv (see ResidualLayerNormState::ToSave).
  std::vector<torch::Tensor> ToSave() const { return {probs, keep}; }
  static AttentionCoreState FromSaved(const std::vector<torch::Tensor>& saved, size_t first,
                                      double keep_scale) {
    AttentionCoreState s;
    s.probs = saved.at(first);
    s.keep = saved.at(first + 1);
    s.keep_scale = static_cast<float>(keep_scale);
    return s;
  }
};
AttentionCoreState AttentionCoreForward(const torch::Tensor& q, const torch::Tensor& kv,
                                        int64_t heads, const torch::Tensor& padding, bool causal,
                                        double scaling, double dropout, bool training);
/// Gradients of q and kv (the same tensor for self-attention) from the output's gradient.
std::pair<torch::Tensor, torch::Tensor> AttentionCoreBackward(
    const torch::Tensor& q, const torch::Tensor& kv, int64_t heads, double scaling,
    const AttentionCoreState& state, const torch::Tensor& dout);

}  // namespace deepnet::model::kernels
