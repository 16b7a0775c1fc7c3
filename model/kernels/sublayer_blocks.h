#pragma once

#include <torch/types.h>

namespace deepnet::model::kernels {

/// What the Post-LN / DeepNorm sub-layer blocks below share: x <- LN(alpha * x + Dropout(G(x))).
struct BlockOptions {
  double alpha = 1.0;               // DeepNorm residual weight; 1 for Post-LN
  double dropout = 0.0;             // on the sub-layer output
  double activation_dropout = 0.0;  // feed-forward only: after the activation
  double attention_dropout = 0.0;   // attention only: on the probabilities
  double eps = 1e-5;                // LayerNorm
  bool gelu = false;                // feed-forward activation: GELU (erf) instead of ReLU
  bool training = false;
};

/// A whole Post-LN feed-forward sub-layer as one autograd op:
/// LN(alpha * x + Dropout(fc2(Dropout_act(act(fc1(x)))))). Forward and backward call the
/// matrix products directly (Gemm) and the residual LayerNorm passes, so the sub-layer costs
/// one autograd node instead of about twenty ATen ops and nodes (addmm, views, transposes,
/// activation, their backward nodes, and the sum of x's two gradient contributions).
/// x [..., D] float32 CPU; w1 [F, D], b1 [F], w2 [D, F], b2 [D], ln_weight and ln_bias [D].
torch::Tensor FeedForwardBlock(const torch::Tensor& x, const torch::Tensor& w1,
                               const torch::Tensor& b1, const torch::Tensor& w2,
                               const torch::Tensor& b2, const torch::Tensor& ln_weight,
                               const torch::Tensor& ln_bias, const BlockOptions& options);

/// The parameters of one attention sub-layer: q/k/v/out projections ([D, D] weights, [D]
/// biases) and the LayerNorm after the residual.
struct AttentionBlockWeights {
  torch::Tensor q_weight, q_bias, k_weight, k_bias, v_weight, v_bias, out_weight, out_bias;
  torch::Tensor ln_weight, ln_bias;
};

/// A whole Post-LN attention sub-layer as one autograd op:
/// LN(alpha * x + Dropout(out_proj(Attention(q_proj(x), k_proj(m), v_proj(m))))), with
/// m = memory. Pass x itself as `memory` for self-attention (one fused q/k/v product).
/// x [B, T, D], memory [B, S, D] float32 CPU; key_padding_mask as in AttentionCore ([B, S],
/// [B, T, S] or undefined);
/// `causal` as in AttentionCore (no cache).
torch::Tensor AttentionBlock(const torch::Tensor& x, const torch::Tensor& memory,
                             const AttentionBlockWeights& weights, int64_t heads,
                             const torch::Tensor& key_padding_mask, bool causal,
                             const BlockOptions& options);

}  // namespace deepnet::model::kernels
