#include "model/kernels/fused_kernels.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

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
  return FusedKernelsEnabled() && t.device().is_cpu() && t.scalar_type() == torch::kFloat;
}

}  // namespace deepnet::model::kernels
