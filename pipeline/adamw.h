#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "pipeline/flat_parameters.h"

namespace deepnet::pipeline {

struct AdamWOptions {
  double beta1 = 0.9;
  double beta2 = 0.98;
  double eps = 1e-8;
  // Decoupled weight decay (Loshchilov & Hutter), applied to matrices only; 0 disables.
  double weight_decay = 0.0;
};

/// Adam with decoupled weight decay over a FlatParameters buffer; the same arithmetic as
/// torch.optim.AdamW (bias-corrected moments, eps added after the square root).
/// Not thread-safe; owned by the training loop.
class AdamW {
 public:
  AdamW(FlatParameters* params, const AdamWOptions& options);

  // One update with learning rate `lr` from the gradients in params->grads(), each multiplied
  // by `grad_multiplier` first (gradient clipping's coefficient: the update reads the clipped
  // gradient without a pass that writes it). On the CPU a cache-blocked kernel; on CUDA with
  // LibTorch >= 2.2 ATen's fused AdamW (one kernel for the moments and the update, after one
  // for the decay mask); elsewhere StepWithAtenOps. The gradients may be left scaled or not.
  void Step(double lr, double grad_multiplier = 1.0);

  // The same update as element-wise ATen ops on any device, chunk by chunk, the denominators
  // in a scratch buffer of one chunk kept between steps (no temporary the size of the
  // parameters). Step() takes it off the CPU when no fused kernel applies; public so that tests
  // hold it to the CPU kernel. A multiplier other than 1 scales the gradients in place.
  void StepWithAtenOps(double lr, double grad_multiplier = 1.0);

  int64_t step_count() const { return step_count_; }
  const torch::Tensor& exp_avg() const { return exp_avg_; }
  const torch::Tensor& exp_avg_sq() const { return exp_avg_sq_; }

  // Moments as named tensors ("exp_avg.<param>", "exp_avg_sq.<param>") for checkpoints.
  std::vector<std::pair<std::string, torch::Tensor>> ExportState() const;
  // Restores moments from named tensors; an error names a missing or mis-shaped tensor.
  [[nodiscard]] absl::Status ImportState(
      const std::vector<std::pair<std::string, torch::Tensor>>& tensors, int64_t step_count);

 private:
  FlatParameters* params_;
  AdamWOptions options_;
  int64_t step_count_ = 0;
  torch::Tensor exp_avg_;
  torch::Tensor exp_avg_sq_;
  torch::Tensor denom_scratch_;  // StepWithAtenOps' denominators, one chunk.
  torch::Tensor step_tensor_;    // The fused kernel's step count, on the device.
};

/// Inverse-square-root schedule with linear warm-up (Vaswani et al.; fairseq
/// inverse_sqrt): warmup_init_lr -> lr linearly over warmup_steps, then lr * sqrt(warmup/step).
/// `step` counts updates from 1.
double InverseSqrtLearningRate(int64_t step, double lr, int64_t warmup_steps,
                               double warmup_init_lr);

}  // namespace deepnet::pipeline
