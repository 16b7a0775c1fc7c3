#pragma once
// Per-layer LayerNorm-input norms for training diagnostics (DeepNet paper, Fig. 3).

#include <torch/types.h>

#include <cstdint>

namespace deepnet::model {

/// Attached to one encoder/decoder layer (set_ln_input_recorder) for a diagnostic forward: the
/// layer then takes its unfused path and adds, for each residual LayerNorm, the squared
/// per-token L2 norm of that LayerNorm's input (Post-LN and DeepNorm: alpha * x + G(x); Pre-LN:
/// the residual stream x) summed over the tokens that count. Detached from every layer
/// (nullptr) on every other step, so normal steps pay nothing. Not thread-safe.
struct LnInputRecorder {
  // [B, T] float: 1 at the tokens that count, 0 at padding; undefined: every token counts.
  torch::Tensor token_weight;
  // Sum of squared per-token norms over every recorded input (0-d float64, on the device).
  torch::Tensor sumsq;
  int64_t inputs = 0;  // LayerNorm inputs recorded.

  void Add(const torch::Tensor& y) {
    torch::NoGradGuard no_grad;
    torch::Tensor per_token = y.detach().to(torch::kFloat).pow(2).sum(-1);  // [B, T]
    if (token_weight.defined()) per_token = per_token * token_weight;
    torch::Tensor s = per_token.sum().to(torch::kDouble);
    sumsq = sumsq.defined() ? sumsq + s : s;
    ++inputs;
  }
};

}  // namespace deepnet::model
