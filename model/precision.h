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

/// `weight` as autocast would give it to a matrix product on this thread: under autocast for
/// its device, its cast to the autocast dtype, taken from (and kept in) autocast's cache of
/// weight casts when `weight` is a parameter (an fp32 leaf that requires grad); otherwise
/// `weight` itself. For weights that are combined before the product (q/k/v concatenated):
/// the combination then takes the cached casts instead of recasting its own result each time.
torch::Tensor AutocastWeight(const torch::Tensor& weight);

/// The residual stream under autocast: `x` cast to the autocast dtype when autocast is on for
/// its device and `x` is fp32; otherwise `x`. The embeddings and the tensors a pipeline stage
/// receives enter the stream through it, so that the stream (and every activation the layers
/// keep for backward) is bf16, not re-cast by each sub-layer's first matrix product.
torch::Tensor ToStreamDtype(const torch::Tensor& x);

/// `norm` over the residual stream: for an fp32 `x` the module itself (autocast runs it in
/// fp32); for a bf16 (half) `x` a result in `x`'s dtype with fp32 statistics. On CUDA that is
/// LayerNorm on `x` itself with the autocast casts of its weight and bias (the kernel
/// accumulates in fp32); on the CPU, whose LibTorch 1.13 kernel keeps bf16 statistics in bf16,
/// LayerNormFp32.
torch::Tensor StreamLayerNorm(const torch::nn::LayerNorm& norm, const torch::Tensor& x);

/// TF32 for fp32 matrix products and cuDNN convolutions (process-wide; CUDA only, a no-op for
/// CPU work).
void AllowTf32(bool allow);

/// `norm` with fp32 statistics whatever `x`'s dtype (autocast gives bf16 inputs to norms inside
/// sublayers); the result has `x`'s dtype.
torch::Tensor LayerNormFp32(const torch::nn::LayerNorm& norm, const torch::Tensor& x);

}  // namespace deepnet::model
