#include "model/kernels/fused_kernels.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <torch/nn/functional/linear.h>

#include "model/precision.h"

namespace deepnet::model::kernels {
namespace {

bool EnabledByEnvironment() {
  const char* value = std::getenv("DEEPNET_FUSED_KERNELS");
  return value == nullptr || std::strcmp(value, "0") != 0;
}

std::atomic<bool>& Enabled() {
  static std::atomic<bool> enabled{EnabledByEnvironment()};
  return enabled;
}

}  // namespace

bool FusedKernelsEnabled() { return Enabled().load(std::memory_order_relaxed); }

void SetFusedKernelsEnabled(bool enabled) { Enabled().store(enabled, std::memory_order_relaxed); }

bool UseFusedKernels(const torch::Tensor& t) {
  // Under bf16 autocast the sublayers' inputs are bf16 even where the residual stream is fp32.
  return FusedKernelsEnabled() && t.device().is_cpu() && t.scalar_type() == torch::kFloat &&
         !AutocastEnabled(c10::DeviceType::CPU);
}

torch::Tensor Linear(const torch::Tensor& x, const torch::Tensor& weight,
                     const torch::Tensor& bias) {
  // Under autocast, linear casts the weight (a leaf) once per step through autocast's cache;
  // addmm would cast the transposed view on every call.
  if (x.dim() <= 2 || !bias.defined() || !x.is_contiguous() || AutocastEnabled(x.device().type())) {
    return torch::nn::functional::linear(x, weight, bias);
  }
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes.back() = weight.size(0);
  return torch::addmm(bias, x.view({-1, x.size(-1)}), weight.t()).view(sizes);
}

}  // namespace deepnet::model::kernels
