#include "model/precision.h"

#include <ATen/Context.h>
#include <ATen/autocast_mode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/version.h>

// LibTorch 2.4 replaced the per-device autocast setters (set_enabled for CUDA, set_cpu_enabled,
// set_autocast_{gpu,cpu}_dtype) with ones that take the device type.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define DEEPNET_AUTOCAST_BY_DEVICE_TYPE 1
#endif

namespace deepnet::model {
namespace {

bool Enabled(c10::DeviceType device) {
#ifdef DEEPNET_AUTOCAST_BY_DEVICE_TYPE
  return at::autocast::is_autocast_enabled(device);
#else
  return device == c10::DeviceType::CUDA ? at::autocast::is_enabled()
                                         : at::autocast::is_cpu_enabled();
#endif
}

void SetEnabled(c10::DeviceType device, bool enabled) {
#ifdef DEEPNET_AUTOCAST_BY_DEVICE_TYPE
  at::autocast::set_autocast_enabled(device, enabled);
#else
  if (device == c10::DeviceType::CUDA) {
    at::autocast::set_enabled(enabled);
  } else {
    at::autocast::set_cpu_enabled(enabled);
  }
#endif
}

c10::ScalarType Dtype(c10::DeviceType device) {
#ifdef DEEPNET_AUTOCAST_BY_DEVICE_TYPE
  return at::autocast::get_autocast_dtype(device);
#else
  return device == c10::DeviceType::CUDA ? at::autocast::get_autocast_gpu_dtype()
                                         : at::autocast::get_autocast_cpu_dtype();
#endif
}

void SetDtype(c10::DeviceType device, c10::ScalarType dtype) {
#ifdef DEEPNET_AUTOCAST_BY_DEVICE_TYPE
  at::autocast::set_autocast_dtype(device, dtype);
#else
  if (device == c10::DeviceType::CUDA) {
    at::autocast::set_autocast_gpu_dtype(dtype);
  } else {
    at::autocast::set_autocast_cpu_dtype(dtype);
  }
#endif
}

// Autocast knows CPU and CUDA here; other devices run unchanged.
bool Supported(c10::DeviceType device) {
  return device == c10::DeviceType::CPU || device == c10::DeviceType::CUDA;
}

}  // namespace

std::optional<ComputePrecision> ParseComputePrecision(std::string_view name) {
  if (name == "fp32") return ComputePrecision::kFp32;
  if (name == "bf16") return ComputePrecision::kBf16;
  if (name == "tf32") return ComputePrecision::kTf32;
  return std::nullopt;
}

std::string_view ToString(ComputePrecision precision) {
  switch (precision) {
    case ComputePrecision::kFp32:
      return "fp32";
    case ComputePrecision::kBf16:
      return "bf16";
    case ComputePrecision::kTf32:
      return "tf32";
  }
  return "unknown";
}

Bf16AutocastScope::Bf16AutocastScope(c10::DeviceType device, bool enabled) : device_(device) {
  if (!enabled || !Supported(device)) return;
  active_ = true;
  was_enabled_ = Enabled(device);
  was_dtype_ = Dtype(device);
  SetDtype(device, c10::ScalarType::BFloat16);
  SetEnabled(device, true);
}

Bf16AutocastScope::~Bf16AutocastScope() {
  if (!active_) return;
  SetEnabled(device_, was_enabled_);
  SetDtype(device_, was_dtype_);
}

bool AutocastEnabled(c10::DeviceType device) { return Supported(device) && Enabled(device); }

void ClearAutocastCache() { at::autocast::clear_cache(); }

torch::Tensor AutocastWeight(const torch::Tensor& weight) {
  const c10::DeviceType device = weight.device().type();
  if (!weight.defined() || !AutocastEnabled(device)) return weight;
  return at::autocast::cached_cast(Dtype(device), weight, device);
}

void AllowTf32(bool allow) {
  at::globalContext().setAllowTF32CuBLAS(allow);
  at::globalContext().setAllowTF32CuDNN(allow);
}

torch::Tensor ToStreamDtype(const torch::Tensor& x) {
  if (!x.defined() || x.scalar_type() != torch::kFloat) return x;
  const c10::DeviceType device = x.device().type();
  if (!AutocastEnabled(device)) return x;
  return x.to(Dtype(device));
}

torch::Tensor StreamLayerNorm(const torch::nn::LayerNorm& norm, const torch::Tensor& x) {
  const auto& o = norm->options;
  if (x.scalar_type() == torch::kFloat) {  // What the module's forward runs.
    return torch::layer_norm(x, o.normalized_shape(), norm->weight, norm->bias, o.eps());
  }
  // The casts first: autocast's cache is out of reach inside the guard below.
  if (!x.is_cuda()) {
    // LibTorch 1.13's CPU kernel keeps bf16 statistics in bf16: widen, as LayerNormFp32 does.
    return LayerNormFp32(norm, x);
  }
  // CUDA's kernel accumulates bf16 and half in fp32 (acc_type): no fp32 copy of the stream.
  // The casts first: autocast's cache is out of reach inside the guard below.
  const bool affine = o.elementwise_affine();
  const torch::Tensor weight = affine ? AutocastWeight(norm->weight).to(x.scalar_type()) : torch::Tensor();
  const torch::Tensor bias = affine ? AutocastWeight(norm->bias).to(x.scalar_type()) : torch::Tensor();
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
  return torch::layer_norm(x, o.normalized_shape(), weight, bias, o.eps());
}

torch::Tensor LayerNormFp32(const torch::nn::LayerNorm& norm, const torch::Tensor& x) {
  // Autocast lists differ by version and device (CUDA keeps layer_norm in fp32, CPU may not):
  // with autocast out of the way the norm runs in fp32 everywhere.
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
  const auto& o = norm->options;
  torch::Tensor y = torch::layer_norm(x.to(torch::kFloat), o.normalized_shape(), norm->weight,
                                      norm->bias, o.eps());
  return y.to(x.scalar_type());
}

}  // namespace deepnet::model
