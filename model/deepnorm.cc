#include "model/deepnorm.h"

#include <c10/util/Exception.h>

#include <cmath>

namespace deepnet::model {

ModelScaling ComputeScaling(NormVariant norm, int64_t n, int64_t m) {
  TORCH_CHECK(n >= 0 && m >= 0 && n + m > 0, "invalid layer counts N=", n, " M=", m);
  ModelScaling s;
  if (n > 0) s.encoder = StackScaling{};
  if (m > 0) s.decoder = StackScaling{};
  const double dn = static_cast<double>(n);
  const double dm = static_cast<double>(m);
  switch (norm) {
    case NormVariant::kDeepNorm:
      if (n > 0 && m > 0) {
        // DeepNet, arXiv:2203.00555 §III-C, encoder-decoder.
        const double nm = std::pow(dn, 4.0) * dm;
        s.encoder = StackScaling{0.81 * std::pow(nm, 1.0 / 16.0), 0.87 * std::pow(nm, -1.0 / 16.0)};
        s.decoder = StackScaling{std::pow(3.0 * dm, 0.25), std::pow(12.0 * dm, -0.25)};
      } else if (n > 0) {
        s.encoder = StackScaling{std::pow(2.0 * dn, 0.25), std::pow(8.0 * dn, -0.25)};
      } else {
        s.decoder = StackScaling{std::pow(2.0 * dm, 0.25), std::pow(8.0 * dm, -0.25)};
      }
      break;
    case NormVariant::kDeepNormPreLn:
      // Pre-LN DeepNet, §IV-C: shortcut weight 1, gain sqrt(log L) with L = 2N (or 2M).
      if (n > 0) s.encoder = StackScaling{1.0, std::sqrt(std::log(2.0 * dn))};
      if (m > 0) s.decoder = StackScaling{1.0, std::sqrt(std::log(2.0 * dm))};
      break;
    case NormVariant::kPostLn:
    case NormVariant::kPreLn:
    case NormVariant::kPostLnInit:
      break;
  }
  return s;
}

double PostLnInitDivisor(int64_t layer_index, int64_t stack_layers) {
  TORCH_CHECK(layer_index >= 0 && layer_index < stack_layers, "layer index ", layer_index,
              " out of range for a stack of ", stack_layers);
  // 1-based l = layer_index + 1, so k_l = L - l + 1 = L - layer_index.
  return static_cast<double>(stack_layers - layer_index);
}

}  // namespace deepnet::model
