#pragma once

// Mixed precision (runtime.precision): bf16 compute through LibTorch autocast, with the fp32
// parameters as master weights (docs/ARCHITECTURE.md "Mixed precision").

#include <torch/nn/modules/normalization.h>
#include <torch/types.h>

#include <optional>
#include <string_view>

namespace deepnet::model {

/// How forward and backward compute. kBf16: matrix products in bf16 under autocast, parameters,
/// gradients, optimiser state, LayerNorm statistics and the loss in fp32. kTf32: fp32 tensors,
/// TF32 matrix products on CUDA (fp32 on CPU).
enum class ComputePrecision { kFp32, kBf16, kTf32 };

/// "fp32", "bf16" or "tf32" (job::EffectivePrecision's names); nullopt for anything else.
std::optional<ComputePrecision> ParseComputePrecision(std::string_view name);
std::string_view ToString(ComputePrecision precision);

/// While alive, this thread runs ops on `device`'s type under bf16 autocast (when `enabled`;
/// otherwise it does nothing). Restores the previous autocast state and dtype on exit, so
/// scopes nest. Autocast state is thread-local: forward and backward of a step (and any
/// recomputation inside backward) must run under a scope on the same thread.
class Bf16AutocastScope {
 public:
  Bf16AutocastScope(c10::DeviceType device, bool enabled);
  ~Bf16AutocastScope();
  Bf16AutocastScope(const Bf16AutocastScope&) = delete;
  Bf16AutocastScope& operator=(const Bf16AutocastScope&) = delete;

 private:
  c10::DeviceType device_;
  bool active_ = false;
  bool was_enabled_ = false;
  c10::ScalarType was_dtype_ = c10::ScalarType::Float;
};

/// Whether autocast is on for `device` on this thread.
bool AutocastEnabled(c10::DeviceType device);

/// Drops this thread's autocast cache of bf16 weight casts. The cache holds one cast of each
/// parameter; it must be dropped whenever parameters change in place (optimiser step, loading
/// a checkpoint) and after passes without autograd (their casts carry no graph).
void ClearAutocastCache();

/// TF32 for fp32 matrix products and cuDNN convolutions (process-wide; CUDA only, a no-op for
/// CPU work).
void AllowTf32(bool allow);

/// `norm` with fp32 statistics whatever `x`'s dtype (autocast gives bf16 inputs to norms inside
/// sublayers); the result has `x`'s dtype.
torch::Tensor LayerNormFp32(const torch::nn::LayerNorm& norm, const torch::Tensor& x);

}  // namespace deepnet::model
