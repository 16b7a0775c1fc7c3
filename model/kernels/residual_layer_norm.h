#pragma once

#include <torch/types.h>

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

}  // namespace deepnet::model::kernels
