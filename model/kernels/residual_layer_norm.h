#pragma once

#include <torch/types.h>

#include <vector>

namespace deepnet::model::kernels {

/// y = LayerNorm(alpha * x + Dropout_p(branch)) * weight + bias over the last dimension: the
/// DeepNorm / Post-LN residual of arXiv:2203.00555 §III-A as one autograd op (forward and
/// backward each one pass over the rows) instead of the six to eight ATen ops and autograd
/// nodes of dropout, scale, add and layer_norm. Dropout is inverted (kept values scaled by
/// 1 / (1 - p)) and applied only when `training` and p > 0; its mask comes from
/// FillDropoutKeepMask. x and branch: float32 CPU tensors of the same shape [..., D];
/// weight, bias [D].
torch::Tensor ResidualLayerNorm(const torch::Tensor& x, const torch::Tensor& branch,
                                const torch::Tensor& weight, const torch::Tensor& bias,
                                double alpha, double dropout, double eps, bool training);

/// The passes behind ResidualLayerNorm, for fused ops that end in one (sublayer_blocks.h); no
/// autograd. Shapes as above, x and branch contiguous or not.
struct ResidualLayerNormState {
  torch::Tensor y;     // output
  torch::Tensor xhat;  // normalised rows, before weight and bias
  torch::Tensor rstd;  // [rows] 1 / sqrt(var + eps)
  torch::Tensor keep;  // uint8 dropout mask of the branch, or no elements
  float keep_scale = 1.0f;

  /// What backward needs, for an autograd context: save these three (in this order) and the
  /// keep scale, and rebuild the state with FromSaved(saved tensors, index of the first).
  std::vector<torch::Tensor> ToSave() const { return {xhat, rstd, keep}; }
  static ResidualLayerNormState FromSaved(const std::vector<torch::Tensor>& saved, size_t first,
                                          double keep_scale) {
    ResidualLayerNormState s;
    s.xhat = saved.at(first);
    s.rstd = saved.at(first + 1);
    s.keep = saved.at(first + 2);
    s.keep_scale = static_cast<float>(keep_scale);
    return s;
  }
};
ResidualLayerNormState ResidualLayerNormForward(const torch::Tensor& x,
                                                const torch::Tensor& branch,
                                                const torch::Tensor& weight,
                                                const torch::Tensor& bias, double alpha,
                                                double dropout, double eps, bool training);
/// Gradients from dy: dx = alpha * d(input of the norm) (added into an existing dx of x's shape
/// with `accumulate_dx`), dbranch, dweight, dbias (all allocated here but dx when accumulating).
void ResidualLayerNormBackward(const ResidualLayerNormState& state, const torch::Tensor& weight,
                               double alpha, const torch::Tensor& dy, bool accumulate_dx,
                               torch::Tensor& dx, torch::Tensor& dbranch, torch::Tensor& dweight,
                               torch::Tensor& dbias);

}  // namespace deepnet::model::kernels
