#pragma once

#include <torch/types.h>

namespace deepnet::model {

/// Sums over non-padding target tokens.
struct LossOutput {
  torch::Tensor loss;  // Label-smoothed cross-entropy, summed (scalar, differentiable).
  torch::Tensor nll;   // Negative log-likelihood, summed (scalar, detached).
  int64_t tokens = 0;  // Non-padding target tokens.
};

/// Label-smoothed cross-entropy as in fairseq's label_smoothed_cross_entropy:
///   loss = (1 - eps - eps/(V-1)) * nll + eps/(V-1) * sum_v -log p_v
/// logits [B, T, V] (or [N, V]), target [B, T] (or [N]); positions equal to pad_id ignored.
/// Computed in fp32 for logits of any dtype, also under autocast. `known_tokens` >= 0 is the
/// caller's count of non-padding targets (the batch builder knows it), taken as `tokens`
/// without counting them on the device and waiting for the result; < 0: counted.
LossOutput LabelSmoothedCrossEntropy(const torch::Tensor& logits, const torch::Tensor& target,
                                     double epsilon, int64_t pad_id, int64_t known_tokens = -1);

}  // namespace deepnet::model
