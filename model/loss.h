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
/// Computed in fp32 for logits of any dtype, also under autocast, in chunks of rows: neither
/// pass holds an fp32 copy of the whole logits, and backward writes the gradient (in the
/// logits' dtype) in one pass per chunk, p - (1 - eps - eps/(V-1)) at the target - eps/(V-1).
/// `known_tokens` >= 0 is the
/// caller's count of non-padding targets (the batch builder knows it), taken as `tokens`
/// without counting them on the device and waiting for the result; < 0: counted.
LossOutput LabelSmoothedCrossEntropy(const torch::Tensor& logits, const torch::Tensor& target,
                                     double epsilon, int64_t pad_id, int64_t known_tokens = -1);

namespace internal {
/// Tests only: how many logits the loss widens to fp32 at a time (default 2^24), so that a small
/// test crosses chunk boundaries. Returns the previous value.
int64_t SetLossChunkElements(int64_t elements);
}  // namespace internal

}  // namespace deepnet::model
